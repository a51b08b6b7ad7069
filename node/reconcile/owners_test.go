package reconcile

import (
	"testing"
	"time"
)

// TestFellSilent: a look at the owners is due as soon as a peer's rounds
// have stopped for the silence length, once per peer falling silent, and
// never for this node itself.
func TestFellSilent(t *testing.T) {
	t0 := time.Unix(1000, 0)
	silent := 2400 * time.Millisecond
	rounds := map[string]time.Time{"n1": t0, "n2": t0.Add(2 * time.Second)}
	for _, c := range []struct {
		name      string
		self      string
		last, now time.Time
		want      bool
	}{
		{"nobody silent yet", "n3", t0.Add(2 * time.Second), t0.Add(2300 * time.Millisecond), false},
		{"n1 fell silent since the last look", "n3", t0.Add(2 * time.Second), t0.Add(2500 * time.Millisecond), true},
		{"n1 was silent at the last look already", "n3", t0.Add(2500 * time.Millisecond), t0.Add(2700 * time.Millisecond), false},
		{"n2 fell silent since the last look", "n3", t0.Add(4 * time.Second), t0.Add(4500 * time.Millisecond), true},
		{"itself is never silent", "n1", t0.Add(2 * time.Second), t0.Add(2500 * time.Millisecond), false},
	} {
		if got := fellSilent(rounds, c.self, c.last, c.now, silent); got != c.want {
			t.Errorf("%s: fellSilent = %v, want %v", c.name, got, c.want)
		}
	}
}
