package fuzz

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/klauspost/compress/s2"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/wire"
)

func seedRaftBatch() *wire.RaftBatch {
	m := &wire.RaftBatch{}
	m.Messages = append(m.Messages, wire.ShardMessage{Shard: 3}, wire.ShardMessage{Shard: 4})
	app := &m.Messages[0].Msg
	app.Type, app.To, app.From, app.Term, app.LogTerm, app.Index, app.Commit = raftpb.MsgApp, 2, 1, 5, 5, 10, 9
	app.Entries = []raftpb.Entry{{Term: uint64(5), Index: uint64(11), Type: raftpb.EntryNormal, Data: []byte("put k v")}, {Data: []byte{}}}
	app.Context = []byte("ctx")
	app.Responses = []raftpb.Message{{Type: raftpb.MsgAppResp, Reject: true, RejectHint: uint64(3)}}
	snap := &m.Messages[1].Msg
	snap.Type, snap.Vote = raftpb.MsgSnap, 7
	snap.Snapshot = &raftpb.Snapshot{Data: []byte("state"), Metadata: raftpb.SnapshotMetadata{Index: uint64(10), Term: uint64(5),
		ConfState: raftpb.ConfState{Voters: []uint64{1, 2}, Learners: []uint64{3}, VotersOutgoing: []uint64{1}, LearnersNext: []uint64{4}, AutoLeave: true}}}
	m.Heartbeats = []wire.Heartbeat{{Shard: 1, Term: 2, Commit: 3, Flags: wire.HeartbeatQuiesce}}
	m.HeartbeatResponses = []wire.Heartbeat{{Shard: 1, Term: 2, Commit: 3}}
	return m
}

func equalBatches(t *testing.T, a, b *wire.RaftBatch) {
	t.Helper()
	if len(a.Messages) != len(b.Messages) || len(a.Heartbeats) != len(b.Heartbeats) || len(a.HeartbeatResponses) != len(b.HeartbeatResponses) {
		t.Fatal("lengths differ")
	}
	for i := range a.Messages {
		if a.Messages[i].Shard != b.Messages[i].Shard || !reflect.DeepEqual(a.Messages[i].Msg, b.Messages[i].Msg) {
			t.Fatalf("message %d differs:\n%v\n%v", i, &a.Messages[i].Msg, &b.Messages[i].Msg)
		}
	}
	for i := range a.Heartbeats {
		if a.Heartbeats[i] != b.Heartbeats[i] {
			t.Fatalf("heartbeat %d differs", i)
		}
	}
	for i := range a.HeartbeatResponses {
		if a.HeartbeatResponses[i] != b.HeartbeatResponses[i] {
			t.Fatalf("heartbeat response %d differs", i)
		}
	}
}

func FuzzRaftBatch(f *testing.F) {
	f.Add(wire.AppendRaftBatch(nil, seedRaftBatch()))
	f.Add(wire.AppendRaftBatch(nil, &wire.RaftBatch{}))
	var reused wire.RaftBatch
	f.Fuzz(func(t *testing.T, data []byte) {
		var m wire.RaftBatch
		if wire.DecodeRaftBatch(data, &m) != nil {
			return
		}
		// The reusing decoder accepts exactly the same inputs.
		if err := wire.DecodeRaftBatchReuse(data, &reused); err != nil {
			t.Fatalf("DecodeRaftBatch accepts, DecodeRaftBatchReuse fails: %v", err)
		}
		equalBatches(t, &m, &reused)
		enc := wire.AppendRaftBatch(nil, &m)
		var again wire.RaftBatch
		if err := wire.DecodeRaftBatch(enc, &again); err != nil {
			t.Fatalf("re-encoding fails to decode: %v", err)
		}
		equalBatches(t, &m, &again)
		if enc2 := wire.AppendRaftBatch(nil, &again); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
	})
}

func FuzzDecompress(f *testing.F) {
	f.Add(s2.Encode(nil, bytes.Repeat([]byte("abc"), 100)))
	f.Add(s2.Encode(nil, nil))
	f.Add([]byte{0xff, 0xff, 0xff, 0x7f})
	buf := make([]byte, 0, 1<<10)
	f.Fuzz(func(t *testing.T, data []byte) {
		out, err := wire.Decompress(buf, data)
		if err != nil {
			return
		}
		if len(out) > wire.MaxFrame {
			t.Fatalf("decompressed %d bytes, above MaxFrame", len(out))
		}
		// Recompressing and decompressing gives the same bytes.
		again, err := wire.Decompress(nil, s2.Encode(nil, out))
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("recompression round trip: %v", err)
		}
	})
}
