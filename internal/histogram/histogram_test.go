package histogram

import (
	"sync"
	"testing"
	"time"
)

func TestBucketOf(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{
		{-time.Second, 0}, {0, 0}, {1, 0}, {FirstBound, 0},
		{FirstBound + 1, 1}, {2 * FirstBound, 1}, {2*FirstBound + 1, 2}, {4 * FirstBound, 2},
		{FirstBound << 10, 10}, {FirstBound<<(Buckets-1) + 1, Buckets}, {time.Hour, Buckets},
	} {
		if got := bucketOf(max(int64(tc.d), 0)); got != tc.want {
			t.Errorf("bucketOf(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
	// Every duration falls in the first bucket whose bound holds it.
	for ns := int64(0); ns < int64(FirstBound)<<(Buckets); ns = ns*5/4 + 1 {
		i := bucketOf(ns)
		if i < Buckets && float64(ns)/1e9 > Bound(i) || i > 0 && float64(ns)/1e9 <= Bound(i-1) {
			t.Fatalf("%dns in bucket %d (bounds %v, %v)", ns, i, Bound(max(i-1, 0)), Bound(min(i, Buckets-1)))
		}
	}
}

func TestSnapshot(t *testing.T) {
	var h Histogram
	h.Observe(10 * time.Microsecond)
	h.Observe(30 * time.Microsecond)
	h.Observe(time.Millisecond)
	h.Observe(time.Hour)
	s := h.Snapshot()
	if s.Count != 4 {
		t.Fatalf("count %d", s.Count)
	}
	if want := (10*time.Microsecond + 30*time.Microsecond + time.Millisecond + time.Hour).Seconds(); s.SumSeconds != want {
		t.Fatalf("sum %v, want %v", s.SumSeconds, want)
	}
	// 25µs: 1; 50µs: 2; ...; 1.6ms (the first bound at least 1ms): 3; the
	// last bound: 3 (the hour is only in Count).
	if s.Cumulative[0] != 1 || s.Cumulative[1] != 2 || s.Cumulative[5] != 2 || s.Cumulative[6] != 3 || s.Cumulative[Buckets-1] != 3 {
		t.Fatalf("cumulative %v", s.Cumulative)
	}
	b := s.Buckets()
	if len(b) != Buckets || b[Bound(6)] != 3 || b[0.000025] != 1 {
		t.Fatalf("buckets %v", b)
	}
}

func TestConcurrentObserve(t *testing.T) {
	var h Histogram
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				h.Observe(time.Duration(g*1000+i) * time.Microsecond)
			}
		})
	}
	wg.Wait()
	if s := h.Snapshot(); s.Count != 4000 || s.Cumulative[Buckets-1] != 4000 {
		t.Fatalf("count %d, last bucket %d", s.Count, s.Cumulative[Buckets-1])
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	var h Histogram
	if a := testing.AllocsPerRun(100, func() { h.Observe(3 * time.Millisecond) }); a != 0 {
		t.Fatalf("%v allocations per Observe", a)
	}
}

func BenchmarkObserve(b *testing.B) {
	var h Histogram
	d := 0 * time.Microsecond
	for b.Loop() {
		h.Observe(d)
		d += 7 * time.Microsecond
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	var h Histogram
	b.RunParallel(func(pb *testing.PB) {
		d := time.Duration(0)
		for pb.Next() {
			h.Observe(d)
			d += 7 * time.Microsecond
		}
	})
}
