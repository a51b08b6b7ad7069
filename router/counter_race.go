//go:build race

package router

import "sync/atomic"

// count adds one to a hit or miss counter; see counter.go.
func count(n *uint64) { atomic.AddUint64(n, 1) }
