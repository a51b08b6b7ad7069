package router

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
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

// Defaults and limits of CacheConfig and of the topics a Cache takes.
const (
	DefaultCacheCapacity = 65536
	DefaultCacheShards   = 64
	MaxCacheCapacity     = 1 << 26
	MaxCacheShards       = 1 << 12
	// MaxCacheTopicLen is the longest topic the cache holds; Put of a longer
	// one is ignored and Get of it misses. Topic names are far shorter
	// (meta.MaxTopicLen).
	MaxCacheTopicLen   = 1<<(32-metaLenShift) - 1
	minEntriesPerShard = 16
	// A lock-free read that keeps racing with writers of its part gives up
	// after this many tries and reads under the part's lock.
	maxReadTries = 4
	// Owners interned per part before the intern table is dropped and
	// rebuilt; owners are node ids, so this is only reached by churn.
	maxInternedOwners = 1024
)

// CacheStats are the cache's counters since it was made, exact: hits and
// misses are added atomically on 64 counter stripes, chosen by the calling
// goroutine's stack, so concurrent readers mostly count on lines of their
// own.
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
// an open-addressing table of 64-byte entries (linear probing, deletion by
// backward shift, at most two thirds full). A topic of up to 24 bytes is
// held inside its entry, so a hit reads one cache line besides the caller's
// topic; a longer topic is held in a copy the entry points to. Reads take no
// lock: every entry is guarded by a sequence counter that writers make odd
// while they change anything but its epoch alone, and every part by one
// that writers make odd while entries move; a reader retries when either
// changed under it, so it never returns a torn route nor misses a topic
// that was resident throughout. Writers lock their part, except a Put that
// would change nothing. All shared words are accessed atomically.
//
// Get on a hit allocates nothing, nor does Put of a present topic once its
// (owner, address) pair has been seen: pairs are kept once per owner in
// each part, and routes hand back the strings given to Put. Put of a new
// topic of up to 24 bytes copies nothing either.
type Cache struct {
	counters [counterStripes]counterStripe
	parts    []cachePart
	mask     uint64
	capacity int
}

// cachePart is one independently locked table, 128 bytes, its read-mostly
// words on one cache line and its writers' words on the other.
type cachePart struct {
	// Read by every Get.
	ver   atomic.Uint64 // odd while entries move
	slots []cacheEntry
	smask uint64
	_     [24]byte
	// Writers only, under mu.
	mu        sync.Mutex
	limit     int // entries this part may hold
	hand      uint64
	owners    map[string]*endpoint
	used      atomic.Int64
	evictions atomic.Uint64
	_         [16]byte
}

// endpoint is an owner and its address, immutable once published; entries
// routing to the same owner share one.
type endpoint struct {
	owner, addr string
}

// An entry's meta word: its state in the low bits, the CLOCK reference bit,
// and the topic's length. Readers set the reference bit outside the
// sequence protocol, so every other use of meta masks it.
const (
	slotEmpty  uint32 = 0
	slotLive   uint32 = 1
	slotFenced uint32 = 2 // invalidated; kept for its epoch
	stateMask  uint32 = 3
	refBit     uint32 = 4

	metaLenShift = 8
	// inlineKeyLen is the longest topic held in the entry itself, as the
	// three words of keyWords.
	inlineKeyLen = 24
)

// cacheEntry is one table slot, 64 bytes.
type cacheEntry struct {
	seq   atomic.Uint32 // odd while a writer changes the slot
	tag   atomic.Uint32 // the topic hash's upper half
	meta  atomic.Uint32 // state | refBit | length << metaLenShift
	parts atomic.Uint32 // the topic's partition count
	ep    atomic.Pointer[endpoint]
	epoch atomic.Uint64
	long  atomic.Pointer[byte] // a topic longer than inlineKeyLen; else nil
	key   [3]atomic.Uint64     // keyWords of a topic up to inlineKeyLen; else 0
}

// counterStripes is the number of hit/miss counter pairs, each on its own
// cache line. One shared counter written by every Get would bounce its line
// between cores on every read and cost more than the lookup itself.
const counterStripes = 64

// counterStripe is one pair of hit and miss counts.
type counterStripe struct {
	hits   atomic.Uint64
	misses atomic.Uint64
	_      [48]byte
}

// stripe picks the counters for the calling goroutine by the address of a
// slot on its stack: goroutine stacks are disjoint, so concurrent readers
// mostly count on lines of their own.
func (c *Cache) stripe() *counterStripe {
	var probe byte
	a := uint64(uintptr(unsafe.Pointer(&probe))) >> 11
	return &c.counters[(a*0x9e3779b97f4a7c15)>>(64-6)]
}

func (c *Cache) countHit()  { c.stripe().hits.Add(1) }
func (c *Cache) countMiss() { c.stripe().misses.Add(1) }

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

// topicKey is a topic as the table compares it: its hash, the meta word of
// a live entry holding it, and its words if it is held inline.
type topicKey struct {
	b    []byte
	h    uint64
	meta uint32 // slotLive | len << metaLenShift
	w    [3]uint64
}

// keySeed seeds the topic hash. The cache is local to a process, so the
// hash need not agree across processes; a random seed keeps a client from
// choosing topics that collide.
var keySeed = [4]uint64{rand.Uint64(), rand.Uint64(), rand.Uint64(), rand.Uint64()}

// longSeed seeds the hash of topics longer than inlineKeyLen.
var longSeed = maphash.MakeSeed()

// mum is the 128-bit product of a and b folded to 64 bits, the mixing step
// of wyhash.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// keyHash returns the hash of a topic and, for a topic of up to
// inlineKeyLen bytes, its words: three zero-padded words read at the start,
// the middle and the end (from 8 bytes on they may overlap, so they are not
// the bytes in order, but with the length they determine the topic: two
// topics of equal length have equal words only if they are equal). Such a
// topic is hashed from its words with three multiplications, which is
// faster than maphash.Bytes and xxh3 on 10–24-byte topics and leaves the
// words, which are what an entry compares, in registers. A longer topic is
// hashed by maphash and has zero words.
func keyHash(b []byte) (h, w0, w1, w2 uint64) {
	if len(b) > inlineKeyLen {
		return maphash.Bytes(longSeed, b), 0, 0, 0
	}
	return shortKeyHash(b)
}

// shortKeyHash is keyHash of a topic of up to inlineKeyLen bytes.
func shortKeyHash(b []byte) (h, w0, w1, w2 uint64) {
	n := len(b)
	switch {
	case n >= 8:
		w0 = binary.LittleEndian.Uint64(b)
		w1 = binary.LittleEndian.Uint64(b[n/2-4:])
		w2 = binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		w0 = uint64(binary.LittleEndian.Uint32(b)) | uint64(binary.LittleEndian.Uint32(b[n-4:]))<<32
	case n > 0:
		w0 = uint64(b[0]) | uint64(b[n>>1])<<8 | uint64(b[n-1])<<16
	}
	x := mum(w0^keySeed[0], w1^keySeed[1])
	y := mum(w2^keySeed[2], uint64(n)^keySeed[3])
	return mum(x^keySeed[1], y^keySeed[0]), w0, w1, w2
}

// makeKey returns the key of topic.
func makeKey(topic []byte) topicKey {
	h, w0, w1, w2 := keyHash(topic)
	return topicKey{b: topic, h: h, meta: slotLive | uint32(len(topic))<<metaLenShift, w: [3]uint64{w0, w1, w2}}
}

func (c *Cache) part(k *topicKey) *cachePart { return &c.parts[k.h&c.mask] }

// home is a topic's first slot; it uses the hash bits the part choice does
// not, the ones an entry keeps as its tag.
func (p *cachePart) home(tag uint32) uint64 { return uint64(tag) & p.smask }

func (k *topicKey) tag() uint32 { return uint32(k.h >> 32) }

type lookupResult uint8

const (
	lookupMiss lookupResult = iota
	lookupHit
	lookupRetry
)

// read is a lock-free read of slot e for k: lookupHit with the route if e
// holds k live, lookupRetry if a writer changed e meanwhile, and lookupMiss
// otherwise, with empty reporting an empty slot (the end of a probe run)
// and fenced an invalidated entry for k.
func (e *cacheEntry) read(k *topicKey) (r Route, res lookupResult, empty, fenced bool) {
	s := e.seq.Load()
	if s&1 != 0 {
		return Route{}, lookupRetry, false, false
	}
	m := e.meta.Load() &^ refBit
	if m == slotEmpty {
		if e.seq.Load() != s {
			return Route{}, lookupRetry, false, false
		}
		return Route{}, lookupMiss, true, false
	}
	if e.tag.Load() != k.tag() || m>>metaLenShift != k.meta>>metaLenShift {
		return Route{}, lookupMiss, false, false
	}
	w0, w1, w2, lp := e.key[0].Load(), e.key[1].Load(), e.key[2].Load(), e.long.Load()
	ep, epoch, parts := e.ep.Load(), e.epoch.Load(), e.parts.Load()
	if e.seq.Load() != s {
		return Route{}, lookupRetry, false, false
	}
	// The snapshot is whole; a long topic's bytes are immutable, so they
	// can be read now.
	if w0 != k.w[0] || w1 != k.w[1] || w2 != k.w[2] || lp != nil && unsafe.String(lp, len(k.b)) != string(k.b) {
		return Route{}, lookupMiss, false, false
	}
	if m&stateMask != slotLive {
		return Route{}, lookupMiss, false, true
	}
	e.touch()
	return Route{Owner: ep.owner, Addr: ep.addr, Epoch: epoch, Partitions: parts}, lookupHit, false, false
}

// touch sets e's reference bit. The bit is a hint outside the sequence
// protocol: setting it on a slot a writer just reused only spares that
// entry one sweep. A hot entry's bit is already set, so reads of it write
// nothing.
func (e *cacheEntry) touch() {
	if e.meta.Load()&refBit == 0 {
		e.meta.Or(refBit)
	}
}

// lookup probes for k without a lock. A miss is only certain if the part's
// ver did not change meanwhile; the caller checks.
func (p *cachePart) lookup(k *topicKey) (Route, lookupResult) {
	i := p.home(k.tag())
	for range len(p.slots) {
		r, res, empty, fenced := p.slots[i].read(k)
		if res != lookupMiss || empty || fenced {
			return r, res
		}
		i = (i + 1) & p.smask
	}
	return Route{}, lookupMiss
}

// Get returns the cached route of topic. A hit allocates nothing.
//
// The probe for a hit takes no lock and, with the key in registers, reads
// the entry's line and nothing else. A hit anywhere on the probe run is
// certain without a part-level check: the slot's snapshot is whole and
// holds the topic. What else ends the probe (an empty slot, a slot a
// writer holds) may be a miss or an entry moving, which getSlow settles.
// Topics held inline and longer ones take separate paths, chosen by the
// length, which is at hand before the entry arrives from memory: a branch
// on what the entry holds would be mispredicted for every long topic after
// a short one, discarding the work the processor had begun on the caller's
// next lookup.
func (c *Cache) Get(topic []byte) (Route, bool) {
	if len(topic) > inlineKeyLen {
		return c.getLong(topic)
	}
	h, w0, w1, w2 := shortKeyHash(topic)
	tag, meta := uint32(h>>32), slotLive|uint32(len(topic))<<metaLenShift
	p := &c.parts[h&c.mask]
	slots, smask := p.slots, p.smask
	for i, n := uint64(tag)&smask, 0; n < len(slots); i, n = (i+1)&smask, n+1 {
		e := &slots[i]
		s, m := e.seq.Load(), e.meta.Load()
		if s&1 != 0 || m&stateMask == slotEmpty {
			break
		}
		if m&^refBit != meta || e.tag.Load() != tag {
			continue
		}
		k0, k1, k2 := e.key[0].Load(), e.key[1].Load(), e.key[2].Load()
		ep, epoch, parts := e.ep.Load(), e.epoch.Load(), e.parts.Load()
		if e.seq.Load() != s {
			break
		}
		if k0 != w0 || k1 != w1 || k2 != w2 {
			continue
		}
		if m&refBit == 0 {
			e.meta.Or(refBit)
		}
		c.countHit()
		return Route{Owner: ep.owner, Addr: ep.addr, Epoch: epoch, Partitions: parts}, true
	}
	return c.getSlow(topic, p)
}

// getLong is Get of a topic longer than inlineKeyLen: the entry points to
// the topic's bytes, immutable once the entry's snapshot is whole.
func (c *Cache) getLong(topic []byte) (Route, bool) {
	if len(topic) > MaxCacheTopicLen {
		c.countMiss()
		return Route{}, false
	}
	h := maphash.Bytes(longSeed, topic)
	tag, meta := uint32(h>>32), slotLive|uint32(len(topic))<<metaLenShift
	p := &c.parts[h&c.mask]
	slots, smask := p.slots, p.smask
	for i, n := uint64(tag)&smask, 0; n < len(slots); i, n = (i+1)&smask, n+1 {
		e := &slots[i]
		s, m := e.seq.Load(), e.meta.Load()
		if s&1 != 0 || m&stateMask == slotEmpty {
			break
		}
		if m&^refBit != meta || e.tag.Load() != tag {
			continue
		}
		lp := e.long.Load()
		ep, epoch, parts := e.ep.Load(), e.epoch.Load(), e.parts.Load()
		if e.seq.Load() != s {
			break
		}
		if lp == nil || unsafe.String(lp, len(topic)) != string(topic) {
			continue
		}
		if m&refBit == 0 {
			e.meta.Or(refBit)
		}
		c.countHit()
		return Route{Owner: ep.owner, Addr: ep.addr, Epoch: epoch, Partitions: parts}, true
	}
	return c.getSlow(topic, p)
}

// getSlow is Get past the fast path: the probe with its retries.
func (c *Cache) getSlow(topic []byte, p *cachePart) (Route, bool) {
	key := makeKey(topic)
	k := &key
	for range maxReadTries {
		v := p.ver.Load()
		if v&1 != 0 {
			continue
		}
		r, res := p.lookup(k)
		if res == lookupHit {
			c.countHit()
			return r, true
		}
		if res == lookupMiss && p.ver.Load() == v {
			c.countMiss()
			return Route{}, false
		}
	}
	// Writers kept changing this part under the reader: read under the lock,
	// where nothing moves.
	p.mu.Lock()
	r, res := p.lookup(k)
	p.mu.Unlock()
	if res == lookupHit {
		c.countHit()
		return r, true
	}
	c.countMiss()
	return Route{}, false
}

// holds reports whether e holds k, live or fenced. Caller holds the part's
// lock, so e does not change.
func (e *cacheEntry) holds(k *topicKey) bool {
	m := e.meta.Load()
	if m&stateMask == slotEmpty || e.tag.Load() != k.tag() || m>>metaLenShift != k.meta>>metaLenShift {
		return false
	}
	if lp := e.long.Load(); lp != nil {
		return unsafe.String(lp, len(k.b)) == string(k.b)
	}
	return e.key[0].Load() == k.w[0] && e.key[1].Load() == k.w[1] && e.key[2].Load() == k.w[2]
}

// find returns the slot holding k, or -1. Caller holds p.mu.
func (p *cachePart) find(k *topicKey) int {
	i := p.home(k.tag())
	for range len(p.slots) {
		e := &p.slots[i]
		if e.meta.Load()&stateMask == slotEmpty {
			return -1
		}
		if e.holds(k) {
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
// newer, and reports whether it did. A topic longer than MaxCacheTopicLen is
// not cached. Put of a present topic with an owner and address seen before
// allocates nothing; the cache copies a new topic only if it is longer than
// 24 bytes.
func (c *Cache) Put(topic []byte, owner, addr string, epoch uint64, partitions uint32) bool {
	if len(topic) > MaxCacheTopicLen {
		return false
	}
	k := makeKey(topic)
	p := c.part(&k)
	applied, settled, i, seq := p.putUnchanged(&k, owner, addr, epoch, partitions)
	if settled {
		return applied
	}
	return p.putLocked(&k, owner, addr, epoch, partitions, i, seq)
}

// putLocked is Put under the part's lock. Slot i, read at sequence number
// seq, is where the lock-free look saw the topic (or -1): it still holds
// the topic if its sequence is unchanged, since every change of what a
// slot holds bumps it; otherwise the topic is looked for again.
func (p *cachePart) putLocked(k *topicKey, owner, addr string, epoch uint64, partitions uint32, i int, seq uint32) bool {
	p.mu.Lock()
	if i < 0 || p.slots[i].seq.Load() != seq {
		i = p.find(k)
	}
	if i >= 0 {
		ok := p.update(&p.slots[i], owner, addr, epoch, partitions)
		p.mu.Unlock()
		return ok
	}
	if int(p.used.Load()) >= p.limit {
		p.evict()
	}
	ep := p.intern(owner, addr)
	free := p.home(k.tag())
	for p.slots[free].meta.Load()&stateMask != slotEmpty {
		free = (free + 1) & p.smask
	}
	// Filling an empty slot moves nothing: a reader sees the topic or not,
	// and either is right for a Put still in progress.
	e := &p.slots[free]
	s := e.seq.Load()
	e.seq.Store(s + 1)
	e.tag.Store(k.tag())
	if len(k.b) > inlineKeyLen {
		key := string(k.b)
		e.long.Store(unsafe.StringData(key))
	} else {
		for j := range e.key {
			e.key[j].Store(k.w[j])
		}
	}
	e.ep.Store(ep)
	e.epoch.Store(epoch)
	e.parts.Store(partitions)
	e.meta.Store(k.meta)
	e.seq.Store(s + 2)
	p.used.Add(1)
	p.mu.Unlock()
	return true
}

// putUnchanged settles without a lock, and without writing, a Put that
// would change nothing: one older than the cached epoch (ignored, false),
// or one of the cached route itself (applied, true), which a router sees
// whenever a route it holds is confirmed again. It reads the topic's home
// slot as Get does, where most topics are; what it decides held at the
// moment the slot's snapshot was whole, when a locked Put would have
// decided the same. Anything else, or a topic not in its home slot, is
// left to the locked path (settled false), with the home slot and the
// sequence number it was read at if the topic seemed to be there, else
// slot -1; the locked path trusts the slot only if that sequence number is
// unchanged.
func (p *cachePart) putUnchanged(k *topicKey, owner, addr string, epoch uint64, partitions uint32) (applied, settled bool, slot int, seq uint32) {
	i := p.home(k.tag())
	e := &p.slots[i]
	s, m := e.seq.Load(), e.meta.Load()
	if s&1 != 0 || m&^(refBit|stateMask) != k.meta&^stateMask || m&stateMask == slotEmpty || e.tag.Load() != k.tag() {
		return false, false, -1, 0
	}
	k0, k1, k2, lp := e.key[0].Load(), e.key[1].Load(), e.key[2].Load(), e.long.Load()
	cur := e.epoch.Load()
	if len(k.b) > inlineKeyLen {
		// A long topic's bytes may be read only from a whole snapshot.
		if e.seq.Load() != s || lp == nil || unsafe.String(lp, len(k.b)) != string(k.b) {
			return false, false, -1, 0
		}
	} else if k0 != k.w[0] || k1 != k.w[1] || k2 != k.w[2] {
		return false, false, -1, 0
	}
	if epoch > cur {
		// A change, the common case of a Put of a present topic. The slot
		// is handed on without checking the snapshot: the locked path uses
		// it only if its sequence is still s, when what was read was whole.
		return false, false, int(i), s
	}
	ep, parts := e.ep.Load(), e.parts.Load()
	if e.seq.Load() != s {
		return false, false, -1, 0
	}
	if epoch < cur {
		return false, true, int(i), s
	}
	if m&stateMask == slotLive && parts == partitions && ep.owner == owner && ep.addr == addr {
		return true, true, int(i), s
	}
	return false, false, int(i), s
}

// update applies a Put to e, which holds the topic. Caller holds p.mu.
//
// Only the words that change are written, and a change of the epoch alone,
// the common case, is one store without a sequence bump: a reader sees the
// old epoch or the new one with the rest, and both are whole routes. Any
// other change bumps the sequence, even of a single word: a reader loads
// the owner before the epoch, so two successive single-word changes (the
// owner, then the epoch) could otherwise be seen as the old owner with the
// new epoch, a route never put. With only the epoch changing unbumped, the
// other words a reader saw held throughout its read, at every epoch it
// could have read.
func (p *cachePart) update(e *cacheEntry, owner, addr string, epoch uint64, partitions uint32) bool {
	cur := e.epoch.Load()
	if epoch < cur {
		return false
	}
	ep := e.ep.Load()
	if ep.owner != owner || ep.addr != addr {
		ep = p.intern(owner, addr)
	}
	m := e.meta.Load()
	newMeta := m&^stateMask | slotLive
	setEp, setEpoch, setParts, setMeta := ep != e.ep.Load(), epoch != cur, partitions != e.parts.Load(), m&stateMask != slotLive
	bump := setEp || setParts || setMeta
	s := e.seq.Load()
	if bump {
		e.seq.Store(s + 1)
	}
	if setEp {
		e.ep.Store(ep)
	}
	if setEpoch {
		e.epoch.Store(epoch)
	}
	if setParts {
		e.parts.Store(partitions)
	}
	if setMeta {
		e.meta.Store(newMeta)
	}
	if bump {
		e.seq.Store(s + 2)
	}
	return true
}

// Refresh updates topic's route to (owner, addr, epoch) if the cache holds
// the topic and epoch is newer than its cached one (or the same, on a live
// route: a change of its partitions), and reports whether it did. Unlike
// Put it never adds a topic: a client that learns of every change in the
// cluster keeps only the routes it uses.
func (c *Cache) Refresh(topic []byte, owner, addr string, epoch uint64, partitions uint32) bool {
	return c.withEntry(topic, func(p *cachePart, e *cacheEntry) bool {
		if cur := e.epoch.Load(); epoch < cur || epoch == cur && e.meta.Load()&stateMask != slotLive {
			return false
		}
		return p.update(e, owner, addr, epoch, partitions)
	})
}

// withEntry runs fn on topic's entry under its part's lock, and returns
// what fn does (false when the cache does not hold the topic).
func (c *Cache) withEntry(topic []byte, fn func(p *cachePart, e *cacheEntry) bool) bool {
	if len(topic) > MaxCacheTopicLen {
		return false
	}
	k := makeKey(topic)
	p := c.part(&k)
	p.mu.Lock()
	defer p.mu.Unlock()
	i := p.find(&k)
	if i < 0 {
		return false
	}
	return fn(p, &p.slots[i])
}

// Invalidate hides topic's route if its epoch is not newer than epoch, and
// reports whether it did. The entry stays as a fence at epoch max(cached,
// epoch) until evicted: Puts below the fence are ignored.
func (c *Cache) Invalidate(topic []byte, epoch uint64) bool {
	return c.withEntry(topic, func(_ *cachePart, e *cacheEntry) bool {
		cur, m := e.epoch.Load(), e.meta.Load()
		if cur > epoch || m&stateMask == slotFenced && cur == epoch {
			return false
		}
		s := e.seq.Load()
		e.seq.Store(s + 1)
		e.epoch.Store(max(cur, epoch))
		e.meta.Store(m&^(stateMask|refBit) | slotFenced)
		e.seq.Store(s + 2)
		return true
	})
}

// evict removes the first entry under the CLOCK hand whose reference bit is
// clear, clearing set bits on the way. Caller holds p.mu; the part is full.
func (p *cachePart) evict() {
	for {
		i := p.hand
		p.hand = (p.hand + 1) & p.smask
		e := &p.slots[i]
		m := e.meta.Load()
		if m&stateMask == slotEmpty {
			continue
		}
		if m&refBit != 0 {
			e.meta.And(^refBit)
			continue
		}
		p.remove(i)
		p.evictions.Add(1)
		return
	}
}

// copySlot publishes a copy of src in dst under dst's sequence counter.
func copySlot(dst, src *cacheEntry) {
	s := dst.seq.Load()
	dst.seq.Store(s + 1)
	dst.tag.Store(src.tag.Load())
	dst.long.Store(src.long.Load())
	for j := range dst.key {
		dst.key[j].Store(src.key[j].Load())
	}
	dst.ep.Store(src.ep.Load())
	dst.epoch.Store(src.epoch.Load())
	dst.parts.Store(src.parts.Load())
	dst.meta.Store(src.meta.Load())
	dst.seq.Store(s + 2)
}

// remove empties slot i by backward shift: later entries of the probe run
// move up into the hole, so no tombstones pile up. Entries move while ver
// is odd. Caller holds p.mu.
func (p *cachePart) remove(i uint64) {
	p.ver.Add(1)
	hole := i
	for k := (i + 1) & p.smask; ; k = (k + 1) & p.smask {
		e := &p.slots[k]
		if e.meta.Load()&stateMask == slotEmpty {
			break
		}
		home := p.home(e.tag.Load())
		// The entry at k may fill the hole if the hole lies on its probe
		// path: no nearer to k than its home slot.
		if (k-home)&p.smask >= (k-hole)&p.smask {
			copySlot(&p.slots[hole], e)
			hole = k
		}
	}
	p.slots[hole].empty()
	p.ver.Add(1)
	p.used.Add(-1)
}

// empty makes e an empty slot under its sequence counter. Caller holds
// the part's lock.
func (e *cacheEntry) empty() {
	s := e.seq.Load()
	e.seq.Store(s + 1)
	e.meta.Store(slotEmpty)
	e.tag.Store(0)
	e.long.Store(nil)
	for j := range e.key {
		e.key[j].Store(0)
	}
	e.ep.Store(nil)
	e.seq.Store(s + 2)
}

// Clear empties the cache in place, keeping its table and its counters:
// every route cached before Clear began is gone when it returns. It costs
// a walk of the table and allocates nothing, where replacing the cache
// would allocate a table of the same size for the collector to scan and
// the kernel to fault in page by page. Safe beside readers and writers:
// each part is emptied under its lock with its ver odd, so a reader
// racing the walk retries or reads under the lock, and a route put into a
// part already emptied stays.
func (c *Cache) Clear() {
	for i := range c.parts {
		p := &c.parts[i]
		p.mu.Lock()
		p.ver.Add(1)
		for j := range p.slots {
			e := &p.slots[j]
			if e.meta.Load()&stateMask != slotEmpty {
				e.empty() // a slot never filled is not written: its page stays untouched
			}
		}
		p.hand = 0
		p.used.Store(0)
		p.ver.Add(1)
		p.mu.Unlock()
	}
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
