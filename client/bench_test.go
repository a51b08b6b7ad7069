package client_test

import (
	"context"
	"testing"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/client/clienttest"
)

// The figures include the fake node's work (a goroutine and a lock per
// request), so they bound the client's cost from above.

func benchClient(b *testing.B, cfg client.Config) (*client.Client, *clienttest.Cluster) {
	cl := &clienttest.Cluster{ClusterID: 7}
	n, err := cl.Start("n1")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	cfg.Servers, cfg.ClusterID = []string{n.Addr()}, 7
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	cl.SetOwner("t", "n1")
	return c, cl
}

// BenchmarkLookupSerial is one caller's round trip.
func BenchmarkLookupSerial(b *testing.B) {
	c, _ := benchClient(b, client.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Lookup(ctx, "t", false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLookupPipelined is many callers sharing one connection.
func BenchmarkLookupPipelined(b *testing.B) {
	c, _ := benchClient(b, client.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Lookup(ctx, "t", false); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkProducePipelined produces 100-byte records from many callers,
// routed through the cache to the owner.
func BenchmarkProducePipelined(b *testing.B) {
	c, _ := benchClient(b, client.Config{})
	ctx := context.Background()
	rec := [][]byte{make([]byte, 100)}
	b.ReportAllocs()
	b.SetParallelism(16)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Produce(ctx, "t", rec); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
