//go:build mutants

package mutant

import "sync/atomic"

var active atomic.Pointer[Name]

// On reports whether mutant n is switched on.
func On(n Name) bool {
	p := active.Load()
	return p != nil && *p == n
}

// Set switches mutant n on (and every other off) until restore is called.
func Set(n Name) (restore func()) {
	prev := active.Swap(&n)
	return func() { active.Store(prev) }
}
