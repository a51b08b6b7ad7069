package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/shardsm"
)

// topicsPerShard returns, for every live shard of n's map, its count of
// topics as its leader (any node of c) holds them; -1 where no node of c
// leads it.
func topicsPerShard(c *testCluster, n *Node) map[uint32]int {
	out := make(map[uint32]int)
	for id := range n.leaders.Map().Shards() {
		out[id] = -1
		for _, m := range c.nodes {
			if !m.events.Leads(uint64(id)) {
				continue
			}
			_ = m.sm.WithShard(uint64(id), func(sh *shardsm.Shard) { out[id] = sh.State.Count() })
		}
	}
	return out
}

// A cluster born with two shards, given a limit of topics per shard,
// splits them on its own while topics are assigned: its leaders split
// every shard that stays over the limit, until none is, and every
// acknowledged assignment keeps its owner and epoch.
func TestShardsSplitOnTheirOwnAsTopicsGrow(t *testing.T) {
	t.Parallel()
	const limit = 120
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.Shards = 2
		cfg.Splits = &reconcile.SplitConfig{Topics: limit, Window: 300 * time.Millisecond, Every: 100 * time.Millisecond}
	})
	cl := allNodesClient(t, c, 3*time.Second, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topics = 1200
	var mu sync.Mutex
	acked := make(map[string]client.Assignment, topics)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < topics; i += 8 {
				topic := fmt.Sprintf("auto-%d", i)
				a, err := cl.Assign(ctx, topic, client.AssignOptions{})
				if err != nil {
					errs <- fmt.Errorf("assign %s: %w", topic, err)
					return
				}
				mu.Lock()
				acked[topic] = a
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n1 := c.nodes[0]
	waitUntil(t, 40*time.Second, "every shard at most the limit", func() bool {
		for _, count := range topicsPerShard(c, n1) {
			if count < 0 || count > limit {
				return false
			}
		}
		return true
	})
	shards := n1.leaders.Map().Len()
	// 1,200 topics at most 120 a shard: at least 10 shards, and a split
	// of a shard under the limit would make more than the 32 that halving
	// every shard over it gives at the worst.
	if shards < topics/limit || shards > 32 {
		t.Errorf("%d shards for %d topics at most %d a shard", shards, topics, limit)
	}
	var splits uint64
	for _, n := range c.nodes {
		splits += n.Stats().AutoSplits
	}
	if want := uint64(shards - 2); splits != want {
		t.Errorf("the nodes count %d automatic splits, want %d (2 shards grew to %d)", splits, want, shards)
	}
	for topic, was := range acked {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil || a.Owner != was.Owner || a.Epoch != was.Epoch {
			t.Fatalf("lookup %s after the splits: %+v %v, want %+v", topic, a, err, was)
		}
	}
	if _, err := cl.Assign(ctx, "after-the-splits", client.AssignOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A cluster born with fewer shards than it wants per member halves them,
// idle, until it has as many of one width, and stops there: three per
// member of three is nine, and a base of 2 halved three times is 16.
func TestShardsFollowTheMembers(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.Shards = 2
		cfg.Splits = &reconcile.SplitConfig{PerMember: 3, Every: 100 * time.Millisecond}
	})
	waitUntil(t, 30*time.Second, "sixteen shards for three members", func() bool {
		for _, n := range c.nodes {
			if n.leaders.Map().Len() < 16 {
				return false
			}
		}
		return true
	})
	time.Sleep(2 * time.Second)
	// Each leader splits only its own shards wider than the members'
	// depth, so no map, however late it learns of the others' splits,
	// makes one more.
	for _, n := range c.nodes {
		m := n.leaders.Map()
		if m.Len() != 16 {
			t.Fatalf("%s: %d shards, want them to stop at 16", n.cfg.ID, m.Len())
		}
		for id := range m.Shards() {
			if _, d, _, _ := m.Space().Range(id); d != 3 {
				t.Fatalf("%s: shard %d at depth %d, want every one at 3", n.cfg.ID, id, d)
			}
		}
	}
}

// A node's store records the shard count its cluster was born with: a
// restart without one takes it, and a restart naming another is refused.
func TestTheStoreKeepsTheShardCount(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := nodeConfig("n1", dir, nil, 1)
	cfg.Shards = 0
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := n.cfg.Shards; got != DefaultShards || n.cfg.Splits == nil {
		t.Fatalf("a node without a count: %d shards, splits %v; want %d, automatic", got, n.cfg.Splits, DefaultShards)
	}
	_ = n.Close()
	cfg.Shards = 64
	if _, err := New(cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("a restart naming 64 shards on a store born with %d: %v, want ErrConfig", DefaultShards, err)
	}
	cfg = nodeConfig("n2", t.TempDir(), nil, 1)
	cfg.Shards = 64
	n, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = n.Close()
	cfg.Shards = 0
	n, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.cfg.Shards != 64 {
		t.Fatalf("a restart without a count on a store of 64 shards: %d", n.cfg.Shards)
	}
}

// On five nodes a split's halves are seeded on their parent's replicas
// and then move to those the ring places them on, by their own ids: each
// half's group ends with exactly its placement's replicas, the nodes it
// left drop their copies, and every topic keeps its owner and epoch and
// takes writes.
func TestHalvesMoveToTheirOwnReplicas(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 5)
	cl := allNodesClient(t, c, 3*time.Second, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before := make(map[string]client.Assignment)
	for i := range 200 {
		topic := fmt.Sprintf("moving-half-%d", i)
		a, err := cl.Assign(ctx, topic, client.AssignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before[topic] = a
		if _, err := cl.Produce(ctx, topic, [][]byte{[]byte(topic)}); err != nil {
			t.Fatal(err)
		}
	}
	n1 := c.nodes[0]
	space := n1.leaders.Map().Space()
	// Split shards until some half's placement is not its parent's.
	moved := 0
	var halves []uint32
	for s := uint32(0); s < testShards && moved < 2; s++ {
		if _, err := cl.SplitShard(ctx, uint64(s)); err != nil {
			t.Fatalf("split %d: %v", s, err)
		}
		pl := n1.view.Load().Placement()
		parent := pl.Replicas(s, nil)
		low, high, _ := space.Children(s)
		for _, h := range []uint32{low, high} {
			halves = append(halves, h)
			if !sameNodes(pl.Replicas(h, nil), parent) {
				moved++
			}
		}
	}
	if moved == 0 {
		t.Fatal("no half placed off its parent's replicas")
	}
	waitUntil(t, 40*time.Second, "every half on its own replicas", func() bool {
		shards, err := cl.Shards(ctx)
		if err != nil {
			return false
		}
		pl := n1.view.Load().Placement()
		got := make(map[uint64][]string)
		for _, s := range shards {
			got[s.Shard] = s.Replicas
		}
		for _, h := range halves {
			if !sameNodes(got[uint64(h)], pl.Replicas(h, nil)) {
				return false
			}
		}
		return true
	})
	waitUntil(t, 40*time.Second, "the nodes a half left drop it", func() bool {
		pl := n1.view.Load().Placement()
		for _, h := range halves {
			for _, n := range c.nodes {
				placed := slices.Contains(pl.Replicas(h, nil), n.ID())
				if hosted := n.hostsReplica(uint64(h)); hosted != placed {
					return false
				}
			}
		}
		return true
	})
	for topic, was := range before {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil || a.Owner != was.Owner || a.Epoch != was.Epoch {
			t.Fatalf("lookup %s after the moves: %+v %v, want %+v", topic, a, err, was)
		}
		if _, err := cl.Produce(ctx, topic, [][]byte{[]byte("after")}); err != nil {
			t.Fatalf("produce %s after the moves: %v", topic, err)
		}
	}
}

func sameNodes(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(x string) bool { return !slices.Contains(b, x) })
}

// hostsReplica reports whether n's store holds a replica of shard.
func (n *Node) hostsReplica(shard uint64) bool {
	ids, err := n.rs.Shards()
	return err == nil && slices.Contains(ids, shard)
}

// A cluster whose whole load lands on one shard (born with one) splits it
// by its command rate, and the halves' leaderships spread over every
// node: the hot range is served by three leaders, not one.
func TestAHotShardSplitsByItsRate(t *testing.T) {
	t.Parallel()
	rate := 200.0
	if raceEnabled {
		// The race detector, beside the other packages' tests, leaves
		// a few hundred assigns a second at most.
		rate = 50
	}
	took := hotShardSpread(t, 3, rate)
	t.Logf("the hot shard's range led by 3 nodes after %v", took.Round(time.Millisecond))
}

// BenchmarkHotShardSpread reports how long a one-shard cluster under a
// closed-loop assign load (16 writers) takes until its range is led by
// three nodes, splitting by rate (200 commands a second held for 1 s).
// -benchtime 1x.
func BenchmarkHotShardSpread(b *testing.B) {
	for range b.N {
		b.ReportMetric(hotShardSpread(b, 3, 200).Seconds(), "spread-s")
	}
}

func hotShardSpread(tb testing.TB, want int, rate float64) time.Duration {
	c := startClusterWith(tb, 3, func(cfg *Config) {
		cfg.Shards = 1
		cfg.Splits = &reconcile.SplitConfig{Rate: rate, Window: time.Second, Every: 200 * time.Millisecond, MaxShards: 16}
	})
	cl := allNodesClient(tb, c, 3*time.Second, 40)
	ctx := context.Background()
	var stop atomic.Bool
	var wg sync.WaitGroup
	defer func() { stop.Store(true); wg.Wait() }()
	for w := range 16 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				_, _ = cl.Assign(ctx, fmt.Sprintf("hot-%d-%d", w, i), client.AssignOptions{})
			}
		})
	}
	start := time.Now()
	leaders := func() int {
		seen := map[string]bool{}
		n1 := c.nodes[0]
		for id := range n1.leaders.Map().Shards() {
			for _, n := range c.nodes {
				if n.events.Leads(uint64(id)) {
					seen[n.ID()] = true
				}
			}
		}
		return len(seen)
	}
	waitUntil(tb, 120*time.Second, "the hot range led by three nodes", func() bool { return leaders() >= want })
	return time.Since(start)
}
