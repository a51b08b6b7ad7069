package router

import (
	"fmt"
	"sync/atomic"
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
// never overwrites a newer one. Reads take no lock; updates are lock-free
// compare-and-swap per shard. Safe for concurrent use.
type LeaderTable struct {
	cells   []atomic.Pointer[leaderCell]
	version atomic.Uint64
	termSum atomic.Uint64
}

// NewLeaderTable returns a table for shards [0, shards), every leader
// unknown at term 0.
func NewLeaderTable(shards uint32) *LeaderTable {
	return &LeaderTable{cells: make([]atomic.Pointer[leaderCell], shards)}
}

// Shards returns the number of shards in the table.
func (t *LeaderTable) Shards() uint32 { return uint32(len(t.cells)) }

// Get returns a shard's leader and term; ok is false when the leader is not
// known or the shard is outside the table. It allocates nothing.
func (t *LeaderTable) Get(shard uint32) (leader string, term uint64, ok bool) {
	if shard >= uint32(len(t.cells)) {
		return "", 0, false
	}
	c := t.cells[shard].Load()
	if c == nil {
		return "", 0, false
	}
	return c.leader, c.term, true
}

// Update records leader as the leader of shard at term. It applies only when
// term is at least the current term; at an equal term it replaces a
// different leader (raft elects at most one leader per term, so this only
// corrects a wrong hint). It reports whether the table changed.
func (t *LeaderTable) Update(shard uint32, leader string, term uint64) (bool, error) {
	if shard >= uint32(len(t.cells)) {
		return false, fmt.Errorf("router: leader update for shard %d of %d: %w", shard, len(t.cells), ErrShardRange)
	}
	if leader == "" {
		return false, fmt.Errorf("router: leader update for shard %d: %w", shard, ErrEmptyLeader)
	}
	cell := &t.cells[shard]
	var next *leaderCell
	for {
		cur := cell.Load()
		if cur != nil && (term < cur.term || (term == cur.term && leader == cur.leader)) {
			return false, nil
		}
		if next == nil {
			next = &leaderCell{leader: leader, term: term}
		}
		if cell.CompareAndSwap(cur, next) {
			var was uint64
			if cur != nil {
				was = cur.term
			}
			t.termSum.Add(term - was)
			t.version.Add(1)
			return true, nil
		}
	}
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
	for i := range t.cells {
		if c := t.cells[i].Load(); c != nil {
			dst = append(dst, ShardLeader{Shard: uint32(i), Leader: c.leader, Term: c.term})
		}
	}
	return dst, v
}
