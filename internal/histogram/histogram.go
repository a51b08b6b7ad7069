// Package histogram is a latency histogram cheap enough for every request:
// Observe is two atomic adds on fixed exponential buckets, with no lock
// and no allocation. A scrape reads a Snapshot, in the shape a Prometheus
// histogram wants (cumulative counts, the sum in seconds).
package histogram

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// Buckets: upper bounds FirstBound·2^i for i in [0, Buckets), 25µs to
// about 13s, then +Inf. Each bound is twice the one before, so a quantile
// read from them is within a factor of two; the range holds a cached
// lookup answered on an event loop and a request that waited out a
// leader election.
const (
	FirstBound = 25 * time.Microsecond
	Buckets    = 20
)

// Histogram counts durations. The zero value is ready; it must not be
// copied once used.
type Histogram struct {
	counts [Buckets + 1]atomic.Uint64 // the last: above the largest bound
	sumNs  atomic.Uint64
}

// Observe records one duration; a negative one counts as zero.
func (h *Histogram) Observe(d time.Duration) {
	ns := max(int64(d), 0)
	h.counts[bucketOf(ns)].Add(1)
	h.sumNs.Add(uint64(ns))
}

// Since records the time from start to now.
func (h *Histogram) Since(start time.Time) { h.Observe(time.Since(start)) }

// bucketOf is the index of the first bucket whose bound is at least ns.
func bucketOf(ns int64) int {
	if ns <= int64(FirstBound) {
		return 0
	}
	return min(bits.Len64(uint64((ns-1)/int64(FirstBound))), Buckets)
}

// Bound is the upper bound of bucket i in seconds.
func Bound(i int) float64 {
	return (FirstBound * time.Duration(1<<i)).Seconds()
}

// Snapshot is a histogram as read at one moment.
type Snapshot struct {
	Count      uint64
	SumSeconds float64
	// Cumulative[i] counts the durations at most Bound(i).
	Cumulative [Buckets]uint64
}

// Snapshot reads h. Observations made while it reads may be counted in a
// bucket and not yet in the sum, or the reverse; the counts stay
// cumulative and Count is at least every Cumulative.
func (h *Histogram) Snapshot() Snapshot {
	var s Snapshot
	var run uint64
	for i := range Buckets {
		run += h.counts[i].Load()
		s.Cumulative[i] = run
	}
	s.Count = run + h.counts[Buckets].Load()
	s.SumSeconds = float64(h.sumNs.Load()) / 1e9
	return s
}

// Buckets returns the snapshot's cumulative counts keyed by upper bound in
// seconds, as prometheus.MustNewConstHistogram takes them.
func (s *Snapshot) Buckets() map[float64]uint64 {
	m := make(map[float64]uint64, Buckets)
	for i, c := range s.Cumulative {
		m[Bound(i)] = c
	}
	return m
}
