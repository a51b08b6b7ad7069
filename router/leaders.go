package router

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shoalmq/shoal/internal/mutant"
)

// ShardLeader is one row of the shard-leader table.
type ShardLeader struct {
	Shard  uint32
	Leader string // node id; "" when no leader is known
	Term   uint64
}

type leaderCell struct {
	leader string
	term   uint64
}

// LeaderTable maps each shard to its current raft leader and term, as learned
// from raft, from gossip and from NotLeader hints. An update is applied only
// with a term at least the current one, so a claim from a deposed leader
// never overwrites a newer one. Reads, and updates that change nothing,
// take no lock; changes are serialized by a mutex (leaders change
// rarely). Safe for concurrent use.
//
// The table holds the cluster's shard map too (Map): a shard exists only
// once its ancestors split, so an update for a shard the map does not hold
// yet (a child whose leader is learned) splits the map down to it. Rows of
// shards that split stay until updated no more; they route nothing.
type LeaderTable struct {
	space ShardSpace
	// cells covers the ids below the map's IDLimit; it grows (a new slice,
	// under mu) as the map splits deeper.
	cells   atomic.Pointer[[]atomic.Pointer[leaderCell]]
	smap    atomic.Pointer[ShardMap]
	mu      sync.Mutex
	version atomic.Uint64
	termSum atomic.Uint64
}

// NewLeaderTable returns a table for a cluster born with base shards, none
// split, every leader unknown at term 0. A base above MaxMapShards is
// clamped to it.
func NewLeaderTable(base uint32) *LeaderTable {
	base = min(max(base, 1), MaxMapShards)
	m, _ := NewShardMap(base)
	t := &LeaderTable{space: m.Space()}
	cells := make([]atomic.Pointer[leaderCell], base)
	t.cells.Store(&cells)
	t.smap.Store(m)
	return t
}

// Shards returns the bound on the ids of the table's shards: the map's
// IDLimit (the base, while no shard split).
func (t *LeaderTable) Shards() uint32 { return uint32(len(*t.cells.Load())) }

// Space returns the shard id space of the table's cluster.
func (t *LeaderTable) Space() ShardSpace { return t.space }

// Map returns the shard map the table has learned.
func (t *LeaderTable) Map() *ShardMap { return t.smap.Load() }

// Get returns a shard's leader and term; ok is false when the leader is not
// known or the shard is outside the table. It allocates nothing.
func (t *LeaderTable) Get(shard uint32) (leader string, term uint64, ok bool) {
	cells := *t.cells.Load()
	if shard >= uint32(len(cells)) {
		return "", 0, false
	}
	c := cells[shard].Load()
	if c == nil {
		return "", 0, false
	}
	return c.leader, c.term, true
}

// Update records leader as the leader of shard at term. It applies only when
// term is at least the current term; at an equal term it replaces a
// different leader (raft elects at most one leader per term, so this only
// corrects a wrong hint). A shard the map does not hold splits the map
// down to it (Including); one the map split already is recorded without
// changing the map. It reports whether the table changed.
func (t *LeaderTable) Update(shard uint32, leader string, term uint64) (bool, error) {
	if !t.space.Valid(uint64(shard)) {
		return false, fmt.Errorf("router: leader update for shard %d of %d: %w", shard, t.space.Capacity(), ErrShardRange)
	}
	if leader == "" {
		return false, fmt.Errorf("router: leader update for shard %d: %w", shard, ErrEmptyLeader)
	}
	// Without the lock, the common case: a row the table has already, of
	// a shard the map holds (a metadata pull merges a whole table).
	if cells := *t.cells.Load(); shard < uint32(len(cells)) && t.smap.Load().Live(shard) {
		if cur := cells[shard].Load(); cur != nil && (term < cur.term || (term == cur.term && leader == cur.leader)) {
			return false, nil
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := false
	if m := t.smap.Load(); !m.Live(shard) && !mutant.On(mutant.SplitStaleRoute) {
		if n, ok := m.Including(shard); ok {
			t.grow(n.IDLimit())
			t.smap.Store(n)
			changed = true
		}
	}
	cells := *t.cells.Load()
	if shard >= uint32(len(cells)) {
		// A shard the map split below long ago: no row to keep.
		if changed {
			t.version.Add(1)
		}
		return changed, nil
	}
	cell := &cells[shard]
	cur := cell.Load()
	if cur != nil && (term < cur.term || (term == cur.term && leader == cur.leader)) {
		if changed {
			t.version.Add(1)
		}
		return changed, nil
	}
	cell.Store(&leaderCell{leader: leader, term: term})
	var was uint64
	if cur != nil {
		was = cur.term
	}
	t.termSum.Add(term - was)
	t.version.Add(1)
	return true, nil
}

// grow makes the cells cover ids below limit. Called under mu.
func (t *LeaderTable) grow(limit uint32) {
	old := *t.cells.Load()
	if limit <= uint32(len(old)) {
		return
	}
	cells := make([]atomic.Pointer[leaderCell], limit)
	for i := range old {
		cells[i].Store(old[i].Load())
	}
	t.cells.Store(&cells)
}

// Version returns a counter that changes whenever the table changes. Two
// equal reads with no change in between mean no update was applied.
func (t *LeaderTable) Version() uint64 { return t.version.Load() }

// TermSum returns the sum of every shard's term: two tables that agree on
// every row have the same sum, and a row learned at a later term raises
// it. Nodes compare it to know whose table is newer, without a scan.
func (t *LeaderTable) TermSum() uint64 { return t.termSum.Load() }

// Snapshot appends every shard with a known leader to dst in shard order
// and returns the table version read before the scan: rows reflect at least
// that version.
func (t *LeaderTable) Snapshot(dst []ShardLeader) ([]ShardLeader, uint64) {
	v := t.version.Load()
	cells := *t.cells.Load()
	for i := range cells {
		if c := cells[i].Load(); c != nil {
			dst = append(dst, ShardLeader{Shard: uint32(i), Leader: c.leader, Term: c.term})
		}
	}
	return dst, v
}
