package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/router"
)

// A watch running while a shard splits: it goes on with the halves,
// giving every change of the shard's topics once, those made before the
// split and after it, and its position resumes a new watch past them.
func TestAWatchGoesOnAcrossASplit(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := allNodesClient(t, c, 3*time.Second, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const shard = 5
	var topics []string
	for i := 0; len(topics) < 40; i++ {
		if topic := fmt.Sprintf("ws-%d", i); router.ShardOfString(topic, testShards) == shard {
			topics = append(topics, topic)
		}
	}
	w, err := cl.Watch(ctx, client.WatchOptions{Prefix: "ws-"})
	if err != nil {
		t.Fatal(err)
	}
	before := w.Position()
	for _, topic := range topics[:20] {
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.SplitShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics[20:] {
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	all := func(w *client.Watcher, what string) {
		t.Helper()
		seen := map[string]int{}
		for len(seen) < len(topics) {
			nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
			ch, err := w.Next(nctx)
			ncancel()
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("%s: gave %d of %d topics and then nothing for 10 s", what, len(seen), len(topics))
				}
				t.Fatalf("%s: after %d of %d topics: %v", what, len(seen), len(topics), err)
			}
			seen[ch.Topic]++
			if seen[ch.Topic] > 1 {
				t.Fatalf("%s: %s given twice", what, ch.Topic)
			}
		}
	}
	all(w, "the running watch")
	// From a position taken before the split: the shard's changes, then
	// its halves'.
	w2, err := cl.Watch(ctx, client.WatchOptions{Prefix: "ws-", From: before})
	if err != nil {
		t.Fatalf("a watch from before the split: %v", err)
	}
	all(w2, "a watch from before the split")
	// From the running watch's position: nothing again, and the next
	// change of the range.
	w3, err := cl.Watch(ctx, client.WatchOptions{Prefix: "ws-", From: w.Position()})
	if err != nil {
		t.Fatalf("a watch from after the split: %v", err)
	}
	if _, err := cl.Assign(ctx, topics[0], client.AssignOptions{Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
	defer ncancel()
	ch, err := w3.Next(nctx)
	if err != nil || ch.Topic != topics[0] || ch.Owner != "n1" {
		t.Fatalf("a watch from after the split: %+v %v, want the move of %s to n1", ch, err, topics[0])
	}
	// A topic watch across the split too.
	w4, err := cl.Watch(ctx, client.WatchOptions{Topic: topics[1], From: before})
	if err != nil {
		t.Fatalf("a topic watch from before the split: %v", err)
	}
	if ch, err := w4.Next(nctx); err != nil || ch.Topic != topics[1] {
		t.Fatalf("a topic watch from before the split: %+v %v", ch, err)
	}
	// Asked to, a watch gives the split itself, after the changes before
	// it and before those after.
	w5, err := cl.Watch(ctx, client.WatchOptions{Prefix: "ws-", From: before, Splits: true})
	if err != nil {
		t.Fatalf("a watch of the splits: %v", err)
	}
	low, high, _ := router.ShardSpace(testShards).Children(shard)
	var order []string
	for len(order) < len(topics)+1 {
		ch, err := w5.Next(nctx)
		if err != nil {
			t.Fatalf("a watch of the splits, after %d: %v", len(order), err)
		}
		if ch.Split != nil {
			if ch.Shard != shard || ch.Split.Low != uint64(low) || ch.Split.High != uint64(high) || ch.Split.Index == 0 || ch.Topic != "" {
				t.Fatalf("split given as %+v %+v", ch, ch.Split)
			}
			order = append(order, "split")
			continue
		}
		order = append(order, ch.Topic)
	}
	if i := slices.Index(order, "split"); i != 20 || slices.Index(order[21:], "split") >= 0 {
		t.Fatalf("the split given at %d of %q, want once, after the 20 changes before it", i, order)
	}
}
