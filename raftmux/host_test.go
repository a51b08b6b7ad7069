package raftmux_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

// shardCount is 1,024 in normal runs; the race detector's slowdown on a
// small shared machine makes 64 the honest size there (and in -short).
func shardCount() int {
	if raceEnabled || testing.Short() {
		return 64
	}
	return 1024
}

func TestConfigValidation(t *testing.T) {
	st, _ := raftmuxtest.NewMemStore("")
	base := raftmux.Config{NodeID: 1, Storage: st, Transport: raftmuxtest.NewNetwork().Endpoint(1), StateMachine: raftmuxtest.NewKV(st, false)}
	for name, tc := range map[string]func(*raftmux.Config){
		"zero node id":        func(c *raftmux.Config) { c.NodeID = 0 },
		"no storage":          func(c *raftmux.Config) { c.Storage = nil },
		"heartbeat>=election": func(c *raftmux.Config) { c.HeartbeatTicks, c.ElectionTicks = 5, 5 },
		"negative workers":    func(c *raftmux.Config) { c.Workers = -1 },
	} {
		t.Run(name, func(t *testing.T) {
			c := base
			tc(&c)
			if _, err := raftmux.NewHost(c); !errors.Is(err, raftmux.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

func TestShardsElectAndReplicateInOrder(t *testing.T) {
	n := shardCount()
	c := newCluster(t, 3, nil)
	shards := shardList(n)
	c.bootstrap(n, []uint64{1, 2, 3})
	leaders := c.waitLeaders(shards, 20*time.Second)
	counts := map[uint64]int{}
	for _, l := range leaders {
		counts[l]++
	}
	if len(counts) != 3 {
		t.Fatalf("leaders not spread over the three hosts: %v", counts)
	}
	const perShard = 3
	for i := 0; i < perShard; i++ {
		for _, s := range shards {
			if _, err := c.propose(s, fmt.Appendf(nil, "s%d-c%d", s, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Every replica applies every command, in the same order.
	c.waitFor("all replicas to apply", 10*time.Second, func() bool {
		for _, id := range c.ids() {
			for _, s := range shards {
				if _, log := c.kvs[id].Log(s); len(log) < perShard {
					return false
				}
			}
		}
		return true
	})
	c.checkSameLogs(shards)
	for _, id := range c.ids() {
		if f := c.stores[id].Fsyncs(); f == 0 || f > int64(n*perShard*2) {
			t.Fatalf("host %d: %d fsyncs for %d shards × %d proposals: group commit not batching", id, f, n, perShard)
		}
	}
}

func TestProposeToFollowerIsNotLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	l := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	follower := l%3 + 1
	_, err := c.hosts[follower].Propose(context.Background(), 0, []byte("x"))
	var nl *raftmux.NotLeaderError
	if !errors.As(err, &nl) || nl.Leader != l {
		t.Fatalf("err = %v, want NotLeaderError with hint %d", err, l)
	}
	if _, err := c.hosts[l].Propose(context.Background(), 99, []byte("x")); !errors.Is(err, raftmux.ErrUnknownShard) {
		t.Fatalf("unknown shard: err = %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.hosts[l].Propose(ctx, 0, []byte("x")); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled ctx: err = %v", err)
	}
}

// Everything proposed is applied everywhere, in order.
func TestReplicateInOrder(t *testing.T) {
	testReplicateInOrder(t, func(*raftmux.Config) {})
}

func testReplicateInOrder(t *testing.T, tune func(*raftmux.Config)) {
	const n = 32
	c := newCluster(t, 3, tune)
	shards := shardList(n)
	c.bootstrap(n, []uint64{1, 2, 3})
	c.waitLeaders(shards, 10*time.Second)
	errc := make(chan error, n)
	for _, s := range shards {
		go func() {
			for i := 0; i < 5; i++ {
				if _, err := c.propose(s, fmt.Appendf(nil, "s%d-%d", s, i)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range shards {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor("all replicas to apply", 10*time.Second, func() bool {
		for _, id := range c.ids() {
			for _, s := range shards {
				if _, log := c.kvs[id].Log(s); len(log) < 5 {
					return false
				}
			}
		}
		return true
	})
	c.checkSameLogs(shards)
}

// A replica opens knowing no leader, and tells OnLeaderChange so before
// anything else: a replica that never learns one (its group removed it
// while it was away) is then known to be leaderless from its opening,
// not taken for one that follows a leader (the node answers plain
// lookups from a replica only while it knows a leader, or briefly after).
func TestAReplicaOpensKnowingNoLeader(t *testing.T) {
	var mu sync.Mutex
	changes := map[uint64][]raftmux.LeaderChange{}
	c := newCluster(t, 3, func(cfg *raftmux.Config) {
		id, next := cfg.NodeID, cfg.OnLeaderChange
		cfg.OnLeaderChange = func(lc raftmux.LeaderChange) {
			mu.Lock()
			changes[id] = append(changes[id], lc)
			mu.Unlock()
			next(lc)
		}
	})
	c.bootstrap(2, []uint64{1, 2, 3})
	c.waitLeaders(shardList(2), 10*time.Second)
	c.stop(3)
	mu.Lock()
	changes[3] = nil
	mu.Unlock()
	c.start(3)
	c.waitFor("host 3 to follow a leader of both shards again", 10*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		led := map[uint64]bool{}
		for _, lc := range changes[3] {
			led[lc.Shard] = led[lc.Shard] || lc.Leader != 0
		}
		return led[0] && led[1]
	})
	mu.Lock()
	defer mu.Unlock()
	first := map[uint64]raftmux.LeaderChange{}
	for _, lc := range changes[3] {
		if _, ok := first[lc.Shard]; !ok {
			first[lc.Shard] = lc
		}
	}
	for _, s := range shardList(2) {
		if lc := first[s]; lc.Leader != 0 || lc.Term == 0 {
			t.Fatalf("shard %d: the restarted replica's first leader change is %+v, want no leader at its stored term", s, lc)
		}
	}
}
