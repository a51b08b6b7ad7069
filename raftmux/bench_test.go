package raftmux_test

import (
	"context"
	"testing"
	"time"
)

// BenchmarkPropose measures one proposal through three in-process hosts
// (no fsync), sequentially: the per-commit cost of the whole round trip.
func BenchmarkPropose(b *testing.B) {
	c := newCluster(b, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	h := c.hosts[lead]
	for _, kv := range c.kvs {
		kv.Record = false
	}
	cmd := []byte("0123456789abcdef")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := h.Propose(ctx, 0, cmd); err != nil {
			b.Fatal(err)
		}
	}
}
