package raftmux_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

// cluster is a set of hosts in this process over a raftmuxtest.Network.
type cluster struct {
	t      testing.TB
	net    *raftmuxtest.Network
	tune   func(*raftmux.Config)
	logDir string // if set, stores write and fsync a log file there
	hosts  map[uint64]*raftmux.Host
	stores map[uint64]*raftmuxtest.MemStore
	kvs    map[uint64]*raftmuxtest.KV

	mu      sync.Mutex
	changes []raftmux.LeaderChange
}

const testTick = 10 * time.Millisecond

func newCluster(t testing.TB, n int, tune func(*raftmux.Config)) *cluster {
	t.Helper()
	return newClusterLogged(t, n, "", tune)
}

// newClusterLogged is newCluster whose stores fsync a log file in logDir
// on every synced commit.
func newClusterLogged(t testing.TB, n int, logDir string, tune func(*raftmux.Config)) *cluster {
	t.Helper()
	c := &cluster{
		t:      t,
		logDir: logDir,
		net:    raftmuxtest.NewNetwork(),
		tune:   tune,
		hosts:  make(map[uint64]*raftmux.Host),
		stores: make(map[uint64]*raftmuxtest.MemStore),
		kvs:    make(map[uint64]*raftmuxtest.KV),
	}
	for id := uint64(1); id <= uint64(n); id++ {
		c.start(id)
	}
	t.Cleanup(func() { // after stopAll
		for _, st := range c.stores {
			_ = st.Close()
		}
	})
	t.Cleanup(c.stopAll)
	return c
}

// start starts host id, on its existing store if it had one (a restart).
func (c *cluster) start(id uint64) *raftmux.Host {
	c.t.Helper()
	st := c.stores[id]
	if st == nil {
		var err error
		path := ""
		if c.logDir != "" {
			path = filepath.Join(c.logDir, fmt.Sprintf("host%d.log", id))
		}
		if st, err = raftmuxtest.NewMemStore(path); err != nil {
			c.t.Fatal(err)
		}
		c.stores[id] = st
		c.kvs[id] = raftmuxtest.NewKV(st, true)
	}
	cfg := raftmux.Config{
		NodeID:       id,
		Storage:      st,
		Transport:    c.net.Endpoint(id),
		StateMachine: c.kvs[id],
		Workers:      2,
		TickInterval: testTick,
		OnLeaderChange: func(lc raftmux.LeaderChange) {
			c.mu.Lock()
			c.changes = append(c.changes, lc)
			c.mu.Unlock()
		},
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	h, err := raftmux.NewHost(cfg)
	if err != nil {
		c.t.Fatal(err)
	}
	c.hosts[id] = h
	c.net.Register(id, h)
	return h
}

// stop halts host id abruptly: it vanishes from the network.
func (c *cluster) stop(id uint64) {
	c.net.Unregister(id)
	c.hosts[id].Stop()
	delete(c.hosts, id)
}

func (c *cluster) stopAll() {
	for id := range c.hosts {
		c.stop(id)
	}
}

func (c *cluster) ids() []uint64 {
	var ids []uint64
	for id := range c.hosts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// bootstrap creates shards 0..n-1 on voters and has voter shard%len campaign.
func (c *cluster) bootstrap(n int, voters []uint64) {
	c.t.Helper()
	ctx := context.Background()
	for s := uint64(0); s < uint64(n); s++ {
		for _, v := range voters {
			if err := c.hosts[v].Bootstrap(ctx, s, voters); err != nil {
				c.t.Fatal(err)
			}
		}
	}
	for s := uint64(0); s < uint64(n); s++ {
		if err := c.hosts[voters[int(s)%len(voters)]].Campaign(ctx, s); err != nil {
			c.t.Fatal(err)
		}
	}
}

// obs is the cluster as raftmuxtest observes it.
func (c *cluster) obs() raftmuxtest.Hosts {
	return raftmuxtest.Hosts{TB: c.t, IDs: c.ids, Host: func(id uint64) *raftmux.Host { return c.hosts[id] }, KV: func(id uint64) *raftmuxtest.KV { return c.kvs[id] }}
}

// infos returns every running host's view of every shard it hosts.
func (c *cluster) infos() map[uint64]map[uint64]raftmux.Info { return c.obs().Infos() }

func (c *cluster) leaders(shards []uint64) (map[uint64]uint64, bool) { return c.obs().Leaders(shards) }

func (c *cluster) waitLeaders(shards []uint64, timeout time.Duration) map[uint64]uint64 {
	c.t.Helper()
	return c.obs().WaitLeaders(shards, timeout)
}

func (c *cluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	raftmuxtest.WaitFor(c.t, what, timeout, cond)
}

// propose sends cmd to shard's leader, following NotLeader hints.
func (c *cluster) propose(shard uint64, cmd []byte) (uint64, error) {
	return c.obs().Propose(shard, cmd, 15*time.Second)
}

func (c *cluster) checkSameLogs(shards []uint64) {
	c.t.Helper()
	c.obs().CheckSameLogs(shards)
}
func shardList(n int) []uint64 { return raftmuxtest.ShardList(n) }
