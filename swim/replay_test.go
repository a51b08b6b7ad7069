package swim

import "testing"

func TestReplayWindow(t *testing.T) {
	var w replayWindow
	take := func(gen, seq uint64) bool {
		if !w.fresh(gen, seq) {
			return false
		}
		w.take(gen, seq)
		return true
	}
	steps := []struct {
		gen, seq uint64
		want     bool
		why      string
	}{
		{5, 1, true, "first"},
		{5, 1, false, "the same again"},
		{5, 3, true, "a gap"},
		{5, 2, true, "late, within the window"},
		{5, 2, false, "late, again"},
		{5, 3 + ReplayWindow, true, "far ahead"},
		{5, 3, false, "below the window now"},
		{5, 4, true, "the bottom of the window"},
		{5, 4, false, "the bottom again"},
		{4, 1 << 40, false, "an earlier generation"},
		{6, 1, true, "a later generation starts over"},
		{6, 1, false, "and remembers"},
		{5, 5, false, "the previous generation is over"},
	}
	for _, s := range steps {
		if got := take(s.gen, s.seq); got != s.want {
			t.Fatalf("%s: gen %d seq %d taken %v, want %v", s.why, s.gen, s.seq, got, s.want)
		}
	}
}

// Every number is taken exactly once, in any order within the window.
func TestReplayWindowTakesEachOnce(t *testing.T) {
	var w replayWindow
	const n = 10 * ReplayWindow
	for base := uint64(1); base < n; base += 100 {
		for i := uint64(99); ; i-- { // each block of 100 in reverse
			s := base + i
			if !w.fresh(1, s) {
				t.Fatalf("%d refused the first time", s)
			}
			w.take(1, s)
			if w.fresh(1, s) {
				t.Fatalf("%d taken twice", s)
			}
			if i == 0 {
				break
			}
		}
	}
}
