package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// latencies collects per-operation durations from parallel goroutines.
type latencies struct {
	mu  sync.Mutex
	all []time.Duration
}

func (l *latencies) add(d []time.Duration) {
	l.mu.Lock()
	l.all = append(l.all, d...)
	l.mu.Unlock()
}

func (l *latencies) report(b *testing.B) {
	if len(l.all) == 0 {
		return
	}
	slices.Sort(l.all)
	q := func(p float64) float64 { return float64(l.all[int(p*float64(len(l.all)-1))].Microseconds()) }
	b.ReportMetric(q(0.50), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

func benchClients(b *testing.B, c *testCluster) []*client.Client {
	var cls []*client.Client
	for _, n := range c.nodes {
		addr, _, _ := n.Addrs()
		cl, err := client.New(client.Config{Servers: []string{addr}, ClusterID: 42, ConnsPerServer: 2, Logger: testLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cl.Close() })
		cls = append(cls, cl)
	}
	return cls
}

// BenchmarkAssignTopic assigns new topics through all three nodes at once
// (each goroutine talks to one node, which forwards to the shard leader
// two times out of three).
func BenchmarkAssignTopic(b *testing.B) {
	c := startCluster(b, 3)
	cls := benchClients(b, c)
	timedParallel(b, len(cls), func(w int, seq uint64) error {
		_, err := cls[w].Assign(context.Background(), fmt.Sprintf("bench-assign-%d", seq), client.AssignOptions{})
		return err
	})
}

// timedParallel runs op under RunParallel, 16 goroutines per core, the
// goroutines taking workers 0..workers-1 in turn and every call a new
// sequence number, and reports the calls' latency percentiles.
func timedParallel(b *testing.B, workers int, op func(worker int, seq uint64) error) {
	var seq, who atomic.Uint64
	var lat latencies
	b.ReportAllocs()
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		w := int(who.Add(1) % uint64(workers))
		var mine []time.Duration
		for pb.Next() {
			n := seq.Add(1)
			t0 := time.Now()
			if err := op(w, n); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(t0))
		}
		lat.add(mine)
	})
	b.StopTimer()
	lat.report(b)
}

// BenchmarkLookup looks up assigned topics through all nodes: "hit" lets a
// node answer at once (from its replica of the shard or its routing cache,
// on the event loop), "linearizable" always goes to the shard leader and
// waits for a raft read index.
func BenchmarkLookup(b *testing.B) {
	c := startCluster(b, 3)
	cls := benchClients(b, c)
	const topics = 512
	ctx := context.Background()
	for i := range topics {
		if _, err := cls[0].Assign(ctx, fmt.Sprintf("bench-lookup-%d", i), client.AssignOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, cl := range cls { // warm every node's cache
		for i := range topics {
			if _, err := cl.Lookup(ctx, fmt.Sprintf("bench-lookup-%d", i), false); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, mode := range []struct {
		name string
		lin  bool
	}{{"hit", false}, {"linearizable", true}} {
		b.Run(mode.name, func(b *testing.B) {
			timedParallel(b, len(cls), func(w int, seq uint64) error {
				_, err := cls[w].Lookup(ctx, fmt.Sprintf("bench-lookup-%d", seq%topics), mode.lin)
				return err
			})
		})
	}
}

// BenchmarkLookupMiss: plain lookups through a node that hosts no replica
// of the topic's shard (one replica per shard) and whose cache entry was
// just invalidated, so every lookup is forwarded to the shard leader.
func BenchmarkLookupMiss(b *testing.B) {
	c := startClusterWith(b, 3, func(cfg *Config) { cfg.Replicas = 1 })
	cls := benchClients(b, c)
	ctx := context.Background()
	type target struct {
		topic []byte
		epoch uint64
	}
	// Per node, assigned topics whose shard it does not host.
	remote := make([][]target, len(c.nodes))
	for i := 0; len(remote[0]) < 64 || len(remote[1]) < 64 || len(remote[2]) < 64; i++ {
		topic := fmt.Sprintf("bench-miss-%d", i)
		a, err := cls[0].Assign(ctx, topic, client.AssignOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for j, n := range c.nodes {
			if !n.sm.hosted(a.Shard, func(*meta.State) {}) {
				remote[j] = append(remote[j], target{[]byte(topic), a.Epoch})
			}
		}
	}
	timedParallel(b, len(cls), func(w int, seq uint64) error {
		t := remote[w][seq%uint64(len(remote[w]))]
		c.nodes[w].routes().Invalidate(t.topic, t.epoch) // timed too: well under a microsecond
		_, err := cls[w].Lookup(ctx, string(t.topic), false)
		return err
	})
	var fwd uint64
	for _, n := range c.nodes {
		fwd += n.Stats().Forwarded
	}
	b.ReportMetric(float64(fwd)/float64(b.N), "forwards/op")
}

// BenchmarkLookupFastPath is the node's share of a cache-hit lookup: decode
// the request, find the route, encode the answer frame. It must not
// allocate.
func BenchmarkLookupFastPath(b *testing.B) {
	n := cachedRouteNode(b)
	payload := wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("orders")})
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		var ok bool
		if buf, ok = n.appendFastLookup(buf[:0], uint64(i), payload); !ok {
			b.Fatal("not answered")
		}
	}
}
