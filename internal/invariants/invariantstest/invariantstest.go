// Package invariantstest checks, in the tests of a build with the
// invariants tag or -race, that a check catches what it exists to catch.
package invariantstest

import (
	"strings"
	"testing"

	"github.com/shoalmq/shoal/internal/invariants"
)

// MustViolate runs fn and fails the test unless fn panics with an
// invariant violation whose message holds want.
func MustViolate(t testing.TB, want string, fn func()) {
	t.Helper()
	defer func() {
		t.Helper()
		v, ok := recover().(*invariants.Violation)
		if !ok {
			t.Fatalf("no invariant violation (want %q)", want)
		}
		if !strings.Contains(v.Error(), want) {
			t.Fatalf("violation %q, want %q", v.Error(), want)
		}
	}()
	fn()
}
