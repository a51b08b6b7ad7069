package metasync

import (
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
)

// The tracker's invariants. Builds with invariants (the invariants tag, or
// -race) check them on each due and panic with an invariants.Violation
// when one breaks; other builds compile none of it.
//
// Every pull due goes to a live peer, at most one per kind, and is the
// kind's pull in flight until its deadline, which lies ahead; every pull
// in flight was asked of a peer counted as tried, so that a fallback never
// asks it again before every other peer was.

// checkDue checks the pulls due returned at now among peers.
func (t *tracker) checkDue(now time.Time, peers []string, out []pull) {
	for i, r := range out {
		if !slices.Contains(peers, r.peer) {
			invariants.Failf("metasync: pull of %v from %q, not a live peer", r.kind, r.peer)
		}
		if i > 0 && out[i-1].kind >= r.kind {
			invariants.Failf("metasync: pulls due out of kind order or twice: %v", out)
		}
		if p := &t.pulls[r.kind]; p.peer != r.peer || !now.Before(p.deadline) {
			invariants.Failf("metasync: pull of %v from %q due, but in flight from %q until %v (now %v)", r.kind, r.peer, p.peer, p.deadline, now)
		}
	}
	for k := range numKinds {
		if p := &t.pulls[k]; p.peer != "" && !slices.Contains(p.tried, p.peer) {
			invariants.Failf("metasync: pull of %v in flight from %q, not among those tried %v", k, p.peer, p.tried)
		}
	}
}
