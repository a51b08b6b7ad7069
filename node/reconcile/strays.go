package reconcile

import (
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// A stray is a replica hosted here that its group no longer counts as a
// member: a configuration change removed this node while it was cut off,
// so it never applied the change that would have destroyed the replica.
// It waits or campaigns forever, and its data lingers.
//
// Every strayCheckRounds passes of the shard manager the Controller lists
// the replicas here that the ring does not place here; one that stays so
// for strayGrace is a suspect, and the node asks the shard's current
// leader (from the leader table, over the forwarded Shards request) for
// the group's voters (an Ask). Two answers in a row from a leader that
// leads the shard and does not list this node make the replica a confirmed
// stray, which the raft host drops with its data (raftmux OpDropReplica).
// Deleting the data of a replica that raft still runs is only safe inside
// the raft host, and doing it at the next start instead could erase a
// replica its leader has meanwhile added back (a voter that forgets what
// it acknowledged breaks raft's safety). A confirmed stray the host could
// not drop yet stays listed (Strays).
//
// A leftover is a replica here of a shard the map shows split that never
// applied the split (it lagged, and its group has had no leader since:
// the replicas that split campaign no more). It would keep this node out
// of the halves for good: a node takes no half's traffic while it hosts
// an ancestor that has not split here. One that stays so for strayGrace
// is a suspect, and the node asks the leader of a live shard below it
// whether it leads that shard: a group below exists only once the split
// committed, so every entry of the leftover's group that mattered is in
// the halves. Two such answers in a row confirm it, and the raft host
// drops it as a stray.

const (
	// strayCheckRounds: shard-manager passes between two looks for strays.
	strayCheckRounds = 5
	// strayVerdicts: answers in a row needed to confirm a stray.
	strayVerdicts = 2
	// strayGrace: reconcile intervals (6 s "fast", 15 s "lan") a replica
	// the ring does not place here waits before it is a suspect: longer
	// than a shard manager needs to move a replica the ring moved away.
	strayGrace = 30
)

// stray is a replica the ring no longer places here.
type stray struct {
	since     time.Time // when the ring stopped placing it here
	verdicts  int       // answers in a row that it is not a member
	confirmed bool
	// under, for a leftover, is the live shard below it whose leader is
	// asked; under+1, so that zero is a plain stray.
	under uint64
}

// Ask is a stray check to send: the shards whose replicas here Leader
// leads, whose voters the node asks it for (wire.KindShards, forwarded).
type Ask struct {
	Leader string
	Shards []uint64
}

// findStrays is the stray look of a shard-manager pass over this node's
// replicas: the checks to send, in leader order. Under mu.
func (c *Controller) findStrays(v *View, infos []raftmux.Info, now time.Time) []Ask {
	c.strayRound++
	if c.strayRound%strayCheckRounds != 0 || v.Placement == nil {
		return nil
	}
	ask := map[string][]uint64{} // leader → shards to ask about
	seen := make(map[uint64]bool)
	var reps []string
	m := c.cfg.Leaders.Map()
	for _, in := range infos {
		if !router.ShardSpace(c.cfg.Shards).Valid(in.Shard) || in.Leader == c.self {
			continue
		}
		ask1 := uint32(in.Shard) // the shard whose leader is asked
		under, leftover := m.LiveUnder(uint32(in.Shard))
		if leftover = leftover && !in.Ended; leftover {
			ask1 = under
		} else {
			reps = v.Placement.Replicas(uint32(in.Shard), reps[:0])
			if len(reps) == 0 || slices.Contains(reps, c.cfg.Self) {
				continue
			}
		}
		seen[in.Shard] = true
		st, ok := c.strays[in.Shard]
		if !ok || (st.under != 0) != leftover {
			st = &stray{since: now}
			c.strays[in.Shard] = st
		}
		if leftover && st.under != uint64(ask1)+1 {
			st.under, st.verdicts = uint64(ask1)+1, 0
		}
		if st.confirmed || now.Sub(st.since) < strayGrace*c.cfg.Interval {
			continue
		}
		leader, _, ok := c.cfg.Leaders.Get(ask1)
		if !ok || leader == c.cfg.Self || !v.Alive(leader) {
			continue
		}
		ask[leader] = append(ask[leader], in.Shard)
	}
	for s := range c.strays {
		if !seen[s] {
			delete(c.strays, s)
		}
	}
	c.publishStrays()
	var out []Ask
	for _, leader := range slices.Sorted(maps.Keys(ask)) {
		out = append(out, Ask{Leader: leader, Shards: ask[leader]})
	}
	return out
}

// Judge weighs the answer to a: the shards its leader knows, with their
// replicas. It returns the strays it confirmed, which the node drops
// (raftmux OpDropReplica) and reports through Dropped. An answer from a
// node that no longer leads a shard counts for nothing: it is asked again
// later.
func (c *Controller) Judge(a Ask, sl *wire.ShardList) (drop []uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range a.Shards {
		st := c.strays[s]
		if st == nil {
			continue
		}
		asked := s
		if st.under != 0 {
			asked = st.under - 1
		}
		i := slices.IndexFunc(sl.Shards, func(si wire.ShardInfo) bool { return si.Shard == asked })
		if i < 0 || string(sl.Shards[i].Leader) != a.Leader {
			continue
		}
		if st.under == 0 && slices.ContainsFunc(sl.Shards[i].Replicas, func(r []byte) bool { return string(r) == c.cfg.Self }) {
			st.verdicts = 0
			continue
		}
		if st.verdicts++; st.verdicts < strayVerdicts {
			continue
		}
		st.confirmed = true
		drop = append(drop, s)
	}
	c.publishStrays()
	return drop
}

// Dropped reports the end of a confirmed stray's drop: gone, or (err) to
// be confirmed anew.
func (c *Controller) Dropped(shard uint64, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if st := c.strays[shard]; st != nil {
			st.verdicts = 0
		}
		return
	}
	delete(c.strays, shard)
	c.publishStrays()
}

// publishStrays lists the confirmed strays for Strays. Under mu.
func (c *Controller) publishStrays() {
	var confirmed []uint64
	for s, st := range c.strays {
		if st.confirmed {
			confirmed = append(confirmed, s)
		}
	}
	slices.Sort(confirmed)
	c.strayList.Store(&confirmed)
}

// Strays lists the confirmed strays not dropped yet, in shard order.
func (c *Controller) Strays() []uint64 {
	if p := c.strayList.Load(); p != nil {
		return *p
	}
	return nil
}
