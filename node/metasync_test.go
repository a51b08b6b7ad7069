package node

import (
	"testing"

	"github.com/shoalmq/shoal/router"
)

func TestLeaderTableRoundTripIsTermChecked(t *testing.T) {
	src := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
	_, _ = src.leaders.Update(1, "n1", 5)
	_, _ = src.leaders.Update(6, "n3", 2)
	rows, _ := src.leaders.Snapshot(nil)
	enc := appendLeaderTable(nil, rows)

	dst := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
	_, _ = dst.leaders.Update(6, "n2", 9) // newer than the pushed row
	if err := dst.mergeLeaderTable(enc); err != nil {
		t.Fatal(err)
	}
	if l, term, _ := dst.leaders.Get(1); l != "n1" || term != 5 {
		t.Fatalf("shard 1: %s@%d", l, term)
	}
	if l, term, _ := dst.leaders.Get(6); l != "n2" || term != 9 {
		t.Fatalf("shard 6 taken from an older term: %s@%d", l, term)
	}
	if got, want := dst.leaderVersion(), uint64(5+9); got != want {
		t.Fatalf("version %d, want %d", got, want)
	}
}

func TestLeaderTableRejectsMalformedInput(t *testing.T) {
	n := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
	good := appendLeaderTable(nil, []router.ShardLeader{{Shard: 3, Leader: "n1", Term: 1}})
	for name, b := range map[string][]byte{
		"empty":        nil,
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"shard range":  appendLeaderTable(nil, []router.ShardLeader{{Shard: 8, Leader: "n1", Term: 1}}),
		"empty leader": appendLeaderTable(nil, []router.ShardLeader{{Shard: 1, Leader: "", Term: 1}}),
		"huge count":   {0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge id":      {1, 1, 1, 0xff, 0x01},
	} {
		if err := n.mergeLeaderTable(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
