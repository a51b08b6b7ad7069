package raftmux_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
	"github.com/shoalmq/shoal/shardstore"
)

// pebbleStorage is the shard store as raftmux.Storage, as the node wires
// it (raftio does the same; importing it would bring the network stack).
type pebbleStorage struct{ s *shardstore.Store }

func (p pebbleStorage) Storage(shard uint64) (raft.Storage, error) { return p.s.Storage(shard) }
func (p pebbleStorage) NewBatch() raftmux.Batch                    { return pebbleBatch{p.s.NewBatch()} }
func (p pebbleStorage) Applied(shard uint64) (uint64, error)       { return p.s.Applied(shard) }
func (p pebbleStorage) Compact(shard, idx uint64) error            { return p.s.Compact(shard, idx) }
func (p pebbleStorage) DeleteShard(shard uint64, t raftmux.Tombstone) error {
	return p.s.DeleteShard(shard, shardstore.Tombstone(t))
}
func (p pebbleStorage) Tombstone(shard uint64) (raftmux.Tombstone, bool, error) {
	t, ok, err := p.s.Tombstone(shard)
	return raftmux.Tombstone(t), ok, err
}
func (p pebbleStorage) Shards() ([]uint64, error) { return p.s.Shards(), nil }

func (p pebbleStorage) SnapshotData(shard uint64) (*raftpb.SnapshotMetadata, io.ReadCloser, error) {
	sr, err := p.s.SnapshotData(shard)
	if err != nil {
		return nil, nil, err
	}
	return sr.Meta(), sr, nil
}

func (p pebbleStorage) ApplySnapshot(shard uint64, snap *raftpb.Snapshot, data io.Reader) error {
	br := bufio.NewReader(data)
	if _, err := br.Peek(1); err == io.EOF {
		return p.s.ApplySnapshot(shard, snap, nil)
	}
	return p.s.ApplySnapshot(shard, snap, br)
}

type pebbleBatch struct{ *shardstore.Batch }

// storeCluster is a set of hosts on real Pebble stores (shardstore through
// raftio) over a raftmuxtest.Network: the store's own rules for who may
// write a shard when are what the engine must keep.
type storeCluster struct {
	t      *testing.T
	net    *raftmuxtest.Network
	hosts  map[uint64]*raftmux.Host
	stores map[uint64]*shardstore.Store
	kvs    map[uint64]*raftmuxtest.KV
}

func newStoreCluster(t *testing.T, n int, tune func(*raftmux.Config)) *storeCluster {
	t.Helper()
	c := &storeCluster{
		t:      t,
		net:    raftmuxtest.NewNetwork(),
		hosts:  make(map[uint64]*raftmux.Host),
		stores: make(map[uint64]*shardstore.Store),
		kvs:    make(map[uint64]*raftmuxtest.KV),
	}
	base := t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	t.Cleanup(func() {
		for id, h := range c.hosts {
			c.net.Unregister(id)
			h.Stop()
			if err := h.Err(); err != nil {
				t.Errorf("host %d halted: %v", id, err)
			}
			if err := c.stores[id].Close(); err != nil {
				t.Errorf("host %d: close store: %v", id, err)
			}
		}
	})
	for id := uint64(1); id <= uint64(n); id++ {
		st, err := shardstore.Open(filepath.Join(base, fmt.Sprint(id)), shardstore.Config{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		c.stores[id] = st
		c.kvs[id] = raftmuxtest.NewKV(nil, true)
		cfg := raftmux.Config{
			NodeID:       id,
			Storage:      pebbleStorage{st},
			Transport:    c.net.Endpoint(id),
			StateMachine: c.kvs[id],
			Workers:      2,
			TickInterval: testTick,
			Logger:       quiet,
		}
		if tune != nil {
			tune(&cfg)
		}
		h, err := raftmux.NewHost(cfg)
		if err != nil {
			_ = st.Close()
			t.Fatal(err)
		}
		c.hosts[id] = h
		c.net.Register(id, h)
	}
	return c
}

func (c *storeCluster) obs() raftmuxtest.Hosts {
	ids := func() []uint64 { return []uint64{1, 2, 3}[:len(c.hosts)] }
	return raftmuxtest.Hosts{TB: c.t, IDs: ids, Host: func(id uint64) *raftmux.Host { return c.hosts[id] }, KV: func(id uint64) *raftmuxtest.KV { return c.kvs[id] }}
}

// TestLoadOnPebbleAppliesTheSameEntriesEverywhere drives many concurrent
// proposals into few groups on real stores, with a small compaction
// threshold, with and without the ack wait: every proposal succeeds, and
// every replica applies the same entries in the same order.
func TestLoadOnPebbleAppliesTheSameEntriesEverywhere(t *testing.T) {
	for _, mode := range []struct {
		name    string
		ackWait time.Duration
	}{{"Sync", 0}, {"SyncWithoutAckWait", -1}} {
		t.Run(mode.name, func(t *testing.T) {
			c := newStoreCluster(t, 3, func(cfg *raftmux.Config) {
				cfg.AckWait = mode.ackWait
				cfg.CompactionOverhead, cfg.CompactionKeep = 64, 8
				// Elections under a load of fsyncs on a shared machine
				// are not what this test is about.
				cfg.TickInterval = 50 * time.Millisecond
			})
			shards := shardList(2)
			for s := range shards {
				for id, h := range c.hosts {
					if err := h.Bootstrap(t.Context(), uint64(s), []uint64{1, 2, 3}); err != nil {
						t.Fatalf("host %d: bootstrap %d: %v", id, s, err)
					}
				}
				if err := c.hosts[uint64(s)+1].Campaign(t.Context(), uint64(s)); err != nil {
					t.Fatal(err)
				}
			}
			c.obs().WaitLeaders(shards, 10*time.Second)
			clients, each := 24, 60
			if raceEnabled {
				each = 25
			}
			var mu sync.Mutex
			acked := map[uint64][]string{} // shard → commands acknowledged
			var wg sync.WaitGroup
			for cl := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					s := shards[cl%len(shards)]
					for i := range each {
						cmd := fmt.Sprintf("c%02d-%04d", cl, i)
						_, err := c.obs().Propose(s, []byte(cmd), 15*time.Second)
						switch {
						case err == nil:
							mu.Lock()
							acked[s] = append(acked[s], cmd)
							mu.Unlock()
						case errors.Is(err, raftmux.ErrOutcomeUnknown):
							// An election under load: it may or may not be
							// applied (or applied twice, once retried).
						default:
							t.Errorf("client %d proposal %d: %v", cl, i, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			if t.Failed() {
				return
			}
			if n := len(acked[0]) + len(acked[1]); n < clients*each/2 {
				t.Fatalf("only %d of %d proposals acknowledged", n, clients*each)
			}
			raftmuxtest.WaitFor(t, "every replica to apply every acknowledged proposal", 10*time.Second, func() bool {
				for _, kv := range c.kvs {
					for _, s := range shards {
						base, log := kv.Log(s)
						if base > 1 {
							continue // caught up by a snapshot
						}
						seen := make(map[string]bool, len(log))
						for _, a := range log {
							seen[a.Data] = true
						}
						for _, cmd := range acked[s] {
							if !seen[cmd] {
								return false
							}
						}
					}
				}
				return true
			})
			c.obs().CheckSameLogs(shards)
		})
	}
}
