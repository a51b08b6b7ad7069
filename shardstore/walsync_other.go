//go:build !linux

package shardstore

import "github.com/cockroachdb/pebble/v2/vfs"

// walSyncFS leaves fsys as it is off Linux (see walsync_linux.go).
func walSyncFS(fsys vfs.FS) vfs.FS { return fsys }
