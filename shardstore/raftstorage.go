package shardstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// RaftStorage is one shard's go.etcd.io/raft/v3 Storage. Its log bounds, the
// last entry's term and a suffix of recent entries live in memory, so
// LastIndex, FirstIndex, Term of recent entries and Entries of recent ranges
// read no disk and do not allocate.
type RaftStorage struct {
	store *Store
	shard uint64

	mu         sync.Mutex
	deleted    bool
	truncIndex uint64 // last index covered by the snapshot/compaction
	truncTerm  uint64
	last       uint64 // last index in the log (truncIndex if empty)
	lastTerm   uint64
	applied    uint64
	hs         hardState
	// cache holds entries [last+1-len(cache), last]. Its elements are never
	// written in place once set: a conflicting append builds a new array,
	// and appends write only past the end, which no slice returned by
	// Entries can reach (they are capped), so those slices stay valid.
	cache      []raftpb.Entry
	cacheBytes atomic.Int64
	ref        atomic.Bool // CLOCK reference bit
	ringPos    int         // index in Store.ring, guarded by Store.mu
}

var _ raft.Storage = (*RaftStorage)(nil)

// Shard returns the shard id.
func (r *RaftStorage) Shard() uint64 { return r.shard }

func (r *RaftStorage) check() error {
	if r.deleted {
		return fmt.Errorf("shardstore: shard %d: %w", r.shard, ErrShardDeleted)
	}
	if r.store.closed.Load() {
		return ErrClosed
	}
	return nil
}

// InitialState returns the saved HardState (empty if none) and ConfState.
// Its commit index is the one written with the term and vote or the applied
// index, whichever is higher (see Batch.Append).
func (r *RaftStorage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	r.mu.Lock()
	err := r.check()
	hs := r.hs
	if hs != (hardState{}) {
		hs.commit = max(hs.commit, r.applied)
	}
	r.mu.Unlock()
	if err != nil {
		return raftpb.HardState{}, raftpb.ConfState{}, err
	}
	cs, err := r.store.confState(r.store.db, r.shard)
	if err != nil {
		return raftpb.HardState{}, raftpb.ConfState{}, err
	}
	return hs.proto(), cs, nil
}

func (s *Store) confState(rd pebble.Reader, shard uint64) (raftpb.ConfState, error) {
	key := appendStateKey(nil, shard, stateConfState)
	v, closer, err := rd.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return raftpb.ConfState{}, nil
	}
	if err != nil {
		return raftpb.ConfState{}, fmt.Errorf("shardstore: read %s: %w", keyString(key), err)
	}
	defer closer.Close()
	return decodeConfState(key, v)
}

// FirstIndex returns the first index still in the log.
func (r *RaftStorage) FirstIndex() (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.truncIndex + 1, nil
}

// LastIndex returns the index of the last entry in the log.
func (r *RaftStorage) LastIndex() (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.check(); err != nil {
		return 0, err
	}
	return r.last, nil
}

// Applied returns the applied index recorded for the shard.
func (r *RaftStorage) Applied() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.applied
}

// Term returns the term of entry i, for i in [FirstIndex()-1, LastIndex()].
func (r *RaftStorage) Term(i uint64) (uint64, error) {
	r.mu.Lock()
	if err := r.check(); err != nil {
		r.mu.Unlock()
		return 0, err
	}
	switch cacheLo := r.last + 1 - uint64(len(r.cache)); {
	case i == r.truncIndex:
		t := r.truncTerm
		r.mu.Unlock()
		return t, nil
	case i < r.truncIndex:
		r.mu.Unlock()
		return 0, raft.ErrCompacted
	case i > r.last:
		r.mu.Unlock()
		return 0, raft.ErrUnavailable
	case i == r.last:
		t := r.lastTerm
		r.mu.Unlock()
		return t, nil
	case i >= cacheLo:
		t := r.cache[i-cacheLo].Term
		r.ref.Store(true)
		r.mu.Unlock()
		return t, nil
	}
	r.mu.Unlock()
	return r.store.diskTerm(r.store.db, r.shard, i)
}

// diskTerm reads the term of log entry i from rd.
func (s *Store) diskTerm(rd pebble.Reader, shard, i uint64) (uint64, error) {
	var kb [logKeyLen]byte
	key := appendLogKey(kb[:0], shard, i)
	v, closer, err := rd.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, raft.ErrCompacted // truncated since the bounds were read
	}
	if err != nil {
		return 0, fmt.Errorf("shardstore: read %s: %w", keyString(key), err)
	}
	defer closer.Close()
	return decodeEntryTerm(key, v)
}

// Entries returns the entries [lo, hi), at most maxSize bytes of them
// (protobuf encoding size) but at least one. Cached entries are returned
// without copying; the returned slice has no spare capacity, so a caller's
// append cannot reach the cache.
func (r *RaftStorage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	r.mu.Lock()
	if err := r.check(); err != nil {
		r.mu.Unlock()
		return nil, err
	}
	if lo <= r.truncIndex {
		r.mu.Unlock()
		return nil, raft.ErrCompacted
	}
	if hi > r.last+1 || lo > hi {
		last := r.last
		r.mu.Unlock()
		return nil, fmt.Errorf("shardstore: shard %d: entries [%d, %d) beyond last index %d: %w", r.shard, lo, hi, last, raft.ErrUnavailable)
	}
	if lo == hi {
		r.mu.Unlock()
		return nil, nil
	}
	cache := r.cache
	cacheLo := r.last + 1 - uint64(len(cache))
	if len(cache) > 0 {
		r.ref.Store(true)
	}
	r.mu.Unlock()
	if lo >= cacheLo {
		ents := cache[lo-cacheLo : hi-cacheLo]
		n := limitEntries(ents, maxSize, 0)
		return ents[:n:n], nil
	}
	ents, size, err := r.store.diskEntries(r.store.db, r.shard, lo, min(hi, cacheLo), maxSize)
	if err != nil {
		return nil, err
	}
	if uint64(len(ents)) == min(hi, cacheLo)-lo && hi > cacheLo {
		more := cache[:hi-cacheLo]
		n := limitEntries(more, maxSize, size)
		ents = append(ents, more[:n]...)
	}
	return ents, nil
}

// limitEntries is how many of ents fit in maxSize given used bytes already
// taken; at least one if nothing is taken yet.
func limitEntries(ents []raftpb.Entry, maxSize, used uint64) int {
	for i := range ents {
		sz := entrySize(&ents[i])
		used += sz
		if used > maxSize {
			if i == 0 && used == sz {
				return 1
			}
			return i
		}
	}
	return len(ents)
}

// diskEntries reads entries [lo, hi) of shard from rd up to maxSize bytes.
func (s *Store) diskEntries(rd pebble.Reader, shard, lo, hi, maxSize uint64) ([]raftpb.Entry, uint64, error) {
	klo, khi := logSpan(shard, lo, hi)
	it, err := rd.NewIter(&pebble.IterOptions{LowerBound: klo, UpperBound: khi})
	if err != nil {
		return nil, 0, fmt.Errorf("shardstore: shard %d: read log: %w", shard, err)
	}
	ents := make([]raftpb.Entry, 0, min(hi-lo, 64))
	var size uint64
	full := false // stopped because maxSize was reached
	next := lo
	for valid := it.First(); valid && !full; valid = it.Next() {
		k := it.Key()
		if len(k) != logKeyLen {
			it.Close()
			return nil, 0, corrupt(k, errors.New("bad log key length"))
		}
		idx := binary.BigEndian.Uint64(k[shardPrefixLen+1:])
		if idx != next {
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return nil, 0, fmt.Errorf("shardstore: read %s: %w", keyString(k), err)
		}
		e, err := decodeEntry(k, v, idx)
		if err != nil {
			it.Close()
			return nil, 0, err
		}
		sz := entrySize(&e)
		if len(ents) > 0 && size+sz > maxSize {
			full = true
			break
		}
		size += sz
		ents = append(ents, e)
		next++
		full = size >= maxSize
	}
	if err := it.Close(); err != nil {
		return nil, 0, fmt.Errorf("shardstore: shard %d: read log: %w", shard, err)
	}
	if next < hi && !full {
		return nil, 0, fmt.Errorf("shardstore: shard %d: log entry %d missing: %w", shard, next, raft.ErrUnavailable)
	}
	return ents, size, nil
}

// Snapshot returns the metadata of a snapshot at the applied index: its
// term and the ConfState recorded with it. The data is not in it; the
// sender streams it with Store.SnapshotData, whose header carries the
// metadata of the state actually sent (it may be newer).
func (r *RaftStorage) Snapshot() (raftpb.Snapshot, error) {
	r.mu.Lock()
	if err := r.check(); err != nil {
		r.mu.Unlock()
		return raftpb.Snapshot{}, err
	}
	r.mu.Unlock()
	snap := r.store.db.NewSnapshot()
	defer snap.Close()
	meta, err := r.store.snapshotMeta(snap, r.shard)
	if err != nil {
		return raftpb.Snapshot{}, err
	}
	if meta.Index == 0 {
		// Nothing applied yet: raft must not send an empty snapshot.
		return raftpb.Snapshot{}, raft.ErrSnapshotTemporarilyUnavailable
	}
	return raftpb.Snapshot{Metadata: *meta}, nil
}

// dropCacheLocked empties the cache and returns the bytes freed.
func (r *RaftStorage) dropCacheLocked() int64 {
	n := r.cacheBytes.Swap(0)
	r.cache = nil
	return n
}

// trimCacheLocked drops cached entries with index <= upTo and returns the
// bytes freed.
func (r *RaftStorage) trimCacheLocked(upTo uint64) int64 {
	cacheLo := r.last + 1 - uint64(len(r.cache))
	if len(r.cache) == 0 || upTo < cacheLo {
		return 0
	}
	n := min(upTo-cacheLo+1, uint64(len(r.cache)))
	var freed int64
	for i := range r.cache[:n] {
		freed += entryCost(&r.cache[i])
	}
	r.cache = r.cache[n:]
	if len(r.cache) == 0 {
		r.cache = nil
	}
	r.cacheBytes.Add(-freed)
	return freed
}
