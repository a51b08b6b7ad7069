package node

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
)

// A replica that believes it belongs to a group that no longer counts it
// (as one removed while cut off does) is found, checked with the shard's
// leader, and dropped with its data; members are never dropped.
func TestStrayReplicaIsConfirmedWithTheLeader(t *testing.T) {
	t.Parallel()
	c := startClusterWith(t, 3, func(cfg *Config) {
		cfg.Replicas = 2
		// A stray is judged after thirty reconcile intervals: 3 s, not 6.
		cfg.ReconcileInterval = 100 * time.Millisecond
	})
	n3 := c.node("n3")
	v := n3.view.Load()
	var shard uint32
	var reps []string
	for s := range uint32(testShards) {
		if reps = v.Placement().Replicas(s, reps[:0]); !slices.Contains(reps, "n3") {
			shard = s
			break
		}
	}
	if len(reps) != 2 || slices.Contains(reps, "n3") {
		t.Fatalf("no shard without n3: %v", reps)
	}
	waitUntil(t, 10*time.Second, "a leader for the shard", func() bool {
		l, _, ok := n3.leaders.Get(shard)
		return ok && slices.Contains(reps, l)
	})
	// n3 gets a replica whose configuration names it, which the group's
	// own configuration does not.
	voters := []uint64{RaftID(reps[0]), RaftID(reps[1]), RaftID("n3")}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n3.host.Bootstrap(ctx, uint64(shard), voters); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the stray dropped", func() bool { return n3.Stats().StraysDropped == 1 })
	ctx2, cancel2 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel2()
	infos, err := n3.host.Shards(ctx2)
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(infos, func(in raftmux.Info) bool { return in.Shard == uint64(shard) }) {
		t.Fatalf("shard %d still hosted on n3 after its drop", shard)
	}
	for _, n := range c.nodes[:2] {
		if s := n.Stats(); s.StrayReplicas != 0 || s.StraysDropped != 0 {
			t.Fatalf("%s reports strays: %d confirmed, %d dropped", n.ID(), s.StrayReplicas, s.StraysDropped)
		}
	}
}
