package reconcile

import (
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
)

// View is the membership as one reconcile pass reads it. The node builds a
// View on every change of SWIM's members or of the marks and never changes
// one after; the Controller tells views apart by their address (a pass
// that saw this very View and found nothing to do need not look again).
type View struct {
	// Members are every member SWIM knows, by id, removed ones included.
	Members map[string]swim.Member
	// Live are the members alive or suspect and not removed, sorted.
	Live []string
	// Dead are the members declared dead or left, and the removed ones.
	Dead map[string]bool
	// Drained are the live members whose record carries a drain mark;
	// Removed the members removed for good (Marks.Judge).
	Drained, Removed map[string]bool
	// Ring is the ring of the live members and Placement its placement,
	// in which drained members lead nothing; both nil before the node
	// first read SWIM's members.
	Ring      *router.Ring
	Placement *router.Placement
	// Suspects counts the members suspected now.
	Suspects int
	// Changed is when Live last changed.
	Changed time.Time
}

// Alive reports whether SWIM counts id alive or suspect.
func (v *View) Alive(id string) bool {
	m, ok := v.Members[id]
	return ok && (m.State == swim.StateAlive || m.State == swim.StateSuspect)
}

// Gone reports whether owner id is gone for good as far as moving its
// topics goes: SWIM declared it dead or left, or does not know it at all
// while knowsAll (Controller.KnowsAll: after a restart SWIM has forgotten
// the members that died meanwhile, and their topics must still move).
func (v *View) Gone(id string, knowsAll bool) bool {
	if v.Dead[id] {
		return true
	}
	_, known := v.Members[id]
	return !known && knowsAll
}

// Died reports whether SWIM declared id dead, not left (a leaving node
// still answers its peers), or id was removed for good.
func (v *View) Died(id string) bool {
	return v.Dead[id] && v.Members[id].State != swim.StateLeft
}

// Candidates returns the live members that are not drained as owner
// candidates, with their load in st (the shard's own count).
func (v *View) Candidates(st *meta.State) []meta.Node {
	out := make([]meta.Node, 0, len(v.Live))
	for _, id := range v.Live {
		if v.Drained[id] {
			continue
		}
		out = append(out, meta.Node{ID: id, Load: uint64(st.Load(id))})
	}
	return out
}
