//go:build linux

package shardstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestWALSyncFSWrapsOnlyLogFiles(t *testing.T) {
	dir := t.TempDir()
	fsys := walSyncFS(vfs.Default)
	for _, c := range []struct {
		name string
		wal  bool
	}{{"000004.log", true}, {"000005-001.log", true}, {"000006.sst", false}, {"MANIFEST-000001", false}} {
		f, err := fsys.Create(filepath.Join(dir, c.name), vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(walFile); ok != c.wal {
			t.Errorf("%s: synced as a log file: %v, want %v", c.name, ok, c.wal)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	f, err := fsys.ReuseForWrite(filepath.Join(dir, "000004.log"), filepath.Join(dir, "000007.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(walFile); !ok {
		t.Error("a recycled log file is not synced as a log file")
	}
	_ = f.Close()
	f, err = fsys.OpenReadWrite(filepath.Join(dir, "000005-001.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(walFile); !ok {
		t.Error("a log file opened for writing is not synced as a log file")
	}
	_ = f.Close()
}

func TestWALSyncReportsItsError(t *testing.T) {
	fsys := walSyncFS(vfs.Default)
	f, err := fsys.Create(filepath.Join(t.TempDir(), "000001.log"), vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte("entry")); err != nil {
		t.Fatal(err)
	}
	if err := f.SyncData(); err != nil {
		t.Fatalf("sync of an open log file: %v", err)
	}
	inner := f.(walFile).File
	if err := inner.Close(); err != nil {
		t.Fatal(err)
	}
	// The descriptor is closed: fdatasync fails with EBADF, and says so.
	if err := f.SyncData(); err == nil || !strings.Contains(err.Error(), "fdatasync") {
		t.Fatalf("sync of a closed log file: %v, want an fdatasync error", err)
	}
}

func TestStoreOnDiskSyncsItsLogThroughWALSync(t *testing.T) {
	for _, runtimePath := range []bool{false, true} {
		dir := t.TempDir()
		cfg := Config{Logger: quietLogger(), LogSyncRuntime: runtimePath}
		s, err := Open(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		before := walSyncs.Load()
		b := s.NewBatch()
		b.Put(7, []byte("k"), []byte("v"))
		commit(t, b, true)
		if raw := walSyncs.Load() != before; raw == runtimePath {
			t.Errorf("LogSyncRuntime %v: the log synced by the raw call: %v", runtimePath, raw)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s, err = Open(dir, cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.Get(7, []byte("k"))
		if err != nil || string(v) != "v" {
			t.Fatalf("LogSyncRuntime %v: after reopening: %q, %v", runtimePath, v, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// With a sync gap (held whatever the CPU), synced commits that come
// while the gap after a sync runs share one fdatasync, each returns only
// once it is durable, and none returns before the gap ended.
func TestLogSyncGapSharesOneSync(t *testing.T) {
	const gap = MaxLogSyncGap
	dir := t.TempDir()
	cfg := Config{Logger: quietLogger(), LogSyncGap: gap, syncGapAlways: true}
	s, err := Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Put(7, []byte("first"), []byte("v"))
	// Taken before the first commit, so before its sync ended: the gap
	// runs from that end, which a clock read after the commit could
	// follow by more than the writers below take.
	synced := time.Now()
	commit(t, b, true)
	before := walSyncs.Load()
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			b := s.NewBatch()
			b.Put(7, fmt.Appendf(nil, "k%d", i), []byte("v"))
			if err := b.Commit(true); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if waited := time.Since(synced); waited < gap {
		t.Errorf("synced commits returned %v after the last sync, within the gap of %v", waited, gap)
	}
	// All came within the gap (started microseconds after the sync): one
	// fdatasync for the eight; a second only if a writer was scheduled
	// after the gap's end.
	if n := walSyncs.Load() - before; n < 1 || n > 2 {
		t.Errorf("%d synced commits made %d fdatasyncs, want them to share one", writers, n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	for i := range writers {
		if v, err := s.Get(7, fmt.Appendf(nil, "k%d", i)); err != nil || string(v) != "v" {
			t.Errorf("k%d after reopening: %q, %v", i, v, err)
		}
	}
}

func TestLogSyncGapBounds(t *testing.T) {
	for _, gap := range []time.Duration{-time.Millisecond, MaxLogSyncGap + 1} {
		if _, err := Open(t.TempDir(), Config{Logger: quietLogger(), LogSyncGap: gap}); !errors.Is(err, ErrInvalid) {
			t.Errorf("LogSyncGap %v: %v, want ErrInvalid", gap, err)
		}
	}
}
