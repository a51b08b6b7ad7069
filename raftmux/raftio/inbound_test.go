package raftio

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// recorder is a Receiver that keeps what it is handed.
type recorder struct {
	mu      sync.Mutex
	batches []uint64 // sender of each batch
	chunks  int
}

func (r *recorder) Deliver(from uint64, _ *raftmux.RaftBatch) {
	r.mu.Lock()
	r.batches = append(r.batches, from)
	r.mu.Unlock()
}

func (r *recorder) DeliverSnapshotChunk(uint64, *raftmux.SnapshotChunk) {
	r.mu.Lock()
	r.chunks++
	r.mu.Unlock()
}

func (r *recorder) counts() (int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.batches), r.chunks
}

func frameOf(t *testing.T, kind wire.Kind, payload []byte) ([]byte, wire.Header) {
	t.Helper()
	f, start := wire.BeginFrame(nil, kind, 0)
	f = append(f, payload...)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		t.Fatal(err)
	}
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil {
		t.Fatal(err)
	}
	return f, h
}

func TestInboundConfigValidation(t *testing.T) {
	for name, cfg := range map[string]InboundConfig{
		"no receiver":    {RaftID: func(string) uint64 { return 1 }},
		"no raft id":     {Receiver: &recorder{}},
		"negative queue": {Receiver: &recorder{}, RaftID: func(string) uint64 { return 1 }, QueueFrames: -1},
	} {
		if _, err := NewInbound(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig", name, err)
		}
	}
}

// The queue holds QueueFrames frames and refuses the next; Run delivers
// them in order, skips what does not decode, and returns when its context
// ends.
func TestInboundQueueIsBoundedAndRunStops(t *testing.T) {
	rec := &recorder{}
	in, err := NewInbound(InboundConfig{
		Receiver: rec, QueueFrames: 3, Logger: slog.New(slog.DiscardHandler),
		RaftID: func(node string) uint64 { return uint64(len(node)) },
	})
	if err != nil {
		t.Fatal(err)
	}
	batch, bh := frameOf(t, wire.KindRaftBatch, wire.AppendRaftBatch(nil, &wire.RaftBatch{Heartbeats: []wire.Heartbeat{{Shard: 1, Term: 2}}}))
	chunk, ch := frameOf(t, wire.KindSnapshotChunk, wire.AppendSnapshotChunk(nil, &wire.SnapshotChunk{Shard: 1, Data: []byte{0, 'x'}}))
	junk, jh := frameOf(t, wire.KindRaftBatch, []byte{0xff, 0xff})
	other, oh := frameOf(t, wire.KindTopicAck, nil)
	if in.Offer("n", oh, other) {
		t.Fatal("a frame that is not raft's was queued")
	}
	for i, f := range []struct {
		from  string
		h     wire.Header
		frame []byte
	}{{"a", bh, batch}, {"bbb", jh, junk}, {"cc", ch, chunk}} {
		if !in.Offer(f.from, f.h, f.frame) {
			t.Fatalf("frame %d refused below the bound", i)
		}
	}
	if in.Offer("a", bh, batch) {
		t.Fatal("a fourth frame was queued past QueueFrames 3")
	}
	if in.Len() != 3 {
		t.Fatalf("Len %d", in.Len())
	}
	// The frames were copied: the event loop may reuse its buffer.
	clear(batch)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.Run(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, c := rec.counts()
		if b == 1 && c == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivered %d batches, %d chunks; want 1 and 1", b, c)
		}
		time.Sleep(time.Millisecond)
	}
	rec.mu.Lock()
	from := rec.batches[0]
	rec.mu.Unlock()
	if from != 1 {
		t.Fatalf("batch from raft id %d, want 1", from)
	}
	cancel()
	<-done
}

// The queue holds at most QueueBytes of frames (a single larger frame is
// taken when the queue is empty), and what Run took is given back.
func TestInboundQueueIsBoundedInBytes(t *testing.T) {
	rec := &recorder{}
	in, err := NewInbound(InboundConfig{
		Receiver: rec, QueueBytes: 3 << 10, Logger: slog.New(slog.DiscardHandler),
		RaftID: func(string) uint64 { return 1 },
	})
	if err != nil {
		t.Fatal(err)
	}
	big, bh := frameOf(t, wire.KindRaftBatch, make([]byte, 4<<10))
	small, sh := frameOf(t, wire.KindRaftBatch, make([]byte, 1<<10))
	if !in.Offer("a", bh, big) {
		t.Fatal("a frame larger than QueueBytes was refused by an empty queue")
	}
	if in.Offer("a", sh, small) {
		t.Fatal("a frame was queued past QueueBytes")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		in.Run(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for in.Len() > 0 || in.queued.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained: %d frames, %d bytes", in.Len(), in.queued.Load())
		}
		time.Sleep(time.Millisecond)
	}
	for range 2 {
		if !in.Offer("a", sh, small) {
			t.Fatal("a frame below QueueBytes was refused after the queue drained")
		}
	}
	cancel()
	<-done
}
