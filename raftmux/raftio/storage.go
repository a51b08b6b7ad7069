package raftio

import (
	"bufio"
	"io"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
)

// Storage adapts a shardstore.Store to raftmux.Storage.
type Storage struct {
	s         *shardstore.Store
	notRaft   []uint64
	commits   atomic.Uint64
	fsyncs    atomic.Uint64
	syncNanos atomic.Int64
	syncHist  histogram.Histogram
}

var _ raftmux.Storage = (*Storage)(nil)

// NewStorage returns the raftmux view of s. notRaft names shard slots of
// the store that hold something other than a raft group (a node's local
// data): Shards leaves them out, so the host never opens them.
func NewStorage(s *shardstore.Store, notRaft ...uint64) *Storage {
	return &Storage{s: s, notRaft: slices.Clone(notRaft)}
}

// StorageStats are the counters of a Storage.
type StorageStats struct {
	Commits  uint64        // batches committed
	Fsyncs   uint64        // of which synced
	SyncTime time.Duration // spent in synced commits: the write, the WAL's fsync and the wait for it
}

// Stats returns the counters.
func (r *Storage) Stats() StorageStats {
	return StorageStats{Commits: r.commits.Load(), Fsyncs: r.fsyncs.Load(), SyncTime: time.Duration(r.syncNanos.Load())}
}

// SyncLatency is the histogram of synced commits: the write, the WAL's
// fsync and the wait for it.
func (r *Storage) SyncLatency() *histogram.Histogram { return &r.syncHist }

// Storage implements raftmux.Storage.
func (r *Storage) Storage(shard uint64) (raft.Storage, error) {
	rs, err := r.s.Storage(shard)
	if err != nil {
		return nil, err
	}
	return rs, nil
}

// NewBatch implements raftmux.Storage. The store's batch is taken at the
// first write (or at Commit): a round that builds a batch and drops it
// unused holds nothing of the store's.
func (r *Storage) NewBatch() raftmux.Batch { return &batch{r: r} }

// Applied implements raftmux.Storage.
func (r *Storage) Applied(shard uint64) (uint64, error) { return r.s.Applied(shard) }

// Compact implements raftmux.Storage.
func (r *Storage) Compact(shard, idx uint64) error { return r.s.Compact(shard, idx) }

// SnapshotData implements raftmux.Storage.
func (r *Storage) SnapshotData(shard uint64) (*raftpb.SnapshotMetadata, io.ReadCloser, error) {
	sr, err := r.s.SnapshotData(shard)
	if err != nil {
		return nil, nil, err
	}
	return sr.Meta(), sr, nil
}

// ApplySnapshot implements raftmux.Storage. An empty data stream (raftmux
// bootstraps a group with one) reaches the store as "no data", which is how
// the store spells it.
func (r *Storage) ApplySnapshot(shard uint64, snap *raftpb.Snapshot, data io.Reader) error {
	if data == nil {
		return r.s.ApplySnapshot(shard, snap, nil)
	}
	br := bufio.NewReader(data)
	if _, err := br.Peek(1); err == io.EOF {
		return r.s.ApplySnapshot(shard, snap, nil)
	}
	return r.s.ApplySnapshot(shard, snap, br)
}

// CheckSnapshot implements raftmux.SnapshotChecker: data must be a whole
// stream of the store's format at meta's index and term. An empty one is
// refused: a sender always streams a header and a checksum, and the store
// takes "no data" to mean an empty state.
func (r *Storage) CheckSnapshot(shard uint64, meta *raftpb.SnapshotMetadata, data []byte) error {
	return shardstore.CheckSnapshot(shard, data, meta.Index, meta.Term)
}

var _ raftmux.SnapshotChecker = (*Storage)(nil)

// DeleteShard implements raftmux.Storage.
func (r *Storage) DeleteShard(shard uint64, t raftmux.Tombstone) error {
	return r.s.DeleteShard(shard, shardstore.Tombstone(t))
}

// Tombstone implements raftmux.Storage.
func (r *Storage) Tombstone(shard uint64) (raftmux.Tombstone, bool, error) {
	t, ok, err := r.s.Tombstone(shard)
	return raftmux.Tombstone(t), ok, err
}

// Shards implements raftmux.Storage.
func (r *Storage) Shards() ([]uint64, error) {
	all := r.s.Shards()
	if len(r.notRaft) == 0 {
		return all, nil
	}
	out := all[:0:0]
	for _, s := range all {
		if !slices.Contains(r.notRaft, s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// batch is a raftmux.Batch over a shardstore.Batch taken lazily; it counts
// group commits and fsyncs.
type batch struct {
	r *Storage
	b *shardstore.Batch
}

func (b *batch) sb() *shardstore.Batch {
	if b.b == nil {
		b.b = b.r.s.NewBatch()
	}
	return b.b
}

func (b *batch) Append(shard uint64, hs *raftpb.HardState, ents []raftpb.Entry) {
	b.sb().Append(shard, hs, ents)
}

func (b *batch) SetConfState(shard uint64, cs *raftpb.ConfState) { b.sb().SetConfState(shard, cs) }

func (b *batch) SetApplied(shard, idx uint64) { b.sb().SetApplied(shard, idx) }

func (b *batch) Seed(shard, index, term uint64, cs *raftpb.ConfState) {
	b.sb().Seed(shard, index, term, cs)
}

func (b *batch) Put(shard uint64, key, value []byte) { b.sb().Put(shard, key, value) }

func (b *batch) Delete(shard uint64, key []byte) { b.sb().Delete(shard, key) }

// Commit commits the batch; an empty synced one still makes every earlier
// unsynced commit durable.
func (b *batch) Commit(sync bool) error {
	b.r.commits.Add(1)
	sb := b.sb()
	b.b = nil
	if !sync {
		return sb.Commit(false)
	}
	b.r.fsyncs.Add(1)
	t0 := time.Now()
	err := sb.Commit(true)
	d := time.Since(t0)
	b.r.syncNanos.Add(int64(d))
	b.r.syncHist.Observe(d)
	return err
}
