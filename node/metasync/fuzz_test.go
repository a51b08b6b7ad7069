package metasync

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
		table := router.NewLeaderTable(8)
		_ = mergeLeaderTable(table, b)
		rows, _ := table.Snapshot(nil)
		for _, r := range rows {
			if r.Shard >= 8 || r.Leader == "" {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}
