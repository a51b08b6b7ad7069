package reconcile

import (
	"slices"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/raftmux"
)

// The shard manager's invariants. Builds with invariants (the invariants
// tag, or -race) check them on each pass and panic with an
// invariants.Violation when one breaks; other builds compile none of it.
//
// A pass starts at most Config.MaxConfChanges configuration changes and
// Config.MaxTransfers transfers, at most one step per shard, each in a
// shard this node hosts and leads; no step removes this node's own
// replica or hands the leadership to it; a learner is added only for a
// live member the ring places in the shard, and the leadership goes only
// to a voter of the group.

// checkPass checks the steps a pass over v and infos returned.
func (c *Controller) checkPass(v *View, infos []raftmux.Info, steps []Step) {
	transfers := 0
	for _, s := range steps {
		if s.Kind == Transfer {
			transfers++
		}
	}
	if n := len(steps) - transfers; n > c.cfg.MaxConfChanges || transfers > c.cfg.MaxTransfers {
		invariants.Failf("reconcile: %d configuration changes and %d transfers in a pass, above %d and %d",
			n, transfers, c.cfg.MaxConfChanges, c.cfg.MaxTransfers)
	}
	var reps []string
	for i, s := range steps {
		if slices.ContainsFunc(steps[:i], func(o Step) bool { return o.Shard == s.Shard }) {
			invariants.Failf("reconcile: two steps in shard %d in one pass: %v", s.Shard, steps)
		}
		j := slices.IndexFunc(infos, func(in raftmux.Info) bool { return in.Shard == s.Shard })
		if j < 0 || infos[j].Leader != c.self {
			invariants.Failf("reconcile: %v in shard %d, which this node does not lead", s.Kind, s.Shard)
		}
		in := infos[j]
		if s.Node == c.self {
			invariants.Failf("reconcile: %v of this node's own replica in shard %d", s.Kind, s.Shard)
		}
		switch s.Kind {
		case AddLearner:
			reps = v.Placement.Replicas(uint32(s.Shard), reps[:0])
			if !v.Alive(s.Name) || !slices.Contains(reps, s.Name) {
				invariants.Failf("reconcile: learner %q added to shard %d, not a live replica the ring places there (%v)", s.Name, s.Shard, reps)
			}
		case Replace:
			if !slices.Contains(in.Learners, s.Node) || !slices.Contains(in.Voters, s.Out) || s.Out == c.self || len(in.Voters) < c.cfg.Replicas {
				invariants.Failf("reconcile: %v in shard %d of voters %v, learners %v", s, s.Shard, in.Voters, in.Learners)
			}
		case Transfer:
			if !slices.Contains(in.Voters, s.Node) {
				invariants.Failf("reconcile: leadership of shard %d handed to %q, not a voter", s.Shard, s.Name)
			}
		}
	}
}
