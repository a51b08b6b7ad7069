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
	var seq, who atomic.Uint64
	var lat latencies
	b.SetParallelism(16)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		cl := cls[who.Add(1)%uint64(len(cls))]
		var mine []time.Duration
		for pb.Next() {
			topic := fmt.Sprintf("bench-assign-%d", seq.Add(1))
			t0 := time.Now()
			if _, err := cl.Assign(context.Background(), topic, client.AssignOptions{}); err != nil {
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
// node answer from its routing cache (filled by an earlier lookup), "miss"
// asks for a linearizable answer, which always goes to the shard leader
// and waits for a raft read index.
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
	}{{"hit", false}, {"miss", true}} {
		b.Run(mode.name, func(b *testing.B) {
			var seq, who atomic.Uint64
			var lat latencies
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				cl := cls[who.Add(1)%uint64(len(cls))]
				var mine []time.Duration
				for pb.Next() {
					topic := fmt.Sprintf("bench-lookup-%d", seq.Add(1)%topics)
					t0 := time.Now()
					if _, err := cl.Lookup(ctx, topic, mode.lin); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(t0))
				}
				lat.add(mine)
			})
			b.StopTimer()
			lat.report(b)
		})
	}
}
