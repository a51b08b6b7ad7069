package load

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// maxRelErr is the documented bound: a bucket is at most 1/128 of its
// values wide and its midpoint is reported.
const maxRelErr = 1.0 / 256

// exactQuantile is the value of rank ⌈q·n⌉ (at least 1) of sorted.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := max(int(math.Ceil(q*float64(len(sorted)))), 1)
	return sorted[rank-1]
}

func TestHistogramQuantilesAgainstSortedSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dists := map[string]func() time.Duration{
		// Latencies from 100 ns to 10 s, evenly spread in log scale.
		"log-uniform": func() time.Duration { return time.Duration(math.Pow(10, 2+8*rng.Float64())) },
		// A typical service: around 2 ms, with a long tail.
		"exponential": func() time.Duration { return time.Duration(rng.ExpFloat64() * 2e6) },
		// Small values, where buckets are exact.
		"tiny": func() time.Duration { return time.Duration(rng.IntN(300)) },
		"any":  func() time.Duration { return time.Duration(rng.Int64()) },
	}
	qs := []float64{0, 0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1}
	for name, draw := range dists {
		for _, n := range []int{1, 2, 7, 1000, 100_000} {
			h := NewHistogram()
			samples := make([]time.Duration, n)
			for i := range samples {
				samples[i] = draw()
				h.Record(samples[i])
			}
			slices.Sort(samples)
			if h.Count() != uint64(n) {
				t.Fatalf("%s n=%d: Count %d", name, n, h.Count())
			}
			if h.Max() != samples[n-1] {
				t.Fatalf("%s n=%d: Max %v, want %v", name, n, h.Max(), samples[n-1])
			}
			got := h.Quantiles(qs...)
			for i, q := range qs {
				want := exactQuantile(samples, q)
				if err := math.Abs(float64(got[i]-want)) / float64(want); want != 0 && err > maxRelErr || want == 0 && got[i] != 0 {
					t.Errorf("%s n=%d q=%v: %v, want %v (relative error %.5f)", name, n, q, got[i], want, err)
				}
			}
			if one := h.Quantile(0.99); one != got[5] {
				t.Errorf("Quantile(0.99) %v, Quantiles says %v", one, got[5])
			}
		}
	}
}

// Every bucket maps its own range back to itself, and the buckets tile the
// whole range of time.Duration without gaps.
func TestHistogramBuckets(t *testing.T) {
	next := uint64(0)
	for i := range numBuckets {
		low, width := bucketRange(i)
		if low != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, low, next)
		}
		if bucketOf(low) != i || bucketOf(low+width-1) != i {
			t.Fatalf("bucket %d [%d, %d) maps to %d and %d", i, low, low+width, bucketOf(low), bucketOf(low+width-1))
		}
		if i >= 2*subCount && float64(width)/float64(low) > 1.0/subCount {
			t.Fatalf("bucket %d: width %d at %d", i, width, low)
		}
		next = low + width
	}
	if next-1 != math.MaxInt64 {
		t.Fatalf("the buckets end at %d", next-1)
	}
}

func TestHistogramEdges(t *testing.T) {
	h := NewHistogram()
	if h.Count() != 0 || h.Max() != 0 || h.Quantile(0.5) != 0 {
		t.Fatal("an empty histogram is not zero")
	}
	h.Record(-5 * time.Second)
	if h.Quantile(1) != 0 || h.Count() != 1 {
		t.Fatalf("a negative value: %v", h.Quantile(1))
	}
	h.Record(math.MaxInt64)
	if h.Max() != math.MaxInt64 || h.Quantile(1) != math.MaxInt64 {
		t.Fatalf("the largest value: max %v, q1 %v", h.Max(), h.Quantile(1))
	}
}

func TestHistogramMerge(t *testing.T) {
	a, b, both := NewHistogram(), NewHistogram(), NewHistogram()
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range 10_000 {
		d := time.Duration(rng.ExpFloat64() * 1e6)
		both.Record(d)
		if i%3 == 0 {
			a.Record(d)
		} else {
			b.Record(d)
		}
	}
	a.Merge(b)
	if a.Count() != both.Count() || a.Max() != both.Max() {
		t.Fatalf("merged count %d max %v, want %d %v", a.Count(), a.Max(), both.Count(), both.Max())
	}
	qs := []float64{0.5, 0.9, 0.99, 0.999}
	if got, want := a.Quantiles(qs...), both.Quantiles(qs...); !slices.Equal(got, want) {
		t.Fatalf("merged quantiles %v, want %v", got, want)
	}
}

// Many goroutines record at once (run with -race); nothing is lost.
func TestHistogramConcurrentRecord(t *testing.T) {
	h := NewHistogram()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 10_000 {
				h.Record(time.Duration(g*10_000 + i))
			}
		})
	}
	for range 10 {
		_ = h.Quantiles(0.5, 0.99)
	}
	wg.Wait()
	if h.Count() != 80_000 || h.Max() != 79_999 {
		t.Fatalf("count %d, max %v", h.Count(), h.Max())
	}
}
