//go:build mutants

package sim

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
)

// catchWithin is how many seeds each mutant may survive; every mutant
// must break a promise the checkers see within that many seeds (the
// README reports how many each took).
const catchWithin = 10

// TestMutants switches on each deliberate bug in turn (build tag mutants)
// and runs seeds until a checker catches it.
func TestMutants(t *testing.T) {
	for _, m := range mutant.All {
		t.Run(string(m), func(t *testing.T) {
			restore := mutant.Set(m)
			defer restore()
			for seed := uint64(1); seed <= catchWithin; seed++ {
				start := time.Now()
				res, err := Run(Config{Seed: seed})
				if err != nil {
					t.Fatal(err)
				}
				if res.Failed() {
					t.Logf("caught at seed %d (%v): %s", seed, time.Since(start).Round(time.Millisecond), firstLine(res.Violations[0]))
					return
				}
			}
			t.Fatalf("mutant %s survived %d seeds", m, catchWithin)
		})
	}
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
