package node

import (
	"context"
	"slices"
	"testing"
	"time"
)

// A replica that believes it belongs to a group that no longer counts it
// (as one removed while cut off does) is found, checked with the shard's
// leader, and reported; members are never reported.
func TestStrayReplicaIsConfirmedWithTheLeader(t *testing.T) {
	c := startClusterWith(t, 3, func(cfg *Config) { cfg.Replicas = 2 })
	n3 := c.node("n3")
	v := n3.view.Load()
	var shard uint32
	var reps []string
	for s := range uint32(testShards) {
		if reps = v.placement.Replicas(s, reps[:0]); !slices.Contains(reps, "n3") {
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
	waitUntil(t, 30*time.Second, "the stray confirmed", func() bool { return n3.Stats().StrayReplicas == 1 })
	if got := n3.strayShards(); !slices.Equal(got, []uint64{uint64(shard)}) {
		t.Fatalf("strays %v, want [%d]", got, shard)
	}
	for _, n := range c.nodes[:2] {
		if got := n.Stats().StrayReplicas; got != 0 {
			t.Fatalf("%s reports %d strays", n.ID(), got)
		}
	}
}
