package main

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// walFS is the OS filesystem with the fsyncs of Pebble's write-ahead logs
// (the *.log files) counted and timed: the disk's share of a synced commit,
// apart from the time a commit waits for an fsync already under way.
type walFS struct {
	vfs.FS
	syncs atomic.Int64
	nanos atomic.Int64
}

func newWALFS() *walFS { return &walFS{FS: vfs.Default} }

type walFile struct {
	vfs.File
	fs *walFS
}

func (f walFile) Sync() error     { return f.timed(f.File.Sync) }
func (f walFile) SyncData() error { return f.timed(f.File.SyncData) }

func (f walFile) timed(sync func() error) error {
	t0 := time.Now()
	err := sync()
	f.fs.nanos.Add(int64(time.Since(t0)))
	f.fs.syncs.Add(1)
	return err
}

func (w *walFS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return f, err
	}
	return walFile{File: f, fs: w}, nil
}

// Pebble creates a WAL, or recycles an old one, through these.

func (w *walFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.Create(name, c)
	return w.wrap(name, f, err)
}

func (w *walFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := w.FS.ReuseForWrite(oldname, newname, c)
	return w.wrap(newname, f, err)
}

func (w *walFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := w.FS.OpenReadWrite(name, c, opts...)
	return w.wrap(name, f, err)
}
