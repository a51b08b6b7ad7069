package node

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// TestLatenciesCountWhatHappened: on a real 3-node cluster, each client
// request lands in the histogram of its op and outcome, on the node that
// answered it; proposals, synced commits, forwards and lease rounds are
// timed.
func TestLatenciesCountWhatHappened(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const assigns = 20
	// A client that asks node 0 only, never the shard leaders directly,
	// so that forwards are timed too.
	addr, _, _ := c.nodes[0].Addrs()
	cl, err := client.New(client.Config{Servers: []string{addr}, ClusterID: 42, RequestTimeout: 3 * time.Second,
		MaxRetries: 20, LeaderTableRefresh: -1, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i := range assigns {
		if _, err := cl.Assign(ctx, "lat-"+string(rune('a'+i)), client.AssignOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cl.Lookup(ctx, "never-assigned", true); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("lookup: %v", err)
	}
	// Lease rounds run every LeaseRenewInterval; wait for one to come back.
	waitUntil(t, 10*time.Second, "a lease round trip", func() bool {
		for _, n := range c.nodes {
			if n.Latencies().LeaseRound.Count > 0 {
				return true
			}
		}
		return false
	})

	counts := map[[2]string]uint64{}
	var commits, syncs, forwards uint64
	for _, n := range c.nodes {
		l := n.Latencies()
		for _, r := range l.Requests {
			counts[[2]string{r.Op, r.Code}] += r.Hist.Count
			if r.Hist.Cumulative[len(r.Hist.Cumulative)-1] > r.Hist.Count || r.Hist.SumSeconds <= 0 {
				t.Errorf("%s %s: %+v", r.Op, r.Code, r.Hist)
			}
		}
		commits += l.RaftCommit.Count
		syncs += l.StorageSync.Count
		forwards += l.Forward.Count
	}
	// The client sends each request to the node it chose (a retry after
	// NotLeader counts again, with its code): every assign answered OK
	// once.
	if counts[[2]string{"assign", "OK"}] != assigns {
		t.Errorf("assign OK counted %d times, want %d (all: %v)", counts[[2]string{"assign", "OK"}], assigns, counts)
	}
	if counts[[2]string{"lookup", "NotFound"}] != 1 {
		t.Errorf("lookup NotFound counted %d times (all: %v)", counts[[2]string{"lookup", "NotFound"}], counts)
	}
	if commits < assigns || syncs == 0 {
		t.Errorf("raft commits timed %d (want at least %d), storage syncs %d", commits, assigns, syncs)
	}
	// The client asked node 0 only; assigns of shards it does not lead
	// were forwarded, unless it leads every shard.
	if led := c.nodes[0].Stats().ShardsLed; led < int(c.nodes[0].cfg.Shards) && forwards == 0 {
		t.Errorf("no forward timed, though n1 leads %d of %d shards", led, c.nodes[0].cfg.Shards)
	}
}
