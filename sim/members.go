package sim

import (
	"fmt"

	"github.com/shoalmq/shoal/swim"
)

// SWIM's promises, checked on what every node's membership reports as it
// happens: within one generation of a member, dead (or left) is final, and
// incarnations never fall.

type memberSeen struct {
	gen, inc uint64
	final    bool
}

// noteMembership checks the events observer's SWIM core reported.
func (w *World) noteMembership(observer *host, evs []swim.Event) {
	for _, e := range evs {
		if e.Kind == swim.EventShardLeader || e.Kind == swim.EventMetadataVersion || e.Member.ID == observer.id {
			continue
		}
		if w.onMember != nil {
			w.onMember(observer, e)
		}
		// A new life of the observer starts knowing nothing.
		key := fmt.Sprintf("%s#%d/%s", observer.id, observer.nodeGen, e.Member.ID)
		m := e.Member
		final := m.State == swim.StateDead || m.State == swim.StateLeft
		prev, ok := w.members[key]
		switch {
		case !ok || m.Generation > prev.gen:
		case m.Generation < prev.gen:
			w.violate(fmt.Sprintf("%s went back from generation %d to %d of %s", observer.id, prev.gen, m.Generation, m.ID))
		case prev.final && !final:
			w.violate(fmt.Sprintf("%s saw %s %s again in generation %d after it was dead", observer.id, m.ID, m.State, m.Generation))
		case m.Incarnation < prev.inc:
			w.violate(fmt.Sprintf("%s saw the incarnation of %s fall from %d to %d", observer.id, m.ID, prev.inc, m.Incarnation))
		}
		w.members[key] = memberSeen{gen: m.Generation, inc: m.Incarnation, final: final}
	}
}

// violate records a violation seen while the run goes on (at most once
// per kind of message).
func (w *World) violate(v string) {
	if w.seen[v] {
		return
	}
	w.seen[v] = true
	w.logf("VIOLATION membership: %s", v)
	w.early = append(w.early, v)
}
