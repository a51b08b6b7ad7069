package sim

import (
	"fmt"
	"testing"
	"time"
)

// TestScaleSmoke runs scale mode on a small cluster: every figure is
// measured, and a seed repeats them (all but the wall-clock ones).
func TestScaleSmoke(t *testing.T) {
	cfg := ScaleConfig{Seed: 3, Nodes: 20, Window: 10 * time.Second, Bound: 30 * time.Second}
	a, err := Scale(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d nodes: %.1f msgs/s and %.0f bytes/s per node, leaders max %d, join seen %v placed %v, kill dead %v leaders %v, wall %v",
		a.Nodes, a.Sent.Msgs, a.Sent.Bytes, a.LeadersMax, a.JoinSeen, a.JoinPlaced, a.KillDead, a.KillLeaders, a.Wall)
	switch {
	case a.Assigned != a.Topics:
		t.Errorf("%d of %d assigns acknowledged", a.Assigned, a.Topics)
	case a.Sent.Msgs == 0 || a.Classes["swim"].Msgs == 0 || a.Classes["lease"].Msgs == 0 || a.Classes["metadata"].Msgs == 0:
		t.Errorf("traffic not counted: %+v", a.Classes)
	case a.LeadersMax == 0 || a.LeadersMean != 1 || a.ReplicasMean != 3:
		t.Errorf("leaders max %d mean %.2f, replicas mean %.2f: want a leader and 3 replicas per node on average", a.LeadersMax, a.LeadersMean, a.ReplicasMean)
	case a.JoinSeen < 0 || a.JoinReady < 0 || a.JoinPlaced < 0 || a.JoinShards == 0:
		t.Errorf("join did not converge: seen %v, ready %v, placed %v (%d shards)", a.JoinSeen, a.JoinReady, a.JoinPlaced, a.JoinShards)
	case a.KillSuspect < 0 || a.KillDead < 0 || a.KillLeaders < 0 || a.KillLed == 0:
		t.Errorf("kill did not converge: suspect %v, dead %v, leaders %v (%d led)", a.KillSuspect, a.KillDead, a.KillLeaders, a.KillLed)
	}
	for _, v := range a.Violations {
		t.Errorf("checkers: %v", v)
	}
	if raceEnabled || testing.Short() {
		return
	}
	b, err := Scale(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*ScaleResult{a, b} {
		r.WallPerNode, r.CPUPerNode, r.HeapBytes, r.MaxRSS, r.Wall, r.Load = 0, 0, 0, 0, 0, 0
	}
	if ja, jb := fmt.Sprintf("%+v", *a), fmt.Sprintf("%+v", *b); ja != jb {
		t.Fatalf("same seed, different figures:\n  %s\n  %s", ja, jb)
	}
}
