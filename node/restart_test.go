package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/wire"
)

func TestRestartKeepsStateWithHigherGeneration(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	before := map[string]client.Assignment{}
	for i := range 50 {
		topic := fmt.Sprintf("durable-%02d", i)
		a, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n2"})
		if err != nil {
			t.Fatal(err)
		}
		before[topic] = a
	}
	old := c.node("n2")
	waitUntil(t, 10*time.Second, "n2 holds its topics", func() bool { return old.Status().TopicsOwned == 50 })
	if _, err := cl.Produce(ctx, "durable-00", [][]byte{[]byte("kept")}); err != nil {
		t.Fatal(err)
	}
	hosted := old.Status().ShardsHosted
	oldGen := old.Generation()
	_, _, seed := c.node("n1").Addrs()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	// Restart from the same directory, before SWIM declares it dead.
	cfg := nodeConfig("n2", c.dirs[1], []string{seed}, 3)
	n2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[1] = n2
	if n2.Generation() <= oldGen {
		t.Fatalf("generation %d after %d", n2.Generation(), oldGen)
	}
	if err := n2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n2.Ready():
	case <-time.After(20 * time.Second):
		t.Fatalf("restarted n2 not ready: %+v", n2.Status())
	}
	st := n2.Status()
	if st.ShardsHosted != hosted {
		t.Fatalf("restarted n2 hosts %d shards, had %d", st.ShardsHosted, hosted)
	}
	// n2 may have been declared dead meanwhile and its topics moved; either
	// way every topic has one live owner at an epoch no lower than before,
	// and whoever owns durable-00 serves it.
	for topic, want := range before {
		var got client.Assignment
		waitUntil(t, 20*time.Second, "lookup "+topic, func() bool {
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			defer lcancel()
			got, err = cl.Lookup(lctx, topic, true)
			return err == nil
		})
		if got.Epoch < want.Epoch || (got.Owner == "n2") != (got.Epoch == want.Epoch) {
			t.Fatalf("%s after restart: %+v, before %+v", topic, got, want)
		}
	}
	res, err := cl.Fetch(ctx, "durable-00", 0, 0)
	if err != nil {
		t.Fatalf("fetch after restart: %v", err)
	}
	if res.Epoch == before["durable-00"].Epoch && (len(res.Records) != 1 || string(res.Records[0].Value) != "kept") {
		t.Fatalf("records after restart at the same epoch: %+v", res)
	}
}

func TestRestartedOwnerDoesNotServeTopicsThatMovedWhileItWasDown(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	a, err := cl.Assign(ctx, "moved-while-down", client.AssignOptions{Owner: "n3"})
	if err != nil {
		t.Fatal(err)
	}
	old := c.node("n3")
	waitUntil(t, 10*time.Second, "n3 holds the topic", func() bool { return old.Status().TopicsOwned == 1 })
	_, _, seed := c.node("n1").Addrs()
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	var moved client.Assignment
	waitUntil(t, 30*time.Second, "the topic moved", func() bool {
		lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
		defer lcancel()
		moved, err = cl.Lookup(lctx, "moved-while-down", true)
		return err == nil && moved.Owner != "n3"
	})
	n3, err := New(nodeConfig("n3", c.dirs[2], []string{seed}, 3))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[2] = n3
	if h, ok := held(n3, "moved-while-down"); !ok {
		t.Fatalf("restarted n3 should still hold the topic: %+v %v", h, ok)
	}
	if _, r := n3.lease.Serve([]byte("moved-while-down"), a.Epoch); r == ownership.Servable {
		t.Fatal("restarted n3 would serve a topic no lease covers")
	}
	if err := n3.Start(ctx); err != nil {
		t.Fatal(err)
	}
	addr, _, _ := n3.Addrs()
	p := wire.AppendProduce(nil, &wire.Produce{Topic: []byte("moved-while-down"), Epoch: a.Epoch, Records: [][]byte{[]byte("split brain")}})
	if kind, _ := rawRequest(t, addr, wire.KindProduce, p); kind != wire.KindError {
		t.Fatalf("restarted n3 accepted a produce at the epoch it lost: %v", kind)
	}
	waitUntil(t, 20*time.Second, "n3 dropped the moved topic", func() bool { return n3.lease.Owned() == 0 })
}

// restartAll closes every node of the three-node cluster c and starts
// them again on their directories, each joining through the first, with
// the config changes the cluster started with.
func (c *testCluster) restartAll(t *testing.T, ctx context.Context) {
	t.Helper()
	for _, n := range c.nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var seed string
	for i, id := range []string{"n1", "n2", "n3"} {
		var join []string
		if seed != "" {
			join = []string{seed}
		}
		cfg := nodeConfig(id, c.dirs[i], join, 3)
		if c.mut != nil {
			c.mut(&cfg)
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = n
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if seed == "" {
			_, _, seed = n.Addrs()
		}
	}
}

func TestWholeClusterRestartLosesNothingAcknowledged(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.nodes[0])
	before := map[string]client.Assignment{}
	for i := range 30 {
		topic := fmt.Sprintf("everything-%02d", i)
		a, err := cl.Assign(ctx, topic, client.AssignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Produce(ctx, topic, [][]byte{[]byte(topic)}); err != nil {
			t.Fatalf("produce %s: %v", topic, err)
		}
		before[topic] = a
	}
	c.restartAll(t, ctx)
	for _, n := range c.nodes {
		select {
		case <-n.Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready after restart", n.ID())
		}
	}
	cl2 := clientOf(t, c.nodes[1])
	for topic, want := range before {
		got, err := cl2.Lookup(ctx, topic, true)
		if err != nil || got.Owner != want.Owner || got.Epoch != want.Epoch {
			t.Fatalf("lookup %s after restart: %+v %v, want %+v", topic, got, err, want)
		}
		res, err := cl2.Fetch(ctx, topic, 0, 0)
		if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != topic {
			t.Fatalf("fetch %s after restart: %+v %v", topic, res, err)
		}
	}
}

// After a whole-cluster restart, every new shard leader owes its
// predecessors' Opens and Closes again, but not to nodes that show they
// hold what its state gives them: here each owner holds exactly its
// topics, and n3, the previous owner of the moved ones, holds nothing in
// most of their shards, where it asks no lease; its rounds to the leaders
// of its other topics show it. No topic is owed again.
//
// An owner shows what it holds by a lease round that reaches the new
// leader before NewLeaderWait runs out; the lease here is long, so that a
// loaded machine's slow rounds still come in time.
func TestAClusterRestartOwesNothingToOwnersThatHoldWhatTheStateGives(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 3, func(cfg *Config) { cfg.LeaseDuration = 4 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.nodes[0])
	const topics = 60
	for i := range topics {
		topic := fmt.Sprintf("moved-off-%02d", i)
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: []string{"n1", "n2"}[i%2]}); err != nil {
			t.Fatal(err)
		}
	}
	const kept = 24 // spread over the shards, so led by every node
	for i := range kept {
		if _, err := cl.Assign(ctx, fmt.Sprintf("kept-%02d", i), client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 20*time.Second, "n3 holds only the topics it kept", func() bool { return c.node("n3").lease.Owned() == kept })
	waitUntil(t, 20*time.Second, "n1 and n2 hold every moved topic", func() bool {
		return c.node("n1").lease.Owned()+c.node("n2").lease.Owned() == topics
	})
	c.restartAll(t, ctx)
	for _, n := range c.nodes {
		select {
		case <-n.Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready after restart", n.ID())
		}
	}
	// Every taken-up leadership's resend comes due and is taken.
	waitUntil(t, 30*time.Second, "the new leaders' resends taken", func() bool {
		for _, n := range c.nodes {
			if n.lease.ResendsPending() {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes {
		if s := n.Stats(); s.TopicsResent != 0 {
			t.Errorf("%s owed %d topics' messages again after the restart, want 0", n.ID(), s.TopicsResent)
		}
	}
}

func TestTopicsOfANodeThatNeverCameBackMoveAfterAClusterRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.nodes[0])
	for i := range 10 {
		if _, err := cl.Assign(ctx, fmt.Sprintf("orphan-%d", i), client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.nodes {
		if err := n.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// n1 and n2 come back; n3 never does, and their SWIM never heard of it.
	var seed string
	for i, id := range []string{"n1", "n2"} {
		var join []string
		if seed != "" {
			join = []string{seed}
		}
		cfg := nodeConfig(id, c.dirs[i], join, 3)
		if c.mut != nil {
			c.mut(&cfg)
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = n
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if seed == "" {
			_, _, seed = n.Addrs()
		}
	}
	c.nodes = c.nodes[:2]
	cl2 := clientOf(t, c.nodes[1])
	waitUntil(t, 30*time.Second, "the orphaned topics moved", func() bool {
		for i := range 10 {
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			a, err := cl2.Lookup(lctx, fmt.Sprintf("orphan-%d", i), true)
			lcancel()
			if err != nil || a.Owner == "n3" {
				return false
			}
		}
		return true
	})
}
