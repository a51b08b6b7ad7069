package raftmuxtest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
)

// MemStore is a raftmux.Storage kept in memory. With a log file, every
// synced Commit writes the batch to it and fsyncs, so durability costs what
// a real store's group commit costs.
type MemStore struct {
	mu     sync.Mutex
	shards map[uint64]*memShard
	tombs  map[uint64]raftmux.Tombstone

	fileMu  sync.Mutex
	file    *os.File
	buf     []byte
	written int64 // bytes written to file (under fileMu)

	// Group commit: a committer whose bytes a concurrent fsync already
	// covered returns without its own, as a real WAL does.
	syncMu sync.Mutex
	synced int64

	commits    atomic.Int64
	fsyncs     atomic.Int64
	fsyncNanos atomic.Int64
}

type memShard struct {
	// ms is swapped whole by ApplySnapshot; raft's reads go straight to
	// it, without the store's lock.
	ms      atomic.Pointer[raft.MemoryStorage]
	cs      *raftpb.ConfState
	applied uint64
	kv      map[string][]byte
}

// NewMemStore returns an empty store. If path is not empty, synced commits
// are appended to that file and fsynced.
func NewMemStore(path string) (*MemStore, error) {
	s := &MemStore{shards: make(map[uint64]*memShard)}
	if path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("raftmuxtest: open log: %w", err)
		}
		s.file = f
	}
	return s, nil
}

// Close closes the log file.
func (s *MemStore) Close() error {
	if s.file != nil {
		return s.file.Close()
	}
	return nil
}

// Commits and Fsyncs count Batch.Commit calls and fsyncs (synced commits).
func (s *MemStore) Commits() int64 { return s.commits.Load() }

// Fsyncs counts synced commits.
func (s *MemStore) Fsyncs() int64 { return s.fsyncs.Load() }

// FsyncTime is the total time synced commits spent writing and fsyncing.
func (s *MemStore) FsyncTime() time.Duration { return time.Duration(s.fsyncNanos.Load()) }

func (s *MemStore) shard(id uint64) *memShard {
	sh := s.shards[id]
	if sh == nil {
		sh = &memShard{cs: &raftpb.ConfState{}, kv: make(map[string][]byte)}
		sh.ms.Store(raft.NewMemoryStorage())
		s.shards[id] = sh
	}
	return sh
}

// memRaftStorage is the raft.Storage of one shard; it follows the shard's
// current MemoryStorage, which ApplySnapshot replaces.
type memRaftStorage struct {
	s  *MemStore
	sh *memShard
}

func (m memRaftStorage) ms() *raft.MemoryStorage { return m.sh.ms.Load() }

// InitialState reports the ConfState of the last applied conf change, not
// the (older) one of the last compaction snapshot.
func (m memRaftStorage) InitialState() (raftpb.HardState, raftpb.ConfState, error) {
	hs, _, err := m.ms().InitialState()
	if err != nil {
		return raftpb.HardState{}, raftpb.ConfState{}, err
	}
	m.s.mu.Lock()
	defer m.s.mu.Unlock()
	return hs, *cloneConfState(m.sh.cs), nil
}

// cloneConfState copies cs and its slices.
func cloneConfState(cs *raftpb.ConfState) *raftpb.ConfState {
	if cs == nil {
		return &raftpb.ConfState{}
	}
	return &raftpb.ConfState{
		Voters:         slices.Clone(cs.Voters),
		Learners:       slices.Clone(cs.Learners),
		VotersOutgoing: slices.Clone(cs.VotersOutgoing),
		LearnersNext:   slices.Clone(cs.LearnersNext),
		AutoLeave:      cs.AutoLeave,
	}
}

func (m memRaftStorage) Entries(lo, hi, maxSize uint64) ([]raftpb.Entry, error) {
	return m.ms().Entries(lo, hi, maxSize)
}
func (m memRaftStorage) Term(i uint64) (uint64, error)      { return m.ms().Term(i) }
func (m memRaftStorage) LastIndex() (uint64, error)         { return m.ms().LastIndex() }
func (m memRaftStorage) FirstIndex() (uint64, error)        { return m.ms().FirstIndex() }
func (m memRaftStorage) Snapshot() (raftpb.Snapshot, error) { return m.ms().Snapshot() }

// Storage implements raftmux.Storage.
func (s *MemStore) Storage(shard uint64) (raft.Storage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return memRaftStorage{s: s, sh: s.shard(shard)}, nil
}

// Applied implements raftmux.Storage.
func (s *MemStore) Applied(shard uint64) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shard(shard).applied, nil
}

// Compact implements raftmux.Storage. The snapshot it leaves carries the
// current ConfState, which raftmux only uses as the snapshot's placeholder
// (SnapshotData supplies what is sent).
func (s *MemStore) Compact(shard, idx uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shard(shard)
	if idx > sh.applied {
		return fmt.Errorf("raftmuxtest: compact %d past applied %d", idx, sh.applied)
	}
	if _, err := sh.ms.Load().CreateSnapshot(idx, cloneConfState(sh.cs), nil); err != nil {
		if errors.Is(err, raft.ErrSnapOutOfDate) {
			return nil
		}
		return err
	}
	return sh.ms.Load().Compact(idx)
}

// SnapshotData implements raftmux.Storage.
func (s *MemStore) SnapshotData(shard uint64) (*raftpb.SnapshotMetadata, io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shard(shard)
	term, err := sh.ms.Load().Term(sh.applied)
	if err != nil {
		return nil, nil, fmt.Errorf("raftmuxtest: term of applied %d: %w", sh.applied, err)
	}
	keys := make([]string, 0, len(sh.kv))
	for k := range sh.kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b []byte
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
		b = binary.AppendUvarint(b, uint64(len(sh.kv[k])))
		b = append(b, sh.kv[k]...)
	}
	meta := &raftpb.SnapshotMetadata{Index: sh.applied, Term: term, ConfState: *cloneConfState(sh.cs)}
	return meta, io.NopCloser(bytes.NewReader(b)), nil
}

// ErrCorrupt is returned for undecodable snapshot data.
var ErrCorrupt = errors.New("raftmuxtest: corrupt snapshot data")

func decodeKV(b []byte) (map[string][]byte, error) {
	kv := make(map[string][]byte)
	for len(b) > 0 {
		var parts [2][]byte
		for i := range parts {
			n, k := binary.Uvarint(b)
			if k <= 0 || n > uint64(len(b)-k) {
				return nil, ErrCorrupt
			}
			parts[i] = b[k : k+int(n)]
			b = b[k+int(n):]
		}
		kv[string(parts[0])] = slices.Clone(parts[1])
	}
	return kv, nil
}

// ApplySnapshot implements raftmux.Storage.
func (s *MemStore) ApplySnapshot(shard uint64, snap *raftpb.Snapshot, data io.Reader) error {
	b, err := io.ReadAll(data)
	if err != nil {
		return err
	}
	kv, err := decodeKV(b)
	if err != nil {
		return err
	}
	if err := s.syncLog(b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shard(shard)
	ms := raft.NewMemoryStorage()
	if err := ms.ApplySnapshot(*snap); err != nil {
		return err
	}
	hs, _, _ := sh.ms.Load().InitialState()
	meta := snap.Metadata
	if err := ms.SetHardState(raftpb.HardState{
		Term:   max(hs.Term, meta.Term),
		Vote:   hs.Vote,
		Commit: max(hs.Commit, meta.Index),
	}); err != nil {
		return err
	}
	sh.ms.Store(ms)
	sh.cs = cloneConfState(&meta.ConfState)
	sh.applied = meta.Index
	sh.kv = kv
	return nil
}

// CheckSnapshot implements raftmux.SnapshotChecker: data must decode.
func (s *MemStore) CheckSnapshot(_ uint64, _ *raftpb.SnapshotMetadata, data []byte) error {
	_, err := decodeKV(data)
	return err
}

var _ raftmux.SnapshotChecker = (*MemStore)(nil)

// DeleteShard implements raftmux.Storage.
func (s *MemStore) DeleteShard(shard uint64, t raftmux.Tombstone) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.shards, shard)
	if s.tombs == nil {
		s.tombs = make(map[uint64]raftmux.Tombstone)
	}
	s.tombs[shard] = t
	return nil
}

// Tombstone implements raftmux.Storage.
func (s *MemStore) Tombstone(shard uint64) (raftmux.Tombstone, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tombs[shard]
	return t, ok, nil
}

// Shards implements raftmux.Storage.
func (s *MemStore) Shards() ([]uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]uint64, 0, len(s.shards))
	for id := range s.shards {
		out = append(out, id)
	}
	slices.Sort(out)
	return out, nil
}

// Get returns the state machine value of key in shard.
func (s *MemStore) Get(shard uint64, key []byte) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := s.shards[shard]
	if sh == nil {
		return nil, false
	}
	v, ok := sh.kv[string(key)]
	return slices.Clone(v), ok
}

// Len returns the number of keys of shard.
func (s *MemStore) Len(shard uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sh := s.shards[shard]; sh != nil {
		return len(sh.kv)
	}
	return 0
}

func (s *MemStore) syncLog(b []byte) error {
	if s.file == nil {
		return nil
	}
	s.fileMu.Lock()
	end, err := s.writeLocked(b)
	s.fileMu.Unlock()
	if err != nil {
		return err
	}
	if err := s.syncTo(end); err != nil {
		return fmt.Errorf("raftmuxtest: fsync log: %w", err)
	}
	return nil
}

// writeLocked appends b to the log file, unsynced, and returns the file's
// end. The caller holds fileMu.
func (s *MemStore) writeLocked(b []byte) (int64, error) {
	if len(b) > 0 {
		if _, err := s.file.Write(b); err != nil {
			return 0, fmt.Errorf("raftmuxtest: write log: %w", err)
		}
		s.written += int64(len(b))
	}
	return s.written, nil
}

// syncTo makes the log durable at least up to offset upTo: one fsync
// serves every committer waiting when it starts.
func (s *MemStore) syncTo(upTo int64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced >= upTo {
		return nil
	}
	s.fileMu.Lock()
	target := s.written
	s.fileMu.Unlock()
	s.fsyncs.Add(1)
	if err := s.file.Sync(); err != nil {
		return err
	}
	s.synced = target
	return nil
}

// NewBatch implements raftmux.Storage.
func (s *MemStore) NewBatch() raftmux.Batch { return &memBatch{s: s} }

type opKind uint8

const (
	opAppend opKind = iota
	opConf
	opApplied
	opPut
	opDelete
	opSeed
)

type op struct {
	kind  opKind
	shard uint64
	hs    *raftpb.HardState
	ents  []raftpb.Entry
	cs    *raftpb.ConfState
	idx   uint64
	key   string
	val   []byte
}

type memBatch struct {
	s   *MemStore
	ops []op
}

func (b *memBatch) Append(shard uint64, hs *raftpb.HardState, ents []raftpb.Entry) {
	b.ops = append(b.ops, op{kind: opAppend, shard: shard, hs: hs, ents: ents})
}
func (b *memBatch) SetConfState(shard uint64, cs *raftpb.ConfState) {
	b.ops = append(b.ops, op{kind: opConf, shard: shard, cs: cloneConfState(cs)})
}
func (b *memBatch) SetApplied(shard, idx uint64) {
	b.ops = append(b.ops, op{kind: opApplied, shard: shard, idx: idx})
}
func (b *memBatch) Seed(shard, index, term uint64, cs *raftpb.ConfState) {
	b.ops = append(b.ops, op{kind: opSeed, shard: shard, idx: index, hs: &raftpb.HardState{Term: term}, cs: cloneConfState(cs)})
}
func (b *memBatch) Put(shard uint64, key, value []byte) {
	b.ops = append(b.ops, op{kind: opPut, shard: shard, key: string(key), val: slices.Clone(value)})
}
func (b *memBatch) Delete(shard uint64, key []byte) {
	b.ops = append(b.ops, op{kind: opDelete, shard: shard, key: string(key)})
}

// Commit applies the batch. With a log file, its appends are written to
// the file first, as a WAL write; a synced commit then fsyncs the file, once
// for every commit written before it, synced or not.
func (b *memBatch) Commit(sync bool) error {
	s := b.s
	s.commits.Add(1)
	if s.file == nil {
		if sync {
			s.fsyncs.Add(1)
		}
	} else {
		t0 := time.Now()
		s.fileMu.Lock()
		buf := s.buf[:0]
		for _, o := range b.ops {
			if o.kind != opAppend {
				continue
			}
			buf = binary.LittleEndian.AppendUint64(buf, o.shard)
			if o.hs != nil {
				buf = appendMarshal(buf, o.hs)
			}
			for i := range o.ents {
				buf = appendMarshal(buf, &o.ents[i])
			}
		}
		s.buf = buf
		mine, err := s.writeLocked(buf)
		s.fileMu.Unlock()
		if err == nil && sync {
			err = s.syncTo(mine)
		}
		if sync {
			s.fsyncNanos.Add(int64(time.Since(t0)))
		}
		if err != nil {
			return fmt.Errorf("raftmuxtest: group commit: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, o := range b.ops {
		sh := s.shard(o.shard)
		switch o.kind {
		case opAppend:
			if o.hs != nil {
				if err := sh.ms.Load().SetHardState(*o.hs); err != nil {
					return err
				}
			}
			if len(o.ents) > 0 {
				if err := sh.ms.Load().Append(o.ents); err != nil {
					return err
				}
			}
		case opConf:
			sh.cs = o.cs
		case opApplied:
			sh.applied = o.idx
		case opSeed:
			ms := sh.ms.Load()
			if last, _ := ms.LastIndex(); last != 0 || sh.applied != 0 {
				return fmt.Errorf("raftmuxtest: shard %d: seed over a log to %d", o.shard, last)
			}
			snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: o.idx, Term: o.hs.Term, ConfState: *o.cs}}
			if err := ms.ApplySnapshot(snap); err != nil {
				return err
			}
			hs, _, _ := ms.InitialState()
			if o.hs.Term > hs.Term {
				hs = raftpb.HardState{Term: o.hs.Term}
			}
			hs.Commit = o.idx
			if err := ms.SetHardState(hs); err != nil {
				return err
			}
			sh.cs, sh.applied = o.cs, o.idx
		case opPut:
			sh.kv[o.key] = o.val
		case opDelete:
			delete(sh.kv, o.key)
		}
	}
	b.ops = b.ops[:0]
	return nil
}

// sizedMarshaler is what raftpb's generated types offer for encoding into
// a buffer the caller sized.
type sizedMarshaler interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// appendMarshal appends m's protobuf encoding to buf.
func appendMarshal(buf []byte, m sizedMarshaler) []byte {
	n := m.Size()
	buf = slices.Grow(buf, n)
	_, _ = m.MarshalToSizedBuffer(buf[len(buf) : len(buf)+n])
	return buf[:len(buf)+n]
}
