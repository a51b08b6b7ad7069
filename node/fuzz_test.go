package node

import (
	"testing"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// FuzzMergeLeaderTable: any pushed table is merged or refused, never a
// panic, and a merged row never names a shard outside the table.
func FuzzMergeLeaderTable(f *testing.F) {
	f.Add(wire.AppendLeaderTable(nil, []wire.LeaderRow{{Shard: 3, Leader: []byte("n1"), Term: 4}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
		_ = n.mergeLeaderTable(b)
		rows, _ := n.leaders.Snapshot(nil)
		for _, r := range rows {
			if r.Shard >= 8 || r.Leader == "" {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}
