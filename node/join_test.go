package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
)

func TestFourthNodeGetsItsShareAndNothingIsLost(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	const topics = 200
	before := map[string]client.Assignment{}
	for i := range topics {
		topic := fmt.Sprintf("kept-%03d", i)
		a, err := cl.Assign(ctx, topic, client.AssignOptions{})
		if err != nil {
			t.Fatalf("assign %s: %v", topic, err)
		}
		before[topic] = a
	}
	// "a4" sorts before every member: it must still join, not bootstrap.
	n4 := c.add("a4")
	select {
	case <-n4.Ready():
	case <-time.After(20 * time.Second):
		t.Fatalf("n4 not ready: %+v", n4.Status())
	}
	// With 4 nodes and RF 3, n4's fair share is 3/4 of the shards and a
	// quarter of the leaderships; wait for most of it.
	waitUntil(t, 40*time.Second, "n4 hosts and leads its share, RF replicas everywhere", func() bool {
		st := n4.Status()
		hosted := 0
		for _, n := range c.nodes {
			hosted += n.Status().ShardsHosted
		}
		return st.ShardsHosted >= testShards/2 && st.ShardsLed >= testShards/8 && hosted == testShards*3
	})
	for _, n := range c.nodes {
		t.Logf("%s: %+v", n.ID(), n.Status())
	}
	// The shard-leader table reached n4 by pull as well as by gossip.
	waitUntil(t, 10*time.Second, "n4 merged a pulled shard-leader table", func() bool { return n4.Stats().MetadataSyncs > 0 })
	c4 := clientOf(t, n4)
	for topic, want := range before {
		for _, lin := range []bool{true, false, false} { // the second plain one may hit the cache
			got, err := c4.Lookup(ctx, topic, lin)
			if err != nil || got.Owner != want.Owner || got.Epoch != want.Epoch {
				t.Fatalf("lookup(linearizable %v) %s through n4 = %+v, %v; want %+v", lin, topic, got, err, want)
			}
		}
	}
	if st := n4.Stats(); st.Forwarded == 0 {
		t.Fatalf("n4 forwarded nothing: %+v", st)
	}
	// Every shard still has RF voters.
	shards, err := c4.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shards {
		if len(s.Replicas) != 3 || s.Leader == "" {
			t.Fatalf("shard %+v after the join", s)
		}
	}
}

func TestDeadNodeIsReplacedInEveryShardItHeld(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 4)
	victim := c.nodes[3]
	dead := RaftID(victim.ID())
	if err := victim.Close(); err != nil {
		t.Fatal(err)
	}
	live := c.nodes[:3]
	defer func() {
		if t.Failed() {
			for _, n := range live {
				infos, _ := n.host.Shards(context.Background())
				t.Logf("%s hosts %d", n.ID(), len(infos))
				for _, in := range infos {
					if len(in.Voters) != 3 || len(in.Learners) != 0 || slices.Contains(in.Voters, dead) || in.Leader == 0 {
						t.Logf("%s shard %d leader %x voters %x learners %x", n.ID(), in.Shard, in.Leader, in.Voters, in.Learners)
					}
				}
			}
		}
	}()
	waitUntil(t, 20*time.Second, "every shard has 3 live voters", func() bool {
		hosted := 0
		for _, n := range live {
			infos, err := n.host.Shards(t.Context())
			if err != nil {
				return false
			}
			for _, in := range infos {
				if len(in.Voters) != 3 || len(in.Learners) != 0 {
					return false
				}
				for _, v := range in.Voters {
					if v == dead {
						return false
					}
				}
			}
			hosted += len(infos)
		}
		return hosted == testShards*3
	})
	cl := clientOf(t, live[0])
	if _, err := cl.Assign(t.Context(), "after-replacement", client.AssignOptions{}); err != nil {
		t.Fatal(err)
	}
}
