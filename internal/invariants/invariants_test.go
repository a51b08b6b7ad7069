package invariants

import (
	"errors"
	"strings"
	"testing"
)

func TestFailPanicsWithAViolation(t *testing.T) {
	defer func() {
		v, ok := recover().(*Violation)
		if !ok || !strings.Contains(v.Error(), "invariant violated: x is 3") {
			t.Fatalf("recovered %v", v)
		}
		var target *Violation
		if !errors.As(error(v), &target) {
			t.Fatal("not a Violation")
		}
	}()
	Failf("x is %d", 3)
}

func TestAmortizedChecksSmallStructuresEveryTime(t *testing.T) {
	var a Amortized
	for range 5 {
		if !a.Due(Rate) {
			t.Fatal("a structure of Rate elements not checked after a change")
		}
	}
	// A structure of 10·Rate elements is checked every 10 changes.
	n := 0
	for range 1000 {
		if a.Due(10 * Rate) {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("%d checks of 10·Rate elements in 1000 changes, want 100", n)
	}
}
