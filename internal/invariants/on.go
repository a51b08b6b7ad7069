//go:build invariants || race

package invariants

// Enabled reports whether invariants are checked: yes, in this build.
const Enabled = true
