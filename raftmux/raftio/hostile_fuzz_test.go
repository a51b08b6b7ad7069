package raftio_test

import (
	"context"
	"encoding/binary"
	"log/slog"
	"runtime"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
	"github.com/shoalmq/shoal/wire"
)

// fuzzHost is a host (node 1) of a few shards on an in-memory store whose
// peers (nodes 2 and 3) exist only as senders of fuzzed input: shard 0 has
// voters 1, 2, 3 (host 1 follows, or campaigns in vain); shard 1 has voter 1
// alone, which leads, and learner 2, so acks from node 2 reach a leader.
// Shards up to fuzzShards-1 may be created by a message.
type fuzzHost struct {
	h     *raftmux.Host
	store *raftmuxtest.MemStore
	calls int
}

const (
	fuzzShards      = 8
	fuzzSnapBudget  = 1 << 20
	fuzzRecycle     = 2000      // inputs before the host is rebuilt, so its logs stay small
	fuzzHeapBound   = 256 << 20 // live heap the whole fuzz process may hold
	fuzzHeapEvery   = 512       // inputs between two heap checks (each costs a GC)
	fuzzTickForTest = 5 * time.Millisecond
)

func newFuzzHost(tb testing.TB) *fuzzHost {
	tb.Helper()
	st, err := raftmuxtest.NewMemStore("")
	if err != nil {
		tb.Fatal(err)
	}
	h, err := raftmux.NewHost(raftmux.Config{
		NodeID:                 1,
		Storage:                st,
		Transport:              raftmuxtest.NewNetwork().Endpoint(1),
		StateMachine:           raftmuxtest.NewKV(st, false),
		Workers:                2,
		TickInterval:           fuzzTickForTest,
		MaxSnapshotBufferBytes: fuzzSnapBudget,
		SnapshotChunkSize:      64 << 10,
		MaxInboxEvents:         4096,
		AcceptReplica:          func(shard, _ uint64) bool { return shard < fuzzShards },
		Logger:                 slog.New(slog.DiscardHandler),
	})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for shard, voters := range [][]uint64{{1, 2, 3}, {1}} {
		if err := h.Bootstrap(ctx, uint64(shard), voters); err != nil {
			tb.Fatal(err)
		}
	}
	if err := h.Campaign(ctx, 1); err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := h.AddLearner(ctx, 1, 2); err == nil {
			break
		} else if ctx.Err() != nil {
			tb.Fatalf("add learner: %v", err)
		}
		time.Sleep(fuzzTickForTest)
	}
	return &fuzzHost{h: h, store: st}
}

func (f *fuzzHost) stop() {
	f.h.Stop()
	_ = f.store.Close()
}

// input encodes one fuzz input: a selector byte (bit 0: snapshot chunk or
// raft batch; bit 1: from node 3 or 2) and the frame payload.
func input(chunk bool, from uint64, payload []byte) []byte {
	sel := byte(0)
	if chunk {
		sel |= 1
	}
	if from == 3 {
		sel |= 2
	}
	return append([]byte{sel}, payload...)
}

func batchOf(shard uint64, ms ...raftpb.Message) []byte {
	var b wire.RaftBatch
	for _, m := range ms {
		b.Messages = append(b.Messages, wire.ShardMessage{Shard: shard, Msg: m})
	}
	return wire.AppendRaftBatch(nil, &b)
}

func chunkOf(shard, id uint64, seq uint32, last bool, msg *raftpb.Message, data []byte) []byte {
	var head []byte
	if msg != nil {
		head = batchOf(shard, *msg)
	}
	d := binary.AppendUvarint(nil, uint64(len(head)))
	d = append(append(d, head...), data...)
	return wire.AppendSnapshotChunk(nil, &wire.SnapshotChunk{Shard: shard, Index: id, Offset: uint64(seq), Last: last, Data: d})
}

// FuzzHostInput feeds arbitrary RaftBatch and SnapshotChunk payloads from
// a peer through raftio's decoding into a running host: whatever they
// hold, the host does not panic, is never halted (a replica may be: a
// configuration change raft refuses halts its replica, not the process),
// keeps its incoming snapshots within budget, and the process's live heap
// stays bounded. Seeds are the inputs that once killed or bloated a node.
func FuzzHostInput(f *testing.F) {
	snapMeta := raftpb.SnapshotMetadata{Index: 1 << 20, Term: 5, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}
	// A commit index past the log, on a coalesced heartbeat and a message.
	f.Add(input(false, 2, wire.AppendRaftBatch(nil, &wire.RaftBatch{Heartbeats: []wire.Heartbeat{{Shard: 0, Term: 5, Commit: 1 << 40}}})))
	f.Add(input(false, 2, batchOf(0, raftpb.Message{Type: raftpb.MsgHeartbeat, From: 2, To: 1, Term: 5, Commit: 1 << 40, Context: []byte("c")})))
	// Message types -1 and past raft's tables, and local ones.
	f.Add(input(false, 2, batchOf(0, raftpb.Message{Type: -1, From: 2, To: 1, Term: 5})))
	f.Add(input(false, 2, batchOf(0, raftpb.Message{Type: 1 << 20, From: 2, To: 1, Term: 5})))
	f.Add(input(false, 2, batchOf(1, raftpb.Message{Type: raftpb.MsgStorageApplyResp, From: 2, To: 1, Term: 5, Entries: []raftpb.Entry{{Index: 1 << 30}}})))
	// A raw MsgSnap without data, a proposal, entries out of sequence, a
	// read without its context, an ack past the log.
	f.Add(input(false, 2, batchOf(0, raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Term: 5, Snapshot: &raftpb.Snapshot{Metadata: snapMeta}})))
	f.Add(input(false, 2, batchOf(1, raftpb.Message{Type: raftpb.MsgProp, From: 2, To: 1, Entries: []raftpb.Entry{{Type: raftpb.EntryConfChangeV2, Data: []byte{0xff}}}})))
	f.Add(input(false, 2, batchOf(0, raftpb.Message{Type: raftpb.MsgApp, From: 2, To: 1, Term: 5, Index: 1, LogTerm: 1, Commit: 3,
		Entries: []raftpb.Entry{{Index: 1, Term: 5}, {Index: 7, Term: 5}}})))
	f.Add(input(false, 2, batchOf(1, raftpb.Message{Type: raftpb.MsgReadIndex, From: 2, To: 1})))
	f.Add(input(false, 2, batchOf(1, raftpb.Message{Type: raftpb.MsgAppResp, From: 2, To: 1, Term: 2, Index: 1 << 40})))
	// A valid-looking append from a new leader, committing a conf change
	// raft refuses (removing every voter).
	cc, _ := (&raftpb.ConfChangeV2{Changes: []raftpb.ConfChangeSingle{{Type: raftpb.ConfChangeRemoveNode, NodeID: 1}, {Type: raftpb.ConfChangeRemoveNode, NodeID: 2}, {Type: raftpb.ConfChangeRemoveNode, NodeID: 3}}}).Marshal()
	f.Add(input(false, 3, batchOf(0, raftpb.Message{Type: raftpb.MsgApp, From: 3, To: 1, Term: 9, Index: 1, LogTerm: 1, Commit: 2,
		Entries: []raftpb.Entry{{Index: 2, Term: 9, Type: raftpb.EntryConfChangeV2, Data: cc}}})))
	// Snapshot chunks: for shards not hosted (created, up to the bound,
	// and past it), without data, with data that does not decode.
	msnap := raftpb.Message{Type: raftpb.MsgSnap, From: 2, To: 1, Term: 5, Snapshot: &raftpb.Snapshot{Metadata: snapMeta}}
	f.Add(input(true, 2, chunkOf(5, 1, 0, false, &msnap, make([]byte, 60<<10))))
	f.Add(input(true, 2, chunkOf(99, 1, 0, true, &msnap, nil)))
	f.Add(input(true, 2, chunkOf(0, 1, 0, true, &msnap, nil)))
	f.Add(input(true, 2, chunkOf(0, 1, 0, true, &msnap, []byte{0x7f, 1, 2})))
	f.Add(input(true, 2, chunkOf(0, 1, 4, true, nil, []byte("continuation of nothing"))))

	fh := newFuzzHost(f)
	f.Cleanup(func() { fh.stop() })
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		fh.calls++
		if fh.calls%fuzzRecycle == 0 || len(fh.h.Halted()) > 0 {
			fh.stop()
			fh = newFuzzHost(t)
		}
		h := fh.h
		from := uint64(2)
		if data[0]&2 != 0 {
			from = 3
		}
		if data[0]&1 != 0 {
			c, err := raftio.DecodeSnapshotChunk(data[1:])
			if err != nil {
				return
			}
			h.DeliverSnapshotChunk(from, c)
		} else {
			rb, err := raftio.DecodeRaftBatch(data[1:])
			if err != nil {
				return
			}
			h.Deliver(from, rb)
		}
		// The info request queues behind the input on every worker: once
		// answered, the input has been stepped and its round run.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		infos, err := h.Shards(ctx)
		if err != nil {
			t.Fatalf("host stopped answering: %v (halted: %v)", err, h.Err())
		}
		if err := h.Err(); err != nil {
			t.Fatalf("host halted: %v", err)
		}
		if len(infos) > fuzzShards {
			t.Fatalf("%d replicas, more than the %d AcceptReplica allows", len(infos), fuzzShards)
		}
		if b := h.Stats().SnapshotBytes; b < 0 || b > fuzzSnapBudget {
			t.Fatalf("%d bytes buffered for snapshots, budget %d", b, fuzzSnapBudget)
		}
		if fh.calls%fuzzHeapEvery == 0 {
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse > fuzzHeapBound {
				t.Fatalf("live heap %d MiB past %d MiB", ms.HeapInuse>>20, fuzzHeapBound>>20)
			}
		}
	})
}
