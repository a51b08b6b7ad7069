package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/node/view"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// cachedRouteNode is a node (not started) that is ready, hosts no shard,
// and has topic "orders" cached: owner n2 (alive) at epoch 3 with 12
// partitions.
func cachedRouteNode(tb testing.TB) *Node {
	tb.Helper()
	n, err := New(nodeConfig("n1", tb.TempDir(), nil, 1))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = n.Close() })
	n.birth.MarkBorn()
	n.birth.MarkReady()
	n.view.Store(&view.View{View: reconcile.View{
		Members: map[string]swim.Member{"n2": {ID: "n2", State: swim.StateAlive, ClientAddr: "127.0.0.1:7102"}},
		Live:    []string{"n2"}, Dead: map[string]bool{},
	}})
	n.cache.Put([]byte("orders"), "n2", "127.0.0.1:7102", 3, 12)
	return n
}

// A lookup answered from the routing cache carries the topic's partition
// count, on the event-loop path and on the request path alike.
func TestCachedLookupAnswersThePartitionCount(t *testing.T) {
	n := cachedRouteNode(t)
	payload := wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("orders")})
	check := func(path string, kind wire.Kind, out []byte) {
		t.Helper()
		var a wire.Assignment
		if kind != wire.KindAssignment || wire.DecodeAssignment(out, &a) != nil {
			t.Fatalf("%s: answer %v %x", path, kind, out)
		}
		if string(a.Owner) != "n2" || string(a.OwnerAddr) != "127.0.0.1:7102" || a.Epoch != 3 || a.Partitions != 12 {
			t.Fatalf("%s: %+v, want n2 at epoch 3 with 12 partitions", path, a)
		}
	}
	kind, out := handleNow(n, wire.KindLookup, payload)
	check("request path", kind, out)
	f, ok := n.disp.AppendLookup(nil, 9, payload)
	if !ok {
		t.Fatal("fast path did not answer a cached route")
	}
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil || h.Kind != wire.KindAssignment || h.RequestID != 9 {
		t.Fatalf("fast path frame header %+v, %v", h, err)
	}
	check("fast path", h.Kind, f[wire.HeaderSize:])
	// A route whose owner is no longer alive is not served from the cache.
	n.view.Store(&view.View{View: reconcile.View{Members: map[string]swim.Member{}, Dead: map[string]bool{"n2": true}}})
	if _, ok := n.disp.AppendLookup(nil, 10, payload); ok {
		t.Fatal("served the route of a dead owner")
	}
}

// The event-loop path never waits for a shard being applied: it hands the
// lookup to the request path instead.
func TestFastLookupDoesNotWaitForABusyShard(t *testing.T) {
	n := cachedRouteNode(t)
	shard := uint64(router.ShardOf([]byte("orders"), n.cfg.Shards))
	payload := wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("orders")})
	ok := false
	// Under the shard's lock.
	if err := n.sm.WithShard(shard, func(*shardsm.Shard) { _, ok = n.disp.AppendLookup(nil, 1, payload) }); err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Fatal("answered while the shard was locked")
	}
	// Unlocked, the hosted replica (which has no such topic) leaves the
	// answer (NotFound) to the request path as well.
	if _, ok := n.disp.AppendLookup(nil, 2, payload); ok {
		t.Fatal("answered a topic the hosted replica does not have")
	}
}

// TestLookupAfterAssignIsNeverNotFound: a topic assigned through one node
// and looked up at once through another (plain lookup) is found there.
// That node may host a follower replica of the shard that has not applied
// the assignment yet; only the leader may answer "not assigned".
func TestLookupAfterAssignIsNeverNotFound(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clients := make([]*client.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = clientOf(t, n)
	}
	for i := range 60 {
		topic := fmt.Sprintf("ryw-%d", i)
		if _, err := clients[i%3].Assign(ctx, topic, client.AssignOptions{}); err != nil {
			t.Fatalf("assign %s: %v", topic, err)
		}
		for j := 1; j <= 2; j++ {
			if _, err := clients[(i+j)%3].Lookup(ctx, topic, false); err != nil {
				t.Fatalf("lookup %s through %s right after its assignment: %v", topic, c.nodes[(i+j)%3].ID(), err)
			}
		}
	}
}
