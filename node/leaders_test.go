package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// ShardLeaders answers the node's table: one entry per shard, each leader
// named with its client address.
func TestShardLeadersAnswersTheTable(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	n := c.nodes[0]
	addrs := map[string]string{}
	for _, m := range c.nodes {
		a, _, _ := m.Addrs()
		addrs[m.ID()] = a
	}
	var m wire.LeaderTable
	waitUntil(t, 30*time.Second, "every shard's leader known", func() bool {
		kind, out := handleNow(n, wire.KindShardLeaders, nil)
		if kind != wire.KindLeaderTable {
			t.Fatalf("answered %v", kind)
		}
		if err := wire.DecodeLeaderTableAnswer(out, &m); err != nil {
			t.Fatal(err)
		}
		for _, l := range m.Leaders {
			if l == 0 {
				return false
			}
		}
		return true
	})
	if m.Shards != testShards || len(m.Leaders) != testShards {
		t.Fatalf("%d shards, %d entries, want %d", m.Shards, len(m.Leaders), testShards)
	}
	for s, l := range m.Leaders {
		node := m.Nodes[l-1]
		if addrs[string(node.ID)] != string(node.Addr) {
			t.Fatalf("shard %d: leader %s at %q, its client address is %q", s, node.ID, node.Addr, addrs[string(node.ID)])
		}
		if leader, term, _ := n.leaders.Get(uint32(s)); leader != string(node.ID) || term != m.Terms[s] {
			t.Fatalf("shard %d: answered %s at term %d, the table has %s at %d", s, node.ID, m.Terms[s], leader, term)
		}
	}
}

// A client that knows one node sends assigns straight to each shard's
// leader once it has the table: a run of them is served with no forward.
func TestClientAssignsReachTheLeaderWithoutForward(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := clientOf(t, c.nodes[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	forwards := func() (sum uint64) {
		for _, n := range c.nodes {
			sum += n.srv.Stats().Forwarded
		}
		return sum
	}
	round := 0
	waitUntil(t, 45*time.Second, "30 assigns in a row without a forward", func() bool {
		before := forwards()
		for i := range 30 {
			if _, err := cl.Assign(ctx, fmt.Sprintf("direct-%d-%d", round, i), client.AssignOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		round++
		return forwards() == before
	})
}
