package netio

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// BenchmarkPeerSend measures Send of 100-byte frames to a connected peer,
// through to delivery on the other node.
func BenchmarkPeerSend(b *testing.B) {
	var got atomic.Int64
	cb := testConfig("n2", HandlerFunc(func(*Conn, wire.Header, []byte) bool { got.Add(1); return true }))
	ca := testConfig("n1", newRecorder(1))
	// Default keepalive timing: the flood delays the receiver's keepalives.
	ca.KeepaliveInterval, cb.KeepaliveInterval = 0, 0
	a, err := New(ca)
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	bt, err := New(cb)
	if err != nil {
		b.Fatal(err)
	}
	defer bt.Close()
	a.SetPeerAddr("n2", bt.PeerAddr())
	frame := testFrame(wire.KindRaftBatch, 0, make([]byte, 100))
	b.ReportAllocs()
	b.ResetTimer()
	sent := 0
	for sent < b.N {
		switch err := a.Send("n2", frame); {
		case err == nil:
			sent++
		case errors.Is(err, ErrQueueFull):
			runtime.Gosched()
		default:
			b.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for got.Load() < int64(b.N) {
		if time.Now().After(deadline) {
			b.Fatalf("delivered %d of %d", got.Load(), b.N)
		}
		runtime.Gosched()
	}
	b.StopTimer()
	c := a.Counters()
	b.ReportMetric(float64(c.PeerSendDropped.Load())/float64(b.N), "full/op")
	if n := c.PeerDials.Load(); n != 1 {
		b.Errorf("%d dials, want 1", n)
	}
}

// BenchmarkClientRoundTrip measures pipelined request/response through a
// client connection answered on the event loop.
func BenchmarkClientRoundTrip(b *testing.B) {
	rec := newRecorder(1)
	rec.echo = true
	cfg := testConfig("n1", rec)
	cfg.Logger = quietLogger()
	tr, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer tr.Close()
	t := &testing.T{}
	nc := dialClient(t, tr, nil)
	defer nc.Close()
	const depth = 64
	frame := testFrame(wire.KindLookup, 1, make([]byte, 64))
	batch := make([]byte, 0, depth*len(frame))
	for range depth {
		batch = append(batch, frame...)
	}
	resp := make([]byte, len(batch))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += depth {
		if _, err := nc.Write(batch); err != nil {
			b.Fatal(err)
		}
		if _, err := ioReadFull(nc, resp); err != nil {
			b.Fatal(err)
		}
	}
}
