package invariantstest

import (
	"testing"

	"github.com/shoalmq/shoal/internal/invariants"
)

// recorder is a testing.TB that keeps what a failed check says and stops
// the check as Fatalf does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = format
	panic(r)
}

func check(t *testing.T, want string, fn func()) (failed string) {
	r := &recorder{TB: t}
	defer func() {
		if p := recover(); p != nil && p != r {
			panic(p)
		}
		failed = r.failed
	}()
	MustViolate(r, want, fn)
	return ""
}

func TestMustViolate(t *testing.T) {
	for _, tt := range []struct {
		name, want, failed string
		fn                 func()
	}{
		{"the violation wanted", "x is 3", "", func() { invariants.Failf("x is %d", 3) }},
		{"another violation", "x is 4", "violation %q, want %q", func() { invariants.Failf("x is %d", 3) }},
		{"no panic", "x is 3", "no invariant violation (want %q)", func() {}},
		{"another panic", "x is 3", "no invariant violation (want %q)", func() { panic("x is 3") }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := check(t, tt.want, tt.fn); got != tt.failed {
				t.Fatalf("failed with %q, want %q", got, tt.failed)
			}
		})
	}
}
