//go:build invariants || race

package reconcile

import (
	"slices"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/internal/ddtest"
	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
	"github.com/shoalmq/shoal/raftmux"
)

// A pass's steps are checked against the replicas it read: a step the
// shard manager must never take is caught where it is decided.
func TestAPassThatBreaksTheRulesIsCaught(t *testing.T) {
	s := newSpec(t)
	var out strings.Builder
	s.newView(t, ddtest.NewArgs(t, map[string][]string{"live": {"n1", "n2", "n3", "n4"}}), &out)
	v, c := s.view, s.c
	infos := []raftmux.Info{
		{Shard: 1, Leader: 1, Voters: []uint64{3, 1, 4}},
		{Shard: 2, Leader: 1, Voters: []uint64{1, 2, 3}},
		{Shard: 3, Leader: 4, Voters: []uint64{4, 3, 1}},
	}
	ok := Step{Kind: Transfer, Shard: 1, Node: 3, Name: "n3"}
	c.checkPass(v, infos, []Step{ok})
	for _, bad := range []struct {
		want  string
		steps []Step
	}{
		{"two steps in shard 1", []Step{ok, {Kind: Promote, Shard: 1, Node: 4, Name: "n4"}}},
		{"which this node does not lead", []Step{{Kind: Transfer, Shard: 3, Node: 3, Name: "n3"}}},
		{"which this node does not lead", []Step{{Kind: AddLearner, Shard: 0, Node: 2, Name: "n2"}}},
		{"of this node's own replica", []Step{{Kind: RemoveVoter, Shard: 2, Node: 1, Name: "n1"}}},
		{"not a live replica the ring places there", []Step{{Kind: AddLearner, Shard: 2, Node: 4, Name: "n4"}}},
		{"not a live replica the ring places there", []Step{{Kind: AddLearner, Shard: 2, Node: 9, Name: "n9"}}},
		{"not a voter", []Step{{Kind: Transfer, Shard: 2, Node: 4, Name: "n4"}}},
		{"5 configuration changes and 0 transfers in a pass, above 4 and 64", slices.Repeat([]Step{{Kind: Promote, Shard: 2, Node: 2, Name: "n2"}}, 5)},
		{"0 configuration changes and 65 transfers in a pass, above 4 and 64", slices.Repeat([]Step{ok}, 65)},
	} {
		invariantstest.MustViolate(t, bad.want, func() { c.checkPass(v, infos, bad.steps) })
	}
}
