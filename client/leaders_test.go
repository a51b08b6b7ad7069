package client_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/client/clienttest"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// leaderCluster starts n fake nodes that answer ShardLeaders (shard s led
// by node s mod n) over 64 shards.
func leaderCluster(t *testing.T, n int) []*clienttest.Node {
	t.Helper()
	c := &clienttest.Cluster{ClusterID: 7, Leaders: true}
	nodes := make([]*clienttest.Node, n)
	for i := range nodes {
		node, err := c.Start(fmt.Sprintf("n%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = node
	}
	t.Cleanup(c.Close)
	return nodes
}

// topicsLedBy returns count topic names whose shard (of 64) the fake
// cluster of n nodes has node i lead.
func topicsLedBy(prefix string, i, n, count int) []string {
	var out []string
	for k := 0; len(out) < count; k++ {
		topic := fmt.Sprintf("%s-%d", prefix, k)
		if int(router.ShardOf([]byte(topic), 64))%n == i {
			out = append(out, topic)
		}
	}
	return out
}

// waitTable assigns topics led by node i until one reaches it: the client
// has pulled the table.
func waitTable(t *testing.T, c *client.Client, node *clienttest.Node, i, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for k := 0; node.Requests(wire.KindAssign) == 0; k++ {
		if time.Now().After(deadline) {
			t.Fatal("no assign reached the shard leader: the table was never used")
		}
		topic := topicsLedBy(fmt.Sprintf("warm%d", k), i, n, 1)[0]
		if _, err := c.Assign(ctxT(t), topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Metadata writes and linearizable lookups go to the leader the pulled
// table names, though only one seed is configured; plain lookups stay on
// the seed.
func TestMetadataRequestsGoToTheShardLeader(t *testing.T) {
	nodes := leaderCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes[0])})
	waitTable(t, c, nodes[2], 2, 3)
	before := [3]int{}
	for i, n := range nodes {
		before[i] = n.Requests(wire.KindAssign)
	}
	topics := topicsLedBy("led", 2, 3, 20)
	for _, topic := range topics {
		if _, err := c.Assign(ctxT(t), topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lookup(ctxT(t), topic, true); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Lookup(ctxT(t), topic, false); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodes[2].Requests(wire.KindAssign) - before[2]; got != len(topics) {
		t.Errorf("the leader got %d of %d assigns", got, len(topics))
	}
	if got := nodes[0].Requests(wire.KindAssign) - before[0]; got != 0 {
		t.Errorf("the seed got %d assigns of shards it does not lead", got)
	}
	// 20 linearizable lookups at the leader; 20 plain ones at the seed.
	if got := nodes[2].Requests(wire.KindLookup); got != len(topics) {
		t.Errorf("the leader got %d lookups, want the %d linearizable ones", got, len(topics))
	}
	if got := nodes[0].Requests(wire.KindLookup); got != len(topics) {
		t.Errorf("the seed got %d lookups, want the %d plain ones", got, len(topics))
	}
}

// A NotLeader answer from the leader the table names sends the request to
// the leader it names, and the table keeps that leader for the shard.
func TestNotLeaderCorrectsTheLeaderTable(t *testing.T) {
	nodes := leaderCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes[0]), LeaderTableRefresh: time.Hour})
	waitTable(t, c, nodes[2], 2, 3)
	topics := topicsLedBy("moved", 2, 3, 2)
	shard := uint64(router.ShardOf([]byte(topics[0]), 64))
	for shard != uint64(router.ShardOf([]byte(topics[1]), 64)) {
		topics = append(topics[:1], topicsLedBy(topics[1], 2, 3, 1)...)
	}
	nodes[2].Inject(wire.KindAssign, clienttest.Fault{Err: &wire.ErrorResponse{Code: wire.CodeNotLeader,
		Message: "led elsewhere", Shard: shard, NodeID: "n2", Addr: nodes[1].Addr()}})
	at2, at3 := nodes[1].Requests(wire.KindAssign), nodes[2].Requests(wire.KindAssign)
	for _, topic := range topics {
		if _, err := c.Assign(ctxT(t), topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodes[2].Requests(wire.KindAssign) - at3; got != 1 {
		t.Errorf("the old leader got %d assigns, want the one it refused", got)
	}
	if got := nodes[1].Requests(wire.KindAssign) - at2; got != 2 {
		t.Errorf("the new leader got %d assigns, want 2", got)
	}
}

// A leader the table names that is down costs a failed attempt; the seeds
// serve the request.
func TestLeaderDownFallsBackToTheSeeds(t *testing.T) {
	nodes := leaderCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes[0], nodes[1]), LeaderTableRefresh: time.Hour})
	waitTable(t, c, nodes[2], 2, 3)
	nodes[2].Close()
	for _, topic := range topicsLedBy("down", 2, 3, 5) {
		if _, err := c.Assign(ctxT(t), topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A leader that does not answer is tried once: the requests after go to
// the seeds until the table is refreshed.
func TestUnreachableLeaderIsAvoided(t *testing.T) {
	nodes := leaderCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes[0]), LeaderTableRefresh: time.Hour, RequestTimeout: 200 * time.Millisecond})
	waitTable(t, c, nodes[2], 2, 3)
	at := nodes[2].Requests(wire.KindAssign)
	faults := make([]clienttest.Fault, 10)
	for i := range faults {
		faults[i].Stall = true
	}
	nodes[2].Inject(wire.KindAssign, faults...)
	for _, topic := range topicsLedBy("stalled", 2, 3, 5) {
		if _, err := c.Assign(ctxT(t), topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodes[2].Requests(wire.KindAssign) - at; got != 1 {
		t.Fatalf("the unreachable leader was tried %d times, want once", got)
	}
}

// With LeaderTableRefresh negative the table is never asked for.
func TestLeaderRoutingOff(t *testing.T) {
	nodes := leaderCluster(t, 2)
	c := newClient(t, client.Config{Servers: addrs(nodes[0]), LeaderTableRefresh: -1})
	for _, topic := range topicsLedBy("off", 1, 2, 10) {
		if _, err := c.Assign(ctxT(t), topic, client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if nodes[0].Requests(wire.KindShardLeaders) != 0 || nodes[1].Requests(wire.KindAssign) != 0 {
		t.Fatalf("table asked %d times; %d assigns went to the other node",
			nodes[0].Requests(wire.KindShardLeaders), nodes[1].Requests(wire.KindAssign))
	}
}
