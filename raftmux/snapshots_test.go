package raftmux_test

import (
	"fmt"
	"io"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

// TestSecondSnapshotRaftRefusesKeepsTheFirstOnesData: a follower
// receives two snapshots before its next Ready, the newer first. raft
// takes the newer and refuses the older (it is at or below what the newer
// committed); the Ready then installs the newer, whose data must still be
// there. (The older one's arrival used to replace the data raft was going
// to ask for, and the replica halted for good: "snapshot without its
// data".)
func TestSecondSnapshotRaftRefusesKeepsTheFirstOnesData(t *testing.T) {
	net := raftmuxtest.NewNetwork()
	hosts, kvs, settle := manualHosts(t, net, func(uint64, raftmux.LeaderChange) {})
	call := func(id uint64, op raftmux.Op) raftmux.Result {
		var res raftmux.Result
		hosts[id].Submit(op, func(r raftmux.Result) { res = r })
		settle()
		return res
	}
	for id := uint64(1); id <= 3; id++ {
		if r := call(id, raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	call(1, raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0})
	for range 100 {
		if r := call(1, raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: []byte("warm")}); r.Err == nil {
			break
		}
		for id := uint64(1); id <= 3; id++ {
			hosts[id].Tick()
		}
	}
	// Host 3 falls behind.
	net.Partition([]uint64{1, 2}, []uint64{3})
	propose := func(from, to int) {
		for i := from; i < to; i++ {
			if r := call(1, raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: fmt.Appendf(nil, "cmd-%02d", i)}); r.Err != nil {
				t.Fatalf("propose %d: %v", i, r.Err)
			}
		}
	}
	snapshot := func() (*raftpb.SnapshotMetadata, []byte) {
		meta, rc, err := kvs[1].Store.SnapshotData(0)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return meta, data
	}
	propose(0, 5)
	olderMeta, olderData := snapshot()
	propose(5, 10)
	newerMeta, newerData := snapshot()
	if newerMeta.Index <= olderMeta.Index {
		t.Fatalf("snapshots at %d then %d", olderMeta.Index, newerMeta.Index)
	}
	var term uint64
	for _, in := range call(1, raftmux.Op{Kind: raftmux.OpShards}).Value.([]raftmux.Info) {
		if in.Shard == 0 {
			term = in.Term
		}
	}
	chunk := func(id uint64, meta *raftpb.SnapshotMetadata, data []byte) *raftmux.SnapshotChunk {
		m := &raftpb.Message{Type: raftpb.MsgSnap, From: 1, To: 3, Term: term, Snapshot: &raftpb.Snapshot{Metadata: *meta}}
		return &raftmux.SnapshotChunk{Shard: 0, ID: id, Last: true, Msg: m, Data: data}
	}
	// Both arrive before host 3 takes its next Ready: the newer, then the
	// older.
	hosts[3].DeliverSnapshotChunk(1, chunk(1, newerMeta, newerData))
	hosts[3].DeliverSnapshotChunk(1, chunk(2, olderMeta, olderData))
	settle()
	if h := hosts[3].Halted(); len(h) > 0 {
		t.Fatalf("host 3 halted: %v", h[0].Err)
	}
	applied, err := kvs[3].Store.Applied(0)
	if err != nil {
		t.Fatal(err)
	}
	if applied != newerMeta.Index {
		t.Fatalf("host 3 applied %d, want the newer snapshot's %d", applied, newerMeta.Index)
	}
	if v, ok := kvs[3].Store.Get(0, []byte("cmd-09")); !ok || string(v) == "" {
		t.Fatalf("host 3 lacks the newer snapshot's last command (%q, %v)", v, ok)
	}
}
