// Package invariants says whether this build checks the code's invariants
// as it runs, as Pebble's internal/invariants does.
//
// Enabled is a constant: true in builds with the invariants tag or the
// race detector, false in every other build. A check is written
//
//	if invariants.Enabled {
//		if err := s.check(); err != nil {
//			invariants.Fail(err)
//		}
//	}
//
// and the compiler drops the whole block from a release build, so a check
// costs nothing there. The test targets of the Makefile build with the tag;
// make build and go build do not.
package invariants

import "fmt"

// Violation is what a failed check panics with.
type Violation struct {
	Err error
}

func (v *Violation) Error() string { return "invariant violated: " + v.Err.Error() }

func (v *Violation) Unwrap() error { return v.Err }

// Fail panics with a Violation of err.
func Fail(err error) {
	panic(&Violation{Err: err})
}

// Failf panics with a Violation of the formatted message.
func Failf(format string, args ...any) {
	Fail(fmt.Errorf(format, args...))
}

// Amortized spreads a check of a whole structure over the changes made to
// it, so that checking after every change does not turn a linear pass into
// a quadratic one: Due reports true once the changes since the last check
// pay for a check of size elements at Rate elements each. A structure of
// at most Rate elements is checked after every change. The zero value is
// ready to use.
type Amortized struct {
	changes int
}

// Rate is how many elements a whole check may visit per change, on
// average.
const Rate = 16

// Due counts one change and reports whether a check of size elements is
// due now.
func (a *Amortized) Due(size int) bool {
	a.changes++
	if a.changes*Rate < size {
		return false
	}
	a.changes = 0
	return true
}
