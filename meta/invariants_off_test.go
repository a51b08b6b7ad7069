//go:build !invariants && !race

package meta

import "testing"

// A release build checks nothing: Apply on a state broken behind its back
// neither notices nor pays for looking.
func TestReleaseApplyChecksNothing(t *testing.T) {
	s := New()
	mustApply(t, s, assign("a", "n1", 0))
	s.owners["n1"].digest ^= 1
	mustApply(t, s, marker(1))
}
