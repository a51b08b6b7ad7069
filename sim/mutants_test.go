//go:build mutants

package sim

import (
	"cmp"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
)

// catchWithin is how many seeds a mutant may survive, unless its target
// says otherwise; every mutant must break a promise its checker sees
// within its seeds (the README reports how many each took).
const catchWithin = 10

// target is the checker that must catch a mutant, the one that checks
// the promise the bug breaks (a violation another checker reports does
// not count as a catch), and the seeds it may take (0: catchWithin).
type target struct {
	checker Checker
	seeds   uint64
	// splits runs the seeds with the operator's splits; the other mutants
	// run without them, on the schedules their catches were found on.
	splits bool
}

var targets = map[mutant.Name]target{
	// An owner that serves past its lease, or a new owner opened before
	// the old one's lease ran out, acknowledges writes while another
	// owner does.
	mutant.LeaseExpiry:    {checker: Owners, seeds: 0},
	mutant.GrantUnchecked: {checker: Owners, seeds: 0},
	// A new leader that opens a topic's new owner at once, before the
	// grants of the leaders before it ran out: the new owner takes the
	// topic while the old one still acknowledges writes (its record pull
	// would hold its own writes back, but taking the topic is already
	// the broken promise).
	mutant.LeaseWait: {checker: Owners, seeds: 0},
	// A late or duplicated Open taken after the Close of its epoch: the
	// epoch comes back to the node, and to its embedder's events.
	mutant.EpochFloor: {checker: Owners, seeds: 0},
	// An owner paused between a produce's append and its answer, whose
	// lease ran out meanwhile, acknowledges it after a new owner took
	// over.
	mutant.LeaseRecheck: {checker: Owners, seeds: 0},
	// A command refused at apply but acknowledged, or a read answered by
	// a leader that was deposed, gives an answer no order of the
	// operations explains.
	mutant.ApplyError:      {checker: Linearizability, seeds: 0},
	mutant.ReadUnconfirmed: {checker: Linearizability, seeds: 0},
	// A write a client's retry, or the network's copy, brings to its
	// shard again applies twice: one call, two effects.
	mutant.SessionDedup: {checker: Linearizability, seeds: 0},
	// A new owner that copies its predecessor's log short, and owners
	// whose epochs share offsets, lose or overwrite acknowledged records.
	mutant.HandoffShort:  {checker: Records, seeds: 0},
	mutant.OffsetsReused: {checker: Records, seeds: 0},
	// A dead member alive again in the same generation.
	mutant.DeadFinal: {checker: Membership, seeds: 0},
	// A move answered before the old owner is fenced: the client that
	// heard of the move sees the old owner acknowledge a write after it.
	mutant.Settle: {checker: History, seeds: 0},
	// A follower that acknowledges entries before its fsync ends, then
	// loses them in a power loss that lands just after its leader
	// answered, with the leader back last: a write the clients were told
	// of is not in the new leader's log. That loss must land in a narrow
	// window, which the first ten seeds may all miss.
	mutant.AckBeforeSync: {checker: Linearizability, seeds: 20},
	// A shard that goes on applying after its split acknowledges writes
	// its halves never hold; halves given the parent's records without
	// the run's last changes lose acknowledged writes. The second shows
	// only when a change lands just before a split, which the first ten
	// seeds may all miss.
	mutant.SplitUnfenced:   {checker: Linearizability, splits: true},
	mutant.SplitStaleChild: {checker: Linearizability, splits: true, seeds: 20},
	// A node whose map keeps a shard that split routes its topics there,
	// where nothing is answered any more: after the faults, no node
	// answers a lookup of them.
	mutant.SplitStaleRoute: {checker: Liveness, splits: true},
}

// TestMutants switches on each deliberate bug in turn (build tag mutants)
// and runs seeds until the mutant's checker catches it.
func TestMutants(t *testing.T) {
	// A catch counts only at a seed the unmutated code passes, with or
	// without splits as the mutant runs.
	type run struct {
		seed   uint64
		splits bool
	}
	clean := make(map[run]bool)
	hunted := make(map[mutant.Name]bool)
	for _, m := range mutant.Hunted {
		hunted[m] = true
	}
	for _, m := range append(mutant.Caught, mutant.Hunted...) {
		t.Run(string(m), func(t *testing.T) {
			tg, ok := targets[m]
			if !ok {
				t.Fatalf("mutant %s names no checker (targets)", m)
			}
			within := cmp.Or(tg.seeds, catchWithin)
			if hunted[m] && os.Getenv("SHOAL_SIM_HUNTED") == "" {
				// Reported, never failed: kept out of make test's time.
				t.Skipf("mutant %s is not yet required; SHOAL_SIM_HUNTED=1 (make sim-hunted) runs it", m)
			}
			for seed := uint64(1); seed <= within; seed++ {
				cfg := Config{Seed: seed, NoSplits: !tg.splits}
				ok, known := clean[run{seed, tg.splits}]
				if !known {
					res, err := Run(cfg)
					if err != nil {
						t.Fatal(err)
					}
					ok = !res.Failed()
					clean[run{seed, tg.splits}] = ok
				}
				if !ok {
					continue
				}
				restore := mutant.Set(m)
				start := time.Now()
				res, err := Run(cfg)
				restore()
				if err != nil {
					t.Fatal(err)
				}
				if v, ok := reportedBy(res, tg.checker); ok {
					t.Logf("caught by %s at seed %d (%v; checkers reporting: %v): %s", tg.checker, seed, time.Since(start).Round(time.Millisecond), checkers(res), firstLine(v.Text))
					return
				}
				if res.Failed() {
					t.Logf("seed %d: missed by %s, reported by %v: %s", seed, tg.checker, checkers(res), firstLine(res.Violations[0].String()))
				}
			}
			if hunted[m] {
				t.Logf("mutant %s (not yet required) survived %s for %d seeds", m, tg.checker, within)
				return
			}
			t.Fatalf("mutant %s survived %s for %d seeds", m, tg.checker, within)
		})
	}
}

// reportedBy returns the first violation checker c reported in res.
func reportedBy(res *Result, c Checker) (Violation, bool) {
	for _, v := range res.Violations {
		if v.Checker == c {
			return v, true
		}
	}
	return Violation{}, false
}

// checkers lists the checkers that reported a violation in res.
func checkers(res *Result) []Checker {
	var out []Checker
	for _, v := range res.Violations {
		if !slices.Contains(out, v.Checker) {
			out = append(out, v.Checker)
		}
	}
	return out
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
