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
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/router"
)

// A shard split in a running cluster, under a load of assigns and
// produces: every topic keeps its owner and epoch, is found in the half
// its key goes to, and takes writes at its owner throughout; the halves
// take new topics and lead where the split's leader campaigned; the shard
// list shows the halves and not the shard that split. Nothing a client
// had acknowledged is lost, and no write is refused for good.
func TestSplitInARunningCluster(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := allNodesClient(t, c, 3*time.Second, 40)
	ctx := context.Background()
	const shard = 3
	space := router.ShardSpace(testShards)
	var topics []string
	for i := 0; len(topics) < 60; i++ {
		if topic := fmt.Sprintf("split-%d", i); router.ShardOfString(topic, testShards) == shard {
			topics = append(topics, topic)
		}
	}
	before := make(map[string]client.Assignment)
	for i, topic := range topics {
		a, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: c.nodes[i%3].ID()})
		if err != nil {
			t.Fatal(err)
		}
		before[topic] = a
		if _, err := cl.Produce(ctx, topic, [][]byte{[]byte("before")}); err != nil {
			t.Fatal(err)
		}
	}

	// A load on the shard's topics through the split: produces to the
	// topics held, and new topics assigned.
	var stop atomic.Bool
	var wg sync.WaitGroup
	var produced, assigned atomic.Int64
	errs := make(chan error, 4)
	for w := range 2 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				topic := topics[(i*2+w)%len(topics)]
				if _, err := cl.Produce(ctx, topic, [][]byte{[]byte("during")}); err != nil {
					errs <- fmt.Errorf("produce %s during the split: %w", topic, err)
					return
				}
				produced.Add(1)
			}
		})
	}
	var fresh []string
	var freshMu sync.Mutex
	wg.Go(func() {
		for i := 0; !stop.Load(); i++ {
			topic := fmt.Sprintf("split-new-%d", i)
			if router.ShardOfString(topic, testShards) != shard {
				continue
			}
			if _, err := cl.Assign(ctx, topic, client.AssignOptions{}); err != nil {
				errs <- fmt.Errorf("assign %s during the split: %w", topic, err)
				return
			}
			assigned.Add(1)
			freshMu.Lock()
			fresh = append(fresh, topic)
			freshMu.Unlock()
		}
	})
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	res, err := cl.SplitShard(ctx, shard)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	low, high, _ := space.Children(shard)
	if res.Shard != shard || res.Low != uint64(low) || res.High != uint64(high) || res.Leader == "" {
		t.Fatalf("split: %+v", res)
	}
	time.Sleep(500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("split answered in %v; %d produces and %d assigns ran through it", took, produced.Load(), assigned.Load())
	if produced.Load() == 0 || assigned.Load() == 0 {
		t.Fatalf("no load ran: %d produces, %d assigns", produced.Load(), assigned.Load())
	}

	for topic, was := range before {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil {
			t.Fatalf("lookup %s after the split: %v", topic, err)
		}
		want := uint64(space.ID(router.KeyHashString(topic), 1))
		if a.Owner != was.Owner || a.Epoch != was.Epoch || a.Shard != want {
			t.Fatalf("%s after the split: %+v, before %+v, want shard %d", topic, a, was, want)
		}
	}
	freshMu.Lock()
	for _, topic := range fresh {
		if _, err := cl.Lookup(ctx, topic, true); err != nil {
			t.Fatalf("a topic assigned during the split: %v", err)
		}
	}
	freshMu.Unlock()
	shards, err := cl.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]uint64, 0, len(shards))
	for _, s := range shards {
		ids = append(ids, s.Shard)
	}
	if slices.Contains(ids, shard) || !slices.Contains(ids, uint64(low)) || !slices.Contains(ids, uint64(high)) || len(ids) != testShards+1 {
		t.Fatalf("shards after the split: %v", ids)
	}
	waitUntil(t, 5*time.Second, "every node counts the split and the halves", func() bool {
		for _, n := range c.nodes {
			if st := n.Stats(); st.ShardSplits != 1 || st.ShardsLive != testShards+1 {
				return false
			}
		}
		return true
	})
	// A listing after the split gives every topic once, from the halves.
	listed := make(map[string]int)
	if _, err := cl.ListAll(ctx, client.ListAllOptions{Prefix: "split-"}, func(as []client.Assignment) error {
		for _, a := range as {
			listed[a.Topic]++
		}
		return nil
	}); err != nil {
		t.Fatalf("listing after the split: %v", err)
	}
	freshMu.Lock()
	want := len(before) + len(fresh)
	freshMu.Unlock()
	for topic, n := range listed {
		if n != 1 {
			t.Fatalf("%s listed %d times", topic, n)
		}
	}
	if len(listed) < want {
		t.Fatalf("listed %d topics, %d were assigned", len(listed), want)
	}
	// A second split of the shard is refused; its halves split again.
	if _, err := cl.SplitShard(ctx, shard); err == nil {
		t.Fatal("a split of a shard that split was taken")
	}
	if _, err := cl.SplitShard(ctx, uint64(low)); err != nil {
		t.Fatalf("a half's split: %v", err)
	}
	for topic, was := range before {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil || a.Owner != was.Owner || a.Epoch != was.Epoch {
			t.Fatalf("%s after the second split: %+v, %v", topic, a, err)
		}
	}
}

// allNodesClient returns a client with every node of c as a seed, closed
// with the test.
func allNodesClient(tb testing.TB, c *testCluster, timeout time.Duration, retries int) *client.Client {
	tb.Helper()
	var seeds []string
	for _, n := range c.nodes {
		addr, _, _ := n.Addrs()
		seeds = append(seeds, addr)
	}
	cl, err := client.New(client.Config{Servers: seeds, ClusterID: 42, RequestTimeout: timeout, MaxRetries: retries, Logger: testLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = cl.Close() })
	return cl
}

// BenchmarkSplitGrowth grows a 3-node cluster born with 8 shards to 512
// by splits, every live shard in turn (the count doubles each pass), one
// split at a time, under a
// closed-loop assign load (32 writers): the time each split took to
// answer (its halves led), the longest an assign waited meanwhile, and,
// at the end, every acknowledged assign looked up. -benchtime 1x.
func BenchmarkSplitGrowth(b *testing.B) {
	for range b.N {
		splitGrowth(b, 8, 512, 32)
	}
}

func splitGrowth(b *testing.B, from, to uint32, writers int) {
	c := startClusterWith(b, 3, func(cfg *Config) { cfg.Shards = from })
	cl := allNodesClient(b, c, 5*time.Second, 60)
	ctx := context.Background()
	load := startAssignLoad(cl, "grow", writers)
	time.Sleep(time.Second)
	var took []time.Duration
	start := time.Now()
	space := router.ShardSpace(from)
	live := make([]uint64, 0, to)
	for s := range uint64(from) {
		live = append(live, s)
	}
	for len(live) < int(to) {
		var next []uint64
		for _, s := range live {
			t0 := time.Now()
			if _, err := cl.SplitShard(ctx, s); err != nil {
				b.Fatalf("split of shard %d: %v", s, err)
			}
			took = append(took, time.Since(t0))
			low, high, _ := space.Children(uint32(s))
			next = append(next, uint64(low), uint64(high))
		}
		live = next
	}
	growth := time.Since(start)
	load.halt()
	acked := load.acked
	slices.Sort(took)
	p := func(q float64) time.Duration { return took[min(len(took)-1, int(q*float64(len(took))))] }
	missing := 0
	for topic, was := range acked {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil || a.Owner != was.Owner || a.Epoch != was.Epoch {
			missing++
		}
	}
	shards, err := cl.Shards(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(took)), "splits")
	b.ReportMetric(float64(len(shards)), "shards")
	b.ReportMetric(float64(p(0.5).Milliseconds()), "split-p50-ms")
	b.ReportMetric(float64(p(0.99).Milliseconds()), "split-p99-ms")
	b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "split-max-ms")
	b.ReportMetric(growth.Seconds(), "growth-s")
	b.ReportMetric(float64(len(acked))/growth.Seconds(), "assigns/s")
	b.ReportMetric(float64(load.lat[len(load.lat)-1].Milliseconds()), "assign-max-ms")
	b.ReportMetric(float64(load.failed.Load()), "assigns-failed")
	b.ReportMetric(float64(missing), "lost")
	if missing > 0 || len(shards) != int(to) {
		b.Fatalf("%d of %d acknowledged assigns lost or changed; %d shards", missing, len(acked), len(shards))
	}
}

// BenchmarkAutoSplitGrowth is BenchmarkSplitGrowth with the splits the
// shards' leaders make on their own: a 3-node cluster born with 8 shards
// and a limit of 100 topics a shard (held for 1 s), under a closed-loop
// assign load of 32 writers, until it has 512 shards (its MaxShards).
// It reports the time the growth took, the assigns' rate, p99 and
// longest latency meanwhile, and, at the end, every acknowledged assign
// looked up. -benchtime 1x.
func BenchmarkAutoSplitGrowth(b *testing.B) {
	for range b.N {
		autoSplitGrowth(b, 8, 512, 32)
	}
}

func autoSplitGrowth(b *testing.B, from, to uint32, writers int) {
	c := startClusterWith(b, 3, func(cfg *Config) {
		cfg.Shards = from
		cfg.Splits = &reconcile.SplitConfig{Topics: 100, Window: time.Second, Every: 100 * time.Millisecond, MaxShards: int(to)}
	})
	cl := allNodesClient(b, c, 5*time.Second, 60)
	ctx := context.Background()
	start := time.Now()
	load := startAssignLoad(cl, "autogrow", writers)
	deadline := time.Now().Add(5 * time.Minute)
	for c.nodes[0].leaders.Map().Len() < int(to) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	growth := time.Since(start)
	load.halt()
	live := c.nodes[0].leaders.Map().Len()
	acked, lat := load.acked, load.lat
	missing := 0
	for topic, was := range acked {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil || a.Owner != was.Owner || a.Epoch != was.Epoch {
			missing++
		}
	}
	var auto uint64
	for _, n := range c.nodes {
		auto += n.Stats().AutoSplits
	}
	b.ReportMetric(float64(live), "shards")
	b.ReportMetric(float64(auto), "auto-splits")
	b.ReportMetric(growth.Seconds(), "growth-s")
	b.ReportMetric(float64(len(acked)), "topics")
	b.ReportMetric(float64(len(lat))/growth.Seconds(), "assigns/s")
	b.ReportMetric(float64(lat[len(lat)*99/100].Milliseconds()), "assign-p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Milliseconds()), "assign-max-ms")
	b.ReportMetric(float64(load.failed.Load()), "assigns-failed")
	b.ReportMetric(float64(missing), "lost")
	if missing > 0 || live < int(to) {
		b.Fatalf("%d of %d acknowledged assigns lost or changed; %d shards of %d", missing, len(acked), live, to)
	}
}

// assignLoad is a closed-loop load of assigns of fresh topics, one writer
// per goroutine, for the growth benchmarks.
type assignLoad struct {
	stop   atomic.Bool
	wg     sync.WaitGroup
	mu     sync.Mutex
	acked  map[string]client.Assignment // the acknowledged assigns
	lat    []time.Duration              // every assign's latency, sorted by halt
	failed atomic.Int64
}

// startAssignLoad starts writers assigning topics named prefix-W-I.
func startAssignLoad(cl *client.Client, prefix string, writers int) *assignLoad {
	l := &assignLoad{acked: make(map[string]client.Assignment)}
	for w := range writers {
		l.wg.Go(func() {
			var mine []time.Duration
			for i := 0; !l.stop.Load(); i++ {
				topic := fmt.Sprintf("%s-%d-%d", prefix, w, i)
				t0 := time.Now()
				a, err := cl.Assign(context.Background(), topic, client.AssignOptions{})
				mine = append(mine, time.Since(t0))
				if err != nil {
					l.failed.Add(1)
					continue
				}
				l.mu.Lock()
				l.acked[topic] = a
				l.mu.Unlock()
			}
			l.mu.Lock()
			l.lat = append(l.lat, mine...)
			l.mu.Unlock()
		})
	}
	return l
}

// halt stops the writers and waits for them; lat is sorted after.
func (l *assignLoad) halt() {
	l.stop.Store(true)
	l.wg.Wait()
	slices.Sort(l.lat)
}
