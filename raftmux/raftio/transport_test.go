package raftio

import (
	"bytes"
	"errors"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

type captureSender struct{ frames [][]byte }

func (c *captureSender) Send(_ string, f []byte) error {
	c.frames = append(c.frames, append([]byte(nil), f...))
	return nil
}

func payloadOf(t *testing.T, f []byte, kind wire.Kind) []byte {
	t.Helper()
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil || h.Kind != kind || int(h.Length) != len(f)-wire.HeaderSize {
		t.Fatalf("frame header %+v, %v", h, err)
	}
	return f[wire.HeaderSize:]
}

func testTransport(cs *captureSender) *Transport {
	return NewTransport(cs, func(id uint64) (string, bool) { return "peer", id == 7 })
}

func TestRaftBatchSurvivesTheWire(t *testing.T) {
	cs := &captureSender{}
	tr := testTransport(cs)
	b := &raftmux.RaftBatch{
		Messages: []raftmux.ShardMessage{{Shard: 3, Msg: &raftpb.Message{
			Type: raftpb.MsgApp, To: uint64(7), From: uint64(1), Term: uint64(4),
			Entries: []raftpb.Entry{{Index: uint64(9), Term: uint64(4), Data: []byte("cmd")}},
		}}},
		Heartbeats: []raftmux.Heartbeat{{Shard: 5, Term: 2, Commit: 8, Flags: raftmux.FlagQuiesce},
			{Shard: 6, Term: 2, Commit: 41, Flags: raftmux.FlagRead}},
		HeartbeatResponses: []raftmux.Heartbeat{{Shard: 6, Term: 2, Flags: raftmux.FlagWake}, {Shard: 7, Term: 2},
			{Shard: 6, Term: 2, Commit: 41, Flags: raftmux.FlagRead}},
	}
	if err := tr.Send(7, b); err != nil {
		t.Fatal(err)
	}
	if err := tr.Send(8, b); !errors.Is(err, ErrUnknownRaftID) {
		t.Fatalf("send to an unknown raft id: %v", err)
	}
	if len(cs.frames) != 1 {
		t.Fatalf("%d frames for one batch", len(cs.frames))
	}
	got, err := DecodeRaftBatch(payloadOf(t, cs.frames[0], wire.KindRaftBatch))
	if err != nil {
		t.Fatal(err)
	}
	m := got.Messages[0]
	if m.Shard != 3 || m.Msg.Type != raftpb.MsgApp || m.Msg.Term != 4 || string(m.Msg.Entries[0].Data) != "cmd" {
		t.Fatalf("message %+v", m)
	}
	if !slices.Equal(got.Heartbeats, b.Heartbeats) {
		t.Fatalf("heartbeats %+v, sent %+v", got.Heartbeats, b.Heartbeats)
	}
	if !slices.Equal(got.HeartbeatResponses, b.HeartbeatResponses) {
		t.Fatalf("responses %+v, sent %+v: the wake and read flags must survive", got.HeartbeatResponses, b.HeartbeatResponses)
	}
}

func TestSnapshotChunkSurvivesTheWire(t *testing.T) {
	cs := &captureSender{}
	tr := testTransport(cs)
	first := &raftmux.SnapshotChunk{Shard: 9, ID: 77, Seq: 0, Codec: raftmux.CodecZstd, Data: []byte("part one"),
		Msg: &raftpb.Message{Type: raftpb.MsgSnap, To: uint64(7), Snapshot: &raftpb.Snapshot{
			Metadata: raftpb.SnapshotMetadata{Index: uint64(12), Term: uint64(3), ConfState: raftpb.ConfState{Voters: []uint64{1, 7}}}}}}
	last := &raftmux.SnapshotChunk{Shard: 9, ID: 77, Seq: 1, Last: true, Codec: raftmux.CodecZstd, Data: []byte("part two")}
	for _, c := range []*raftmux.SnapshotChunk{first, last} {
		if err := tr.SendSnapshotChunk(7, c); err != nil {
			t.Fatal(err)
		}
	}
	for i, want := range []*raftmux.SnapshotChunk{first, last} {
		got, err := DecodeSnapshotChunk(payloadOf(t, cs.frames[i], wire.KindSnapshotChunk))
		if err != nil {
			t.Fatal(err)
		}
		if got.Shard != want.Shard || got.ID != want.ID || got.Seq != want.Seq || got.Last != want.Last || got.Codec != want.Codec || !bytes.Equal(got.Data, want.Data) {
			t.Fatalf("chunk %d: %+v, want %+v", i, got, want)
		}
		if (got.Msg == nil) != (want.Msg == nil) {
			t.Fatalf("chunk %d: message presence", i)
		}
		if got.Msg != nil && got.Msg.Snapshot.Metadata.Index != 12 {
			t.Fatalf("chunk %d: snapshot metadata %+v", i, got.Msg.Snapshot)
		}
	}
	// Malformed framing inside a well-formed chunk is refused.
	bad := wire.AppendSnapshotChunk(nil, &wire.SnapshotChunk{Shard: 1, Data: []byte{0x05, 1}})
	if _, err := DecodeSnapshotChunk(bad); !errors.Is(err, ErrBadChunk) {
		t.Fatalf("bad chunk: %v", err)
	}
}

// FuzzDecodeSnapshotChunk: any chunk payload decodes or is refused.
func FuzzDecodeSnapshotChunk(f *testing.F) {
	f.Add(wire.AppendSnapshotChunk(nil, &wire.SnapshotChunk{Shard: 1, Index: 2, Offset: 0, Last: true, Data: []byte{0, 'x'}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeSnapshotChunk(b)
		if err == nil && c == nil {
			t.Fatal("nil chunk without error")
		}
	})
}

// FuzzDecodeRaftBatch: any batch payload decodes or is refused, and what
// decodes carries only known flags.
func FuzzDecodeRaftBatch(f *testing.F) {
	f.Add(wire.AppendRaftBatch(nil, &wire.RaftBatch{Heartbeats: []wire.Heartbeat{{Shard: 1, Term: 2, Commit: 3}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rb, err := DecodeRaftBatch(b)
		if err != nil {
			return
		}
		for _, h := range rb.HeartbeatResponses {
			if h.Flags&^(raftmux.FlagWake|raftmux.FlagRead) != 0 {
				t.Fatalf("response flags %#x", h.Flags)
			}
		}
		for _, h := range rb.Heartbeats {
			if h.Flags&^(raftmux.FlagQuiesce|raftmux.FlagRead) != 0 {
				t.Fatalf("heartbeat flags %#x", h.Flags)
			}
		}
		for _, m := range rb.Messages {
			if m.Msg == nil {
				t.Fatal("nil message")
			}
		}
	})
}

// benchBatch is a round's batch from a leader of many groups to one
// follower: an append of one 16-byte entry for each of 32 shards and 64
// heartbeat tuples.
func benchBatch() *raftmux.RaftBatch {
	b := &raftmux.RaftBatch{}
	for s := uint64(0); s < 32; s++ {
		b.Messages = append(b.Messages, raftmux.ShardMessage{Shard: s, Msg: &raftpb.Message{
			Type: raftpb.MsgApp, To: uint64(7), From: uint64(1), Term: uint64(4),
			LogTerm: uint64(4), Index: uint64(100), Commit: uint64(99),
			Entries: []raftpb.Entry{{Index: uint64(101), Term: uint64(4), Data: bytes.Repeat([]byte("x"), 16)}},
		}})
	}
	for s := uint64(0); s < 64; s++ {
		b.Heartbeats = append(b.Heartbeats, raftmux.Heartbeat{Shard: 100 + s, Term: 4, Commit: 99})
	}
	return b
}

type discardSender struct{ n int }

func (d *discardSender) Send(_ string, f []byte) error { d.n += len(f); return nil }

func BenchmarkTransportSend(b *testing.B) {
	tr := NewTransport(&discardSender{}, func(uint64) (string, bool) { return "peer", true })
	rb := benchBatch()
	b.ReportAllocs()
	for b.Loop() {
		if err := tr.Send(7, rb); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecode compares a fresh decode per frame with the decoder
// Inbound runs (allocations amortized over slabs).
func BenchmarkDecode(b *testing.B) {
	cs := &captureSender{}
	if err := NewTransport(cs, func(uint64) (string, bool) { return "peer", true }).Send(7, benchBatch()); err != nil {
		b.Fatal(err)
	}
	payload := cs.frames[0][wire.HeaderSize:]
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeRaftBatch(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		var d decoder
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.decode(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
