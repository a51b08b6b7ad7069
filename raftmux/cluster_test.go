package raftmux_test

import (
	"context"
	"errors"
	"fmt"
	"os"
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
	// The whole suite runs on either storage path.
	cfg.PipelineWrites = os.Getenv("RAFTMUX_PIPELINE") != ""
	cfg.AsyncStorageWrites = os.Getenv("RAFTMUX_ASYNC") != ""
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

// infos returns every running host's view of every shard it hosts.
func (c *cluster) infos() map[uint64]map[uint64]raftmux.Info {
	c.t.Helper()
	out := make(map[uint64]map[uint64]raftmux.Info)
	for id, h := range c.hosts {
		inf, err := h.Shards(context.Background())
		if err != nil {
			c.t.Fatal(err)
		}
		m := make(map[uint64]raftmux.Info)
		for _, i := range inf {
			m[i.Shard] = i
		}
		out[id] = m
	}
	return out
}

// leaders returns, for each shard in shards, the running host that claims
// to lead it and whose claim every running replica agrees with; ok is false
// while some shard has none.
func (c *cluster) leaders(shards []uint64) (map[uint64]uint64, bool) {
	inf := c.infos()
	out := make(map[uint64]uint64)
	for _, s := range shards {
		var lead uint64
		for id, m := range inf {
			if i, ok := m[s]; ok && i.Leader == id {
				lead = id
			}
		}
		if lead == 0 {
			return out, false
		}
		for _, m := range inf {
			if i, ok := m[s]; ok && i.Leader != lead {
				return out, false
			}
		}
		out[s] = lead
	}
	return out, true
}

func (c *cluster) waitLeaders(shards []uint64, timeout time.Duration) map[uint64]uint64 {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, ok := c.leaders(shards)
		if ok {
			return l
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("only %d of %d shards have an agreed leader after %v", len(l), len(shards), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *cluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// propose sends cmd to shard's leader, following NotLeader hints.
func (c *cluster) propose(shard uint64, cmd []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ids := c.ids()
	target := ids[0]
	for i := 0; ; i++ {
		h := c.hosts[target]
		if h == nil {
			target = ids[i%len(ids)]
			continue
		}
		res, err := h.Propose(ctx, shard, cmd)
		if err == nil {
			return res.(uint64), nil
		}
		var nl *raftmux.NotLeaderError
		switch {
		case errors.As(err, &nl) && nl.Leader != 0 && c.hosts[nl.Leader] != nil && !errors.Is(err, raftmux.ErrOutcomeUnknown):
			target = nl.Leader
		case errors.Is(err, raftmux.ErrNotLeader), errors.Is(err, raftmux.ErrDropped), errors.Is(err, raftmux.ErrUnknownShard):
			target = ids[i%len(ids)]
			time.Sleep(5 * time.Millisecond)
		default:
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("propose shard %d: %w", shard, ctx.Err())
		}
	}
}

// checkSameLogs verifies that every running replica of each shard applied
// the same commands at the same indexes (over the indexes both applied),
// and that each replica's log is gap-free after its snapshot base.
func (c *cluster) checkSameLogs(shards []uint64) {
	c.t.Helper()
	for _, s := range shards {
		var ref map[uint64]string
		var refID uint64
		for _, id := range c.ids() {
			base, log := c.kvs[id].Log(s)
			m := make(map[uint64]string, len(log))
			prev := base
			for _, a := range log {
				if a.Index <= prev {
					c.t.Fatalf("shard %d host %d: index %d applied after %d", s, id, a.Index, prev)
				}
				prev = a.Index
				m[a.Index] = a.Data
			}
			if ref == nil {
				ref, refID = m, id
				continue
			}
			for idx, d := range m {
				if rd, ok := ref[idx]; ok && rd != d {
					c.t.Fatalf("shard %d index %d: host %d applied %q, host %d applied %q", s, idx, refID, rd, id, d)
				}
			}
		}
	}
}

func shardList(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}
