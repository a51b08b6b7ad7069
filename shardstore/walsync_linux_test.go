//go:build linux

package shardstore

import (
	"path/filepath"
	"strings"
	"testing"

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
