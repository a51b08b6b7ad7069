package node

import (
	"github.com/shoalmq/shoal/node/feed"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/ownership"
)

// The ownership protocol's leases (docs/leases.md) are the lease room's
// (node/lease): the topics this node holds (ownership.Holder) and what it
// owes as a shard leader (duty.Leader), the lease rounds, the OpenTopic
// and CloseTopic messages on both sides and their acks, the leaderships
// taken up and the answers waiting for a command to settle. Here the room
// is given the node's parts; the node's tasks run its work (lease.Task),
// the dispatch room (node/dispatch) hands it the frames that are its own,
// and events.go what raft reports of the hosted replicas.

// newLease builds the node's lease room.
func (n *Node) newLease() (*lease.Agent, error) {
	return lease.New(lease.Config{
		Self:          n.cfg.ID,
		RaftID:        RaftID,
		Shards:        n.cfg.Shards,
		Generation:    n.gen,
		Lease:         n.cfg.LeaseDuration,
		RenewInterval: n.cfg.LeaseRenewInterval,
		ConfirmFresh:  n.cfg.LeaseConfirmFresh(),
		MaxDrift:      n.cfg.MaxClockDrift,
		Window:        n.cfg.OwnershipWindow,
		Leaders:       n.leaders,
		Store:         n.store,
		Machine:       n.sm,
		Records:       n.records,
		RoundTimes:    &n.lat.leaseRound,
		CommitTimes:   &n.lat.raftCommit,
		Logger:        n.log,
		Env:           leaseEnv{parts{n}},
	})
}

// leaseEnv is what the lease room touches of the node. It reads the
// node's network, raft host and view when called: they are set after
// New.
type leaseEnv struct{ parts }

func (e leaseEnv) ShardEvents() uint64 { return e.n.events.ShardEvents() }

func (e leaseEnv) PrevSilent(shard uint64, prev string) bool {
	return e.n.reconciler.PrevSilent(shard, prev)
}

func (e leaseEnv) Kick(t lease.Task) {
	switch t {
	case lease.Due:
		e.n.dutyTask.Kick()
	case lease.Rounds:
		e.n.leaseTask.Kick()
	case lease.Replies:
		e.n.leaseReplyTask.Kick()
	}
}

// Gone counts another node gone as the view says (reconcile.View.Gone),
// knowing every member or not (reconcile.Driver.KnowsAll).
func (e leaseEnv) Gone() func(node string) bool {
	n := e.n
	v, knowsAll := n.view.Load(), n.reconciler.KnowsAll()
	return func(node string) bool { return node != n.cfg.ID && v.Gone(node, knowsAll) }
}

func (e leaseEnv) Announce(changes []ownership.Change, why lease.Reason) {
	reason := feed.ReasonSuperseded
	if why == lease.Closed {
		reason = feed.ReasonClosed
	}
	e.n.ownFeed.Announce(changes, reason, e.n.ownedFn)
}
