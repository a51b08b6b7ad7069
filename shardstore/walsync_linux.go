//go:build linux

package shardstore

import (
	"os"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
)

// walSyncFS returns fsys with the write-ahead log's files synced by an
// fdatasync made as a raw system call: the thread keeps its P while the
// disk works. Pebble syncs its log from one goroutine, so at most one P
// waits on the disk at a time.
//
// Through the runtime's usual system call path, a sync that blocks for
// milliseconds is a P in a system call: the runtime's monitor takes it back
// and hands it to another thread, and keeps waking every 20 µs while it
// finds such Ps; the syncing thread, back from the disk, must find a P
// again. On a node that syncs hundreds of times a second that hand-over was
// 10% of its CPU (docs/decisions/shardstore-wal-sync-keeps-its-p.md). The
// cost: a stop of the world (a GC phase) waits for a sync under way to end.
//
// Other files (tables, the manifest) sync as before: their syncs are rarer
// and a table's can be long.
func walSyncFS(fsys vfs.FS) vfs.FS { return walFS{fsys} }

type walFS struct{ vfs.FS }

func (f walFS) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") || file.Fd() == vfs.InvalidFd {
		return file, err
	}
	return walFile{file}, nil
}

func (f walFS) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	return f.wrap(name, file, err)
}

func (f walFS) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	return f.wrap(newname, file, err)
}

func (f walFS) OpenReadWrite(name string, category vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	file, err := f.FS.OpenReadWrite(name, category, opts...)
	return f.wrap(name, file, err)
}

type walFile struct{ vfs.File }

// walSyncs counts the log syncs made here, for the tests.
var walSyncs atomic.Uint64

// SyncData is fdatasync(2), made without leaving the P.
func (f walFile) SyncData() error {
	if _, _, errno := unix.RawSyscall(unix.SYS_FDATASYNC, f.Fd(), 0, 0); errno != 0 {
		return os.NewSyscallError("fdatasync", errno)
	}
	walSyncs.Add(1)
	return nil
}
