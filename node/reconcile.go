package node

import (
	"context"
	"slices"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
)

// reconcileLoop is the local controller of every shard this node leads:
// each interval it takes up new leaderships, moves the topics of dead
// owners, and fixes one difference between a shard's raft configuration
// and the ring.
func (n *Node) reconcileLoop() {
	defer n.wg.Done()
	tick := time.NewTicker(n.cfg.ReconcileInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		}
		if !n.born.Load() {
			continue
		}
		v := n.view.Load()
		n.takeUpLeaderships()
		n.reassignDead(v)
		n.manageShards(v)
	}
}

// reassignDead proposes, in every shard this node leads, the move of the
// topics owned by members SWIM declared dead (or gone) to live members,
// and of those owned by a member that has not asked this leader for a
// lease on the shard for silentOwnerLeases leases (it cannot reach this
// node, a one-way partition SWIM does not see: its topics are unwritable
// where they are).
//
// An owner SWIM does not know at all counts as gone too, once this node has
// synced its membership with a peer and run long enough since to have heard
// of every member (knowsAllMembers): after
// a restart SWIM has forgotten members that died meanwhile, and their
// topics must still move.
func (n *Node) reassignDead(v *clusterView) {
	if len(v.live) == 0 {
		return
	}
	knowsAll := n.knowsAllMembers()
	gone := func(id string) bool {
		if v.dead[id] {
			return true
		}
		_, known := v.byID[id]
		return !known && knowsAll
	}
	silentFor := silentOwnerLeases * n.cfg.LeaseDuration
	now := n.clock()
	for s := range n.led {
		if !n.led[s].Load() {
			continue
		}
		shard := uint64(s)
		since, leads := n.leaderSince(shard)
		var cmds []meta.Command
		_ = n.sm.withShard(shard, func(sh *shardState) {
			st := sh.st
			for _, o := range st.Owners() {
				silent := leads && o.ID != n.cfg.ID && now.Sub(since) > silentFor && now.Sub(sh.lastAsk[o.ID]) > silentFor
				if !gone(o.ID) && !silent {
					continue
				}
				if silent && !gone(o.ID) {
					n.log.Info("owner silent: moving its topics", "shard", shard, "owner", o.ID)
				}
				cmd, err := st.PlanReassign(o.ID, liveNodes(v, st), 0)
				if err != nil || len(cmd.Moves) == 0 {
					continue
				}
				// Moves alias st's strings only, and Topic bytes are
				// owned by the command: encode before leaving the lock.
				cmds = append(cmds, cmd)
			}
		})
		for i := range cmds {
			data, err := meta.AppendCommand(nil, &cmds[i])
			if err != nil {
				n.log.Error("node: encode reassign", "shard", shard, "err", err)
				continue
			}
			ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
			res, err := n.propose(ctx, shard, data)
			cancel()
			if err != nil {
				n.log.Warn("node: reassign", "shard", shard, "dead", cmds[i].Node, "err", err)
				continue
			}
			if ar, ok := res.(*applyResult); ok && ar.err == nil {
				n.counters.reassigned.Add(uint64(ar.moved))
				n.log.Info("reassigned topics of a dead owner", "shard", shard, "dead", cmds[i].Node, "moved", ar.moved)
			}
		}
	}
}

// silentOwnerLeases: how many lease lengths an owner may go without asking
// its shard's leader for a lease before the leader moves its topics.
const silentOwnerLeases = 3

// membershipSettle: reconcile intervals the live set must stay unchanged
// before the shard manager changes any raft configuration.
const membershipSettle = 5

// catchUpWake: how long after adding a replica on a node its groups are
// woken every round.
const catchUpWake = 30 * time.Second

// unknownOwnerGrace is ten reconcile intervals (2 s "fast", 5 s "lan").
func (n *Node) unknownOwnerGrace() time.Duration { return 10 * n.cfg.ReconcileInterval }

// knowsAllMembers reports whether a member SWIM does not know may be taken
// for gone: the node is Ready (it merged a peer's membership, or is alone)
// and has been for unknownOwnerGrace. Counting from readiness rather than
// from the start keeps nodes of a cluster restarted one after the other
// from taking the ones not started yet for gone.
func (n *Node) knowsAllMembers() bool {
	at := n.readyAt.Load()
	return at != 0 && time.Since(time.Unix(0, at)) > n.unknownOwnerGrace()
}

// manageShards compares, for every shard this node leads, the raft
// configuration with the ring's desired replicas and starts at most one
// change per shard, at most MaxConfChanges per round over all shards:
// add a desired member as learner, promote a learner that had a round to
// catch up, remove a voter the ring no longer wants once the group has
// more voters than the replication factor, and finally hand leadership to
// the preferred replica.
func (n *Node) manageShards(v *clusterView) {
	if v.ring == nil || v.ring.Len() == 0 {
		return
	}
	// Act only on a settled view: with a member suspected, or the live set
	// just changed, the ring may be about to change again, and a change
	// made now could remove a replica the next view wants back.
	if v.suspects > 0 || time.Since(v.changed) < membershipSettle*n.cfg.ReconcileInterval {
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
	defer cancel()
	infos, err := n.host.Shards(ctx)
	if err != nil {
		return
	}
	n.collectStrays(ctx, v, infos)
	if n.ledCount() == 0 {
		return
	}
	budget := n.cfg.MaxConfChanges
	// A replica added to a group starts empty and is caught up by its
	// leader; a quiesced leader only does that while awake, so groups
	// with a member that is not yet caught up are woken for it each round
	// (NodeAlive wakes the groups this node leads that include it).
	defer func() {
		for id, since := range n.catchingUp {
			if time.Since(since) > catchUpWake {
				delete(n.catchingUp, id)
				continue
			}
			n.host.NodeAlive(id)
		}
	}()
	var desired []string
	for _, in := range infos {
		if budget == 0 {
			return
		}
		if in.Leader != n.self || in.Shard >= uint64(n.cfg.Shards) {
			continue
		}
		s := uint32(in.Shard)
		desired = v.placement.Replicas(s, desired[:0])
		if len(desired) == 0 {
			continue
		}
		if n.shardStep(ctx, v, in, desired) {
			budget--
		}
	}
}

func (n *Node) shardStep(ctx context.Context, v *clusterView, in raftmux.Info, desired []string) bool {
	want := make(map[uint64]bool, len(desired))
	for _, d := range desired {
		want[RaftID(d)] = true
	}
	// Promote learners the ring wants (added on an earlier round).
	for _, l := range in.Learners {
		if want[l] {
			if _, err := n.host.Promote(ctx, in.Shard, l); err != nil {
				n.log.Debug("node: promote", "shard", in.Shard, "err", err)
				return false
			}
			n.counters.confChanges.Add(1)
			return true
		}
		if _, err := n.host.RemoveReplica(ctx, in.Shard, l); err == nil {
			n.counters.confChanges.Add(1)
			return true
		}
	}
	// Add a desired live member that is not in the group.
	for _, d := range desired {
		id := RaftID(d)
		if slices.Contains(in.Voters, id) || !v.alive(d) {
			continue
		}
		if _, err := n.host.AddLearner(ctx, in.Shard, id); err != nil {
			n.log.Debug("node: add learner", "shard", in.Shard, "node", d, "err", err)
			return false
		}
		n.catchingUp[id] = time.Now()
		n.counters.confChanges.Add(1)
		n.log.Info("shard: learner added", "shard", in.Shard, "node", d)
		return true
	}
	// Remove a voter the ring does not want, once enough others are in.
	if len(in.Voters) > n.cfg.Replicas {
		for _, vo := range in.Voters {
			if want[vo] {
				continue
			}
			if vo == n.self {
				return n.transferTo(ctx, in, desired, v)
			}
			if _, err := n.host.RemoveReplica(ctx, in.Shard, vo); err != nil {
				n.log.Debug("node: remove replica", "shard", in.Shard, "err", err)
				return false
			}
			n.counters.confChanges.Add(1)
			name, _ := n.nameOf(vo)
			n.log.Info("shard: replica removed", "shard", in.Shard, "node", name)
			return true
		}
	}
	// Leadership to the preferred replica.
	if pref := v.placement.Leader(uint32(in.Shard)); pref != "" && pref != n.cfg.ID && v.alive(pref) && slices.Contains(in.Voters, RaftID(pref)) {
		if err := n.host.TransferLeader(ctx, in.Shard, RaftID(pref)); err == nil {
			n.counters.transfers.Add(1)
			return true
		}
	}
	return false
}

func (n *Node) transferTo(ctx context.Context, in raftmux.Info, desired []string, v *clusterView) bool {
	for _, d := range desired {
		id := RaftID(d)
		if d != n.cfg.ID && v.alive(d) && slices.Contains(in.Voters, id) {
			if err := n.host.TransferLeader(ctx, in.Shard, id); err == nil {
				n.counters.transfers.Add(1)
				return true
			}
		}
	}
	return false
}
