package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/router"
)

// A listing that crosses splits gives each topic once and misses none:
// splits of the shard its cursor is in, of a shard it listed already, of
// one it has not reached, and of a half of the first, between its pages;
// and a ListAll over ranges while shards split under it.
func TestAListingAcrossSplitsGivesEachTopicOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := allNodesClient(t, c, 3*time.Second, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	space := router.ShardSpace(testShards)
	// Topics in the first bases, several a shard, so that pages end
	// inside shards.
	var want []string
	for i := 0; len(want) < 120; i++ {
		topic := fmt.Sprintf("ls-%d", i)
		if router.ShardOfString(topic, testShards) < 8 {
			want = append(want, topic)
			if _, err := cl.Assign(ctx, topic, client.AssignOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	slices.Sort(want)
	split := func(shard uint64) {
		t.Helper()
		if _, err := cl.SplitShard(ctx, shard); err != nil {
			t.Fatalf("split %d: %v", shard, err)
		}
	}
	once := func(what string, got []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			seen := map[string]int{}
			for _, g := range got {
				seen[g]++
			}
			var twice, missed []string
			for _, w := range want {
				switch seen[w] {
				case 0:
					missed = append(missed, w)
				case 1:
				default:
					twice = append(twice, w)
				}
			}
			t.Fatalf("%s: %d topics listed, want %d; twice %q, missed %q", what, len(got), len(want), twice, missed)
		}
	}

	var got []string
	cursor := ""
	var cursorShard uint64
	for pages := 0; ; pages++ {
		page, err := cl.ListTopics(ctx, client.ListOptions{Prefix: "ls-", Limit: 6, Cursor: cursor})
		if err != nil {
			t.Fatalf("page %d: %v", pages, err)
		}
		for _, a := range page.Topics {
			got = append(got, a.Topic)
		}
		if page.Next == "" {
			break
		}
		cursor = page.Next
		if len(page.Topics) > 0 {
			cursorShard = page.Topics[len(page.Topics)-1].Shard
		}
		switch pages {
		case 0:
			// The shard the cursor is in, one listed before it (if any)
			// and one not reached.
			split(cursorShard)
			if cursorShard > 0 {
				split(0)
			}
			split(7)
		case 2:
			// The shard the cursor is in now: a half of the first (a
			// split of a split).
			split(cursorShard)
		}
	}
	once("pages across splits", got)

	var all []string
	first := true
	if _, err := cl.ListAll(ctx, client.ListAllOptions{Prefix: "ls-", Ranges: 3}, func(page []client.Assignment) error {
		for _, a := range page {
			all = append(all, a.Topic)
		}
		if first {
			first = false
			for _, s := range []uint64{1, 3, 5} {
				shards, err := cl.Shards(ctx)
				if err != nil {
					return err
				}
				for _, si := range shards {
					if b, _, _, _ := space.Range(uint32(si.Shard)); uint64(b) == s {
						split(si.Shard)
						break
					}
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	once("ListAll while shards split", all)
}

// A node takes a half's traffic wherever the ring places the half once
// its replica of the parent has split, from a member it knows, and never
// for an id outside the shard space.
func TestANodeTakesTheHalvesOfAShardThatSplitHere(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := allNodesClient(t, c, 3*time.Second, 40)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const shard = 9
	if _, err := cl.SplitShard(ctx, shard); err != nil {
		t.Fatal(err)
	}
	low, high, _ := router.ShardSpace(testShards).Children(shard)
	n := c.nodes[0]
	waitUntil(t, 10*time.Second, "n1's replica of the shard ended", func() bool { return n.endedHere(shard) })
	from := RaftID(c.nodes[1].ID())
	for _, h := range []uint32{low, high} {
		if !n.acceptReplica(uint64(h), from) {
			t.Fatalf("half %d refused from a member", h)
		}
		if n.acceptReplica(uint64(h), RaftID("stranger")) {
			t.Fatalf("half %d taken from a node no one knows", h)
		}
		if n.acceptReplica(uint64(h)+1<<32, from) {
			t.Fatalf("shard %d taken: outside the shard space", uint64(h)+1<<32)
		}
	}
}
