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
	var seeds []string
	for _, n := range c.nodes {
		addr, _, _ := n.Addrs()
		seeds = append(seeds, addr)
	}
	cl, err := client.New(client.Config{Servers: seeds, ClusterID: 42, RequestTimeout: 3 * time.Second, MaxRetries: 40, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
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
