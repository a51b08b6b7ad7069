package metasync

import (
	"testing"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

func TestLeaderTableRoundTripIsTermChecked(t *testing.T) {
	src := router.NewLeaderTable(8)
	_, _ = src.Update(1, "n1", 5)
	_, _ = src.Update(6, "n3", 2)
	rows, _ := src.Snapshot(nil)
	enc := wire.AppendLeaderTable(nil, leaderRows(rows))

	dst := router.NewLeaderTable(8)
	_, _ = dst.Update(6, "n2", 9) // newer than the pushed row
	if err := mergeLeaderTable(dst, enc); err != nil {
		t.Fatal(err)
	}
	if l, term, _ := dst.Get(1); l != "n1" || term != 5 {
		t.Fatalf("shard 1: %s@%d", l, term)
	}
	if l, term, _ := dst.Get(6); l != "n2" || term != 9 {
		t.Fatalf("shard 6 taken from an older term: %s@%d", l, term)
	}
	if got, want := dst.TermSum(), uint64(5+9); got != want {
		t.Fatalf("version %d, want %d", got, want)
	}
}

func TestLeaderTableRejectsMalformedInput(t *testing.T) {
	table := func(rows ...router.ShardLeader) []byte { return wire.AppendLeaderTable(nil, leaderRows(rows)) }
	good := table(router.ShardLeader{Shard: 3, Leader: "n1", Term: 1})
	for name, b := range map[string][]byte{
		"empty":        nil,
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"shard range":  table(router.ShardLeader{Shard: router.ShardSpace(8).Capacity(), Leader: "n1", Term: 1}),
		"empty leader": table(router.ShardLeader{Shard: 1, Leader: "", Term: 1}),
		"huge count":   {0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge id":      {1, 1, 1, 0xff, 0x01},
	} {
		dst := router.NewLeaderTable(8)
		if err := mergeLeaderTable(dst, b); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if dst.TermSum() != 0 {
			t.Errorf("%s: changed the table", name)
		}
	}
}

// A digest version rises by one per change of this node's own view, and
// never falls when a peer's list is merged.
func TestDigestVersionNeverFalls(t *testing.T) {
	var d digestVersion
	d.observe(7)
	d.observe(7)
	if d.version != 1 {
		t.Fatalf("version %d after one change", d.version)
	}
	for _, c := range []struct {
		peerVersion, peerDigest, want uint64
	}{
		{0, 7, 1},   // same view, lower version: keep
		{5, 7, 5},   // same view, higher version: take it
		{3, 9, 5},   // other view, lower version: keep
		{5, 9, 6},   // other view, same version: one above
		{10, 9, 11}, // other view, higher version: one above
	} {
		d.merge(c.peerVersion, c.peerDigest)
		if d.version != c.want {
			t.Fatalf("merge of %d@%x: version %d, want %d", c.peerVersion, c.peerDigest, d.version, c.want)
		}
	}
}
