package shardstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Batch collects the writes of many shards (HardStates, log appends, log
// truncations, applied indexes, configurations and state-machine data) and
// commits them as one Pebble batch with at most one fsync. The raft layer
// builds one per round. A Batch is used by one goroutine; after Commit or
// Close it must not be used again.
//
// Methods that cannot proceed record the first error, which Commit returns
// without writing anything.
//
// Point writes are held back and reach the Pebble batch sorted by key (a
// range deletion, and Commit, write out what is held, so the order against
// range deletions is kept; writes of one key keep their order). Pebble's
// memtable inserts a batch's keys one after another, reusing the skiplist
// position of the previous key: in key order each insert starts next to
// where the last one ended instead of from the top of the list, which is
// what a round touching many shards in arrival order costs otherwise.
type Batch struct {
	s    *Store
	pb   *pebble.Batch
	ops  []shardOp
	idx  map[uint64]int
	key  []byte
	val  []byte
	held []heldWrite
	buf  []byte // keys and values of held
	err  error
}

// heldWrite is a point write waiting in Batch.held: key buf[k:v], value
// buf[v:end] (a deletion has none).
type heldWrite struct {
	k, v, end int
	del       bool
}

// shardOp is the pending change of one shard's raft state in a batch.
type shardOp struct {
	r         *RaftStorage
	baseLast  uint64 // r.last when the batch first touched the shard
	baseTrunc uint64
	last      uint64 // last index once the batch is applied
	lastTerm  uint64
	trunc     uint64
	truncTerm uint64
	firstNew  uint64         // index of ents[0]; 0 if no entries
	ents      []raftpb.Entry // new log suffix [firstNew, last]
	hs        hardState      // the HardState as written: its commit moves only with its term or vote
	hasHS     bool           // hs is written by this batch
	commit    uint64         // the highest commit index Append was given
	applied   uint64
	hasApply  bool
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *Batch {
	var b *Batch
	s.freeMu.Lock()
	if n := len(s.free); n > 0 {
		b = s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
	}
	s.freeMu.Unlock()
	if b == nil {
		b = &Batch{s: s, idx: make(map[uint64]int), key: make([]byte, 0, maxKeyScratch)}
	}
	b.pb = s.db.NewBatch()
	return b
}

// op returns the pending state of shard, loading the shard if needed.
func (b *Batch) op(shard uint64) *shardOp {
	if i, ok := b.idx[shard]; ok {
		return &b.ops[i]
	}
	r, err := b.s.Storage(shard)
	if err != nil {
		b.fail(err)
		return nil
	}
	r.mu.Lock()
	op := shardOp{
		r: r, baseLast: r.last, baseTrunc: r.truncIndex,
		last: r.last, lastTerm: r.lastTerm, trunc: r.truncIndex, truncTerm: r.truncTerm,
		hs: r.hs, applied: r.applied,
	}
	r.mu.Unlock()
	b.idx[shard] = len(b.ops)
	b.ops = append(b.ops, op)
	return &b.ops[len(b.ops)-1]
}

func (b *Batch) fail(err error) {
	if b.err == nil {
		b.err = err
	}
}

func (b *Batch) set(key, value []byte) {
	k := len(b.buf)
	b.buf = append(append(b.buf, key...), value...)
	b.held = append(b.held, heldWrite{k: k, v: k + len(key), end: len(b.buf)})
}

func (b *Batch) del(key []byte) {
	k := len(b.buf)
	b.buf = append(b.buf, key...)
	b.held = append(b.held, heldWrite{k: k, v: len(b.buf), end: len(b.buf), del: true})
}

// writeHeld writes the held point writes into the Pebble batch in key
// order, those of one key in the order they were made.
func (b *Batch) writeHeld() {
	if len(b.held) == 0 {
		return
	}
	buf := b.buf
	slices.SortStableFunc(b.held, func(x, y heldWrite) int {
		return bytes.Compare(buf[x.k:x.v], buf[y.k:y.v])
	})
	for _, h := range b.held {
		var err error
		if h.del {
			err = b.pb.Delete(buf[h.k:h.v], nil)
		} else {
			err = b.pb.Set(buf[h.k:h.v], buf[h.v:h.end], nil)
		}
		if err != nil {
			b.fail(fmt.Errorf("shardstore: batch %s: %w", keyString(buf[h.k:h.v]), err))
			break
		}
	}
	b.held = b.held[:0]
	b.buf = b.buf[:0]
}

// Append records shard's HardState (skipped if nil or empty) and entries.
// Entries at indexes already in the log replace them and every later entry
// is removed, as raft requires; entries already compacted are skipped. The
// cache keeps copies of the entries after Commit, sharing their Data: the
// entries' data must not be mutated.
//
// The HardState is written only when its term or vote differs from the one
// recorded. A change of the commit index alone, which most rounds of a
// busy shard make, is not written: the commit index is volatile state in
// Raft, and InitialState reports it as the recorded one or the applied
// index, whichever is higher, which is all a restarted replica needs (the
// package doc says why that is safe). It saves a key per shard and round.
func (b *Batch) Append(shard uint64, hs *raftpb.HardState, ents []raftpb.Entry) {
	if b.err != nil {
		return
	}
	op := b.op(shard)
	if op == nil {
		return
	}
	if len(ents) > 0 {
		b.appendEntries(shard, op, ents)
	}
	if hs == nil || raft.IsEmptyHardState(*hs) || b.err != nil {
		return
	}
	op.commit = max(op.commit, hs.Commit)
	if hs.Term == op.hs.term && hs.Vote == op.hs.vote {
		return
	}
	op.hs = hardState{term: hs.Term, vote: hs.Vote, commit: hs.Commit}
	op.hasHS = true
	b.key = appendStateKey(b.key[:0], shard, stateHardState)
	b.val = appendHardState(b.val[:0], hs)
	b.set(b.key, b.val)
}

func (b *Batch) appendEntries(shard uint64, op *shardOp, ents []raftpb.Entry) {
	first := ents[0].Index
	for i := range ents {
		if idx := ents[i].Index; idx != first+uint64(i) {
			b.fail(fmt.Errorf("shardstore: shard %d: entry %d at position %d after %d: %w", shard, idx, i, first, ErrLogGap))
			return
		}
	}
	if first <= op.trunc {
		skip := op.trunc + 1 - first
		if skip >= uint64(len(ents)) {
			return
		}
		ents, first = ents[skip:], op.trunc+1
	}
	if first > op.last+1 {
		b.fail(fmt.Errorf("shardstore: shard %d: entries from %d after last index %d: %w", shard, first, op.last, ErrLogGap))
		return
	}
	for i := range ents {
		e := &ents[i]
		b.key = appendLogKey(b.key[:0], shard, e.Index)
		b.val = appendEntryValue(b.val[:0], e)
		b.set(b.key, b.val)
	}
	newLast := first + uint64(len(ents)) - 1
	if newLast < op.last {
		b.deleteLog(shard, newLast+1, op.last+1)
	}
	if op.firstNew != 0 && first >= op.firstNew {
		keep := first - op.firstNew
		op.ents = append(op.ents[:keep:keep], ents...)
	} else {
		op.firstNew = first
		op.ents = ents[:len(ents):len(ents)]
	}
	op.last = newLast
	op.lastTerm = ents[len(ents)-1].Term
}

// SetApplied records the applied index of shard, atomically with the
// state-machine writes of the same batch.
func (b *Batch) SetApplied(shard uint64, index uint64) {
	if b.err != nil {
		return
	}
	op := b.op(shard)
	if op == nil {
		return
	}
	op.applied, op.hasApply = index, true
	b.key = appendStateKey(b.key[:0], shard, stateApplied)
	b.val = appendUint64Value(b.val[:0], index)
	b.set(b.key, b.val)
}

// SetConfState records shard's configuration as of its applied index; it is
// what InitialState and snapshots report.
func (b *Batch) SetConfState(shard uint64, cs *raftpb.ConfState) {
	if b.err != nil {
		return
	}
	b.key = appendStateKey(b.key[:0], shard, stateConfState)
	b.val = appendConfState(b.val[:0], cs)
	b.set(b.key, b.val)
}

// Seed starts shard's empty replica state at index: its log empty with
// (index, term) as its truncation point, its applied and commit indexes at
// index, its configuration cs. A raft group born from an entry of another
// (a split) starts so, from data the same batch writes, where a group born
// by itself starts at index 1. The shard must hold no log, no applied
// state and no configuration; a HardState it holds at a later term (a vote
// given) is kept.
func (b *Batch) Seed(shard, index, term uint64, cs *raftpb.ConfState) {
	if b.err != nil {
		return
	}
	if index == 0 || term == 0 {
		b.fail(fmt.Errorf("shardstore: shard %d: seed at index %d, term %d: %w", shard, index, term, ErrInvalid))
		return
	}
	op := b.op(shard)
	if op == nil {
		return
	}
	if op.last != 0 || op.trunc != 0 || op.applied != 0 || op.firstNew != 0 {
		b.fail(fmt.Errorf("shardstore: shard %d: seed at %d over a log to %d (applied %d): %w", shard, index, op.last, op.applied, ErrInvalid))
		return
	}
	if term > op.hs.term {
		op.hs = hardState{term: term}
	}
	op.hs.commit = index
	op.hasHS = true
	op.commit = index
	op.trunc, op.truncTerm = index, term
	op.last, op.lastTerm = index, term
	op.applied, op.hasApply = index, true
	hsp := op.hs.proto()
	b.key = appendStateKey(b.key[:0], shard, stateHardState)
	b.val = appendHardState(b.val[:0], &hsp)
	b.set(b.key, b.val)
	b.key = appendStateKey(b.key[:0], shard, stateApplied)
	b.val = appendUint64Value(b.val[:0], index)
	b.set(b.key, b.val)
	b.key = appendStateKey(b.key[:0], shard, stateTruncated)
	b.val = appendTruncated(b.val[:0], index, term)
	b.set(b.key, b.val)
	b.SetConfState(shard, cs)
}

// Put sets key of shard's state-machine data.
func (b *Batch) Put(shard uint64, key, value []byte) {
	if b.err != nil {
		return
	}
	b.key = appendDataKey(b.key[:0], shard, key)
	b.set(b.key, value)
}

// Delete removes key of shard's state-machine data.
func (b *Batch) Delete(shard uint64, key []byte) {
	if b.err != nil {
		return
	}
	b.key = appendDataKey(b.key[:0], shard, key)
	b.del(b.key)
}

// Compact truncates shard's log up to and including index, keeping index's
// term for Term. index must not exceed the applied index (as of this batch)
// nor the last index; compacting at or below the current truncation point
// fails with raft.ErrCompacted.
func (b *Batch) Compact(shard uint64, index uint64) {
	if b.err != nil {
		return
	}
	op := b.op(shard)
	if op == nil {
		return
	}
	if index <= op.trunc {
		b.fail(fmt.Errorf("shardstore: shard %d: compact %d at or below %d: %w", shard, index, op.trunc, raft.ErrCompacted))
		return
	}
	if index > op.applied || index > op.last {
		b.fail(fmt.Errorf("shardstore: shard %d: compact %d beyond applied %d or last %d: %w", shard, index, op.applied, op.last, ErrInvalid))
		return
	}
	term, err := b.termForCompact(shard, op, index)
	if err != nil {
		b.fail(err)
		return
	}
	b.deleteLog(shard, op.trunc+1, index+1)
	b.key = appendStateKey(b.key[:0], shard, stateTruncated)
	b.val = appendTruncated(b.val[:0], index, term)
	b.set(b.key, b.val)
	op.trunc, op.truncTerm = index, term
	if op.firstNew != 0 && index >= op.firstNew {
		op.ents = op.ents[index+1-op.firstNew:]
		op.firstNew = index + 1
		if len(op.ents) == 0 {
			op.ents, op.firstNew = nil, 0
		}
	}
}

// maxPointDeletes is the most log entries deleted one key at a time; longer
// runs take one range deletion. Range tombstones in the memtable slow every
// read that crosses them until a flush, and a round of thousands of shards
// each truncating a few entries would add thousands of them.
const maxPointDeletes = 256

// deleteLog deletes shard's log entries [from, to).
func (b *Batch) deleteLog(shard, from, to uint64) {
	if to-from > maxPointDeletes {
		lo, hi := logSpan(shard, from, to)
		b.writeHeld()
		if err := b.pb.DeleteRange(lo, hi, nil); err != nil {
			b.fail(fmt.Errorf("shardstore: shard %d: batch: %w", shard, err))
		}
		return
	}
	for i := from; i < to; i++ {
		b.key = appendLogKey(b.key[:0], shard, i)
		b.del(b.key)
	}
}

func (b *Batch) termForCompact(shard uint64, op *shardOp, index uint64) (uint64, error) {
	if index == op.last {
		return op.lastTerm, nil
	}
	if op.firstNew != 0 && index >= op.firstNew {
		return op.ents[index-op.firstNew].Term, nil
	}
	return op.r.Term(index)
}

// Close discards an uncommitted batch.
func (b *Batch) Close() {
	if b.pb != nil {
		b.release()
	}
}

func (b *Batch) release() {
	_ = b.pb.Close()
	b.pb = nil
	if cap(b.ops) > maxKeptOps {
		// A round over most of a big node's shards (start-up, elections)
		// is rare: its slices are not worth keeping.
		b.ops, b.idx = nil, make(map[uint64]int)
	} else {
		clear(b.ops)
		b.ops = b.ops[:0]
		clear(b.idx)
	}
	b.err = nil
	if cap(b.val) > 1<<20 {
		b.val = nil
	}
	b.held = b.held[:0]
	b.buf = b.buf[:0]
	if cap(b.buf) > maxKeptHeldBytes {
		b.held, b.buf = nil, nil
	}
	s := b.s
	s.freeMu.Lock()
	if len(s.free) < maxFreeBatches {
		s.free = append(s.free, b)
	}
	s.freeMu.Unlock()
}

// Commit writes the batch, fsyncing the WAL when sync is set; the caches and
// log bounds change only once the write succeeded.
func (b *Batch) Commit(sync bool) error {
	defer b.release()
	if b.err != nil {
		return b.err
	}
	if b.s.closed.Load() {
		return ErrClosed
	}
	for i := range b.ops {
		op := &b.ops[i]
		if op.commit > op.last {
			return fmt.Errorf("shardstore: shard %d: commit %d beyond last index %d: %w", op.r.shard, op.commit, op.last, ErrInvalid)
		}
		r := op.r
		r.mu.Lock()
		stale := r.last != op.baseLast || r.truncIndex != op.baseTrunc
		deleted := r.deleted
		r.mu.Unlock()
		if deleted {
			return fmt.Errorf("shardstore: shard %d: %w", r.shard, ErrShardDeleted)
		}
		if stale {
			return fmt.Errorf("shardstore: shard %d: %w", r.shard, ErrConcurrentWrite)
		}
	}
	if b.writeHeld(); b.err != nil {
		return b.err
	}
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
		if b.pb.Empty() {
			// Pebble commits an empty batch without touching the WAL; a
			// synced commit must still make every earlier unsynced one
			// durable.
			if err := b.pb.LogData(nil, nil); err != nil {
				return fmt.Errorf("shardstore: commit: %w", err)
			}
		}
	}
	if err := b.pb.Commit(wo); err != nil {
		if errors.Is(err, pebble.ErrClosed) {
			return ErrClosed
		}
		return fmt.Errorf("shardstore: commit: %w", err)
	}
	for i := range b.ops {
		b.s.applyOp(&b.ops[i])
	}
	b.s.maybeEvict()
	return nil
}

// applyOp moves a committed op into the shard's memory state.
func (s *Store) applyOp(op *shardOp) {
	r := op.r
	r.mu.Lock()
	var delta int64
	if op.firstNew != 0 && s.cache.budget > 0 {
		cacheLo := r.last + 1 - uint64(len(r.cache))
		switch {
		case len(r.cache) > 0 && op.firstNew == r.last+1:
			r.cache = append(r.cache, op.ents...)
		case len(r.cache) > 0 && op.firstNew > cacheLo && op.firstNew <= r.last:
			// Conflict inside the cache: a new array, so slices handed out
			// earlier keep their entries.
			keep := op.firstNew - cacheLo
			for i := range r.cache[keep:] {
				delta -= entryCost(&r.cache[keep+uint64(i)])
			}
			c := make([]raftpb.Entry, 0, keep+uint64(len(op.ents)))
			r.cache = append(append(c, r.cache[:keep]...), op.ents...)
		default:
			delta -= r.cacheBytes.Load()
			r.cache = append(make([]raftpb.Entry, 0, len(op.ents)), op.ents...)
		}
		for i := range op.ents {
			delta += entryCost(&op.ents[i])
		}
	} else if op.firstNew != 0 {
		delta -= r.cacheBytes.Load()
		r.cache = nil
	}
	r.cacheBytes.Add(delta)
	r.last, r.lastTerm = op.last, op.lastTerm
	r.truncIndex, r.truncTerm = op.trunc, op.truncTerm
	freed := r.trimCacheLocked(r.truncIndex)
	// Keep one shard within its share of the budget, dropping oldest first.
	if r.cacheBytes.Load() > s.cache.shardMax && len(r.cache) > 0 {
		var n int
		over := r.cacheBytes.Load() - s.cache.shardMax
		var f int64
		for n < len(r.cache) && f < over {
			f += entryCost(&r.cache[n])
			n++
		}
		freed += r.trimCacheLocked(r.last + 1 - uint64(len(r.cache)) + uint64(n) - 1)
	}
	if op.hasHS {
		r.hs = op.hs
	}
	if op.hasApply {
		r.applied = op.applied
	}
	if op.firstNew != 0 {
		r.ref.Store(true)
	}
	r.mu.Unlock()
	s.cache.charge(delta - freed)
}

// Compact truncates shard's log up to and including index (see
// Batch.Compact) in a batch of its own. It does not fsync: a truncation lost
// in a crash leaves a longer log, which is still consistent.
func (s *Store) Compact(shard uint64, index uint64) error {
	b := s.NewBatch()
	b.Compact(shard, index)
	return b.Commit(false)
}
