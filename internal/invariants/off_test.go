//go:build !invariants && !race

package invariants

import "testing"

func TestDisabledInARelease(t *testing.T) {
	if Enabled {
		t.Fatal("Enabled is true in a build without the invariants tag or -race")
	}
}
