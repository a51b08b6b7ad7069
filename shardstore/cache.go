package shardstore

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"go.etcd.io/raft/v3/raftpb"
)

// entryOverhead is the memory an entry costs beyond its data: the Entry
// value in the cache's slice (48 bytes; it has no pointer fields of its own
// to allocate).
const entryOverhead = int64(unsafe.Sizeof(raftpb.Entry{}))

func entryCost(e *raftpb.Entry) int64 { return int64(len(e.Data)) + entryOverhead }

// entryCache accounts the memory of every shard's cached entries against one
// budget and evicts whole shard caches in CLOCK order when it is exceeded: a
// shard read or appended since the hand last passed gets a second chance.
type entryCache struct {
	budget   int64
	shardMax int64
	used     atomic.Int64

	evictMu sync.Mutex // one evictor at a time; guards hand
	hand    int
}

func (c *entryCache) init(budget int64) {
	c.budget = budget
	c.shardMax = budget / shardCacheShare
}

func (c *entryCache) charge(n int64)  { c.used.Add(n) }
func (c *entryCache) release(n int64) { c.used.Add(-n) }

// maybeEvict drops cold shards' caches until usage is within budget. Shards
// whose lock is held are skipped, so a committing goroutine never waits on
// another shard's reader.
func (s *Store) maybeEvict() {
	c := &s.cache
	if c.used.Load() <= c.budget {
		return
	}
	c.evictMu.Lock()
	defer c.evictMu.Unlock()
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := len(s.ring)
	// Two full turns: the first clears reference bits, the second evicts.
	for step := 0; step < 2*n && c.used.Load() > c.budget; step++ {
		if c.hand >= n {
			c.hand = 0
		}
		r := s.ring[c.hand]
		c.hand++
		if r.cacheBytes.Load() == 0 {
			continue
		}
		if r.ref.Swap(false) {
			continue
		}
		if !r.mu.TryLock() {
			continue
		}
		c.release(r.dropCacheLocked())
		r.mu.Unlock()
	}
}
