package router

import (
	"errors"
	"fmt"
	"iter"
	"math/bits"

	"github.com/zeebo/xxh3"
)

// Shards as ranges of the key hash.
//
// A cluster is born with B shards (the base): shard s holds the keys whose
// hash h has h mod B = s. A shard splits in two by the next bit of the
// rest of the hash, q = h / B: the shard at depth d with path u (it holds
// the keys with h mod B = s and q mod 2^d = u) has the children (d+1, u)
// and (d+1, u + 2^d). Every key thus has one shard at each depth on its
// path, and a map of live shards holds exactly one of them.
//
// Shard ids are dense and fixed by the range: depth d's shards take the ids
// [B·(2^d − 1), B·(2^(d+1) − 1)), shard (s, d, u) the id B·(2^d − 1) + s·2^d + u.
// The base shards keep the ids 0..B−1, so a map that never split routes
// every key exactly as ShardOf(key, B) does.

// MaxShardDepth bounds how many times a base shard's range may be halved:
// 2^16 shards per base shard, far beyond what a map holds (MaxMapShards).
const MaxShardDepth = 16

// MaxSplitIDs bounds the ids a space gives children: a split whose
// children's ids would reach it is refused (ErrShardDepth), so that a
// node's tables indexed by shard stay arrays of at most this many (or B,
// when B is larger: such a space never splits).
const MaxSplitIDs = 1 << 16

// MaxMapShards bounds the live shards of a map (the node's MaxShards).
const MaxMapShards = 1 << 20

// Errors of shard maps.
var (
	ErrShardNotLive = errors.New("router: shard not live in the map")
	ErrShardDepth   = errors.New("router: shard at the deepest split")
	ErrMapBase      = errors.New("router: map base out of range")
	ErrMapFull      = errors.New("router: map at its most shards")
)

// ShardSpace is the id space of a cluster's shards: its base count B.
type ShardSpace uint32

// Base returns B.
func (sp ShardSpace) Base() uint32 { return uint32(sp) }

// Limit returns the first id past the ids of shards no deeper than depth.
func (sp ShardSpace) Limit(depth uint8) uint64 {
	return uint64(sp) * (1<<(uint64(depth)+1) - 1)
}

// MaxDepth returns the depth of the deepest shards the space holds: a
// shard at it does not split.
func (sp ShardSpace) MaxDepth() uint8 {
	d := uint8(0)
	for d < MaxShardDepth && sp.Limit(d+1) <= MaxSplitIDs {
		d++
	}
	return d
}

// Capacity returns the bound on every id the space's shards may take:
// B, or below MaxSplitIDs where the space splits.
func (sp ShardSpace) Capacity() uint32 { return uint32(sp.Limit(sp.MaxDepth())) }

// Valid reports whether id names a shard of the space (base or child).
func (sp ShardSpace) Valid(id uint64) bool { return sp != 0 && id < uint64(sp.Capacity()) }

// ID returns the id of the shard at depth d holding hash h.
func (sp ShardSpace) ID(h uint64, depth uint8) uint32 {
	b := uint64(sp)
	s, q := h%b, h/b
	d := uint64(depth)
	u := q & (1<<d - 1)
	return uint32(b*(1<<d-1) + s<<d + u)
}

// Range returns the range of shard id: its base shard, depth and path. ok
// is false for an id deeper than MaxShardDepth or a zero space.
func (sp ShardSpace) Range(id uint32) (base uint32, depth uint8, path uint64, ok bool) {
	b := uint64(sp)
	if b == 0 {
		return 0, 0, 0, false
	}
	x := uint64(id)
	// Depth d holds [b·(2^d−1), b·(2^(d+1)−1)): d = floor(log2(x/b + 1)).
	d := uint64(bits.Len64(x/b+1) - 1)
	if d > MaxShardDepth {
		return 0, 0, 0, false
	}
	r := x - b*(1<<d-1)
	return uint32(r >> d), uint8(d), r & (1<<d - 1), true
}

// Children returns the two shards id splits into: low holds the keys whose
// next hash bit is 0, high those whose bit is 1.
func (sp ShardSpace) Children(id uint32) (low, high uint32, err error) {
	s, d, u, ok := sp.Range(id)
	if !ok {
		return 0, 0, fmt.Errorf("router: shard %d in a space of base %d: %w", id, sp, ErrShardRange)
	}
	if d >= sp.MaxDepth() {
		return 0, 0, fmt.Errorf("router: shard %d at depth %d: %w", id, d, ErrShardDepth)
	}
	b, nd := uint64(sp), uint64(d)+1
	first := b*(1<<nd-1) + uint64(s)<<nd
	return uint32(first + u), uint32(first + u + 1<<d), nil
}

// Parent returns the shard id split from; ok is false for a base shard.
func (sp ShardSpace) Parent(id uint32) (parent uint32, ok bool) {
	s, d, u, rok := sp.Range(id)
	if !rok || d == 0 {
		return 0, false
	}
	pd := uint64(d) - 1
	return uint32(uint64(sp)*(1<<pd-1) + uint64(s)<<pd + u&(1<<pd-1)), true
}

// Holds reports whether shard id's range holds hash h.
func (sp ShardSpace) Holds(id uint32, h uint64) bool {
	_, d, _, ok := sp.Range(id)
	return ok && sp.ID(h, d) == id
}

// KeyHash is the hash that places a key: xxh3 of its bytes.
func KeyHash(key []byte) uint64 { return xxh3.Hash(key) }

// KeyHashString is KeyHash of a string; it allocates nothing.
func KeyHashString(key string) uint64 { return xxh3.HashString(key) }

// ShardMap is a set of live shards that partitions the key hashes: every
// hash has exactly one live shard on its path. A map is never changed;
// Split returns a new one. Version counts the splits the map holds, so of
// two maps of one cluster the one with the higher version knows more.
type ShardMap struct {
	space ShardSpace
	// live[id] for ids below len(live); ids past it are not live.
	live    []uint64
	depth   uint8 // deepest live shard
	count   int
	version uint64
}

// NewShardMap returns the map of a cluster born with base shards, none
// split.
func NewShardMap(base uint32) (*ShardMap, error) {
	if base == 0 || base > MaxMapShards {
		return nil, fmt.Errorf("router: base of %d shards, want 1..%d: %w", base, MaxMapShards, ErrMapBase)
	}
	m := &ShardMap{space: ShardSpace(base), live: make([]uint64, (base+63)/64), count: int(base)}
	for i := range base {
		m.live[i/64] |= 1 << (i % 64)
	}
	return m, nil
}

// Space returns the map's id space.
func (m *ShardMap) Space() ShardSpace { return m.space }

// Base returns the number of shards the cluster was born with.
func (m *ShardMap) Base() uint32 { return uint32(m.space) }

// Len returns the number of live shards.
func (m *ShardMap) Len() int { return m.count }

// Version returns the number of splits the map holds.
func (m *ShardMap) Version() uint64 { return m.version }

// IDLimit returns a bound on every live shard's id: all are below it.
func (m *ShardMap) IDLimit() uint32 { return uint32(m.space.Limit(m.depth)) }

// Live reports whether shard id is live in the map.
func (m *ShardMap) Live(id uint32) bool {
	w := id / 64
	return int(w) < len(m.live) && m.live[w]&(1<<(id%64)) != 0
}

// HasSplit reports whether shard id split in m: it is not live, and the
// live shards of its range lie below it.
func (m *ShardMap) HasSplit(id uint32) bool {
	if m.Live(id) || !m.space.Valid(uint64(id)) {
		return false
	}
	_, d, _, _ := m.space.Range(id)
	_, ld, _, _ := m.space.Range(m.OfHash(m.hashIn(id)))
	return ld > d
}

// LiveUnder returns a live shard below shard id, which split in m: the
// one holding the lowest hash of id's range. ok is false when m does not
// show id split.
func (m *ShardMap) LiveUnder(id uint32) (uint32, bool) {
	if !m.HasSplit(id) {
		return 0, false
	}
	return m.OfHash(m.hashIn(id)), true
}

// OfHash returns the live shard holding hash h. It allocates nothing.
func (m *ShardMap) OfHash(h uint64) uint32 {
	for d := uint8(0); d < m.depth; d++ {
		if id := m.space.ID(h, d); m.Live(id) {
			return id
		}
	}
	return m.space.ID(h, m.depth)
}

// Of returns the live shard holding key.
func (m *ShardMap) Of(key []byte) uint32 { return m.OfHash(KeyHash(key)) }

// OfString returns the live shard holding key; it allocates nothing.
func (m *ShardMap) OfString(key string) uint32 { return m.OfHash(KeyHashString(key)) }

// Shards yields the live shards in ascending id order.
func (m *ShardMap) Shards() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		for w, word := range m.live {
			for word != 0 {
				i := bits.TrailingZeros64(word)
				word &^= 1 << i
				if !yield(uint32(w*64 + i)) {
					return
				}
			}
		}
	}
}

// Split returns the map with shard id replaced by its two children.
func (m *ShardMap) Split(id uint32) (*ShardMap, error) {
	if !m.Live(id) {
		return nil, fmt.Errorf("router: split of shard %d: %w", id, ErrShardNotLive)
	}
	if m.count >= MaxMapShards {
		return nil, fmt.Errorf("router: split of shard %d with %d shards: %w", id, m.count, ErrMapFull)
	}
	low, high, err := m.space.Children(id)
	if err != nil {
		return nil, err
	}
	_, d, _, _ := m.space.Range(low)
	n := &ShardMap{space: m.space, depth: max(m.depth, d), count: m.count + 1, version: m.version + 1}
	words := (int(n.space.Limit(n.depth)) + 63) / 64
	n.live = make([]uint64, max(words, len(m.live)))
	copy(n.live, m.live)
	n.live[id/64] &^= 1 << (id % 64)
	n.live[low/64] |= 1 << (low % 64)
	n.live[high/64] |= 1 << (high % 64)
	return n, nil
}

// Including returns the map with shard id live: m itself when it is, or
// m with id's ancestors split down to it. A shard exists only once its
// ancestors split, so a node that learns of one (its leader, say) learns
// of those splits. ok is false, and m returned, when id is not a shard of
// the space or m already split id itself (m knows more there).
func (m *ShardMap) Including(id uint32) (*ShardMap, bool) {
	if m.Live(id) {
		return m, true
	}
	if !m.space.Valid(uint64(id)) {
		return m, false
	}
	_, d, _, _ := m.space.Range(id)
	h := m.hashIn(id)
	n := m
	for !n.Live(id) {
		top := n.OfHash(h)
		if _, td, _, _ := n.space.Range(top); td >= d {
			return m, false
		}
		next, err := n.Split(top)
		if err != nil {
			return m, false
		}
		n = next
	}
	return n, true
}

// Merged returns the map that holds both m's splits and o's: a shard live
// in either that the other split is replaced by the other's shards below
// it. Both must share a base. Maps of one cluster only ever split, so this
// is the map that knows both.
func (m *ShardMap) Merged(o *ShardMap) (*ShardMap, error) {
	if m.space != o.space {
		return nil, fmt.Errorf("router: merging maps of bases %d and %d: %w", m.space, o.space, ErrMapBase)
	}
	n := m
	for id := range o.Shards() {
		n, _ = n.Including(id)
	}
	return n, nil
}

// hashIn returns a hash that shard id's range holds.
func (m *ShardMap) hashIn(id uint32) uint64 {
	s, _, u, _ := m.space.Range(id)
	return u*uint64(m.space) + uint64(s) // h mod B = s, and q = h / B = u
}
