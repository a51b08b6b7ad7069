package main

import (
	"bufio"
	"fmt"
	"os"
	"runtime/metrics"
	"slices"
	"sync/atomic"
	"time"
)

// timelineBucket is the width of one -timeline row.
const timelineBucket = 100 * time.Millisecond

// timelineSampleEvery is how often the sampler reads the GC and Pebble
// counters.
const timelineSampleEvery = 10 * time.Millisecond

// timeline records when each measured proposal completed and, beside it,
// when garbage collections ended and Pebble flushed or compacted, so that a
// run's tail can be read against what the process was doing (-timeline).
type timeline struct {
	c     *cluster
	start atomic.Int64 // window start, UnixNano; 0 before it
	ends  [][]int64    // per client: completion offsets from start, ns
	lats  [][]int64    // per client: latencies, ns, beside ends

	samples []timelineSample // the sampler's, read once it has stopped
	stop    chan struct{}
	done    chan struct{}
}

type timelineSample struct {
	at                   time.Duration
	gcs, flushes, compcs uint64
}

func newTimeline(c *cluster, clients int) *timeline {
	return &timeline{
		c:    c,
		ends: make([][]int64, clients),
		lats: make([][]int64, clients),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
}

// begin marks the start of the measured window and starts the sampler.
func (t *timeline) begin() {
	t.start.Store(time.Now().UnixNano())
	go t.sample()
}

// record notes a measured proposal of client cl that ended at end after d.
// Each client records from its own goroutine only.
func (t *timeline) record(cl int, end time.Time, d time.Duration) {
	t.ends[cl] = append(t.ends[cl], end.UnixNano()-t.start.Load())
	t.lats[cl] = append(t.lats[cl], int64(d))
}

func (t *timeline) sample() {
	defer close(t.done)
	gc := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	tick := time.NewTicker(timelineSampleEvery)
	defer tick.Stop()
	for {
		metrics.Read(gc)
		s := timelineSample{at: time.Duration(time.Now().UnixNano() - t.start.Load()), gcs: gc[0].Value.Uint64()}
		for _, hs := range t.c.hosts {
			if hs.store != nil {
				m := hs.store.Metrics()
				s.flushes += uint64(m.Flush.Count)
				s.compcs += uint64(m.Compact.Count)
			}
		}
		t.samples = append(t.samples, s)
		select {
		case <-t.stop:
			return
		case <-tick.C:
		}
	}
}

// end stops the sampler.
func (t *timeline) end() {
	close(t.stop)
	<-t.done
}

// write writes one row per timelineBucket of the window: proposals
// completed in it, their p50, p99 and max latency, and the GC cycles,
// Pebble flushes and compactions (all hosts) that ended in it.
func (t *timeline) write(path string, window time.Duration) error {
	n := int(window/timelineBucket) + 1
	rows := make([][]int64, n)
	for cl := range t.ends {
		for i, e := range t.ends[cl] {
			b := int(time.Duration(e) / timelineBucket)
			if b >= 0 && b < n {
				rows[b] = append(rows[b], t.lats[cl][i])
			}
		}
	}
	gcs := make([]uint64, n)
	flushes := make([]uint64, n)
	compcs := make([]uint64, n)
	for i := 1; i < len(t.samples); i++ {
		a, b := t.samples[i-1], t.samples[i]
		k := int(b.at / timelineBucket)
		if k < 0 || k >= n {
			continue
		}
		gcs[k] += b.gcs - a.gcs
		flushes[k] += b.flushes - a.flushes
		compcs[k] += b.compcs - a.compcs
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "t_ms\tcommits\tp50_ms\tp99_ms\tmax_ms\tgc_cycles\tflushes\tcompactions")
	for i, r := range rows {
		slices.Sort(r)
		q := func(p float64) float64 {
			if len(r) == 0 {
				return 0
			}
			return float64(r[min(int(p*float64(len(r))), len(r)-1)]) / 1e6
		}
		fmt.Fprintf(w, "%d\t%d\t%.1f\t%.1f\t%.1f\t%d\t%d\t%d\n",
			time.Duration(i)*timelineBucket/time.Millisecond, len(r), q(0.5), q(0.99), q(1), gcs[i], flushes[i], compcs[i])
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
