package reconcile

import (
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/ddtest"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	good := func() Config {
		return Config{Self: "n1", Shards: 4, Replicas: 3, MaxConfChanges: 4, MaxTransfers: 64, BootstrapExpect: 1,
			Interval: time.Second, Lease: time.Second, RaftID: specID,
			Leaders: router.NewLeaderTable(4), Env: &specEnv{}}
	}
	if _, err := New(good()); err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string]func(*Config){
		"no self":              func(c *Config) { c.Self = "" },
		"no shards":            func(c *Config) { c.Shards = 0 },
		"no replicas":          func(c *Config) { c.Replicas = 0 },
		"no conf changes":      func(c *Config) { c.MaxConfChanges = 0 },
		"no transfers":         func(c *Config) { c.MaxTransfers = 0 },
		"no bootstrap members": func(c *Config) { c.BootstrapExpect = 0 },
		"no interval":          func(c *Config) { c.Interval = 0 },
		"no lease":             func(c *Config) { c.Lease = 0 },
		"no raft ids":          func(c *Config) { c.RaftID = nil },
		"no leader table":      func(c *Config) { c.Leaders = nil },
		"no env":               func(c *Config) { c.Env = nil },
	} {
		c := good()
		edit(&c)
		if _, err := New(c); err == nil || !strings.HasPrefix(err.Error(), "reconcile: ") {
			t.Errorf("%s: New = %v", name, err)
		}
	}
}

// TestTheControllerTakesConcurrentCallers: the reconcile task's passes,
// the raft host's answers, a forward's answer, an operator's pin and the
// node's stats reach the Controller from goroutines of their own (run
// with -race).
func TestTheControllerTakesConcurrentCallers(t *testing.T) {
	s := newSpec(t)
	var out strings.Builder
	s.newView(t, ddtest.NewArgs(t, map[string][]string{"live": {"n1", "n2", "n3", "n4", "n5", "n6", "n7"}}), &out)
	v, c := s.view, s.c
	if _, err := s.leaders.Update(3, "n4", 2); err != nil {
		t.Fatal(err)
	}
	// n1 leads shard 1 as the ring places it, but for its preferred
	// leader (a pin, moves in flight, or a transfer), and shard 2 with a
	// replica to add; shard 3 is a stray.
	infos := []raftmux.Info{
		{Shard: 1, Leader: 1, Voters: []uint64{6, 3, 1}},
		{Shard: 2, Leader: 1, Voters: []uint64{1, 2, 3}},
		{Shard: 3, Leader: 4, Voters: []uint64{4, 3, 1}},
	}
	now := ddtest.T0.Add(time.Hour)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			at := now.Add(time.Duration(i) * 500 * time.Millisecond)
			if c.ManageDue(v, at, uint64(i)) && c.BeginPass() {
				for _, st := range c.Manage(v, uint64(i), infos, at).Steps {
					c.StepDone(st, true, at)
				}
			}
			if c.OwnersDue(v, at, nil) {
				if l := c.Owners(v, at, nil, true, uint64(i), 0); l != nil {
					l.Shard(true, ddtest.T0, nil).Moves("n9")
					l.Done()
				}
			}
		}
	})
	wg.Go(func() {
		for range 200 {
			c.Pin(1, v.Placement)
			c.Pinned(1, v)
			if c.BeginReassign(1, 1) {
				c.Reassigned(1)
			}
		}
	})
	wg.Go(func() {
		sl := &wire.ShardList{Shards: []wire.ShardInfo{{Shard: 3, Leader: []byte("n4")}}}
		for range 200 {
			for _, d := range c.Judge(Ask{Leader: "n4", Shards: []uint64{3}}, sl) {
				c.Dropped(d, nil)
			}
			_ = c.Strays()
		}
	})
	wg.Wait()
}

// TestTransfersHaveABudgetOfTheirOwn: a pass starts up to MaxTransfers
// leadership transfers beside up to MaxConfChanges configuration changes;
// a full transfer budget holds no configuration change back, and the
// transfers left over wait for a later pass.
func TestTransfersHaveABudgetOfTheirOwn(t *testing.T) {
	s := newSpec(t)
	var out strings.Builder
	s.newView(t, ddtest.NewArgs(t, map[string][]string{"live": {"n1", "n2", "n3", "n4"}, "drained": {"n1"}}), &out)
	v, c := s.view, s.c
	c.cfg.MaxTransfers = 1
	// n1 is drained: shards 1 and 2 go to their preferred replicas (n3,
	// n2); shard 0 lacks n4.
	infos := []raftmux.Info{
		{Shard: 0, Leader: 1, Voters: []uint64{3, 1}},
		{Shard: 1, Leader: 1, Voters: []uint64{3, 1, 4}},
		{Shard: 2, Leader: 1, Voters: []uint64{1, 2, 3}},
	}
	at := ddtest.T0.Add(time.Hour)
	if !c.BeginPass() {
		t.Fatal("a pass is in flight")
	}
	steps := c.Manage(v, 0, infos, at).Steps
	want := []Step{{Kind: AddLearner, Shard: 0, Node: 4, Name: "n4"}, {Kind: Transfer, Shard: 1, Node: 3, Name: "n3"}}
	if !slices.Equal(steps, want) {
		t.Fatalf("steps %v, want %v", steps, want)
	}
	for _, st := range steps {
		c.StepDone(st, true, at)
	}
	infos[0].Learners = []uint64{4}
	infos[1].Leader = 3
	if !c.BeginPass() {
		t.Fatal("the first pass did not end")
	}
	steps = c.Manage(v, 1, infos, at.Add(time.Second)).Steps
	want = []Step{{Kind: Promote, Shard: 0, Node: 4, Name: "n4"}, {Kind: Transfer, Shard: 2, Node: 2, Name: "n2"}}
	if !slices.Equal(steps, want) {
		t.Fatalf("second pass: steps %v, want %v", steps, want)
	}
}
