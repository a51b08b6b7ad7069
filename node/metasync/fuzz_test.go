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
	// A split's grandchild (a cluster born with 8 shards), and a parent
	// after its children.
	f.Add(wire.AppendLeaderTable(nil, []wire.LeaderRow{{Shard: 48, Leader: []byte("n1"), Term: 48}}))
	f.Add(wire.AppendLeaderTable(nil, []wire.LeaderRow{{Shard: 8, Leader: []byte("n1"), Term: 2}, {Shard: 0, Leader: []byte("n2"), Term: 1}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		table := router.NewLeaderTable(8)
		_ = mergeLeaderTable(table, b)
		rows, _ := table.Snapshot(nil)
		sm := table.Map()
		for _, r := range rows {
			// A row is of a shard the map holds, or of one it split.
			if !table.Space().Valid(uint64(r.Shard)) || r.Leader == "" || !(sm.Live(r.Shard) || sm.HasSplit(r.Shard)) {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}
