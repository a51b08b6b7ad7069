package router

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"sync/atomic"
	"unsafe"
)

// Route is where a topic lives: the node that owns it, the node's client
// address, and the ownership epoch the route was learned at.
type Route struct {
	Owner      string
	Addr       string
	Epoch      uint64
	Partitions uint32
}

// CacheConfig configures NewCache.
type CacheConfig struct {
	// Capacity is the most entries the cache holds. Default 65536. It is
	// rounded up to a multiple of the part count; Cache.Capacity reports the
	// bound in force.
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
	MaxCacheCapacity     = 1 << 26
	MaxCacheShards       = 1 << 12
	minEntriesPerShard   = 16
	// A lock-free read that keeps racing with writers of its part gives up
	// after this many tries and reads under the part's lock.
	maxReadTries = 4
	// Owners interned per part before the intern table is dropped and
	// rebuilt; owners are node ids, so this is only reached by churn.
	maxInternedOwners = 1024
)

// CacheStats are the cache's counters since it was made.
type CacheStats struct {
	Hits      uint64
	Misses    uint64
	Evictions uint64
	Len       int // entries resident, including invalidated ones kept as fences
}

// Cache maps topics to routes: topic → (owner, address, epoch). It is
// bounded and evicts with CLOCK: a hit sets an entry's reference bit, and
// the eviction hand clears set bits and takes the first entry it finds
// clear, so topics read between evictions stay while one-off lookups go
// first.
//
// Epochs only go forward. A Put older than the cached epoch is ignored.
// Invalidate(topic, e) hides an entry whose epoch is not newer than e; the
// hidden entry stays as a fence at epoch max(cached, e), so a late Put of an
// older route is still ignored, until eviction reclaims it. An evicted
// entry's epoch is forgotten: the owner's epoch check, not the cache, is
// what keeps a stale route from being used.
//
// Safe for concurrent use. The cache is split into parts by topic hash, each
// an open-addressing table of entries (linear probing, deletion by backward
// shift, at most two thirds full) so that a hit touches one entry's cache
// line and the topic's bytes. Reads take no lock: every entry is guarded by
// a sequence counter that writers make odd while they change it, and every
// part by one that writers make odd while entries move; a reader retries
// when either changed under it, so it never returns a torn route nor misses
// a topic that was resident throughout. Writers lock their part. All shared
// words are accessed atomically.
//
// Get on a hit allocates nothing, nor does Put of a present topic once its
// (owner, address) pair has been seen: pairs are kept once per owner in
// each part, and routes hand back the strings given to Put.
type Cache struct {
	counters [counterStripes]counterStripe
	parts    []cachePart
	mask     uint64
	capacity int
}

type cachePart struct {
	// Read by every Get.
	ver   atomic.Uint64 // odd while entries move
	slots []cacheEntry
	smask uint64
	_     [64]byte
	// Writers only, under mu.
	mu        sync.Mutex
	limit     int // entries this part may hold
	hand      uint64
	owners    map[string]*endpoint
	used      atomic.Int64
	evictions atomic.Uint64
	_         [64]byte
}

// endpoint is an owner and its address, immutable once published; entries
// routing to the same owner share one.
type endpoint struct {
	owner, addr string
}

const (
	slotEmpty uint32 = iota
	slotLive
	slotFenced // invalidated; kept for its epoch
)

// cacheEntry is one table slot, 64 bytes.
type cacheEntry struct {
	seq   atomic.Uint64 // odd while a writer changes the slot
	hash  atomic.Uint64
	keyP  atomic.Pointer[byte]
	keyN  atomic.Uint64
	ep    atomic.Pointer[endpoint]
	epoch atomic.Uint64
	state atomic.Uint32
	ref   atomic.Uint32 // CLOCK reference bit
	parts atomic.Uint32 // the topic's partition count
	_     [4]byte
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
func (c *Cache) stripe() *counterStripe {
	var probe byte
	a := uint64(uintptr(unsafe.Pointer(&probe))) >> 11
	return &c.counters[(a*0x9e3779b97f4a7c15)>>(64-6)]
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
	slots := 1 << bits.Len(uint(per+per/2)) // more than 1.5 slots per entry
	c := &Cache{parts: make([]cachePart, shards), mask: uint64(shards - 1), capacity: per * shards}
	for i := range c.parts {
		p := &c.parts[i]
		p.slots = make([]cacheEntry, slots)
		p.smask = uint64(slots - 1)
		p.limit = per
		p.owners = make(map[string]*endpoint)
	}
	return c, nil
}

// Capacity returns the most entries the cache holds.
func (c *Cache) Capacity() int { return c.capacity }

func (c *Cache) part(h uint64) *cachePart { return &c.parts[h&c.mask] }

// home is a topic's first slot; it uses the hash bits the part choice does
// not.
func (p *cachePart) home(h uint64) uint64 { return (h >> 32) & p.smask }

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
	for range len(p.slots) {
		e := &p.slots[i]
		s := e.seq.Load()
		if s&1 != 0 {
			return Route{}, lookupRetry
		}
		state := e.state.Load()
		if state == slotEmpty {
			if e.seq.Load() != s {
				return Route{}, lookupRetry
			}
			return Route{}, lookupMiss
		}
		if e.hash.Load() == h {
			kp, kn := e.keyP.Load(), e.keyN.Load()
			ep, epoch, parts := e.ep.Load(), e.epoch.Load(), e.parts.Load()
			if e.seq.Load() != s {
				return Route{}, lookupRetry
			}
			// The snapshot is whole; the key bytes and the endpoint are
			// immutable, so they can be read now.
			if unsafe.String(kp, int(kn)) == string(topic) {
				if state != slotLive {
					return Route{}, lookupMiss
				}
				// The reference bit is a hint outside the sequence
				// protocol: setting it on a slot a writer just reused
				// only spares that entry one sweep.
				if e.ref.Load() == 0 {
					e.ref.Store(1)
				}
				return Route{Owner: ep.owner, Addr: ep.addr, Epoch: epoch, Partitions: parts}, lookupHit
			}
		}
		i = (i + 1) & p.smask
	}
	return Route{}, lookupMiss
}

// Get returns the cached route of topic. A hit allocates nothing.
func (c *Cache) Get(topic []byte) (Route, bool) {
	h := maphash.Bytes(hashSeed, topic)
	p := &c.parts[h&c.mask]
	// The common case, a hit in the topic's home slot, is inlined here. A
	// hit needs no part-level check: the slot's snapshot is whole and holds
	// the topic. Anything else goes to getSlow.
	e := &p.slots[p.home(h)]
	s := e.seq.Load()
	if s&1 == 0 && e.hash.Load() == h && e.state.Load() == slotLive {
		kp, kn := e.keyP.Load(), e.keyN.Load()
		ep, epoch, parts := e.ep.Load(), e.epoch.Load(), e.parts.Load()
		if e.seq.Load() == s && unsafe.String(kp, int(kn)) == string(topic) {
			if e.ref.Load() == 0 {
				e.ref.Store(1)
			}
			c.stripe().hits.Add(1)
			return Route{Owner: ep.owner, Addr: ep.addr, Epoch: epoch, Partitions: parts}, true
		}
	}
	return c.getSlow(h, p, topic)
}

// getSlow is Get past the home slot: the probe with its retries.
func (c *Cache) getSlow(h uint64, p *cachePart, topic []byte) (Route, bool) {
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
	// where nothing moves.
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

// find returns the slot holding topic, or -1. Caller holds p.mu.
func (p *cachePart) find(h uint64, topic []byte) int {
	i := p.home(h)
	for range len(p.slots) {
		e := &p.slots[i]
		if e.state.Load() == slotEmpty {
			return -1
		}
		if e.hash.Load() == h && unsafe.String(e.keyP.Load(), int(e.keyN.Load())) == string(topic) {
			return int(i)
		}
		i = (i + 1) & p.smask
	}
	return -1
}

// intern returns the shared endpoint for (owner, addr). Caller holds p.mu.
func (p *cachePart) intern(owner, addr string) *endpoint {
	if ep := p.owners[owner]; ep != nil && ep.addr == addr {
		return ep
	}
	if len(p.owners) >= maxInternedOwners {
		clear(p.owners)
	}
	ep := &endpoint{owner: owner, addr: addr}
	p.owners[owner] = ep
	return ep
}

// Put caches route (owner, addr, epoch) for topic unless the cached epoch is
// newer, and reports whether it did. The cache copies topic only when it is
// new; Put of a present topic with an owner and address seen before
// allocates nothing.
func (c *Cache) Put(topic []byte, owner, addr string, epoch uint64, partitions uint32) bool {
	h := maphash.Bytes(hashSeed, topic)
	p := c.part(h)
	p.mu.Lock()
	if i := p.find(h, topic); i >= 0 {
		e := &p.slots[i]
		if epoch < e.epoch.Load() {
			p.mu.Unlock()
			return false
		}
		ep := p.intern(owner, addr)
		e.seq.Add(1)
		e.ep.Store(ep)
		e.epoch.Store(epoch)
		e.parts.Store(partitions)
		e.state.Store(slotLive)
		e.seq.Add(1)
		p.mu.Unlock()
		return true
	}
	if int(p.used.Load()) >= p.limit {
		p.evict()
	}
	key := string(topic)
	ep := p.intern(owner, addr)
	i := p.home(h)
	for p.slots[i].state.Load() != slotEmpty {
		i = (i + 1) & p.smask
	}
	// Filling an empty slot moves nothing: a reader sees the topic or not,
	// and either is right for a Put still in progress.
	e := &p.slots[i]
	e.seq.Add(1)
	e.hash.Store(h)
	e.keyP.Store(unsafe.StringData(key))
	e.keyN.Store(uint64(len(key)))
	e.ep.Store(ep)
	e.epoch.Store(epoch)
	e.parts.Store(partitions)
	e.ref.Store(0)
	e.state.Store(slotLive)
	e.seq.Add(1)
	p.used.Add(1)
	p.mu.Unlock()
	return true
}

// Invalidate hides topic's route if its epoch is not newer than epoch, and
// reports whether it did. The entry stays as a fence at epoch max(cached,
// epoch) until evicted: Puts below the fence are ignored.
func (c *Cache) Invalidate(topic []byte, epoch uint64) bool {
	h := maphash.Bytes(hashSeed, topic)
	p := c.part(h)
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(h, topic)
	if i < 0 {
		return false
	}
	e := &p.slots[i]
	cur, state := e.epoch.Load(), e.state.Load()
	if cur > epoch || state == slotFenced && cur == epoch {
		return false
	}
	e.seq.Add(1)
	e.epoch.Store(max(cur, epoch))
	e.state.Store(slotFenced)
	e.ref.Store(0)
	e.seq.Add(1)
	return true
}

// evict removes the first entry under the CLOCK hand whose reference bit is
// clear, clearing set bits on the way. Caller holds p.mu; the part is full.
func (p *cachePart) evict() {
	for {
		i := p.hand
		p.hand = (p.hand + 1) & p.smask
		e := &p.slots[i]
		if e.state.Load() == slotEmpty {
			continue
		}
		if e.ref.Load() != 0 {
			e.ref.Store(0)
			continue
		}
		p.remove(i)
		p.evictions.Add(1)
		return
	}
}

// copySlot publishes a copy of src in dst under dst's sequence counter.
func copySlot(dst, src *cacheEntry) {
	dst.seq.Add(1)
	dst.hash.Store(src.hash.Load())
	dst.keyP.Store(src.keyP.Load())
	dst.keyN.Store(src.keyN.Load())
	dst.ep.Store(src.ep.Load())
	dst.epoch.Store(src.epoch.Load())
	dst.parts.Store(src.parts.Load())
	dst.ref.Store(src.ref.Load())
	dst.state.Store(src.state.Load())
	dst.seq.Add(1)
}

// remove empties slot i by backward shift: later entries of the probe run
// move up into the hole, so no tombstones pile up. Entries move while ver
// is odd. Caller holds p.mu.
func (p *cachePart) remove(i uint64) {
	p.ver.Add(1)
	hole := i
	for k := (i + 1) & p.smask; ; k = (k + 1) & p.smask {
		e := &p.slots[k]
		if e.state.Load() == slotEmpty {
			break
		}
		home := p.home(e.hash.Load())
		// The entry at k may fill the hole if the hole lies on its probe
		// path: no nearer to k than its home slot.
		if (k-home)&p.smask >= (k-hole)&p.smask {
			copySlot(&p.slots[hole], e)
			hole = k
		}
	}
	e := &p.slots[hole]
	e.seq.Add(1)
	e.state.Store(slotEmpty)
	e.hash.Store(0)
	e.keyP.Store(nil)
	e.keyN.Store(0)
	e.ep.Store(nil)
	e.ref.Store(0)
	e.seq.Add(1)
	p.ver.Add(1)
	p.used.Add(-1)
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

// hashSeed seeds the cache's topic hash. The cache is local to a process,
// so the hash need not agree across nodes; maphash (the runtime's own map
// hash) is the fastest on short keys.
var hashSeed = maphash.MakeSeed()
