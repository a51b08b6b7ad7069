//go:build !race

package router

// count adds one to a hit or miss counter with a plain increment.
//
// An atomic add is a locked instruction, a full barrier on amd64 that keeps
// the next lookup's loads from starting until it completes; on the
// benchmark machine it cost a cache hit a fifth to a third of its time
// (bench/README.md, "Routing cache"). Counting per goroutine stripe
// without it, the counts are exact while one goroutine uses a stripe at a
// time, and can miss an increment when two goroutines that share a stripe
// (their stacks hash alike, 1 in 64 for a pair) count at the same instant:
// CacheStats documents them as approximate under concurrency. Under the
// race detector the add is atomic (counter_race.go), so that tests see no
// race on them.
func count(n *uint64) { *n++ }
