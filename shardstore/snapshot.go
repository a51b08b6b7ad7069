package shardstore

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/zeebo/xxh3"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Snapshot stream format (all of it covered by the trailing checksum):
//
//	"SHSN" version(1) metaLen(uvarint) meta
//	{ 0x01 keyLen(uvarint) key valueLen(uvarint) value }*
//	0x00 count(uvarint) xxh3-64(8, big-endian) of every byte before it
//
// meta is index(uvarint) term(uvarint) and the ConfState encoding.
const (
	snapMagic       = "SHSN"
	snapVersion     = 1
	snapTagRecord   = 0x01
	snapTagEnd      = 0x00
	snapChunkBytes  = 64 << 10
	maxSnapKeyBytes = 64 << 10
	maxSnapValBytes = 64 << 20
	maxSnapMetaLen  = 1 << 20
)

// snapshotMeta reads the snapshot metadata of shard from rd: the applied
// index, its term and the recorded ConfState.
func (s *Store) snapshotMeta(rd pebble.Reader, shard uint64) (*raftpb.SnapshotMetadata, error) {
	var applied, truncIndex, truncTerm uint64
	get := func(kind byte, fn func(k, v []byte) error) error {
		key := appendStateKey(nil, shard, kind)
		v, closer, err := rd.Get(key)
		if errors.Is(err, pebble.ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("shardstore: read %s: %w", keyString(key), err)
		}
		defer closer.Close()
		return fn(key, v)
	}
	if err := get(stateApplied, func(k, v []byte) (err error) {
		applied, err = decodeUint64Value(k, v)
		return err
	}); err != nil {
		return nil, err
	}
	if err := get(stateTruncated, func(k, v []byte) (err error) {
		truncIndex, truncTerm, err = decodeTruncated(k, v)
		return err
	}); err != nil {
		return nil, err
	}
	term := truncTerm
	switch {
	case applied < truncIndex:
		return nil, fmt.Errorf("shardstore: shard %d: %w: applied %d below truncated index %d", shard, ErrCorrupt, applied, truncIndex)
	case applied > truncIndex:
		t, err := s.diskTerm(rd, shard, applied)
		if err != nil {
			return nil, err
		}
		term = t
	}
	cs, err := s.confState(rd, shard)
	if err != nil {
		return nil, err
	}
	return &raftpb.SnapshotMetadata{ConfState: cs, Index: applied, Term: term}, nil
}

// SnapshotReader streams a consistent snapshot of one shard's state-machine
// data. Read it to the end (or copy it with io.Copy) and Close it.
type SnapshotReader struct {
	snap  *pebble.Snapshot
	it    *pebble.Iterator
	meta  *raftpb.SnapshotMetadata
	buf   []byte // encoded bytes not yet read
	chunk []byte
	hash  *xxh3.Hasher
	count uint64
	done  bool
	err   error
}

// SnapshotData opens a stream of shard's state-machine data as of one Pebble
// snapshot. Its Meta is the applied index, term and ConfState of that same
// state: the sender puts it in the raft snapshot message it sends.
func (s *Store) SnapshotData(shard uint64) (*SnapshotReader, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	snap := s.db.NewSnapshot()
	meta, err := s.snapshotMeta(snap, shard)
	if err != nil {
		snap.Close()
		return nil, err
	}
	lo, hi := dataSpan(shard, nil)
	it, err := snap.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		snap.Close()
		return nil, fmt.Errorf("shardstore: shard %d: snapshot: %w", shard, err)
	}
	sr := &SnapshotReader{snap: snap, it: it, meta: meta, hash: xxh3.New(), chunk: make([]byte, 0, snapChunkBytes+1024)}
	m := appendSnapMeta(nil, meta)
	sr.chunk = append(sr.chunk, snapMagic...)
	sr.chunk = append(sr.chunk, snapVersion)
	sr.chunk = binary.AppendUvarint(sr.chunk, uint64(len(m)))
	sr.chunk = append(sr.chunk, m...)
	it.First()
	return sr, nil
}

func appendSnapMeta(dst []byte, m *raftpb.SnapshotMetadata) []byte {
	dst = binary.AppendUvarint(dst, m.Index)
	dst = binary.AppendUvarint(dst, m.Term)
	return appendConfState(dst, &m.ConfState)
}

// Meta returns the metadata of the state the stream carries.
func (sr *SnapshotReader) Meta() *raftpb.SnapshotMetadata { return sr.meta }

// fill encodes the next chunk of records into sr.buf.
func (sr *SnapshotReader) fill() {
	for ; sr.it.Valid() && len(sr.chunk) < snapChunkBytes; sr.it.Next() {
		v, err := sr.it.ValueAndErr()
		if err != nil {
			sr.err = fmt.Errorf("shardstore: snapshot %s: %w", keyString(sr.it.Key()), err)
			return
		}
		k := sr.it.Key()[dataPrefixLen:]
		sr.chunk = append(sr.chunk, snapTagRecord)
		sr.chunk = binary.AppendUvarint(sr.chunk, uint64(len(k)))
		sr.chunk = append(sr.chunk, k...)
		sr.chunk = binary.AppendUvarint(sr.chunk, uint64(len(v)))
		sr.chunk = append(sr.chunk, v...)
		sr.count++
	}
	if err := sr.it.Error(); err != nil {
		sr.err = fmt.Errorf("shardstore: snapshot: %w", err)
		return
	}
	if !sr.it.Valid() {
		sr.chunk = append(sr.chunk, snapTagEnd)
		sr.chunk = binary.AppendUvarint(sr.chunk, sr.count)
		_, _ = sr.hash.Write(sr.chunk)
		sr.chunk = binary.BigEndian.AppendUint64(sr.chunk, sr.hash.Sum64())
		sr.done = true
	} else {
		_, _ = sr.hash.Write(sr.chunk)
	}
	sr.buf = sr.chunk
}

// Read implements io.Reader.
func (sr *SnapshotReader) Read(p []byte) (int, error) {
	for len(sr.buf) == 0 {
		if sr.err != nil {
			return 0, sr.err
		}
		if sr.done {
			return 0, io.EOF
		}
		if sr.it == nil {
			return 0, ErrClosed
		}
		sr.fill()
		if sr.err != nil {
			return 0, sr.err
		}
	}
	n := copy(p, sr.buf)
	sr.buf = sr.buf[n:]
	if len(sr.buf) == 0 {
		sr.chunk = sr.chunk[:0]
	}
	return n, nil
}

// Close releases the Pebble snapshot.
func (sr *SnapshotReader) Close() error {
	if sr.it == nil {
		return nil
	}
	err := sr.it.Close()
	sr.it = nil
	if cerr := sr.snap.Close(); err == nil {
		err = cerr
	}
	return err
}

// ApplySnapshot replaces shard's state with a received snapshot, atomically:
// the old state-machine data and log are gone, data's records are in, the
// log is empty with snap's index and term as its truncation point, the
// applied index is snap's, the HardState's commit is at least snap's index,
// and snap's ConfState is recorded; or, on any error, nothing changed. data
// is a stream from SnapshotData (nil for a shard with no data); its
// metadata must match snap's index and term.
func (s *Store) ApplySnapshot(shard uint64, snap *raftpb.Snapshot, data io.Reader) error {
	if s.closed.Load() {
		return ErrClosed
	}
	if snap == nil {
		return fmt.Errorf("shardstore: shard %d: apply nil snapshot: %w", shard, ErrInvalid)
	}
	md := &snap.Metadata
	index, term := md.Index, md.Term
	if index == 0 {
		return fmt.Errorf("shardstore: shard %d: apply snapshot at index 0: %w", shard, ErrInvalid)
	}
	r, err := s.Storage(shard)
	if err != nil {
		return err
	}
	r.mu.Lock()
	applied, baseLast, baseTrunc, hs := r.applied, r.last, r.truncIndex, r.hs
	r.mu.Unlock()
	if index <= applied {
		return fmt.Errorf("shardstore: shard %d: snapshot %d at or below applied %d: %w", shard, index, applied, raft.ErrSnapOutOfDate)
	}
	b := s.db.NewBatch()
	defer b.Close()
	lo, hi := shardSpan(shard)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return fmt.Errorf("shardstore: shard %d: apply snapshot: %w", shard, err)
	}
	if data != nil {
		if err := readSnapshotStream(shard, data, index, term, b); err != nil {
			return err
		}
	}
	if term > hs.term {
		hs = hardState{term: term}
	}
	hs.commit = max(hs.commit, index)
	var kb [stateKeyLen]byte
	hsp := hs.proto()
	for _, kv := range []struct {
		kind byte
		v    []byte
	}{
		{stateHardState, appendHardState(nil, &hsp)},
		{stateApplied, appendUint64Value(nil, index)},
		{stateTruncated, appendTruncated(nil, index, term)},
		{stateConfState, appendConfState(nil, &md.ConfState)},
	} {
		if err := b.Set(appendStateKey(kb[:0], shard, kv.kind), kv.v, nil); err != nil {
			return fmt.Errorf("shardstore: shard %d: apply snapshot: %w", shard, err)
		}
	}
	r.mu.Lock()
	stale := r.last != baseLast || r.truncIndex != baseTrunc || r.deleted
	r.mu.Unlock()
	if stale {
		return fmt.Errorf("shardstore: shard %d: apply snapshot: %w", shard, ErrConcurrentWrite)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("shardstore: shard %d: apply snapshot: %w", shard, err)
	}
	r.mu.Lock()
	freed := r.dropCacheLocked()
	r.truncIndex, r.truncTerm = index, term
	r.last, r.lastTerm = index, term
	r.applied = index
	r.hs = hs
	r.mu.Unlock()
	s.cache.release(freed)
	return nil
}

// CheckSnapshot reports whether data is a whole snapshot stream that
// ApplySnapshot takes for shard at index and term (format, limits,
// checksum), without writing anything: a receiver checks a snapshot before
// its raft group believes it installed. Errors wrap ErrCorrupt.
func CheckSnapshot(shard uint64, data []byte, index, term uint64) error {
	return readSnapshotStream(shard, bytes.NewReader(data), index, term, nil)
}

// readSnapshotStream checks and decodes a snapshot stream into b (nil: only
// check it).
func readSnapshotStream(shard uint64, data io.Reader, index, term uint64, b *pebble.Batch) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("shardstore: shard %d: snapshot stream: %w: %s", shard, ErrCorrupt, fmt.Sprintf(format, args...))
	}
	// The checksum covers exactly the bytes consumed before it, not what the
	// buffer has read ahead.
	cr := &hashingReader{r: bufio.NewReaderSize(data, 64<<10), h: xxh3.New()}
	var hdr [5]byte
	if _, err := io.ReadFull(cr, hdr[:]); err != nil {
		return bad("header: %v", err)
	}
	if string(hdr[:4]) != snapMagic {
		return bad("bad magic %q", hdr[:4])
	}
	if hdr[4] != snapVersion {
		return bad("version %d, this build reads %d", hdr[4], snapVersion)
	}
	metaLen, err := binary.ReadUvarint(cr)
	if err != nil || metaLen > maxSnapMetaLen {
		return bad("meta length")
	}
	meta := make([]byte, metaLen)
	if _, err := io.ReadFull(cr, meta); err != nil {
		return bad("meta: %v", err)
	}
	d := decoder{b: meta}
	mIndex, mTerm := d.uvarint(), d.uvarint()
	d.version()
	decodeConfStateFrom(&d)
	d.end()
	if d.err != nil {
		return bad("meta: %v", d.err)
	}
	if mIndex != index || mTerm != term {
		return bad("stream is at index %d term %d, snapshot at index %d term %d", mIndex, mTerm, index, term)
	}
	var key []byte
	var val []byte
	var count uint64
	for {
		tag, err := cr.ReadByte()
		if err != nil {
			return bad("record %d: %v", count, err)
		}
		if tag == snapTagEnd {
			break
		}
		if tag != snapTagRecord {
			return bad("record %d: unknown tag %d", count, tag)
		}
		kl, err := binary.ReadUvarint(cr)
		if err != nil || kl > maxSnapKeyBytes {
			return bad("record %d: key length", count)
		}
		key = appendDataKey(key[:0], shard, nil)
		key = append(key, make([]byte, kl)...)
		if _, err := io.ReadFull(cr, key[dataPrefixLen:]); err != nil {
			return bad("record %d: key: %v", count, err)
		}
		vl, err := binary.ReadUvarint(cr)
		if err != nil || vl > maxSnapValBytes {
			return bad("record %d: value length", count)
		}
		if uint64(cap(val)) < vl {
			val = make([]byte, vl)
		}
		val = val[:vl]
		if _, err := io.ReadFull(cr, val); err != nil {
			return bad("record %d: value: %v", count, err)
		}
		if b != nil {
			if err := b.Set(key, val, nil); err != nil {
				return fmt.Errorf("shardstore: shard %d: apply snapshot: %w", shard, err)
			}
		}
		count++
	}
	n, err := binary.ReadUvarint(cr)
	if err != nil || n != count {
		return bad("record count %d, trailer says %d", count, n)
	}
	sum := cr.h.Sum64()
	var tr [8]byte
	if _, err := io.ReadFull(cr.r, tr[:]); err != nil {
		return bad("checksum: %v", err)
	}
	if binary.BigEndian.Uint64(tr[:]) != sum {
		return bad("checksum mismatch")
	}
	if _, err := cr.r.ReadByte(); err != io.EOF {
		return bad("trailing bytes after checksum")
	}
	return nil
}

// hashingReader hashes exactly the bytes consumed through it.
type hashingReader struct {
	r   *bufio.Reader
	h   *xxh3.Hasher
	one [1]byte
}

func (c *hashingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	_, _ = c.h.Write(p[:n])
	return n, err
}

func (c *hashingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.one[0] = b
		_, _ = c.h.Write(c.one[:])
	}
	return b, err
}
