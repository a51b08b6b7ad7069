package node

import (
	"testing"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// FuzzMergeLeaderTable: any pushed table is merged or refused, never a
// panic, and a merged row never names a shard outside the table.
func FuzzMergeLeaderTable(f *testing.F) {
	f.Add(appendLeaderTable(nil, []router.ShardLeader{{Shard: 3, Leader: "n1", Term: 4}}))
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

// FuzzDecodeMembers: any pushed member list decodes or is refused; one
// that decodes is sorted and within the limits (uvarints need not be
// minimal, so re-encoding may only shrink).
func FuzzDecodeMembers(f *testing.F) {
	f.Add(appendMembers(nil, []memberRecord{{id: "n1", rack: "r1", swimAddr: "127.0.0.1:7301", gen: 5, inc: 1, state: swim.StateAlive}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := decodeMembers(b)
		if err != nil {
			return
		}
		for i, r := range rs {
			if r.id == "" || len(r.id) > wire.MaxNodeIDLen || (i > 0 && rs[i-1].id >= r.id) || r.state < swim.StateAlive || r.state > swim.StateLeft {
				t.Fatalf("bad record %d: %+v", i, r)
			}
		}
		if out := appendMembers(nil, rs); len(out) > len(b) {
			t.Fatalf("re-encoding grew: %d > %d bytes", len(out), len(b))
		}
	})
}
