package shardstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func openMem(t testing.TB, fs vfs.FS, cfg Config) *Store {
	t.Helper()
	cfg.FS = fs
	cfg.Logger = quietLogger()
	s, err := Open("/db", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func commit(t testing.TB, b *Batch, sync bool) {
	t.Helper()
	if err := b.Commit(sync); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRefusesForeignDirectoryBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Config{Logger: quietLogger()})
	if !errors.Is(err, ErrNotStore) {
		t.Fatalf("open foreign dir: got %v, want ErrNotStore", err)
	}
	names, _ := os.ReadDir(dir)
	if len(names) != 1 {
		t.Fatalf("open wrote into a foreign directory: %v", names)
	}
}

func TestOpenRefusesNewerFormatBeforeWriting(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, formatFile), []byte("shoal-store 99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirListing(t, dir)
	_, err = Open(dir, Config{Logger: quietLogger()})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("open newer format: got %v, want ErrNewerFormat naming the version", err)
	}
	if after := dirListing(t, dir); after != before {
		t.Fatalf("open of a newer store changed it:\n%s\nvs\n%s", before, after)
	}
	if err := os.WriteFile(filepath.Join(dir, formatFile), []byte("something else\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Config{Logger: quietLogger()}); !errors.Is(err, ErrNotStore) {
		t.Fatalf("open with a foreign marker: got %v, want ErrNotStore", err)
	}
}

// reopen closes s and opens the store in dir again, closed when the test
// ends.
func reopen(t *testing.T, s *Store, dir string) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func dirListing(t *testing.T, dir string) string {
	t.Helper()
	var sb strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		fmt.Fprintf(&sb, "%s %d %v\n", p, info.Size(), info.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return sb.String()
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{MemTableBytes: 1},
		{BlockCacheBytes: -1},
	} {
		cfg.FS = vfs.NewMem()
		if _, err := Open("/db", cfg); !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%+v): got %v, want ErrInvalid", cfg, err)
		}
	}
}

func TestReopenKeepsEverything(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	w := newWorkload(1, []uint64{1, 2, 300})
	for range 20 {
		b := s.NewBatch()
		w.step(b)
		commit(t, b, true)
	}
	want := w.digest()
	if got := storeDigest(t, s, w.shards); got != want {
		t.Fatalf("before reopen:\n%s\nwant\n%s", got, want)
	}
	s = reopen(t, s, dir)
	if got := storeDigest(t, s, w.shards); got != want {
		t.Fatalf("after reopen:\n%s\nwant\n%s", got, want)
	}
	if got := s.Shards(); !slices.Equal(got, []uint64{1, 2, 300}) {
		t.Fatalf("Shards() = %v", got)
	}
}

// TestMatchesMemoryStorage runs raft-shaped batches against the store and
// raft's MemoryStorage and compares every read, with a cache budget small
// enough that reads mix cache, eviction and disk.
func TestMatchesMemoryStorage(t *testing.T) {
	for _, budget := range []int64{-1, 4 << 10, 1 << 20} {
		t.Run(fmt.Sprintf("budget=%d", budget), func(t *testing.T) {
			s := openMem(t, vfs.NewMem(), Config{CacheBudgetBytes: budget})
			defer s.Close()
			shards := []uint64{0, 5, 6, 1 << 40}
			w := newWorkload(uint64(budget), shards)
			rng := rand.New(rand.NewPCG(7, 7))
			rounds := 150
			if raceEnabled {
				rounds = 60
			}
			for round := range rounds {
				b := s.NewBatch()
				w.step(b)
				commit(t, b, false)
				for _, sh := range shards {
					ms := memoryStorage(t, w.model[sh])
					r, _ := s.Storage(sh)
					compareStorage(t, round, sh, r, ms, rng)
				}
				if used := s.cache.used.Load(); budget > 0 && used > budget {
					t.Fatalf("round %d: cache uses %d bytes over budget %d", round, used, budget)
				}
			}
		})
	}
}

// memoryStorage builds raft's MemoryStorage holding the model's log.
func memoryStorage(t *testing.T, m *modelShard) *raft.MemoryStorage {
	t.Helper()
	ms := raft.NewMemoryStorage()
	if m.trunc > 0 {
		snap := raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: m.trunc, Term: m.truncTerm}}
		if err := ms.ApplySnapshot(snap); err != nil {
			t.Fatal(err)
		}
	}
	if err := ms.Append(m.ents); err != nil {
		t.Fatal(err)
	}
	if err := ms.SetHardState(m.hs.proto()); err != nil {
		t.Fatal(err)
	}
	return ms
}

func compareStorage(t *testing.T, round int, sh uint64, r *RaftStorage, ms *raft.MemoryStorage, rng *rand.Rand) {
	t.Helper()
	f1, _ := r.FirstIndex()
	f2, _ := ms.FirstIndex()
	l1, _ := r.LastIndex()
	l2, _ := ms.LastIndex()
	if f1 != f2 || l1 != l2 {
		t.Fatalf("round %d shard %d: bounds [%d, %d], memory storage [%d, %d]", round, sh, f1, l1, f2, l2)
	}
	for i := f1 - 1; i <= l1+1; i++ {
		t1, e1 := r.Term(i)
		t2, e2 := ms.Term(i)
		if t1 != t2 || !errors.Is(e1, e2) && !errors.Is(e2, e1) {
			t.Fatalf("round %d shard %d: Term(%d) = %d, %v; memory storage %d, %v", round, sh, i, t1, e1, t2, e2)
		}
	}
	if l1 < f1 {
		return
	}
	for range 4 {
		lo := f1 + rng.Uint64N(l1-f1+1)
		hi := lo + 1 + rng.Uint64N(l1-lo+1)
		maxSize := []uint64{0, 20, 60, ^uint64(0)}[rng.IntN(4)]
		a, err1 := r.Entries(lo, hi, maxSize)
		b, err2 := ms.Entries(lo, hi, maxSize)
		if err1 != nil || err2 != nil {
			t.Fatalf("round %d shard %d: Entries(%d, %d, %d): %v / %v", round, sh, lo, hi, maxSize, err1, err2)
		}
		if len(a) != len(b) {
			t.Fatalf("round %d shard %d: Entries(%d, %d, %d): %d entries, memory storage %d", round, sh, lo, hi, maxSize, len(a), len(b))
		}
		for i := range a {
			if !reflect.DeepEqual(a[i], b[i]) {
				t.Fatalf("round %d shard %d: entry %d = %v, memory storage %v", round, sh, lo+uint64(i), a[i], b[i])
			}
		}
		// The caller owns the slice: appending to it must not reach the
		// store's cache.
		_ = append(a, newEntry(1<<60, 1<<60, nil))
		again, _ := r.Entries(lo, hi, ^uint64(0))
		if n := len(a); len(again) > n && again[n].Index != lo+uint64(n) {
			t.Fatalf("round %d shard %d: an append to a returned slice changed the log", round, sh)
		}
	}
	if _, err := r.Entries(f1-1, l1+1, 0); f1 > 1 && !errors.Is(err, raft.ErrCompacted) {
		t.Fatalf("Entries below the first index: %v, want ErrCompacted", err)
	}
}

func TestEntrySizeMatchesProtobuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 500 {
		e := &raftpb.Entry{}
		if rng.IntN(2) == 0 {
			e.Term = rng.Uint64() >> rng.IntN(64)
		}
		if rng.IntN(2) == 0 {
			e.Index = rng.Uint64() >> rng.IntN(64)
		}
		if rng.IntN(2) == 0 {
			e.Type = raftpb.EntryType(rng.IntN(3))
		}
		if rng.IntN(3) != 0 {
			e.Data = make([]byte, rng.IntN(300))
		}
		if got, want := entrySize(e), uint64(e.Size()); got != want {
			t.Fatalf("entrySize(%v) = %d, Size = %d", e, got, want)
		}
		v := appendEntryValue(nil, e)
		back, err := decodeEntry([]byte("k"), v, e.Index)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, *e) {
			t.Fatalf("round trip %v -> %v", e, back)
		}
	}
}

func TestBadValuesNameShardAndKey(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{CacheBudgetBytes: -1})
	b := s.NewBatch()
	b.Append(7, &raftpb.HardState{Term: 1, Commit: 2}, []raftpb.Entry{newEntry(1, 1, []byte("a")), newEntry(2, 1, []byte("b")), newEntry(3, 1, []byte("c"))})
	commit(t, b, true)
	// Garbage straight into Pebble: a log entry and the HardState.
	if err := s.db.Set(appendLogKey(nil, 7, 2), []byte{valueVersion, 0xff}, nil); err != nil {
		t.Fatal(err)
	}
	r, _ := s.Storage(7)
	_, err := r.Entries(1, 4, ^uint64(0))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "shard 7 log/2") {
		t.Fatalf("Entries over a bad value: %v", err)
	}
	if _, err := r.Term(2); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "shard 7 log/2") {
		t.Fatalf("Term over a bad value: %v", err)
	}
	for _, v := range [][]byte{nil, {9}, {valueVersion}, {valueVersion, 1, 2, 3, 4}} {
		if err := s.db.Set(appendStateKey(nil, 8, stateHardState), v, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Storage(8); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "shard 8 state/hardstate") {
			t.Fatalf("Storage over a bad HardState %x: %v", v, err)
		}
	}
	if err := s.db.Set(appendStateKey(nil, 9, stateConfState), []byte{valueVersion, 0, 0xff, 0xff, 0xff, 0x7f}, nil); err != nil {
		t.Fatal(err)
	}
	r9, err := s.Storage(9)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := r9.InitialState(); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "shard 9 state/confstate") {
		t.Fatalf("InitialState over a bad ConfState: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestAppendRejectsGapsAndBadCommit(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	b := s.NewBatch()
	b.Append(1, nil, []raftpb.Entry{newEntry(2, 1, nil)})
	if err := b.Commit(true); !errors.Is(err, ErrLogGap) {
		t.Fatalf("append after a gap: %v", err)
	}
	b = s.NewBatch()
	b.Append(1, nil, []raftpb.Entry{newEntry(1, 1, nil), newEntry(3, 1, nil)})
	if err := b.Commit(true); !errors.Is(err, ErrLogGap) {
		t.Fatalf("non-consecutive entries: %v", err)
	}
	b = s.NewBatch()
	b.Append(1, &raftpb.HardState{Term: 1, Commit: 5}, []raftpb.Entry{newEntry(1, 1, nil)})
	if err := b.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("commit beyond the log: %v", err)
	}
	b = s.NewBatch()
	b.Append(1, nil, []raftpb.Entry{newEntry(1, 1, nil)})
	b.Compact(1, 1)
	if err := b.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("compaction beyond applied: %v", err)
	}
	if r, _ := s.Storage(1); r.last != 0 {
		t.Fatalf("failed batches changed the log: last %d", r.last)
	}
}

// TestReturnedEntriesStayValid checks the cache's aliasing discipline:
// slices Entries returned keep their entries across later appends past the
// end, conflicting appends and compactions, and appending to one reaches
// neither the cache nor another returned slice.
func TestReturnedEntriesStayValid(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	ents := func(first, last, term uint64) []raftpb.Entry {
		var es []raftpb.Entry
		for i := first; i <= last; i++ {
			es = append(es, newEntry(i, term, fmt.Appendf(nil, "%d/%d", i, term)))
		}
		return es
	}
	b := s.NewBatch()
	b.Append(1, nil, ents(1, 5, 1))
	commit(t, b, false)
	r, _ := s.Storage(1)
	all, err := r.Entries(1, 6, ^uint64(0))
	if err != nil || len(all) != 5 || cap(all) != 5 {
		t.Fatalf("Entries(1, 6) = %d entries (capacity %d), %v", len(all), cap(all), err)
	}
	head, _ := r.Entries(1, 3, ^uint64(0))
	want := slices.Clone(all)
	check := func(when string) {
		t.Helper()
		if !reflect.DeepEqual(all, want) || !reflect.DeepEqual(head, want[:2]) {
			t.Fatalf("%s: returned entries changed:\n%v\n%v", when, all, head)
		}
	}
	grown := append(head, newEntry(99, 99, nil))
	if again, _ := r.Entries(3, 4, ^uint64(0)); len(again) != 1 || again[0].Index != 3 || all[2].Index != 3 || len(grown) != 3 {
		t.Fatalf("appending to a returned slice reached the cache: %v", again)
	}
	b = s.NewBatch()
	b.Append(1, &raftpb.HardState{Term: 2, Vote: 1}, ents(3, 4, 2))
	commit(t, b, false)
	check("after a conflicting append")
	got, _ := r.Entries(1, 5, ^uint64(0))
	if wantNew := append(slices.Clone(want[:2]), ents(3, 4, 2)...); !reflect.DeepEqual(got, wantNew) {
		t.Fatalf("log after conflict %v, want %v", got, wantNew)
	}
	b = s.NewBatch()
	b.Append(1, nil, ents(5, 8, 2))
	commit(t, b, false)
	check("after an append past the end")
	b = s.NewBatch()
	b.SetApplied(1, 2)
	b.Compact(1, 2)
	commit(t, b, false)
	check("after a compaction")
}

// TestApplyNilSnapshot checks that a nil snapshot is refused, not a panic.
func TestApplyNilSnapshot(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	if err := s.ApplySnapshot(1, nil, nil); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ApplySnapshot(nil) = %v, want ErrInvalid", err)
	}
}

func TestBatchDetectsConcurrentLogChange(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	b1 := s.NewBatch()
	b1.Append(1, nil, []raftpb.Entry{newEntry(1, 1, nil)})
	b2 := s.NewBatch()
	b2.Append(1, nil, []raftpb.Entry{newEntry(1, 1, nil), newEntry(2, 1, nil)})
	commit(t, b1, false)
	if err := b2.Commit(false); !errors.Is(err, ErrConcurrentWrite) {
		t.Fatalf("stale batch: %v", err)
	}
}

func TestCacheStaysWithinBudget(t *testing.T) {
	const budget = 64 << 10
	s := openMem(t, vfs.NewMem(), Config{CacheBudgetBytes: budget})
	defer s.Close()
	data := bytes.Repeat([]byte("x"), 128)
	for round := range 20 {
		b := s.NewBatch()
		for sh := range uint64(200) {
			idx := uint64(round + 1)
			b.Append(sh, &raftpb.HardState{Term: 1, Commit: idx}, []raftpb.Entry{newEntry(idx, 1, data)})
		}
		commit(t, b, false)
		if used := s.cache.used.Load(); used > budget {
			t.Fatalf("round %d: %d bytes cached, budget %d", round, used, budget)
		}
	}
	var sum int64
	for sh := range uint64(200) {
		r, _ := s.Storage(sh)
		sum += r.cacheBytes.Load()
		ents, err := r.Entries(1, 21, ^uint64(0))
		if err != nil || len(ents) != 20 {
			t.Fatalf("shard %d: %d entries, %v", sh, len(ents), err)
		}
	}
	if sum != s.cache.used.Load() {
		t.Fatalf("shard caches hold %d bytes, the budget counts %d", sum, s.cache.used.Load())
	}
}

func TestDeleteShardRemovesEverything(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	w := newWorkload(3, []uint64{1, 2, 3})
	for range 10 {
		b := s.NewBatch()
		w.step(b)
		commit(t, b, true)
	}
	r, _ := s.Storage(2)
	if _, ok, _ := s.Tombstone(2); ok {
		t.Fatal("tombstone before delete")
	}
	tomb := Tombstone{Term: 7, Vote: 3, Applied: 41}
	if err := s.DeleteShard(2, tomb); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.Tombstone(2); err != nil || !ok || got != tomb {
		t.Fatalf("Tombstone(2) = %+v, %v, %v; want %+v", got, ok, err, tomb)
	}
	if got := s.Shards(); !slices.Equal(got, []uint64{1, 3}) {
		t.Fatalf("Shards() after delete = %v", got)
	}
	if _, err := r.LastIndex(); !errors.Is(err, ErrShardDeleted) {
		t.Fatalf("old handle after delete: %v", err)
	}
	lo, hi := shardSpan(2)
	it, _ := s.db.NewIter(nil)
	for valid := it.SeekGE(lo); valid && bytes.Compare(it.Key(), hi) < 0; valid = it.Next() {
		t.Errorf("key left behind: %s", keyString(it.Key()))
	}
	it.Close()
	r2, err := s.Storage(2)
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := r2.LastIndex(); last != 0 {
		t.Fatalf("recreated shard has last index %d", last)
	}
}

func TestTombstoneSurvivesRestart(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{FS: fs})
	w := newWorkload(3, []uint64{4})
	for range 5 {
		b := s.NewBatch()
		w.step(b)
		commit(t, b, true)
	}
	tomb := Tombstone{Term: 9, Vote: 2, Applied: 5}
	if err := s.DeleteShard(4, tomb); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{FS: fs})
	defer s.Close()
	if got, ok, err := s.Tombstone(4); err != nil || !ok || got != tomb {
		t.Fatalf("Tombstone(4) after reopen = %+v, %v, %v; want %+v", got, ok, err, tomb)
	}
	if got := s.Shards(); len(got) != 0 {
		t.Fatalf("Shards() = %v: a tombstone is not a shard", got)
	}
}

func snapshotBytes(t *testing.T, s *Store, shard uint64) (*raftpb.SnapshotMetadata, []byte) {
	t.Helper()
	sr, err := s.SnapshotData(shard)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, sr); err != nil {
		t.Fatal(err)
	}
	return sr.Meta(), buf.Bytes()
}

func TestSnapshotMovesAShard(t *testing.T) {
	src := openMem(t, vfs.NewMem(), Config{})
	defer src.Close()
	w := newWorkload(4, []uint64{10})
	for range 30 {
		b := src.NewBatch()
		w.step(b)
		commit(t, b, false)
	}
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}
	b := src.NewBatch()
	b.SetConfState(10, cs)
	big := bytes.Repeat([]byte("y"), 100<<10) // spans chunks
	b.Put(10, []byte("big"), big)
	commit(t, b, true)
	meta, stream := snapshotBytes(t, src, 10)
	if meta.Index != w.model[10].applied {
		t.Fatalf("snapshot index %d, applied %d", meta.Index, w.model[10].applied)
	}
	r, _ := src.Storage(10)
	if term, _ := r.Term(meta.Index); term != meta.Term {
		t.Fatalf("snapshot term %d, log says %d", meta.Term, term)
	}
	if !reflect.DeepEqual(meta.ConfState, *cs) {
		t.Fatalf("snapshot conf state %v", meta.ConfState)
	}
	fresh, _ := src.Storage(77)
	if _, err := fresh.Snapshot(); !errors.Is(err, raft.ErrSnapshotTemporarilyUnavailable) {
		t.Fatalf("snapshot of a shard with nothing applied: %v", err)
	}
	rs, _ := r.Snapshot()
	if rs.Metadata.Index != meta.Index || rs.Metadata.Term != meta.Term {
		t.Fatalf("RaftStorage.Snapshot %v, stream %v", rs.Metadata, meta)
	}

	// The receiver holds an older, diverging copy of the shard.
	dst := openMem(t, vfs.NewMem(), Config{})
	defer dst.Close()
	old := newWorkload(5, []uint64{10})
	for range 5 {
		b := dst.NewBatch()
		old.step(b)
		commit(t, b, false)
	}
	b = dst.NewBatch()
	b.Put(10, []byte("stale"), []byte("gone"))
	commit(t, b, false)
	snap := &raftpb.Snapshot{Metadata: *meta}
	if err := dst.ApplySnapshot(10, snap, bytes.NewReader(stream)); err != nil {
		t.Fatal(err)
	}
	dr, _ := dst.Storage(10)
	first, _ := dr.FirstIndex()
	last, _ := dr.LastIndex()
	term, _ := dr.Term(meta.Index)
	if first != meta.Index+1 || last != meta.Index || term != meta.Term {
		t.Fatalf("log after snapshot: first %d last %d term %d", first, last, term)
	}
	hs, gotCS, _ := dr.InitialState()
	if hs.Commit < meta.Index || !reflect.DeepEqual(gotCS, *cs) {
		t.Fatalf("after snapshot: hs %v conf %v", hs, gotCS)
	}
	var want, got []string
	_ = src.Iterate(10, nil, func(k, v []byte) bool { want = append(want, string(k)+"="+string(v)); return true })
	_ = dst.Iterate(10, nil, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
	if !slices.Equal(got, want) {
		t.Fatalf("data after snapshot:\n%v\nwant\n%v", got, want)
	}
	if applied, _ := dst.Applied(10); applied != meta.Index {
		t.Fatalf("applied %d after snapshot at %d", applied, meta.Index)
	}
	// The log continues from the snapshot.
	b = dst.NewBatch()
	b.Append(10, nil, []raftpb.Entry{newEntry(meta.Index+1, meta.Term, []byte("next"))})
	commit(t, b, true)
	if err := dst.ApplySnapshot(10, snap, bytes.NewReader(stream)); !errors.Is(err, raft.ErrSnapOutOfDate) {
		t.Fatalf("re-applying the same snapshot: %v", err)
	}
}

func TestApplySnapshotIsAllOrNothing(t *testing.T) {
	src := openMem(t, vfs.NewMem(), Config{})
	defer src.Close()
	w := newWorkload(6, []uint64{3})
	for range 30 {
		b := src.NewBatch()
		w.step(b)
		commit(t, b, false)
	}
	meta, stream := snapshotBytes(t, src, 3)
	dst := openMem(t, vfs.NewMem(), Config{})
	defer dst.Close()
	old := newWorkload(8, []uint64{3})
	for range 5 {
		b := dst.NewBatch()
		old.step(b)
		commit(t, b, false)
	}
	before := storeDigest(t, dst, []uint64{3})
	flipped := bytes.Clone(stream)
	flipped[len(flipped)/2] ^= 1
	otherTerm := *meta
	otherTerm.Term = meta.Term + 1
	cases := []struct {
		name string
		meta *raftpb.SnapshotMetadata
		data []byte
	}{
		{"flipped bit", meta, flipped},
		{"truncated", meta, stream[:len(stream)-3]},
		{"trailing bytes", meta, append(bytes.Clone(stream), 0)},
		{"empty", meta, nil},
		{"wrong term", &otherTerm, stream},
	}
	for _, c := range cases {
		err := dst.ApplySnapshot(3, &raftpb.Snapshot{Metadata: *c.meta}, bytes.NewReader(c.data))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: got %v, want ErrCorrupt", c.name, err)
		}
		if after := storeDigest(t, dst, []uint64{3}); after != before {
			t.Fatalf("%s: failed snapshot changed the shard:\n%s\nwas\n%s", c.name, after, before)
		}
	}
}

func TestTopicLog(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	topic := []byte("orders")
	first, err := s.AppendRecords(topic, 1, 0, [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}, true)
	if err != nil || first != 0 {
		t.Fatalf("append: %d, %v", first, err)
	}
	first, err = s.AppendRecords(topic, 1, 0, [][]byte{[]byte("dddd")}, true)
	if err != nil || first != 3 {
		t.Fatalf("second append: %d, %v", first, err)
	}
	if _, err := s.AppendRecords([]byte("other"), 1, 0, [][]byte{[]byte("z")}, false); err != nil {
		t.Fatal(err)
	}
	read := func(from uint64, maxBytes int) (string, uint64, error) {
		var sb strings.Builder
		next, err := s.ReadRecords(topic, from, maxBytes, func(off, _ uint64, v []byte) bool {
			fmt.Fprintf(&sb, "%d:%s ", off, v)
			return true
		})
		return sb.String(), next, err
	}
	for _, c := range []struct {
		from     uint64
		maxBytes int
		want     string
		next     uint64
	}{
		{0, 1 << 20, "0:a 1:bb 2:ccc 3:dddd ", 4},
		{1, 3, "1:bb ", 2},
		{1, 5, "1:bb 2:ccc ", 3},
		{3, 1, "3:dddd ", 4},
		{4, 100, "", 4},
	} {
		got, next, err := read(c.from, c.maxBytes)
		if err != nil || got != c.want || next != c.next {
			t.Errorf("read(%d, %d) = %q next %d, %v; want %q next %d", c.from, c.maxBytes, got, next, err, c.want, c.next)
		}
	}
	if _, _, err := read(5, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("read beyond the high watermark: %v", err)
	}
	if err := s.TrimTopic(topic, 2); err != nil {
		t.Fatal(err)
	}
	if _, _, err := read(1, 10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Errorf("read below the trim point: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	if hwm, err := s.HighWatermark(topic); hwm != 4 || err != nil {
		t.Fatalf("high watermark after reopen: %d, %v", hwm, err)
	}
	if got, _, err := read(2, 100); got != "2:ccc 3:dddd " || err != nil {
		t.Fatalf("after reopen: %q, %v", got, err)
	}
	if err := s.TrimTopic(topic, 4); err != nil {
		t.Fatal(err)
	}
	if first, err := s.AppendRecords(topic, 1, 0, [][]byte{[]byte("e")}, true); first != 4 || err != nil {
		t.Fatalf("append after trimming everything: %d, %v", first, err)
	}
	if err := s.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	if hwm, _ := s.HighWatermark(topic); hwm != 0 {
		t.Fatalf("high watermark after delete: %d", hwm)
	}
	if got, _, err := readOther(s); got != "0:z " || err != nil {
		t.Fatalf("other topic after delete: %q, %v", got, err)
	}
	for _, bad := range [][]byte{nil, bytes.Repeat([]byte("t"), 256)} {
		if _, err := s.AppendRecords(bad, 1, 0, [][]byte{nil}, false); !errors.Is(err, ErrInvalid) {
			t.Errorf("topic of %d bytes: %v", len(bad), err)
		}
	}
	if _, err := s.AppendRecords(topic, 1, 0, nil, false); !errors.Is(err, ErrInvalid) {
		t.Errorf("append of no records: %v", err)
	}
}

func readOther(s *Store) (string, uint64, error) {
	var sb strings.Builder
	next, err := s.ReadRecords([]byte("other"), 0, 100, func(off, _ uint64, v []byte) bool {
		fmt.Fprintf(&sb, "%d:%s ", off, v)
		return true
	})
	return sb.String(), next, err
}

func TestClosedStore(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	r, _ := s.Storage(1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LastIndex(); !errors.Is(err, ErrClosed) {
		t.Errorf("LastIndex after close: %v", err)
	}
	if _, err := s.Storage(2); !errors.Is(err, ErrClosed) {
		t.Errorf("Storage after close: %v", err)
	}
	b := s.NewBatch()
	b.Put(1, []byte("k"), []byte("v"))
	if err := b.Commit(true); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit after close: %v", err)
	}
}

// TestConcurrentWorkers runs two raft-like workers, each appending to and
// reading back its own shards, with a cache budget so small that each
// worker's commits evict the other's caches.
func TestConcurrentWorkers(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{CacheBudgetBytes: 8 << 10})
	defer s.Close()
	const workers, perWorker, rounds = 2, 8, 100
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			errs <- func() error {
				last := make([]uint64, perWorker)
				for round := range rounds {
					b := s.NewBatch()
					for i := range perWorker {
						sh := uint64(w + workers*i)
						last[i]++
						data := fmt.Appendf(nil, "%d/%d", sh, last[i])
						b.Append(sh, &raftpb.HardState{Term: 1, Commit: last[i]}, []raftpb.Entry{newEntry(last[i], 1, data)})
						if round%20 == 19 {
							b.SetApplied(sh, last[i])
							b.Compact(sh, last[i]-5)
						}
					}
					if err := b.Commit(false); err != nil {
						return err
					}
					for i := range perWorker {
						sh := uint64(w + workers*i)
						r, err := s.Storage(sh)
						if err != nil {
							return err
						}
						first, _ := r.FirstIndex()
						ents, err := r.Entries(first, last[i]+1, ^uint64(0))
						if err != nil {
							return err
						}
						for j, e := range ents {
							if want := fmt.Sprintf("%d/%d", sh, first+uint64(j)); string(e.Data) != want {
								return fmt.Errorf("shard %d entry %d: %q, want %q", sh, first+uint64(j), e.Data, want)
							}
						}
					}
				}
				return nil
			}()
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestSnapshotDataIsPointInTime: writes committed while a snapshot stream is
// open are not in it, and its metadata is the applied index of the state it
// carries.
func TestSnapshotDataIsPointInTime(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	b := s.NewBatch()
	b.Append(1, &raftpb.HardState{Term: 2, Commit: 2}, []raftpb.Entry{newEntry(1, 2, nil), newEntry(2, 2, nil)})
	b.Put(1, []byte("a"), []byte("old"))
	b.SetApplied(1, 2)
	commit(t, b, true)
	sr, err := s.SnapshotData(1)
	if err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	b.Append(1, &raftpb.HardState{Term: 2, Commit: 3}, []raftpb.Entry{newEntry(3, 2, nil)})
	b.Put(1, []byte("a"), []byte("new"))
	b.Put(1, []byte("b"), []byte("new"))
	b.SetApplied(1, 3)
	commit(t, b, true)
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, sr); err != nil {
		t.Fatal(err)
	}
	meta := sr.Meta()
	if err := sr.Close(); err != nil {
		t.Fatal(err)
	}
	if meta.Index != 2 || meta.Term != 2 {
		t.Fatalf("stream metadata %v, want index 2 term 2", meta)
	}
	dst := openMem(t, vfs.NewMem(), Config{})
	defer dst.Close()
	if err := dst.ApplySnapshot(1, &raftpb.Snapshot{Metadata: *meta}, &buf); err != nil {
		t.Fatal(err)
	}
	var got []string
	_ = dst.Iterate(1, nil, func(k, v []byte) bool { got = append(got, string(k)+"="+string(v)); return true })
	if !slices.Equal(got, []string{"a=old"}) {
		t.Fatalf("snapshot carried %v, want [a=old]", got)
	}
}

func TestOpenMarksAnOlderStoreWithThisVersion(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Append(7, &raftpb.HardState{Term: 1, Vote: 2, Commit: 1}, []raftpb.Entry{newEntry(1, 1, []byte("a"))})
	commit(t, b, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(dir, formatFile)
	if err := os.WriteFile(marker, []byte("shoal-store 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatalf("open a version-1 store: %v", err)
	}
	defer s.Close()
	if got, _ := os.ReadFile(marker); string(got) != fmt.Sprintf("shoal-store %d\n", FormatVersion) {
		t.Fatalf("marker after open = %q, want version %d", got, FormatVersion)
	}
	r, err := s.Storage(7)
	if err != nil {
		t.Fatal(err)
	}
	if last, _ := r.LastIndex(); last != 1 {
		t.Fatalf("last index after the upgrade = %d, want 1", last)
	}
}

// writtenHardState reads shard's HardState as it is on disk.
func writtenHardState(t *testing.T, s *Store, shard uint64) hardState {
	t.Helper()
	var hs hardState
	err := s.getValue(appendStateKey(nil, shard, stateHardState), func(k, v []byte) (err error) {
		hs, err = decodeHardState(k, v)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

// TestCommitAloneIsNotWritten: a HardState whose term and vote are the
// recorded ones is not written; InitialState reports the commit index as
// written or the applied index, whichever is higher, before and after a
// reopen; a new term is written with its commit index.
func TestCommitAloneIsNotWritten(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := func(term, vote, commit uint64) *raftpb.HardState {
		return &raftpb.HardState{Term: term, Vote: vote, Commit: commit}
	}
	ents := make([]raftpb.Entry, 6)
	for i := range ents {
		ents[i] = newEntry(uint64(i+1), 1, []byte("x"))
	}
	appendHS := func(h *raftpb.HardState, ents []raftpb.Entry) {
		t.Helper()
		b := s.NewBatch()
		b.Append(1, h, ents)
		commit(t, b, true)
	}
	wantWritten := func(when string, want hardState) {
		t.Helper()
		if got := writtenHardState(t, s, 1); got != want {
			t.Fatalf("written after %s: %+v, want %+v", when, got, want)
		}
	}
	appendHS(hs(1, 3, 1), ents)
	appendHS(hs(1, 3, 5), nil)
	wantWritten("a commit-only change", hardState{term: 1, vote: 3, commit: 1})
	b := s.NewBatch()
	b.Append(1, hs(1, 3, 6), nil)
	b.SetApplied(1, 4)
	commit(t, b, true)

	check := func(when string, want uint64) {
		t.Helper()
		r, err := s.Storage(1)
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := r.InitialState()
		if err != nil {
			t.Fatal(err)
		}
		if got.Term != 1 || got.Vote != 3 || got.Commit != want {
			t.Fatalf("%s: InitialState = %v, want term 1 vote 3 commit %d", when, got, want)
		}
	}
	check("before reopen", 4)
	s = reopen(t, s, dir)
	check("after reopen", 4)

	appendHS(hs(2, 2, 6), nil)
	wantWritten("a new term", hardState{term: 2, vote: 2, commit: 6})
	b = s.NewBatch()
	b.Append(1, hs(2, 2, 7), nil)
	if err := b.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("commit beyond the last index: got %v, want ErrInvalid", err)
	}
}

// A seeded shard starts at the seed: its log empty after (index, term),
// applied and committed there, with its configuration and the data of the
// same batch; a restart finds it so, its log continues from there, and a
// shard with a log is not seeded.
func TestSeedStartsAShardAtAnIndex(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	cs := &raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{4}}
	// A vote given at a later term than the seed's survives it.
	b := s.NewBatch()
	b.Append(20, &raftpb.HardState{Term: 9, Vote: 2}, nil)
	commit(t, b, true)
	b = s.NewBatch()
	b.Seed(10, 40, 7, cs)
	b.Seed(20, 40, 7, cs)
	b.Put(10, []byte("k"), []byte("v"))
	commit(t, b, false)
	check := func(s *Store) {
		t.Helper()
		for shard, wantHS := range map[uint64]raftpb.HardState{10: {Term: 7, Commit: 40}, 20: {Term: 9, Vote: 2, Commit: 40}} {
			r, err := s.Storage(shard)
			if err != nil {
				t.Fatal(err)
			}
			first, _ := r.FirstIndex()
			last, _ := r.LastIndex()
			term, _ := r.Term(40)
			hs, gotCS, _ := r.InitialState()
			applied, _ := s.Applied(shard)
			if first != 41 || last != 40 || term != 7 || applied != 40 || hs != wantHS || !reflect.DeepEqual(gotCS, *cs) {
				t.Fatalf("shard %d: first %d last %d term(40) %d applied %d hs %v conf %v", shard, first, last, term, applied, hs, gotCS)
			}
		}
		if v, _ := s.Get(10, []byte("k")); string(v) != "v" {
			t.Fatalf("seeded data: %q", v)
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	check(s)
	b = s.NewBatch()
	b.Append(10, nil, []raftpb.Entry{newEntry(41, 8, []byte("next"))})
	commit(t, b, true)
	b = s.NewBatch()
	b.Seed(10, 50, 8, cs)
	if err := b.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("seed over a log: %v", err)
	}
	b = s.NewBatch()
	b.Seed(30, 0, 8, cs)
	if err := b.Commit(true); !errors.Is(err, ErrInvalid) {
		t.Fatalf("seed at index 0: %v", err)
	}
	_ = s.Close()
}
