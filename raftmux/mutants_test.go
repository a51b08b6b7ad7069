//go:build mutants

package raftmux_test

import (
	"testing"

	"github.com/shoalmq/shoal/internal/mutant"
)

// TestMutants shows that TestCutOffLeaderAnswersNoRead can fail: with the
// leader's reads answered without a quorum's confirmation, the cut-off
// leader answers while a new leader writes on the other side.
func TestMutants(t *testing.T) {
	defer mutant.Set(mutant.ReadUnconfirmed)()
	a := readAcrossCut(t)
	if a.err != nil || !a.at.Before(a.healed) || a.index >= a.written {
		t.Fatalf("mutant %s survived: read at %d (err %v), before the heal: %v; writes up to %d", mutant.ReadUnconfirmed, a.index, a.err, a.at.Before(a.healed), a.written)
	}
	t.Logf("caught: the cut-off leader answered at %d, below the write at %d", a.index, a.written)
}
