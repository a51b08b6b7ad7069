//go:build invariants || race

package invariants

import "testing"

func TestEnabledUnderTheTag(t *testing.T) {
	if !Enabled {
		t.Fatal("Enabled is false in a build with the invariants tag or -race")
	}
}
