// Package load drives a request load at a service and measures it: a
// fixed number of workers, each with one request in flight, in a closed
// loop (each worker sends its next request when the last one is answered)
// or an open loop (requests scheduled at a fixed total rate, their latency
// counted from the scheduled send time), with a progress report every
// second and a latency histogram of fixed size. It knows nothing of Shoal:
// the caller supplies the request.
package load

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
)

// Histogram counts durations in log-linear buckets: values below 256 ns
// exactly, larger ones in buckets 1/128 of their power of two wide, so a
// value read back is within 0.4% of what was recorded (the bucket's
// midpoint is reported). It covers every non-negative time.Duration in
// 7,296 counters (57 KiB) whatever the number of values recorded.
//
// Record is safe to call from many goroutines at once and takes no lock;
// the readers (Count, Quantile, Max, Merge) may run at the same time and
// then see some of the values being recorded and not others.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	max    atomic.Int64
}

const (
	subBits  = 7
	subCount = 1 << subBits // buckets per power of two
	// A time.Duration has at most 63 bits: the last power of two
	// covered is [2⁶², 2⁶³).
	numBuckets = (63 - subBits + 1) * subCount
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram { return new(Histogram) }

// bucketOf returns the bucket of v ≥ 0.
func bucketOf(v uint64) int {
	if v < 2*subCount {
		return int(v)
	}
	// v>>shift has subBits+1 bits: subCount..2*subCount-1.
	shift := bits.Len64(v) - subBits - 1
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketRange returns the smallest value of bucket i and its width.
func bucketRange(i int) (low, width uint64) {
	if i < 2*subCount {
		return uint64(i), 1
	}
	shift := i/subCount - 1
	return uint64(i%subCount+subCount) << shift, 1 << shift
}

// Record adds one duration; a negative one counts as 0.
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))].Add(1)
	for m := h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
}

// Count returns how many durations were recorded.
func (h *Histogram) Count() uint64 {
	var n uint64
	for i := range h.counts {
		n += h.counts[i].Load()
	}
	return n
}

// Max returns the largest duration recorded, exactly; 0 if none.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the recorded durations:
// the value of rank ⌈q·n⌉ (at least 1) in ascending order, within 0.4%, and
// never above Max; the top rank (q = 1) is Max exactly. It is 0 for an
// empty histogram.
func (h *Histogram) Quantile(q float64) time.Duration {
	return h.Quantiles(q)[0]
}

// Quantiles returns the quantiles of qs, as Quantile does, in one pass
// over the buckets.
func (h *Histogram) Quantiles(qs ...float64) []time.Duration {
	counts := make([]uint64, numBuckets)
	var n uint64
	for i := range h.counts {
		counts[i] = h.counts[i].Load()
		n += counts[i]
	}
	hi := h.Max()
	out := make([]time.Duration, len(qs))
	if n == 0 {
		return out
	}
	for j, q := range qs {
		rank := uint64(math.Ceil(min(max(q, 0), 1) * float64(n)))
		rank = min(max(rank, 1), n)
		if rank == n {
			out[j] = hi
			continue
		}
		var seen uint64
		for i, c := range counts {
			seen += c
			if seen >= rank {
				low, width := bucketRange(i)
				out[j] = min(time.Duration(low+(width-1)/2), hi)
				break
			}
		}
	}
	return out
}

// Merge adds the counts of o to h.
func (h *Histogram) Merge(o *Histogram) {
	for i := range o.counts {
		if c := o.counts[i].Load(); c > 0 {
			h.counts[i].Add(c)
		}
	}
	for v, m := o.max.Load(), h.max.Load(); v > m && !h.max.CompareAndSwap(m, v); m = h.max.Load() {
	}
}
