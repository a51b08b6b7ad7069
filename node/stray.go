package node

import (
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// A stray is a replica hosted here that its group no longer counts as a
// member: a configuration change removed this node while it was cut off,
// so it never applied the change that would have destroyed the replica.
// It waits or campaigns forever, and its data lingers.
//
// Every strayCheckRounds reconcile rounds the node lists its replicas that
// the ring does not place here; one that stays so for strayGrace is a
// suspect, and the node asks the shard's current leader (from the leader
// table, over the forwarded Shards request) for the group's voters. Two
// answers in a row from a leader that leads the shard and does not list
// this node make the replica a confirmed stray, and the raft host drops it
// with its data (raftmux.Host.DropReplica; Stats.StraysDropped). Deleting
// the data of a replica that raft still runs is only safe inside the raft
// host, and doing it at the next start instead could erase a replica its
// leader has meanwhile added back (a voter that forgets what it
// acknowledged breaks raft's safety). A confirmed stray the host could not
// drop yet is counted in Stats.StrayReplicas.

const (
	strayCheckRounds = 5
	// strayVerdicts: answers in a row needed to confirm a stray.
	strayVerdicts = 2
)

// strayGrace is thirty reconcile intervals (6 s "fast", 15 s "lan"): longer
// than a shard manager needs to move a replica the ring moved away.
func (n *Node) strayGrace() time.Duration { return 30 * n.cfg.ReconcileInterval }

type strayState struct {
	since     time.Time // when the ring stopped placing it here
	verdicts  int       // answers in a row that it is not a member
	confirmed bool
}

// collectStrays runs in a shard manager pass with this node's replicas; it
// asks the leaders about suspects without waiting for their answers.
func (n *Node) collectStrays(v *clusterView, infos []raftmux.Info) {
	n.reconcileMu.Lock()
	defer n.reconcileMu.Unlock()
	n.strayRound++
	if n.strayRound%strayCheckRounds != 0 || v.placement == nil {
		return
	}
	now := n.clock()
	ask := map[string][]uint64{} // leader → shards to ask about
	seen := make(map[uint64]bool)
	var reps []string
	for _, in := range infos {
		if in.Shard >= uint64(n.cfg.Shards) || in.Leader == n.self {
			continue
		}
		reps = v.placement.Replicas(uint32(in.Shard), reps[:0])
		if len(reps) == 0 || slices.Contains(reps, n.cfg.ID) {
			continue
		}
		seen[in.Shard] = true
		st, ok := n.strays[in.Shard]
		if !ok {
			n.strays[in.Shard] = &strayState{since: now}
			continue
		}
		if st.confirmed || now.Sub(st.since) < n.strayGrace() {
			continue
		}
		leader, _, ok := n.leaders.Get(uint32(in.Shard))
		if !ok || leader == n.cfg.ID || !v.alive(leader) {
			continue
		}
		ask[leader] = append(ask[leader], in.Shard)
	}
	for s := range n.strays {
		if !seen[s] {
			delete(n.strays, s)
		}
	}
	for _, leader := range slices.Sorted(maps.Keys(ask)) {
		shards := ask[leader]
		n.fwd.forward(n, leader, wire.KindShards, nil, wire.MaxForwardHops, func(a answer, err error) {
			var sl wire.ShardList
			if err != nil || a.kind != wire.KindShardList || wire.DecodeShardList(a.payload, &sl) != nil {
				n.log.Debug("node: stray check", "leader", leader, "err", err)
				return
			}
			n.reconcileMu.Lock()
			defer n.reconcileMu.Unlock()
			for _, s := range shards {
				n.judgeStray(s, leader, &sl)
			}
			n.publishStrays()
		})
	}
	n.publishStrays()
}

// publishStrays lists the confirmed strays for Stats. Under reconcileMu.
func (n *Node) publishStrays() {
	var confirmed []uint64
	for s, st := range n.strays {
		if st.confirmed {
			confirmed = append(confirmed, s)
		}
	}
	slices.Sort(confirmed)
	n.strayList.Store(&confirmed)
}

// strayShards lists the confirmed strays, in shard order.
func (n *Node) strayShards() []uint64 {
	if p := n.strayList.Load(); p != nil {
		return *p
	}
	return nil
}

// judgeStray weighs the leader's answer about shard s. Under reconcileMu.
func (n *Node) judgeStray(s uint64, leader string, sl *wire.ShardList) {
	st := n.strays[s]
	i := slices.IndexFunc(sl.Shards, func(si wire.ShardInfo) bool { return si.Shard == s })
	if st == nil || i < 0 || string(sl.Shards[i].Leader) != leader {
		return // the leader moved meanwhile: ask again later
	}
	if slices.ContainsFunc(sl.Shards[i].Replicas, func(r []byte) bool { return string(r) == n.cfg.ID }) {
		st.verdicts = 0
		return
	}
	if st.verdicts++; st.verdicts < strayVerdicts {
		return
	}
	st.confirmed = true
	n.host.Submit(raftmux.Op{Kind: raftmux.OpDropReplica, Shard: s}, func(r raftmux.Result) {
		n.reconcileMu.Lock()
		defer n.reconcileMu.Unlock()
		if r.Err != nil {
			if st := n.strays[s]; st != nil {
				st.verdicts = 0
			}
			n.log.Warn("node: drop stray replica", "shard", s, "err", r.Err)
			return
		}
		delete(n.strays, s)
		n.publishStrays()
		n.counters.straysDropped.Add(1)
		n.log.Info("stray replica dropped", "shard", s, "leader", leader)
	})
}
