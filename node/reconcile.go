package node

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/swim"
)

// reconcileDuty is the local controller of every shard this node leads:
// the reconcile task, which runs reconcile every interval.
func (n *Node) reconcileDuty(now time.Time) time.Time {
	n.reconcile()
	return now.Add(n.cfg.ReconcileInterval)
}

// reconcile takes up new leaderships, moves the topics of dead or silent
// owners, and fixes one difference between a shard's raft configuration
// and the ring. It does not wait: what it asks raft for completes later,
// and what is still in flight from an earlier call is not asked again.
func (n *Node) reconcile() {
	if !n.born.Load() {
		return
	}
	v := n.view.Load()
	n.takeUpLeaderships()
	n.reassignDead(v)
	n.manageShards(v)
}

// inFlight marks keys (a shard, a pass) with work in flight, so that a
// periodic duty does not ask raft for the same thing again before the
// first answer.
type inFlight struct {
	mu sync.Mutex
	m  map[uint64]bool
}

// begin marks key and reports whether it was free.
func (f *inFlight) begin(key uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = make(map[uint64]bool)
	}
	if f.m[key] {
		return false
	}
	f.m[key] = true
	return true
}

// busy reports whether key has work in flight.
func (f *inFlight) busy(key uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.m[key]
}

func (f *inFlight) end(key uint64) {
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
}

// reassignDead proposes, in every shard this node leads, the move of the
// topics owned by members SWIM declared dead (or gone) to live members,
// and of those owned by a member that has not asked this leader for a
// lease on the shard for silentOwnerLeases leases (it cannot reach this
// node, a one-way partition SWIM does not see: its topics are unwritable
// where they are). An owner whose lease rounds keep arriving is not
// silent, even if none named the shard: its shard-leader table lags (a
// refusal's hint sends it here next round), or this node has not yet
// taken its rounds. Moving its topics then would only add work.
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
	// A pass looks at every shard this node leads: with the membership
	// unchanged, one pass in reassignEvery is enough to find an owner
	// that fell silent (it has silentOwnerLeases leases to do so) or that
	// SWIM forgot.
	n.deadPass++
	silentFor := silentOwnerLeases * n.cfg.LeaseDuration
	now := n.clock()
	// Copied only for a pass: most intervals end at the cadence check.
	n.roundsMu.Lock()
	due := v != n.deadView || n.deadPass%reassignEvery == 0 || fellSilent(n.roundsFrom, n.cfg.ID, n.deadPassAt, now, silentFor)
	var roundsFrom map[string]time.Time
	if due {
		roundsFrom = maps.Clone(n.roundsFrom)
	}
	n.roundsMu.Unlock()
	if !due {
		return
	}
	n.deadView, n.deadPassAt = v, now
	knowsAll := n.knowsAllMembers()
	gone := func(id string) bool {
		if v.dead[id] {
			return true
		}
		_, known := v.byID[id]
		return !known && knowsAll
	}
	// The owners the last pass found, with no state applied and no
	// leadership or configuration changed since: if none of them is gone,
	// drained or can be silent now (its lease rounds keep coming), this
	// pass would find nothing to move, and need not look.
	version, events := n.sm.stateVersion(), n.shardEvents.Load()
	if m := &n.deadMemo; m.valid && m.version == version && m.events == events {
		quiet := true
		for id := range m.owners {
			if gone(id) || v.drained[id] || (id != n.cfg.ID && now.Sub(roundsFrom[id]) > silentFor) {
				quiet = false
				break
			}
		}
		if quiet {
			return
		}
	}
	owners := make(map[string]bool)
	found := false
	for s := range n.led {
		if !n.led[s].Load() {
			continue
		}
		shard := uint64(s)
		since, leads := n.leaderSince(shard)
		var cmds []meta.Command
		_ = n.sm.withShard(shard, func(sh *shardState) {
			st := sh.st
			silent := func(id string) bool {
				return leads && id != n.cfg.ID && isSilent(now, silentFor, since, sh.lastAsk[id], roundsFrom[id])
			}
			if !st.AnyOwner(func(id string) bool { owners[id] = true; return gone(id) || v.drained[id] || silent(id) }) {
				return // the common case, without sorting the owners
			}
			found = true
			for _, o := range st.Owners() {
				silent, drained := silent(o.ID), v.drained[o.ID]
				if !gone(o.ID) && !silent && !drained {
					continue
				}
				switch {
				case gone(o.ID):
				case drained:
					n.log.Info("owner drained: moving its topics", "shard", shard, "owner", o.ID)
				case silent:
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
		if len(cmds) == 0 || !n.reassigning.begin(shard) {
			continue
		}
		left := len(cmds)
		var mu sync.Mutex
		for i := range cmds {
			dead := cmds[i].Node
			data, err := meta.AppendCommand(nil, &cmds[i])
			if err != nil {
				n.log.Error("node: encode reassign", "shard", shard, "err", err)
			}
			finish := func() {
				mu.Lock()
				left--
				last := left == 0
				mu.Unlock()
				if last {
					n.reassigning.end(shard)
				}
			}
			if err != nil {
				finish()
				continue
			}
			n.propose(shard, data, func(res any, err error) {
				defer finish()
				if err != nil {
					n.log.Warn("node: reassign", "shard", shard, "dead", dead, "err", err)
					return
				}
				if ar, ok := res.(*applyResult); ok && ar.err == nil {
					n.counters.reassigned.Add(uint64(ar.moved))
					n.log.Info("reassigned topics of a dead owner", "shard", shard, "dead", dead, "moved", ar.moved)
				}
			})
		}
	}
	n.deadMemo = deadMemo{valid: !found, version: version, events: events, owners: owners}
}

// deadMemo is what reassignDead's last full pass saw: every owner of a
// topic in a shard this node led, at a state version and shard events
// count (valid: the pass found no owner to move).
type deadMemo struct {
	valid           bool
	version, events uint64
	owners          map[string]bool
}

// isSilent is reassignDead's rule of silence at now: this node has led the
// shard since since, and the owner has neither asked it for a lease on
// the shard (lastAsk) nor sent it any lease round (lastRound) for longer
// than silentFor.
func isSilent(now time.Time, silentFor time.Duration, since, lastAsk, lastRound time.Time) bool {
	return now.Sub(since) > silentFor && now.Sub(lastAsk) > silentFor && now.Sub(lastRound) > silentFor
}

// prevSilent reports whether the OpenTopic of a topic of shard moved off
// prev says that prev cannot answer (wire.OpenTopic.PrevSilent): SWIM
// declared it dead (not left: a leaving node answers the pulls), or, by
// reassignDead's rule, it is silent towards this node as the shard's
// leader — the two reasons for which this node moves topics off an owner
// without asking it. An owner moved for another reason (an assign, a
// drain, a leave) keeps sending rounds, so its new owner pulls in full.
func (n *Node) prevSilent(shard uint64, prev string) bool {
	if prev == "" || prev == n.cfg.ID {
		return false
	}
	v := n.view.Load()
	if v.dead[prev] && v.byID[prev].State != swim.StateLeft {
		return true
	}
	since, leads := n.leaderSince(shard)
	if !leads {
		return false
	}
	n.roundsMu.Lock()
	lastRound := n.roundsFrom[prev]
	n.roundsMu.Unlock()
	var lastAsk time.Time
	_ = n.sm.withShard(shard, func(sh *shardState) { lastAsk = sh.lastAsk[prev] })
	return isSilent(n.clock(), silentOwnerLeases*n.cfg.LeaseDuration, since, lastAsk, lastRound)
}

// reassignEvery: with the membership unchanged, reassignDead looks at its
// shards every this many reconcile intervals (0.8 s "fast", 2 s "lan"),
// and at the first interval after a peer's lease rounds have stopped
// reaching this node for silentOwnerLeases lease lengths (fellSilent).
const reassignEvery = 4

// fellSilent reports whether a peer other than self (whose last lease
// round reached this node at rounds[peer]) has been silent for longer
// than silentFor at now, but was not yet at the last full pass (at last):
// its topics, if this node leads their shards, are due to move now, not
// at the next pass of the cadence.
func fellSilent(rounds map[string]time.Time, self string, last, now time.Time, silentFor time.Duration) bool {
	for id, at := range rounds {
		if id != self && now.Sub(at) > silentFor && last.Sub(at) <= silentFor {
			return true
		}
	}
	return false
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
	return at != 0 && n.clock().Sub(time.Unix(0, at)) > n.unknownOwnerGrace()
}

// manageShards compares, for every shard this node leads, the raft
// configuration with the ring's desired replicas and starts at most one
// change per shard, at most MaxConfChanges per pass over all shards:
// add a desired member as learner, promote a learner that had a round to
// catch up, remove a voter the ring no longer wants once the group has
// more voters than the replication factor, and finally hand leadership to
// the preferred replica. One pass runs at a time; the next starts once
// every change of this one has been answered.
func (n *Node) manageShards(v *clusterView) {
	if v.ring == nil || v.ring.Len() == 0 {
		return
	}
	// Act only on a settled view: with a member suspected, or the live set
	// just changed, the ring may be about to change again, and a change
	// made now could remove a replica the next view wants back.
	if v.suspects > 0 || n.clock().Sub(v.changed) < membershipSettle*n.cfg.ReconcileInterval {
		return
	}
	events := n.shardEvents.Load()
	if n.manageIdle.skip(v, events) {
		return
	}
	if !n.managing.begin(0) {
		return
	}
	n.host.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			n.managing.end(0)
			return
		}
		n.managePass(v, events, infos)
	})
}

// manageEvery: with nothing to do, the view unchanged and no replica's
// leadership or configuration changed, the shard manager looks at every
// replica once in this many reconcile intervals (5 s "lan", 2 s "fast"):
// a pass reads the state of every hosted replica, the largest part of an
// idle node's work otherwise.
const manageEvery = 10

// manageMemo remembers the last shard-manager pass that had nothing to do.
type manageMemo struct {
	mu     sync.Mutex
	view   *clusterView
	events uint64
	skips  int
}

// skip reports whether a pass at view v with events shard events can be
// left out: the last pass saw the same and found nothing to do.
func (m *manageMemo) skip(v *clusterView, events uint64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.view != v || m.events != events || m.skips >= manageEvery-1 {
		return false
	}
	m.skips++
	return true
}

// done records a pass's outcome.
func (m *manageMemo) done(v *clusterView, events uint64, idle bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.view, m.events, m.skips = nil, 0, 0
	if idle {
		m.view, m.events = v, events
	}
}

// managePass is one pass of manageShards over the replicas' infos; events
// is the count of shard events before the infos were read.
func (n *Node) managePass(v *clusterView, events uint64, infos []raftmux.Info) {
	n.collectStrays(v, infos)
	// A replica added to a group starts empty and is caught up by its
	// leader; a quiesced leader only does that while awake, so groups
	// with a member that is not yet caught up are woken for it each pass
	// (NodeAlive wakes the groups this node leads that include it).
	n.reconcileMu.Lock()
	for _, id := range slices.Sorted(maps.Keys(n.catchingUp)) {
		if since := n.catchingUp[id]; n.clock().Sub(since) > catchUpWake {
			delete(n.catchingUp, id)
			continue
		}
		n.host.NodeAlive(id)
	}
	quiet := len(n.catchingUp) == 0 && len(n.strays) == 0
	n.reconcileMu.Unlock()
	var steps []func(done func(bool))
	var desired []string
	deferred := false
	for _, in := range infos {
		if len(steps) == n.cfg.MaxConfChanges {
			break
		}
		if in.Leader != n.self || in.Shard >= uint64(n.cfg.Shards) {
			continue
		}
		desired = v.placement.Replicas(uint32(in.Shard), desired[:0])
		if len(desired) == 0 {
			continue
		}
		if step := n.shardStep(v, in, slices.Clone(desired), &deferred); step != nil {
			steps = append(steps, step)
		}
	}
	n.manageIdle.done(v, events, quiet && !deferred && len(steps) == 0)
	if len(steps) == 0 {
		n.managing.end(0)
		return
	}
	left := len(steps)
	var mu sync.Mutex
	for _, step := range steps {
		step(func(bool) {
			mu.Lock()
			left--
			last := left == 0
			mu.Unlock()
			if last {
				n.managing.end(0)
			}
		})
	}
}

// shardStep returns the one change the shard needs (nil: none), which
// reports through done whether it was made; it sets *deferred when it
// leaves a change for a later pass (holdsBack).
func (n *Node) shardStep(v *clusterView, in raftmux.Info, desired []string, deferred *bool) func(done func(bool)) {
	want := make(map[uint64]bool, len(desired))
	for _, d := range desired {
		want[RaftID(d)] = true
	}
	conf := func(kind raftmux.OpKind, node uint64, what string, onDone func()) func(func(bool)) {
		return func(done func(bool)) {
			n.host.Submit(raftmux.Op{Kind: kind, Shard: in.Shard, Node: node}, func(r raftmux.Result) {
				if r.Err != nil {
					n.log.Debug("node: "+what, "shard", in.Shard, "node", node, "err", r.Err)
					done(false)
					return
				}
				n.counters.confChanges.Add(1)
				if onDone != nil {
					onDone()
				}
				done(true)
			})
		}
	}
	// Promote a learner the ring wants (added on an earlier pass), or
	// drop it; one change per pass.
	if len(in.Learners) > 0 {
		l := in.Learners[0]
		if want[l] {
			return conf(raftmux.OpPromote, l, "promote", nil)
		}
		return conf(raftmux.OpRemoveReplica, l, "remove learner", nil)
	}
	// Add a desired live member that is not in the group.
	for _, d := range desired {
		id := RaftID(d)
		if slices.Contains(in.Voters, id) || !v.alive(d) {
			continue
		}
		return conf(raftmux.OpAddLearner, id, "add learner", func() {
			n.reconcileMu.Lock()
			n.catchingUp[id] = n.clock()
			n.reconcileMu.Unlock()
			n.log.Info("shard: learner added", "shard", in.Shard, "node", d)
		})
	}
	// Remove a voter the ring does not want, once enough others are in,
	// or at once when it was removed for good (marks.go): it never comes
	// back to count.
	for _, vo := range in.Voters {
		name, _ := n.nameOf(vo)
		if want[vo] || vo == n.self || !v.removed[name] {
			continue
		}
		return conf(raftmux.OpRemoveReplica, vo, "remove replica", func() {
			n.log.Info("shard: replica of a removed node removed", "shard", in.Shard, "node", name)
		})
	}
	if len(in.Voters) > n.cfg.Replicas {
		for _, vo := range in.Voters {
			if want[vo] {
				continue
			}
			if vo == n.self {
				return n.transferTo(in, desired, v)
			}
			name, _ := n.nameOf(vo)
			return conf(raftmux.OpRemoveReplica, vo, "remove replica", func() {
				n.log.Info("shard: replica removed", "shard", in.Shard, "node", name)
			})
		}
	}
	// Leadership to the preferred replica, unless an operator moved it
	// here under this placement (and this node is not drained since).
	if n.pinned(in.Shard, v) {
		return nil
	}
	if pref := v.placement.Leader(uint32(in.Shard)); pref != "" && pref != n.cfg.ID && v.alive(pref) && slices.Contains(in.Voters, RaftID(pref)) {
		if n.holdsBack(in.Shard) {
			*deferred = true
			return nil
		}
		return n.transfer(in.Shard, RaftID(pref))
	}
	return nil
}

// holdsBack reports whether this node, leading shard, is moving topics
// there: a reassignment of a dead or silent owner's topics is in flight,
// or an open it owes is not sent yet (duty.Leader.HoldsBack). Its
// leadership is then not handed to the preferred replica: the next leader
// would hold the opens back again for its own NewLeaderWait, from its
// election, and a topic moved off a dead leader and owner would stay
// unwritable for a second such wait (4 s "lan").
func (n *Node) holdsBack(shard uint64) bool {
	if n.reassigning.busy(shard) {
		return true
	}
	n.dutyMu.Lock()
	defer n.dutyMu.Unlock()
	return n.duty.HoldsBack(shard)
}

// transferTo hands a shard's leadership to a desired live voter.
func (n *Node) transferTo(in raftmux.Info, desired []string, v *clusterView) func(func(bool)) {
	for _, d := range desired {
		id := RaftID(d)
		if d != n.cfg.ID && v.alive(d) && slices.Contains(in.Voters, id) {
			return n.transfer(in.Shard, id)
		}
	}
	return nil
}

func (n *Node) transfer(shard, to uint64) func(func(bool)) {
	return func(done func(bool)) {
		n.host.Submit(raftmux.Op{Kind: raftmux.OpTransferLeader, Shard: shard, Node: to}, func(r raftmux.Result) {
			if r.Err == nil {
				n.counters.transfers.Add(1)
			}
			done(r.Err == nil)
		})
	}
}
