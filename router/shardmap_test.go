package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestShardSpaceIDsAreDenseAndInvertible(t *testing.T) {
	for _, base := range []uint32{1, 3, 8, 256, 1000} {
		sp := ShardSpace(base)
		seen := make(map[uint32]bool)
		for d := uint8(0); d <= 5; d++ {
			lo, hi := sp.Limit(d)-uint64(base)<<d, sp.Limit(d)
			if d == 0 {
				lo = 0
			}
			for id := lo; id < hi; id++ {
				s, dd, u, ok := sp.Range(uint32(id))
				if !ok || dd != d || s >= base || u >= 1<<d {
					t.Fatalf("base %d: Range(%d) = %d, %d, %d, %v; want depth %d", base, id, s, dd, u, ok, d)
				}
				if seen[uint32(id)] {
					t.Fatalf("base %d: id %d twice", base, id)
				}
				seen[uint32(id)] = true
				h := u*uint64(base) + uint64(s)
				if got := sp.ID(h, d); got != uint32(id) {
					t.Fatalf("base %d: ID of a hash in %d at depth %d = %d", base, id, d, got)
				}
			}
		}
		if len(seen) != int(sp.Limit(5)) {
			t.Fatalf("base %d: %d ids below depth 6, want %d", base, len(seen), sp.Limit(5))
		}
	}
}

func TestShardSpaceChildrenPartitionTheParent(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, base := range []uint32{1, 7, 1024} {
		sp := ShardSpace(base)
		for range 2000 {
			h := r.Uint64()
			for d := uint8(0); d < sp.MaxDepth(); d++ {
				id := sp.ID(h, d)
				low, high, err := sp.Children(id)
				if err != nil {
					t.Fatal(err)
				}
				child := sp.ID(h, d+1)
				if child != low && child != high {
					t.Fatalf("base %d: hash %x at depth %d: child %d, not %d or %d", base, h, d+1, child, low, high)
				}
				if (child == high) != (h/uint64(base)>>d&1 == 1) {
					t.Fatalf("base %d: hash %x: the high child holds the keys of bit %d set", base, h, d)
				}
				for _, c := range []uint32{low, high} {
					if p, ok := sp.Parent(c); !ok || p != id {
						t.Fatalf("base %d: Parent(%d) = %d, %v; want %d", base, c, p, ok, id)
					}
				}
				if !sp.Holds(id, h) || !sp.Holds(child, h) || sp.Holds(low^high^child, h) {
					t.Fatalf("base %d: Holds disagrees with ID for hash %x at depth %d", base, h, d)
				}
			}
		}
		if _, ok := sp.Parent(base - 1); ok {
			t.Fatalf("base %d: a base shard has a parent", base)
		}
		if c := sp.Capacity(); uint64(c) != sp.Limit(sp.MaxDepth()) || (c > MaxSplitIDs && c != base) || sp.Limit(sp.MaxDepth()+1) <= MaxSplitIDs {
			t.Fatalf("base %d: capacity %d at depth %d", base, c, sp.MaxDepth())
		}
	}
	deepest := ShardSpace(4).ID(^uint64(0), ShardSpace(4).MaxDepth())
	if _, _, err := ShardSpace(4).Children(deepest); !errors.Is(err, ErrShardDepth) {
		t.Fatalf("Children at the deepest depth: %v, want ErrShardDepth", err)
	}
}

func TestShardMapUnsplitRoutesAsShardOf(t *testing.T) {
	for _, base := range []uint32{1, 5, 256} {
		m, err := NewShardMap(base)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5000 {
			k := fmt.Sprintf("topic-%d", i)
			if got, want := m.OfString(k), ShardOfString(k, base); got != want {
				t.Fatalf("base %d: %q in shard %d, ShardOf says %d", base, k, got, want)
			}
		}
		if m.Len() != int(base) || m.Version() != 0 || m.IDLimit() != base {
			t.Fatalf("base %d: len %d version %d limit %d", base, m.Len(), m.Version(), m.IDLimit())
		}
	}
}

// splitRandomly splits n random live shards of m.
func splitRandomly(t *testing.T, r *rand.Rand, m *ShardMap, n int) *ShardMap {
	t.Helper()
	for range n {
		ids := slices.Collect(m.Shards())
		next, err := m.Split(ids[r.IntN(len(ids))])
		if errors.Is(err, ErrShardDepth) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		m = next
	}
	return m
}

func TestShardMapSplitsPartitionTheHashes(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, base := range []uint32{1, 3, 64} {
		m0, _ := NewShardMap(base)
		m := splitRandomly(t, r, m0, 300)
		if m.Len() != int(base)+int(m.Version()) {
			t.Fatalf("base %d: %d live after %d splits", base, m.Len(), m.Version())
		}
		live := slices.Collect(m.Shards())
		if !slices.IsSorted(live) || len(live) != m.Len() {
			t.Fatalf("base %d: Shards gave %d ids, sorted %v", base, len(live), slices.IsSorted(live))
		}
		for _, id := range live {
			if id >= m.IDLimit() {
				t.Fatalf("base %d: live shard %d at or past the limit %d", base, id, m.IDLimit())
			}
		}
		hits := make(map[uint32]int)
		for range 20000 {
			h := r.Uint64()
			var on []uint32
			for d := uint8(0); d <= MaxShardDepth; d++ {
				if id := m.Space().ID(h, d); m.Live(id) {
					on = append(on, id)
				}
			}
			if len(on) != 1 || m.OfHash(h) != on[0] {
				t.Fatalf("base %d: hash %x has live shards %v on its path, OfHash %d", base, h, on, m.OfHash(h))
			}
			hits[on[0]]++
		}
		// Each split halves a range: a shard at depth d holds 1/(B·2^d) of
		// the hashes.
		for id, n := range hits {
			_, d, _, _ := m.Space().Range(id)
			want := 20000 / float64(uint64(base)<<d)
			if want > 400 && (float64(n) < want*0.7 || float64(n) > want*1.3) {
				t.Fatalf("base %d: shard %d at depth %d holds %d of 20000 hashes, want about %.0f", base, id, d, n, want)
			}
		}
	}
}

func TestShardMapSplitRefusals(t *testing.T) {
	m, _ := NewShardMap(4)
	if _, err := m.Split(4); !errors.Is(err, ErrShardNotLive) {
		t.Fatalf("split of a shard not in the map: %v", err)
	}
	n, err := m.Split(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Split(2); !errors.Is(err, ErrShardNotLive) {
		t.Fatalf("split of a shard already split: %v", err)
	}
	if !m.Live(2) || m.Len() != 4 {
		t.Fatal("Split changed the map it was called on")
	}
	if _, err := NewShardMap(0); !errors.Is(err, ErrMapBase) {
		t.Fatalf("base 0: %v", err)
	}
}

func TestShardMapMergedKnowsBoth(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 50 {
		root, _ := NewShardMap(6)
		common := splitRandomly(t, r, root, r.IntN(20))
		a := splitRandomly(t, r, common, r.IntN(30))
		b := splitRandomly(t, r, common, r.IntN(30))
		ab, err := a.Merged(b)
		if err != nil {
			t.Fatal(err)
		}
		ba, _ := b.Merged(a)
		if !slices.Equal(slices.Collect(ab.Shards()), slices.Collect(ba.Shards())) {
			t.Fatalf("merge is not symmetric: %v against %v", slices.Collect(ab.Shards()), slices.Collect(ba.Shards()))
		}
		for range 5000 {
			h := r.Uint64()
			_, da, _, _ := a.Space().Range(a.OfHash(h))
			_, db, _, _ := b.Space().Range(b.OfHash(h))
			_, dm, _, _ := ab.Space().Range(ab.OfHash(h))
			if dm != max(da, db) {
				t.Fatalf("hash %x: depth %d in the merge, %d and %d in the two", h, dm, da, db)
			}
		}
		if self, _ := a.Merged(a); !slices.Equal(slices.Collect(self.Shards()), slices.Collect(a.Shards())) {
			t.Fatal("a map merged with itself changed")
		}
	}
	x, _ := NewShardMap(3)
	y, _ := NewShardMap(4)
	if _, err := x.Merged(y); !errors.Is(err, ErrMapBase) {
		t.Fatalf("maps of two bases: %v", err)
	}
}

func TestShardMapIncluding(t *testing.T) {
	m, _ := NewShardMap(5)
	sp := m.Space()
	deep := sp.ID(0xdeadbeefcafe, 4)
	n, ok := m.Including(deep)
	if !ok || !n.Live(deep) || n.Version() != 4 || m.Live(deep) {
		t.Fatalf("Including a shard 4 splits down: ok %v live %v version %d", ok, n.Live(deep), n.Version())
	}
	if !n.HasSplit(parent(t, sp, deep)) || n.HasSplit(deep) || m.HasSplit(parent(t, sp, deep)) || n.HasSplit(sp.Capacity()) {
		t.Fatal("HasSplit disagrees with the splits made")
	}
	if same, ok := n.Including(deep); !ok || same != n {
		t.Fatal("Including a live shard made a new map")
	}
	// n split deep's parent's range further on deep's path: an ancestor
	// of deep is older news there.
	parent, _ := sp.Parent(deep)
	if same, ok := n.Including(parent); ok || same != n {
		t.Fatal("Including a shard the map split below took it back")
	}
	if _, ok := m.Including(sp.Capacity()); ok {
		t.Fatal("Including an id past the space's capacity")
	}
	big := ShardSpace(MaxSplitIDs)
	if big.MaxDepth() != 0 || big.Capacity() != MaxSplitIDs {
		t.Fatalf("a base of %d splits to depth %d", MaxSplitIDs, big.MaxDepth())
	}
	if _, _, err := big.Children(7); !errors.Is(err, ErrShardDepth) {
		t.Fatalf("a split past the capacity: %v", err)
	}
}

func parent(t *testing.T, sp ShardSpace, id uint32) uint32 {
	t.Helper()
	p, ok := sp.Parent(id)
	if !ok {
		t.Fatalf("shard %d has no parent", id)
	}
	return p
}

func TestShardMapLookupAllocatesNothing(t *testing.T) {
	m, _ := NewShardMap(8)
	m = splitRandomly(t, rand.New(rand.NewPCG(7, 8)), m, 100)
	if n := testing.AllocsPerRun(1000, func() { _ = m.OfString("some-topic-name") }); n != 0 {
		t.Fatalf("OfString allocates %.0f times", n)
	}
}

func BenchmarkShardOf(b *testing.B) {
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("bench-topic-%d", i)
	}
	b.Run("ShardOf", func(b *testing.B) {
		for i := range b.N {
			_ = ShardOfString(keys[i&1023], 256)
		}
	})
	for _, splits := range []int{0, 256, 2048} {
		m, _ := NewShardMap(256)
		r := rand.New(rand.NewPCG(9, 10))
		for range splits {
			ids := slices.Collect(m.Shards())
			if n, err := m.Split(ids[r.IntN(len(ids))]); err == nil {
				m = n
			}
		}
		b.Run(fmt.Sprintf("map/splits=%d", splits), func(b *testing.B) {
			for i := range b.N {
				_ = m.OfString(keys[i&1023])
			}
		})
	}
}
