package node

import (
	"maps"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// The changes of the groups this node leads, the moves of dead, drained or
// silent owners' topics, strays and the cluster's birth are decided by the
// reconcile room (node/reconcile). Here the room is given the node's
// parts, and its decisions are made against the raft host and the state
// machine: the reconcile task runs its passes, the event loop its birth.

// newReconcile builds the node's reconcile room.
func (n *Node) newReconcile() (*reconcile.Controller, error) {
	return reconcile.New(reconcile.Config{
		Self:            n.cfg.ID,
		Shards:          n.cfg.Shards,
		Replicas:        n.cfg.Replicas,
		MaxConfChanges:  n.cfg.MaxConfChanges,
		BootstrapExpect: n.cfg.BootstrapExpect,
		Interval:        n.cfg.ReconcileInterval,
		Lease:           n.cfg.LeaseDuration,
		RaftID:          RaftID,
		Leaders:         n.leaders,
		Env:             reconcileEnv{n},
	})
}

// reconcileEnv is what the reconcile room reads of the node.
type reconcileEnv struct{ n *Node }

func (e reconcileEnv) NameOf(id uint64) (string, bool) { return e.n.nameOf(id) }

func (e reconcileEnv) HoldsBack(shard uint64) bool { return e.n.lease.HoldsBack(shard) }

// reconcileView is v as the reconcile room reads it, over the same maps.
func reconcileView(v *clusterView) *reconcile.View {
	return &reconcile.View{Members: v.byID, Live: v.live, Dead: v.dead, Drained: v.drained, Removed: v.removed,
		Ring: v.ring, Placement: v.placement, Suspects: v.suspects, Changed: v.changed}
}

// reconcileDuty is the local controller of every shard this node leads:
// the reconcile task, which runs reconcile every interval.
func (n *Node) reconcileDuty(now time.Time) time.Time {
	n.reconcile()
	return now.Add(n.cfg.ReconcileInterval)
}

// reconcile takes up new leaderships, moves the topics of dead, drained or
// silent owners, and fixes one difference between a shard's raft
// configuration and the ring. It does not wait: what it asks raft for
// completes later, and what is still in flight from an earlier call is not
// asked again.
func (n *Node) reconcile() {
	if !n.born.Load() {
		return
	}
	v := n.view.Load()
	n.lease.TakeUpLeaderships()
	n.reassignDead(v)
	n.manageShards(v)
}

// reassignDead proposes, in every shard this node leads, the moves of the
// topics of owners the room's look says must move (reconcile.OwnerLook)
// to live members that are not drained.
func (n *Node) reassignDead(v *clusterView) {
	now := n.clock()
	// Copied only for a look: most intervals end at the cadence check.
	var due bool
	var roundsFrom map[string]time.Time
	n.lease.WithRoundsFrom(func(from map[string]time.Time) {
		if due = n.rec.OwnersDue(v.rec, now, from); due {
			roundsFrom = maps.Clone(from)
		}
	})
	if !due {
		return
	}
	look := n.rec.Owners(v.rec, now, roundsFrom, n.knowsAllMembers(), n.sm.StateVersion(), n.shardEvents.Load())
	if look == nil {
		return
	}
	for s := range n.led {
		if !n.led[s].Load() {
			continue
		}
		shard := uint64(s)
		since, leads := n.lease.Since(shard)
		var cmds []meta.Command
		_ = n.sm.WithShard(shard, func(sh *shardsm.Shard) {
			st := sh.State
			owners := look.Shard(leads, since, sh.LastAsk)
			if !st.AnyOwner(owners.Moves) {
				return // the common case, without sorting the owners
			}
			for _, o := range st.Owners() {
				switch owners.Why(o.ID) {
				case reconcile.Stays:
					continue
				case reconcile.Drained:
					n.log.Info("owner drained: moving its topics", "shard", shard, "owner", o.ID)
				case reconcile.Silent:
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
		if len(cmds) == 0 || !n.rec.BeginReassign(shard, len(cmds)) {
			continue
		}
		for i := range cmds {
			dead := cmds[i].Node
			data, err := meta.AppendCommand(nil, &cmds[i])
			if err != nil {
				n.log.Error("node: encode reassign", "shard", shard, "err", err)
				n.rec.Reassigned(shard)
				continue
			}
			n.propose(shard, data, func(res any, err error) {
				defer n.rec.Reassigned(shard)
				if err != nil {
					n.log.Warn("node: reassign", "shard", shard, "dead", dead, "err", err)
					return
				}
				if ar, ok := res.(*shardsm.Result); ok && ar.Err == nil {
					n.counters.reassigned.Add(uint64(ar.Moved))
					n.log.Info("reassigned topics of a dead owner", "shard", shard, "dead", dead, "moved", ar.Moved)
				}
			})
		}
	}
	look.Done()
}

// liveNodes returns the live members that are not drained as owner
// candidates with their load in st (the shard's own count).
func liveNodes(v *clusterView, st *meta.State) []meta.Node {
	out := make([]meta.Node, 0, len(v.live))
	for _, id := range v.live {
		if v.drained[id] {
			continue
		}
		out = append(out, meta.Node{ID: id, Load: uint64(st.Load(id))})
	}
	return out
}

// prevSilent reports whether the OpenTopic of a topic of shard moved off
// prev says that prev cannot answer (wire.OpenTopic.PrevSilent): SWIM
// declared it dead (not left: a leaving node answers the pulls), or, by
// the room's rule, it is silent towards this node as the shard's leader —
// the two reasons for which this node moves topics off an owner without
// asking it. An owner moved for another reason (an assign, a drain, a
// leave) keeps sending rounds, so its new owner pulls in full; a drained
// owner SWIM counts alive is never taken for silent, as its rounds may
// reach a leader that took the shard over from it late on a loaded
// machine, and a short pull would leave its records behind.
func (n *Node) prevSilent(shard uint64, prev string) bool {
	if prev == "" || prev == n.cfg.ID {
		return false
	}
	v := n.view.Load()
	if v.rec.Died(prev) {
		return true
	}
	if v.drained[prev] {
		return false
	}
	since, leads := n.lease.Since(shard)
	if !leads {
		return false
	}
	lastRound := n.lease.LastRound(prev)
	var lastAsk time.Time
	_ = n.sm.WithShard(shard, func(sh *shardsm.Shard) { lastAsk = sh.LastAsk[prev] })
	return n.rec.Silent(n.clock(), since, lastAsk, lastRound)
}

// knowsAllMembers reports whether a member SWIM does not know may be taken
// for gone (reconcile.Controller.KnowsAll).
func (n *Node) knowsAllMembers() bool {
	var readyAt time.Time
	if at := n.readyAt.Load(); at != 0 {
		readyAt = time.Unix(0, at)
	}
	return n.rec.KnowsAll(readyAt, n.clock())
}

// manageShards starts a pass of the shard manager when one is due: the
// infos of every hosted replica are read from the raft host, and the room
// says what to do with them (managePass).
func (n *Node) manageShards(v *clusterView) {
	events := n.shardEvents.Load()
	if !n.rec.ManageDue(v.rec, n.clock(), events) || !n.rec.BeginPass() {
		return
	}
	n.host.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			n.rec.EndPass()
			return
		}
		n.managePass(v, events, infos)
	})
}

// managePass is one pass of the shard manager over the replicas' infos;
// events is the count of shard events before the infos were read.
func (n *Node) managePass(v *clusterView, events uint64, infos []raftmux.Info) {
	p := n.rec.Manage(v.rec, events, infos, n.clock())
	for _, a := range p.Asks {
		n.checkStray(a)
	}
	for _, id := range p.Wake {
		n.host.NodeAlive(id)
	}
	for _, s := range p.Steps {
		n.startStep(s)
	}
}

// startStep asks the raft host for one step of a pass and reports its end
// to the room.
func (n *Node) startStep(s reconcile.Step) {
	if s.Kind == reconcile.Transfer {
		n.host.Submit(raftmux.Op{Kind: raftmux.OpTransferLeader, Shard: s.Shard, Node: s.Node}, func(r raftmux.Result) {
			if r.Err == nil {
				n.counters.transfers.Add(1)
			}
			n.rec.StepDone(s, r.Err == nil, n.clock())
		})
		return
	}
	op, what := raftmux.OpRemoveReplica, "remove replica"
	switch s.Kind {
	case reconcile.Promote:
		op, what = raftmux.OpPromote, "promote"
	case reconcile.RemoveLearner:
		what = "remove learner"
	case reconcile.AddLearner:
		op, what = raftmux.OpAddLearner, "add learner"
	}
	n.host.Submit(raftmux.Op{Kind: op, Shard: s.Shard, Node: s.Node}, func(r raftmux.Result) {
		if r.Err != nil {
			n.log.Debug("node: "+what, "shard", s.Shard, "node", s.Node, "err", r.Err)
			n.rec.StepDone(s, false, n.clock())
			return
		}
		n.counters.confChanges.Add(1)
		switch s.Kind {
		case reconcile.AddLearner:
			n.log.Info("shard: learner added", "shard", s.Shard, "node", s.Name)
		case reconcile.RemoveRemoved:
			n.log.Info("shard: replica of a removed node removed", "shard", s.Shard, "node", s.Name)
		case reconcile.RemoveVoter:
			n.log.Info("shard: replica removed", "shard", s.Shard, "node", s.Name)
		}
		n.rec.StepDone(s, true, n.clock())
	})
}

// checkStray asks a shard leader for the voters of the shards whose
// replicas here may be strays, without waiting for its answer, and drops
// the strays the answer confirms.
func (n *Node) checkStray(a reconcile.Ask) {
	n.srv.Forward(a.Leader, wire.KindShards, nil, wire.MaxForwardHops, func(ans serve.Answer, err error) {
		var sl wire.ShardList
		if err != nil || ans.Kind != wire.KindShardList || wire.DecodeShardList(ans.Payload, &sl) != nil {
			n.log.Debug("node: stray check", "leader", a.Leader, "err", err)
			return
		}
		for _, s := range n.rec.Judge(a, &sl) {
			n.host.Submit(raftmux.Op{Kind: raftmux.OpDropReplica, Shard: s}, func(r raftmux.Result) {
				n.rec.Dropped(s, r.Err)
				if r.Err != nil {
					n.log.Warn("node: drop stray replica", "shard", s, "err", r.Err)
					return
				}
				n.counters.straysDropped.Add(1)
				n.log.Info("stray replica dropped", "shard", s, "leader", a.Leader)
			})
		}
	})
}

// maybeBirth creates this node's groups, or joins a born cluster, when the
// room says so (reconcile.Controller.Birth).
func (n *Node) maybeBirth() {
	if n.born.Load() {
		return
	}
	var rows []router.ShardLeader
	rows, _ = n.leaders.Snapshot(rows[:0])
	v := n.view.Load()
	b, err := n.rec.Birth(v.rec, rows, n.clock())
	if err != nil {
		n.log.Error("node: birth ring", "err", err)
		return
	}
	switch b.Step {
	case reconcile.BirthWait:
		n.log.Info("waiting for members to create the cluster", "seen", len(v.live), "expect", n.cfg.BootstrapExpect,
			"members", v.live, "join", n.cfg.Join)
	case reconcile.BirthJoin:
		n.log.Info("joined a born cluster")
		n.markBorn()
	case reconcile.BirthCreate:
		n.log.Info("birth", "members", b.Members, "shards", n.cfg.Shards)
		if len(b.Groups) == 0 {
			n.markBorn()
			return
		}
		for _, g := range b.Groups {
			n.createGroup(g)
		}
	}
}

// createGroup bootstraps one group of the birth, and campaigns in it if
// this node is its preferred leader; the node is born once every group
// was answered.
func (n *Node) createGroup(g reconcile.Group) {
	finish := func() {
		if n.rec.GroupDone() {
			n.markBorn()
		}
	}
	n.host.Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: g.Shard, Voters: g.Voters}, func(r raftmux.Result) {
		if r.Err != nil {
			n.log.Warn("node: bootstrap", "shard", g.Shard, "err", r.Err)
			finish()
			return
		}
		if !g.Campaign {
			finish()
			return
		}
		n.host.Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: g.Shard}, func(raftmux.Result) { finish() })
	})
}

// maybeReady marks a born node ready once its cluster metadata is synced
// and it knows its leaders (reconcile.Controller.Ready).
func (n *Node) maybeReady() {
	if n.isReady() || !n.born.Load() {
		return
	}
	if at := n.bornAt.Load(); at == 0 {
		n.bornAt.Store(n.clock().UnixNano())
	}
	var rows []router.ShardLeader
	rows, _ = n.leaders.Snapshot(rows)
	if !n.metadataSynced() {
		return
	}
	if n.rec.Ready(len(rows), time.Unix(0, n.bornAt.Load()), n.clock()) {
		vs := n.MetadataVersions()
		n.log.Info("ready", "leaders_known", len(rows), "membership_version", vs.Membership, "ring_version", vs.Ring, "leader_version", vs.ShardLeaders)
		n.markReady()
	}
}
