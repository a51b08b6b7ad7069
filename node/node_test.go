package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

func assignCount() int {
	if raceEnabled {
		return 300
	}
	return 1000
}

func TestThreeNodesAssignThroughAnyNodeAndLookupsAgree(t *testing.T) {
	t.Parallel()
	testAssignThroughAnyNode(t, startCluster(t, 3))
}

// The same over gnet event loops (Config.NetLoops) instead of goroutines.
func TestThreeNodesOnEventLoopsAssignAndLookupsAgree(t *testing.T) {
	t.Parallel()
	testAssignThroughAnyNode(t, startClusterWith(t, 3, func(c *Config) { c.NetLoops = true }))
}

func testAssignThroughAnyNode(t *testing.T, c *testCluster) {
	var clients []*client.Client
	for _, n := range c.nodes {
		clients = append(clients, clientOf(t, n))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	total := assignCount()
	assigned := make(map[string]client.Assignment, total)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range total {
		topic := fmt.Sprintf("topic-%04d", i)
		a, err := clients[rng.IntN(len(clients))].Assign(ctx, topic, client.AssignOptions{})
		if err != nil {
			t.Fatalf("assign %s: %v", topic, err)
		}
		if a.Owner == "" || a.Epoch == 0 || a.OwnerAddr == "" {
			t.Fatalf("assign %s: incomplete answer %+v", topic, a)
		}
		assigned[topic] = a
	}
	owners := map[string]int{}
	for topic, want := range assigned {
		owners[want.Owner]++
		for i, cl := range clients {
			got, err := cl.Lookup(ctx, topic, i == 0)
			if err != nil {
				t.Fatalf("lookup %s at %s: %v", topic, c.nodes[i].ID(), err)
			}
			if got.Owner != want.Owner || got.Epoch != want.Epoch || got.Shard != want.Shard {
				t.Fatalf("lookup %s at %s = %+v, assign said %+v", topic, c.nodes[i].ID(), got, want)
			}
		}
	}
	if len(owners) != 3 {
		t.Errorf("owners %v: want topics spread over the 3 nodes", owners)
	}
	// Re-assigning is idempotent.
	for topic, want := range assigned {
		a, err := clients[0].Assign(ctx, topic, client.AssignOptions{})
		if err != nil || a.Owner != want.Owner || a.Epoch != want.Epoch {
			t.Fatalf("re-assign %s = %+v, %v; want %+v", topic, a, err, want)
		}
		break
	}
	// Every owner was told to open its topics.
	waitUntil(t, 10*time.Second, "owners hold their topics", func() bool {
		sum := 0
		for _, n := range c.nodes {
			sum += n.Status().TopicsOwned
		}
		return sum == total
	})
	if _, err := clients[1].Lookup(ctx, "never-assigned", true); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("lookup of an unknown topic: %v, want NotFound", err)
	}
}
