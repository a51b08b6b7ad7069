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
	"github.com/shoalmq/shoal/wire"
)

// nextChange reads one change or fails the test.
func nextChange(t *testing.T, ctx context.Context, w *client.Watcher) client.Change {
	t.Helper()
	ch, err := w.Next(ctx)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	return ch
}

func changeLine(ch client.Change) string {
	return fmt.Sprintf("%s %v %s@%d/%d", ch.Topic, ch.Change, ch.Owner, ch.Epoch, ch.Partitions)
}

// A watch sees each kind of change in commit order, and resumes from its
// position after a disconnect and a restart of the node that served it,
// with no change missed or given twice.
func TestWatchInOrderAndResumesAcrossRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	w, err := cl.Watch(ctx, client.WatchOptions{Prefix: "w-"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Assign(ctx, "other", client.AssignOptions{Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	mustAssign := func(cl *client.Client, topic, owner string) {
		t.Helper()
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: owner}); err != nil {
			t.Fatal(err)
		}
	}
	mustAssign(cl, "w-a", "n2")
	mustAssign(cl, "w-a", "n3")
	if _, err := cl.UpdatePartitions(ctx, "w-a", 4); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Revoke(ctx, "w-a"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		got = append(got, changeLine(nextChange(t, ctx, w)))
	}
	want := []string{"w-a assigned n2@1/1", "w-a moved n3@2/1", "w-a updated n3@2/4", "w-a revoked @3/0"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes\n got %q\nwant %q", got, want)
	}
	pos := w.Position()
	_ = cl.Close() // the watcher is gone

	// Changes while nobody watches; then a watch resumed from the position
	// goes on while a node it reads from restarts, with changes while that
	// node is down.
	other := clientOf(t, c.node("n2"))
	mustAssign(other, "w-b", "n1")
	mustAssign(other, "w-b", "n2")
	n1 := c.node("n1")
	w, err = clientOf(t, n1).Watch(ctx, client.WatchOptions{Prefix: "w-", From: pos})
	if err != nil {
		t.Fatal(err)
	}
	// Topics of different shards come in no fixed order among each other:
	// read until the last change of each topic came.
	want = []string{"w-b assigned n1@1/1", "w-b moved n2@2/1", "w-c assigned n3@1/1", "w-z assigned n2@1/1"}
	readUntil := func(got []string, last ...string) []string {
		for slices.ContainsFunc(last, func(l string) bool { return !slices.Contains(got, l) }) {
			got = append(got, changeLine(nextChange(t, ctx, w)))
		}
		return got
	}
	got = readUntil(nil, want[1])
	if n1.Stats().Watches == 0 {
		t.Fatal("the resumed watch reads nothing from n1")
	}
	if err := n1.Close(); err != nil {
		t.Fatal(err)
	}
	mustAssign(other, "w-c", "n3")
	_, _, seed := c.node("n2").Addrs()
	n1, err = New(nodeConfig("n1", c.dirs[0], []string{seed}, 3))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[0] = n1
	if err := n1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n1.Ready():
	case <-ctx.Done():
		t.Fatalf("restarted n1 not ready: %+v", n1.Status())
	}
	mustAssign(other, "w-z", "n2")
	got = readUntil(got, want[2], want[3])
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("after resume\n got %q\nwant %q", got, want)
	}

	// From the position after all that, through the restarted node: the
	// next change, and none of the earlier ones again.
	pos = w.Position()
	w, err = clientOf(t, n1).Watch(ctx, client.WatchOptions{Prefix: "w-", From: pos})
	if err != nil {
		t.Fatal(err)
	}
	mustAssign(other, "w-y", "n1")
	if got := changeLine(nextChange(t, ctx, w)); got != "w-y assigned n1@1/1" {
		t.Fatalf("after the restart, from the last position: %s", got)
	}
}

// A listing covers every shard page by page, with a prefix and a limit,
// and its position lets a watch continue right after it. A position older
// than a node keeps is refused, and a watcher that falls behind is told.
func TestListTopicsThenWatchAndCompaction(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.ChangeLogLen, cfg.MaxWatchers = 16, 1
		cfg.RequestTimeout = time.Minute // a held watch stays held while the test looks
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n2"))
	var want []string
	for i := range 30 {
		topic := fmt.Sprintf("l-%02d", i)
		want = append(want, topic)
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		if _, err := cl.Assign(ctx, fmt.Sprintf("x-%d", i), client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var listed []string
	var positions []string
	shards := map[uint64]bool{}
	cursor, pages := "", 0
	for {
		page, err := cl.ListTopics(ctx, client.ListOptions{Prefix: "l-", Limit: 7, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(page.Topics) > 7 {
			t.Fatalf("page of %d topics, limit 7", len(page.Topics))
		}
		for _, a := range page.Topics {
			listed = append(listed, a.Topic)
			shards[a.Shard] = true
			if a.Owner != "n3" || a.Epoch != 1 || a.OwnerAddr == "" {
				t.Fatalf("listed %+v", a)
			}
		}
		positions = append(positions, page.Position)
		if page.Next == "" {
			break
		}
		cursor = page.Next
	}
	slices.Sort(listed)
	if !slices.Equal(listed, want) || pages < 5 || len(shards) < 2 {
		t.Fatalf("listed %q in %d pages over %d shards, want %q", listed, pages, len(shards), want)
	}
	if _, err := cl.ListTopics(ctx, client.ListOptions{Limit: wire.MaxListTopics + 1}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("limit too large: %v", err)
	}
	if _, err := cl.ListTopics(ctx, client.ListOptions{Cursor: "!!"}); !errors.Is(err, client.ErrBadPosition) {
		t.Fatalf("bad cursor: %v", err)
	}

	// Every page at once, over ranges of shards: each topic once, pages
	// handed over one at a time; fn's error stops the listing.
	for _, ranges := range []int{1, 5, testShards + 1} {
		var all []string
		busy := false
		pos, err := cl.ListAll(ctx, client.ListAllOptions{Prefix: "l-", Ranges: ranges}, func(page []client.Assignment) error {
			if busy {
				t.Error("fn called while a call was running")
			}
			busy = true
			defer func() { busy = false }()
			for _, a := range page {
				all = append(all, a.Topic)
			}
			return nil
		})
		slices.Sort(all)
		if err != nil || !slices.Equal(all, want) {
			t.Fatalf("ListAll over %d ranges: %q, %v; want %q", ranges, all, err, want)
		}
		if _, err := client.MergePositions(pos); err != nil {
			t.Fatalf("ListAll's position %q: %v", pos, err)
		}
	}
	stop := errors.New("enough")
	if _, err := cl.ListAll(ctx, client.ListAllOptions{}, func([]client.Assignment) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("ListAll with a failing fn: %v", err)
	}
	if _, err := cl.ListAll(ctx, client.ListAllOptions{Ranges: -1}, nil); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("ListAll of -1 ranges: %v", err)
	}

	// List, then watch from the listing: the change after it comes first.
	from, err := client.MergePositions(positions...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Assign(ctx, "l-new", client.AssignOptions{Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	w, err := cl.Watch(ctx, client.WatchOptions{Prefix: "l-", From: from})
	if err != nil {
		t.Fatal(err)
	}
	if got := changeLine(nextChange(t, ctx, w)); got != "l-new assigned n1@1/1" {
		t.Fatalf("first change after the listing: %s", got)
	}

	// A watcher that does not keep up with more changes than a node keeps.
	w, err = cl.Watch(ctx, client.WatchOptions{Topic: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Assign(ctx, "slow", client.AssignOptions{Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	nextChange(t, ctx, w)
	old := w.Position()
	for i := range 18 {
		if _, err := cl.Assign(ctx, "slow", client.AssignOptions{Owner: []string{"n2", "n3"}[i%2]}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Next(ctx); !errors.Is(err, client.ErrWatchTooSlow) || !errors.Is(err, client.ErrCompacted) {
		t.Fatalf("slow watcher: %v", err)
	}
	if _, err := cl.Watch(ctx, client.WatchOptions{Topic: "slow", From: old}); !errors.Is(err, client.ErrCompacted) || errors.Is(err, client.ErrWatchTooSlow) {
		t.Fatalf("compacted position: %v", err)
	}
	if _, err := cl.Watch(ctx, client.WatchOptions{Topic: "slow", From: "nonsense"}); !errors.Is(err, client.ErrBadPosition) {
		t.Fatalf("bad position: %v", err)
	}
	if _, err := cl.Watch(ctx, client.WatchOptions{Topic: "a", Prefix: "b"}); !errors.Is(err, client.ErrInvalidArgument) {
		t.Fatalf("topic and prefix: %v", err)
	}

	// A node holds at most MaxWatchers watches while nothing changes.
	n := c.node("n2")
	shard := uint64(router.ShardOf([]byte("held"), testShards))
	watch := func(index uint64, wait uint32) wire.WatchEvents {
		t.Helper()
		k, out := handleNow(n, wire.KindWatch, wire.AppendWatch(nil, &wire.Watch{Match: []byte("held"), Exact: true, WaitMillis: wait,
			Positions: []wire.ShardPosition{{Shard: shard, Index: index}}}))
		var ev wire.WatchEvents
		if k != wire.KindWatchEvents || wire.DecodeWatchEvents(out, &ev) != nil {
			t.Fatalf("watch answered %v %x", k, out)
		}
		return ev
	}
	now := watch(wire.NowIndex, 0).Positions[0].Index
	held := make(chan wire.WatchEvents, 1)
	go func() { held <- watch(now, 60_000) }()
	waitUntil(t, 10*time.Second, "a watch held", func() bool { return n.Stats().WatchesWaiting == 1 })
	k, out := handleNow(n, wire.KindWatch, wire.AppendWatch(nil, &wire.Watch{Match: []byte("held"), Exact: true, WaitMillis: 60_000,
		Positions: []wire.ShardPosition{{Shard: shard, Index: now}}}))
	var e wire.Error
	if k != wire.KindError || wire.DecodeError(out, &e) != nil || e.Code != wire.CodeUnavailable {
		t.Fatalf("a watch past MaxWatchers: %v %x", k, out)
	}
	if _, err := cl.Assign(ctx, "held", client.AssignOptions{Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	ev := <-held
	for len(ev.Events) == 0 { // n2 had not applied it when the wait ended
		ev = watch(ev.Positions[0].Index, 60_000)
	}
	if len(ev.Events) != 1 || string(ev.Events[0].Topic) != "held" || ev.Events[0].Change != wire.ChangeAssigned || ev.Positions[0].Index < ev.Events[0].Index {
		t.Fatalf("the held watch was answered %+v", ev)
	}
	if st := n.Stats(); st.WatchRefused != 1 || st.WatchesWaiting != 0 || st.WatchCompacted == 0 {
		t.Fatalf("stats %+v", st)
	}
}
