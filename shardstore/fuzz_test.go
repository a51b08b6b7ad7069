package shardstore

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// FuzzDecodeValues feeds arbitrary bytes to every value decoder: each either
// fails with ErrCorrupt naming the key or yields a value that re-encodes to
// the same bytes, but for the forms written by earlier builds that still
// decode: an entry lacking the type, term or index flag (re-encoded with
// them) and a ConfState whose auto-leave byte is an explicit false
// (re-encoded as unset).
func FuzzDecodeValues(f *testing.F) {
	f.Add(appendEntryValue(nil, new(newEntry(3, 2, []byte("data")))))
	f.Add(appendHardState(nil, &raftpb.HardState{Term: 5, Vote: 1, Commit: 9}))
	f.Add(appendConfState(nil, &raftpb.ConfState{Voters: []uint64{1, 2}, AutoLeave: true}))
	f.Add(appendTruncated(nil, 10, 3))
	f.Add([]byte{valueVersion, 0xff, 0xff})
	f.Add([]byte{valueVersion, entryHasData, 0, 0, 'x'}) // an entry of an earlier build: no type, term or index flag
	f.Add([]byte{valueVersion, 1, 1, 7, 0, 0, 0})        // a ConfState of an earlier build: explicit auto-leave false
	key := appendLogKey(nil, 42, 3)
	f.Fuzz(func(t *testing.T, v []byte) {
		check := func(err error, reencoded func() []byte, canon []byte) {
			if err != nil {
				if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("shard 42")) {
					t.Fatalf("error %v does not name the key or wrap ErrCorrupt", err)
				}
				return
			}
			if got := reencoded(); !bytes.Equal(got, canon) {
				t.Fatalf("decoded %x re-encodes to %x, want %x", v, got, canon)
			}
		}
		// The canonical forms of v as an entry and as a ConfState.
		entryCanon, csCanon := v, v
		if len(v) >= 2 {
			entryCanon = bytes.Clone(v)
			entryCanon[1] |= entryHasType | entryHasTerm | entryHasIndex
			if v[1] == 1 {
				csCanon = bytes.Clone(v)
				csCanon[1] = 0
			}
		}
		e, err := decodeEntry(key, v, 3)
		check(err, func() []byte { return appendEntryValue(nil, &e) }, entryCanon)
		if err == nil {
			if term, err := decodeEntryTerm(key, v); err != nil || term != e.Term {
				t.Fatalf("decodeEntryTerm = %d, %v; entry term %d", term, err, e.Term)
			}
		}
		hs, err := decodeHardState(key, v)
		check(err, func() []byte { return appendHardState(nil, new(hs.proto())) }, v)
		cs, err := decodeConfState(key, v)
		check(err, func() []byte { return appendConfState(nil, &cs) }, csCanon)
		i, term, err := decodeTruncated(key, v)
		check(err, func() []byte { return appendTruncated(nil, i, term) }, v)
		x, err := decodeUint64Value(key, v)
		check(err, func() []byte { return appendUint64Value(nil, x) }, v)
	})
}

// FuzzApplySnapshot feeds arbitrary streams to ApplySnapshot: it either
// applies the stream or fails with ErrCorrupt leaving the shard untouched.
func FuzzApplySnapshot(f *testing.F) {
	src := openMem(f, vfs.NewMem(), Config{})
	b := src.NewBatch()
	b.Append(1, &raftpb.HardState{Term: 1, Commit: 2}, []raftpb.Entry{newEntry(1, 1, nil), newEntry(2, 1, nil)})
	b.Put(1, []byte("a"), []byte("1"))
	b.SetApplied(1, 2)
	commit(f, b, true)
	sr, err := src.SnapshotData(1)
	if err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	if _, err := good.ReadFrom(sr); err != nil {
		f.Fatal(err)
	}
	meta := *sr.Meta()
	_ = sr.Close()
	_ = src.Close()
	f.Add(good.Bytes())
	f.Add(good.Bytes()[:10])
	f.Add([]byte("SHSN\x01\x02\x02\x01\x01\x00"))

	dst := openMem(f, vfs.NewMem(), Config{})
	f.Cleanup(func() { _ = dst.Close() })
	f.Fuzz(func(t *testing.T, stream []byte) {
		const shard = 9
		if err := dst.DeleteShard(shard, Tombstone{}); err != nil {
			t.Fatal(err)
		}
		err := dst.ApplySnapshot(shard, &raftpb.Snapshot{Metadata: meta}, bytes.NewReader(stream))
		r, _ := dst.Storage(shard)
		last, _ := r.LastIndex()
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("bad stream: %v, want ErrCorrupt", err)
			}
			if last != 0 {
				t.Fatalf("failed snapshot left last index %d", last)
			}
			return
		}
		if last != meta.Index {
			t.Fatalf("applied snapshot: last index %d, want %d", last, meta.Index)
		}
	})
}
