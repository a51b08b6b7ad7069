package node

import (
	"sync"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/swim"
	"go.etcd.io/raft/v3/raftpb"
)

// maxQueuedEvents bounds the event queue; SWIM events past it are dropped
// (the view is rebuilt from SWIM's full member list on the next event or
// reconcile tick, so nothing is lost but latency).
const maxQueuedEvents = 1 << 16

// eventQueue hands SWIM events and raft leader changes, produced on
// goroutines that must not block, to the event loop.
type eventQueue struct {
	mu     sync.Mutex
	swim   []swim.Event
	lead   []raftmux.LeaderChange
	wake   func() // kicks the events task
	closed bool
	drops  uint64
}

func (q *eventQueue) push(e swim.Event) {
	q.mu.Lock()
	if q.closed || len(q.swim) >= maxQueuedEvents {
		q.drops++
		q.mu.Unlock()
		return
	}
	q.swim = append(q.swim, e)
	q.mu.Unlock()
	q.kick()
}

func (q *eventQueue) pushLeader(c raftmux.LeaderChange) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.lead = append(q.lead, c)
	q.mu.Unlock()
	q.kick()
}

func (q *eventQueue) kick() {
	if q.wake != nil {
		q.wake()
	}
}

func (q *eventQueue) take() ([]swim.Event, []raftmux.LeaderChange) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, l := q.swim, q.lead
	q.swim, q.lead = nil, nil
	return s, l
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

func (q *eventQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.swim) + len(q.lead)
}

// onLeaderChange runs on a raftmux worker: record, then hand over. The
// replica's leader and term are recorded before raft sends anything of
// the round that changed them (a vote above all), which is what makes a
// vouch for a leader at a term safe (docs/leases.md).
func (n *Node) onLeaderChange(c raftmux.LeaderChange) {
	if c.Shard >= uint64(n.cfg.Shards) {
		return
	}
	n.lease.Follows(c.Shard, c.Leader, c.Term)
	n.led[c.Shard].Store(c.Leader == n.self)
	if c.Leader == 0 {
		n.leaderless[c.Shard].CompareAndSwap(0, n.clock().UnixNano())
	} else {
		n.leaderless[c.Shard].Store(0)
	}
	n.lease.Leadership(c.Shard, c.Term, c.Leader == n.self)
	// Counted after the change: whoever read the count before looking at
	// leaderships sees this change, or a count that differs next time.
	n.shardEvents.Add(1)
	if c.Leader != n.self {
		n.lease.RecheckSettling()
	}
	if name, ok := n.nameOf(c.Leader); ok && c.Leader != 0 {
		_, _ = n.leaders.Update(uint32(c.Shard), name, c.Term)
	}
	n.events.pushLeader(c)
}

// onConfState runs on a raftmux worker: a hosted replica's configuration,
// whose voters vouch for its leader.
func (n *Node) onConfState(shard uint64, cs raftpb.ConfState) {
	if shard >= uint64(n.cfg.Shards) {
		return
	}
	n.lease.ConfState(shard, cs.Voters, cs.VotersOutgoing)
	n.shardEvents.Add(1)
}

// eventsDuty is the events task: it applies membership events to the view
// and raft, spreads this node's leaderships through SWIM, and births the
// cluster; it runs on each event and every reconcile interval.
func (n *Node) eventsDuty(now time.Time) time.Time {
	n.handleEvents()
	return now.Add(n.cfg.ReconcileInterval)
}

// viewRefreshTicks: quiet event-loop ticks between two reads of SWIM's
// members without an event (5 s "lan", 2 s "fast").
const viewRefreshTicks = 10

// handleEvents is one pass of the event loop.
func (n *Node) handleEvents() {
	evs, leads := n.events.take()
	membership := false
	var versions []swim.Event
	for _, e := range evs {
		switch e.Kind {
		case swim.EventShardLeader:
			if e.Shard < uint64(n.cfg.Shards) && e.Leader != "" {
				_, _ = n.leaders.Update(uint32(e.Shard), e.Leader, e.Term)
			}
		case swim.EventMetadataVersion:
			versions = append(versions, e)
		default:
			membership = true
			n.liveness(e)
		}
	}
	for _, c := range leads {
		if c.Leader == n.self {
			n.swim.AnnounceShardLeader(c.Shard, n.cfg.ID, c.Term)
			n.lease.TakeUpLater(c.Shard, c.Term)
		}
	}
	if !membership && len(evs) == 0 {
		// A quiet tick: SWIM's events carry every change, so the view is
		// read again only now and then, in case one was missed (reading
		// it copies and sorts every member).
		n.quietTicks++
		membership = n.quietTicks%viewRefreshTicks == 0
	}
	if membership {
		n.rebuildView()
	}
	// After the view is rebuilt, so that a change this node learned by
	// SWIM in the same round counts before comparing versions.
	for _, e := range versions {
		n.msync.Announced(e.MetaKind, e.Leader, e.Version)
	}
	v := n.view.Load()
	n.msync.Tick(v.live, v.dead)
	n.rotateCache()
	n.maybeBirth()
	n.maybeReady()
}

func (n *Node) liveness(e swim.Event) {
	if e.Member.ID == n.cfg.ID {
		// Declared dead meanwhile (EventRejoined), this node's topics may
		// have moved: the leases say which it still owns.
		return
	}
	rid := RaftID(e.Member.ID)
	if n.view.Load().removed[e.Member.ID] {
		return // out for good, whatever SWIM says (marks.go)
	}
	switch e.Kind {
	case swim.EventSuspect:
		n.host.NodeSuspect(rid)
	case swim.EventDead, swim.EventLeft:
		n.host.NodeDead(rid)
		n.net.RemovePeer(e.Member.ID)
		n.log.Info("member gone", "member", e.Member.ID, "state", e.Member.State.String())
	case swim.EventJoined, swim.EventAliveAgain, swim.EventUpdated:
		n.host.NodeAlive(rid)
	}
}
