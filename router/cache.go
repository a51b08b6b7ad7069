package router

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/zeebo/xxh3"
)

// Route is where a topic lives: the node that owns it, the node's client
// address, and the ownership epoch the route was learned at.
type Route struct {
	Owner string
	Addr  string
	Epoch uint64
}

// CacheConfig configures NewCache.
type CacheConfig struct {
	// Capacity is the most entries the cache holds. Default 65536. It is
	// rounded up to a multiple of the shard count; Cache.Capacity reports
	// the bound in force.
	Capacity int
	// Shards is the number of independently locked parts, rounded up to a
	// power of two. Default 64, lowered so that each part holds at least
	// 16 entries (eviction within a tiny part would not keep hot topics).
	Shards int
}

// Defaults and limits of CacheConfig.
const (
	DefaultCacheCapacity = 65536
	DefaultCacheShards   = 64
	MaxCacheCapacity     = 1 << 28
	MaxCacheShards       = 1 << 12
	minEntriesPerShard   = 16
	// A lock-free read that keeps racing with writers of its part gives up
	// after this many tries and reads under the part's lock.
	maxReadTries = 4
)

// CacheStats are the cache's counters since it was made.
type CacheStats struct {
	Hits      uint64
	Misses    uint64
	Evictions uint64
	Len       int // entries resident, including invalidated ones kept as fences
}

// Cache maps topics to routes: topic → (owner, address, epoch). It is
// bounded and evicts with CLOCK (a hit sets an entry's reference bit; the
// eviction hand clears set bits and takes the first entry found clear), so
// topics read between evictions stay while one-off lookups go first.
//
// Epochs only go forward. A Put older than the cached epoch is ignored.
// Invalidate(topic, e) hides an entry whose epoch is not newer than e; the
// hidden entry stays as a fence with epoch max(cached, e), so a late Put of
// an older route is still ignored, until eviction reclaims it. An evicted
// entry's epoch is forgotten: the owner's epoch check, not the cache, is
// what keeps a stale route from being used.
//
// Safe for concurrent use. Reads take no lock: the cache is split into parts
// by topic hash, each an open-addressing table (linear probing, deletion by
// backward shift) over a fixed array of entries. Every entry is guarded by a
// sequence counter that writers make odd while they change it, and every
// part by one that writers make odd while they move index slots; a reader
// retries when either changed under it. Writers lock their part. All shared
// words are accessed atomically. Get on a hit and Put of a present topic
// allocate nothing: routes hand back the strings given to Put.
type Cache struct {
	counters [counterStripes]counterStripe
	parts    []cachePart
	mask     uint64
	perPart  int
	capacity int
}

type cachePart struct {
	// Read by every Get.
	ver     atomic.Uint64 // odd while index slots move
	index   []atomic.Uint32
	imask   uint64
	entries []cacheEntry
	_       [64]byte
	// Writers only, under mu.
	mu        sync.Mutex
	free      []uint32
	hand      int
	used      atomic.Int64
	evictions atomic.Uint64
	_         [64]byte
}

// counterStripes is the number of hit/miss counter pairs, each on its own
// cache line. One shared counter written by every Get would bounce its line
// between cores on every read and cost more than the lookup itself.
const counterStripes = 64

type counterStripe struct {
	hits   atomic.Uint64
	misses atomic.Uint64
	_      [48]byte
}

// stripe picks the counters for the calling goroutine by the address of a
// slot on its stack: goroutine stacks are disjoint, so concurrent readers
// mostly count on lines of their own. The choice affects speed only; every
// count is atomic wherever it lands.
//
//go:nosplit
func (c *Cache) stripe() *counterStripe {
	var probe byte
	a := uint64(uintptr(unsafe.Pointer(&probe))) >> 11
	return &c.counters[(a*0x9e3779b97f4a7c15)>>(64-6)]
}

type cacheEntry struct {
	seq   atomic.Uint64 // odd while a writer changes the entry
	hash  atomic.Uint64
	key   atomicString
	owner atomicString
	addr  atomicString
	epoch atomic.Uint64
	live  atomic.Uint32 // 0: invalidated, kept as an epoch fence
	ref   atomic.Uint32 // CLOCK reference bit
}

// atomicString is a string whose two words are stored atomically; a reader
// must check the entry's sequence counter before it uses the bytes.
type atomicString struct {
	p atomic.Pointer[byte]
	n atomic.Uint64
}

func (a *atomicString) store(s string) {
	a.p.Store(unsafe.StringData(s))
	a.n.Store(uint64(len(s)))
}

func (a *atomicString) load() string {
	return unsafe.String(a.p.Load(), int(a.n.Load()))
}

// NewCache returns an empty cache.
func NewCache(cfg CacheConfig) (*Cache, error) {
	capacity, shards := cfg.Capacity, cfg.Shards
	if capacity == 0 {
		capacity = DefaultCacheCapacity
	}
	if shards == 0 {
		shards = DefaultCacheShards
	}
	if capacity < 1 || capacity > MaxCacheCapacity {
		return nil, fmt.Errorf("router: cache capacity %d not in [1, %d]: %w", cfg.Capacity, MaxCacheCapacity, ErrConfig)
	}
	if shards < 1 || shards > MaxCacheShards {
		return nil, fmt.Errorf("router: cache shards %d not in [1, %d]: %w", cfg.Shards, MaxCacheShards, ErrConfig)
	}
	shards = 1 << bits.Len(uint(shards-1))
	for shards > 1 && capacity/shards < minEntriesPerShard {
		shards /= 2
	}
	per := (capacity + shards - 1) / shards
	slots := 1 << bits.Len(uint(2*per-1)) // load factor at most 1/2
	c := &Cache{parts: make([]cachePart, shards), mask: uint64(shards - 1), perPart: per, capacity: per * shards}
	for i := range c.parts {
		p := &c.parts[i]
		p.index = make([]atomic.Uint32, slots)
		p.imask = uint64(slots - 1)
		p.entries = make([]cacheEntry, per)
		p.free = make([]uint32, per)
		for j := range p.free {
			p.free[j] = uint32(per - 1 - j)
		}
	}
	return c, nil
}

// Capacity returns the most entries the cache holds.
func (c *Cache) Capacity() int { return c.capacity }

func (c *Cache) part(h uint64) *cachePart { return &c.parts[h&c.mask] }

func (p *cachePart) home(h uint64) uint64 { return (h >> 32) & p.imask }

type lookupResult uint8

const (
	lookupMiss lookupResult = iota
	lookupHit
	lookupRetry
)

// lookup probes for topic without a lock. A miss is only certain if the
// part's ver did not change meanwhile; the caller checks.
func (p *cachePart) lookup(h uint64, topic []byte) (Route, lookupResult) {
	i := p.home(h)
	for range len(p.index) {
		v := p.index[i].Load()
		if v == 0 {
			return Route{}, lookupMiss
		}
		e := &p.entries[v-1]
		s := e.seq.Load()
		if s&1 != 0 {
			return Route{}, lookupRetry
		}
		if e.hash.Load() == h {
			kp, kn := e.key.p.Load(), e.key.n.Load()
			op, on := e.owner.p.Load(), e.owner.n.Load()
			ap, an := e.addr.p.Load(), e.addr.n.Load()
			epoch, live := e.epoch.Load(), e.live.Load()
			if e.seq.Load() != s {
				return Route{}, lookupRetry
			}
			if unsafe.String(kp, int(kn)) == string(topic) {
				if live == 0 {
					return Route{}, lookupMiss
				}
				if e.ref.Load() == 0 {
					e.ref.Store(1)
				}
				return Route{Owner: unsafe.String(op, int(on)), Addr: unsafe.String(ap, int(an)), Epoch: epoch}, lookupHit
			}
		}
		i = (i + 1) & p.imask
	}
	return Route{}, lookupMiss
}

// Get returns the cached route of topic. A hit allocates nothing.
func (c *Cache) Get(topic []byte) (Route, bool) {
	h := xxh3.Hash(topic)
	p := c.part(h)
	for range maxReadTries {
		v := p.ver.Load()
		if v&1 != 0 {
			continue
		}
		r, res := p.lookup(h, topic)
		if res == lookupHit {
			c.stripe().hits.Add(1)
			return r, true
		}
		if res == lookupMiss && p.ver.Load() == v {
			c.stripe().misses.Add(1)
			return Route{}, false
		}
	}
	// Writers kept changing this part under the reader: read under the lock,
	// where nothing can change.
	p.mu.Lock()
	r, res := p.lookup(h, topic)
	p.mu.Unlock()
	if res == lookupHit {
		c.stripe().hits.Add(1)
		return r, true
	}
	c.stripe().misses.Add(1)
	return Route{}, false
}

// find returns the entry index of topic, or -1. Caller holds p.mu.
func (p *cachePart) find(h uint64, topic []byte) int {
	i := p.home(h)
	for range len(p.index) {
		v := p.index[i].Load()
		if v == 0 {
			return -1
		}
		e := &p.entries[v-1]
		if e.hash.Load() == h && e.key.load() == string(topic) {
			return int(v - 1)
		}
		i = (i + 1) & p.imask
	}
	return -1
}

// Put caches route (owner, addr, epoch) for topic unless the cached epoch is
// newer, and reports whether it did. The cache keeps owner and addr as
// given and copies topic only when it is new; Put of a present topic
// allocates nothing.
func (c *Cache) Put(topic []byte, owner, addr string, epoch uint64) bool {
	h := xxh3.Hash(topic)
	p := c.part(h)
	p.mu.Lock()
	if i := p.find(h, topic); i >= 0 {
		e := &p.entries[i]
		if epoch < e.epoch.Load() {
			p.mu.Unlock()
			return false
		}
		e.seq.Add(1)
		if e.owner.load() != owner {
			e.owner.store(owner)
		}
		if e.addr.load() != addr {
			e.addr.store(addr)
		}
		e.epoch.Store(epoch)
		e.live.Store(1)
		e.seq.Add(1)
		p.mu.Unlock()
		return true
	}
	var i uint32
	if n := len(p.free); n > 0 {
		i = p.free[n-1]
		p.free = p.free[:n-1]
		p.used.Add(1)
	} else {
		i = p.evict()
	}
	e := &p.entries[i]
	e.seq.Add(1)
	e.hash.Store(h)
	e.key.store(string(topic))
	e.owner.store(owner)
	e.addr.store(addr)
	e.epoch.Store(epoch)
	e.live.Store(1)
	e.ref.Store(0)
	e.seq.Add(1)
	p.insert(h, i)
	p.mu.Unlock()
	return true
}

// Invalidate hides topic's route if its epoch is not newer than epoch, and
// reports whether it did. The entry stays as a fence at epoch max(cached,
// epoch) until evicted: Puts below the fence are ignored.
func (c *Cache) Invalidate(topic []byte, epoch uint64) bool {
	h := xxh3.Hash(topic)
	p := c.part(h)
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(h, topic)
	if i < 0 {
		return false
	}
	e := &p.entries[i]
	cur := e.epoch.Load()
	if cur > epoch || e.live.Load() == 0 && cur == epoch {
		return false
	}
	e.seq.Add(1)
	e.epoch.Store(max(cur, epoch))
	e.live.Store(0)
	e.ref.Store(0)
	e.seq.Add(1)
	return true
}

// insert puts entry i (hash h) in the index. Caller holds p.mu. The index
// has at least twice as many slots as entries, so an empty slot exists. A
// reader racing with the single slot store sees the topic or not; either is
// a correct answer for a Put still in progress.
func (p *cachePart) insert(h uint64, i uint32) {
	j := p.home(h)
	for p.index[j].Load() != 0 {
		j = (j + 1) & p.imask
	}
	p.index[j].Store(i + 1)
}

// evict takes the entry under the CLOCK hand with a clear reference bit,
// clearing set bits on the way, removes it from the index and returns its
// index for reuse. Caller holds p.mu; every entry is in use.
func (p *cachePart) evict() uint32 {
	for {
		i := p.hand
		if p.hand++; p.hand == len(p.entries) {
			p.hand = 0
		}
		e := &p.entries[i]
		if e.ref.Load() != 0 {
			e.ref.Store(0)
			continue
		}
		p.remove(uint32(i))
		p.evictions.Add(1)
		return uint32(i)
	}
}

// remove deletes entry i from the index by backward shift: later entries of
// the probe run move up into the hole, so no tombstones pile up. Slots move
// while ver is odd. Caller holds p.mu.
func (p *cachePart) remove(i uint32) {
	j := p.home(p.entries[i].hash.Load())
	for p.index[j].Load() != i+1 {
		j = (j + 1) & p.imask
	}
	p.ver.Add(1)
	hole := j
	for k := (j + 1) & p.imask; ; k = (k + 1) & p.imask {
		v := p.index[k].Load()
		if v == 0 {
			break
		}
		home := p.home(p.entries[v-1].hash.Load())
		// The entry at k may fill the hole if the hole lies on its probe
		// path, i.e. no nearer to k than its home slot.
		if (k-home)&p.imask >= (k-hole)&p.imask {
			p.index[hole].Store(v)
			hole = k
		}
	}
	p.index[hole].Store(0)
	p.ver.Add(1)
}

// Stats returns the counters.
func (c *Cache) Stats() CacheStats {
	var s CacheStats
	for i := range c.counters {
		s.Hits += c.counters[i].hits.Load()
		s.Misses += c.counters[i].misses.Load()
	}
	for i := range c.parts {
		p := &c.parts[i]
		s.Evictions += p.evictions.Load()
		s.Len += int(p.used.Load())
	}
	return s
}

// Len returns the number of entries resident.
func (c *Cache) Len() int { return c.Stats().Len }
