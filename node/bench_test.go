package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/security"
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

// BenchmarkAssignCost is the CPU an assign costs end to end, the way
// bench/scaleout sends it: three nodes, 256 shards, one client that knows
// every node and sends each assign to the shard leader its pulled table
// names, 128 assigns in flight. cpu-µs/op is the whole process (three
// nodes and the client), allocs/op every allocation in it; fsyncs/op and
// forwards/op say how many raft fsyncs and forwarding hops an assign took.
// Profile it with -cpuprofile and -memprofile; compare with -count N, in
// turns with the code it is measured against.
func BenchmarkAssignCost(b *testing.B) {
	c := startClusterWith(b, 3, func(cfg *Config) { cfg.Shards = assignCostShards })
	cl := seedsClient(b, c.nodes)
	ctx := context.Background()
	// Warm up: the leader table pulled, every shard with a leader that
	// has served an assign.
	for i := range 2 * assignCostShards {
		if _, err := cl.Assign(ctx, fmt.Sprintf("bench-cost-warm-%d", i), client.AssignOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	stats := func() (fsyncs, fwd uint64) {
		for _, n := range c.nodes {
			st := n.Stats()
			fsyncs += st.RaftFsyncs
			fwd += st.Forwarded
		}
		return fsyncs, fwd
	}
	fsyncs0, fwd0 := stats()
	perCore := max(1, assignCostInFlight/runtime.GOMAXPROCS(0))
	timedParallelN(b, perCore, 1, func(_ int, seq uint64) error {
		_, err := cl.Assign(ctx, fmt.Sprintf("bench-cost-%d", seq), client.AssignOptions{})
		return err
	})
	fsyncs, fwd := stats()
	b.ReportMetric(float64(fsyncs-fsyncs0)/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(fwd-fwd0)/float64(b.N), "forwards/op")
}

// seedsClient is a client that knows every node of nodes, closed with b.
func seedsClient(b *testing.B, nodes []*Node) *client.Client {
	var seeds []string
	for _, n := range nodes {
		addr, _, _ := n.Addrs()
		seeds = append(seeds, addr)
	}
	cl, err := client.New(client.Config{Servers: seeds, ClusterID: 42, ConnsPerServer: 2, Logger: testLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cl.Close() })
	return cl
}

// The size of BenchmarkAssignCost's cluster and load.
const (
	assignCostShards   = 256
	assignCostInFlight = 128
)

// BenchmarkLinks compares assign and produce throughput with plain TCP and
// with TLS 1.3 on every client and peer link (certificates made here, the
// peers verifying each other), each on a 3-node cluster of its own,
// started once per variant: run with -count N to take them in turns.
// Produce goes to 16 topics spread over the owners, one small record each.
func BenchmarkLinks(b *testing.B) {
	ca := testcerts.NewCA(b, "bench")
	for _, variant := range []string{"plain", "tls"} {
		var clientTLS *tls.Config
		mut := func(*Config) {}
		if variant == "tls" {
			clientTLS = &tls.Config{RootCAs: ca.Pool}
			mut = func(cfg *Config) { cfg.Security.TLS = &security.TLS{Certificate: ca.Node(b, cfg.ID).TLS, CA: ca.Pool} }
		}
		c := startClusterWith(b, 3, mut)
		var cls []*client.Client
		for _, n := range c.nodes {
			addr, _, _ := n.Addrs()
			cl, err := client.New(client.Config{Servers: []string{addr}, ClusterID: 42, ConnsPerServer: 2, TLS: clientTLS, Logger: testLogger()})
			if err != nil {
				b.Fatal(err)
			}
			cls = append(cls, cl)
		}
		ctx := context.Background()
		const topics = 16
		for i := range topics {
			owner := c.nodes[i%len(c.nodes)].ID()
			if _, err := cls[0].Assign(ctx, fmt.Sprintf("bench-produce-%d", i), client.AssignOptions{Owner: owner}); err != nil {
				b.Fatal(err)
			}
		}
		b.Run("assign/"+variant, func(b *testing.B) {
			timedParallel(b, len(cls), func(w int, seq uint64) error {
				_, err := cls[w].Assign(ctx, fmt.Sprintf("bench-links-%s-%d", variant, seq), client.AssignOptions{})
				return err
			})
		})
		b.Run("produce/"+variant, func(b *testing.B) {
			rec := [][]byte{make([]byte, 100)}
			timedParallel(b, len(cls), func(w int, seq uint64) error {
				_, err := cls[w].Produce(ctx, fmt.Sprintf("bench-produce-%d", seq%topics), rec)
				return err
			})
		})
		for _, cl := range cls {
			_ = cl.Close()
		}
		c.close()
	}
}

// timedParallel runs op under RunParallel, 16 goroutines per core, the
// goroutines taking workers 0..workers-1 in turn and every call a new
// sequence number, and reports the calls' latency percentiles and the
// process's CPU time per call (the whole cluster and its clients run in
// this process): on a busy machine, the figure that compares.
func timedParallel(b *testing.B, workers int, op func(worker int, seq uint64) error) {
	timedParallelN(b, 16, workers, op)
}

// timedParallelN is timedParallel with perCore goroutines per core.
func timedParallelN(b *testing.B, perCore, workers int, op func(worker int, seq uint64) error) {
	var seq, who atomic.Uint64
	var lat latencies
	b.ReportAllocs()
	b.SetParallelism(perCore)
	cpu0 := processCPU()
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
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	lat.report(b)
}

// processCPU is the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
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
			if !n.sm.Hosted(a.Shard, func(*meta.State) {}) {
				remote[j] = append(remote[j], target{[]byte(topic), a.Epoch})
			}
		}
	}
	timedParallel(b, len(cls), func(w int, seq uint64) error {
		t := remote[w][seq%uint64(len(remote[w]))]
		c.nodes[w].cache.Invalidate(t.topic, t.epoch) // timed too: well under a microsecond
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
		if buf, ok = n.disp.AppendLookup(buf[:0], uint64(i), payload); !ok {
			b.Fatal("not answered")
		}
	}
}
