//go:build race

package rawsock

import "sync/atomic"

// ioSync stands for the kernel in the race detector's model, as the
// syscall package's own ioSync does: syscall.Write releases on it and
// syscall.Read acquires, so that what a goroutine did before writing to a
// socket happens before what the goroutine that read it does next. A raw
// call bypasses those annotations; these atomics put them back.
var ioSync atomic.Uint64

// wrote is called before a write: release.
func wrote() { ioSync.Add(1) }

// read is called after a read that returned bytes: acquire.
func read() { ioSync.Load() }
