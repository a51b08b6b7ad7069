// Package memtrim gives a process's idle heap memory back to the system
// once the process is at rest.
//
// Go's collector lets the heap grow to twice what was live after the last
// collection (GOGC=100), and its scavenger hands back only what lies past
// that goal. A node filled with millions of topics and then left idle so
// keeps about twice its live heap resident: the garbage of the fill is
// collected only by the runtime's forced collection every two minutes,
// and the memory it frees stays mapped for the next burst. A Trimmer
// watches the heap and, when the process has allocated little over a
// whole interval while holding much more than it needs, collects and
// returns the free memory at once (debug.FreeOSMemory). Under load it
// does nothing: the heap is then the runtime's to size.
package memtrim

import (
	"context"
	"log/slog"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Sample is what a Trimmer reads of the runtime, in bytes.
type Sample struct {
	// Allocated: every byte ever allocated on the heap.
	Allocated uint64
	// Live: the heap marked live by the last collection.
	Live uint64
	// Held: the heap memory mapped and not returned to the system
	// (objects, free and unused slots of spans in use, free spans).
	Held uint64
}

// Rule decides when memory is trimmed. The zero value is not usable; see
// DefaultRule.
type Rule struct {
	// Quiet: at rest means fewer bytes allocated over an interval than
	// the larger of Quiet and QuietFraction of the live heap.
	Quiet         uint64
	QuietFraction float64
	// Excess: a trim is worth it when the heap held exceeds the live heap
	// by more than the larger of Excess and ExcessFraction of it, and has
	// grown by as much since the last trim (what a trim leaves behind,
	// spans partly in use, it cannot give back: it is not trimmed again).
	Excess         uint64
	ExcessFraction float64
}

// DefaultRule: at rest below 16 MiB or 1% of the live heap allocated in
// an interval (an idle node allocates well under 1 MiB in 30 s; an assign
// costs a node kilobytes), and worth it past 64 MiB or a quarter of the
// live heap held beyond it.
var DefaultRule = Rule{Quiet: 16 << 20, QuietFraction: 0.01, Excess: 64 << 20, ExcessFraction: 0.25}

// Decider applies a Rule to successive samples, one an interval apart.
type Decider struct {
	Rule Rule
	last Sample
	have bool
	// floor: the least the heap held since the last trim.
	floor uint64
}

// Observe takes the sample of the interval that just ended and reports
// whether to trim now. After a trim the caller reports what the heap
// then holds with Trimmed.
func (d *Decider) Observe(s Sample) bool {
	prev, had := d.last, d.have
	d.last, d.have = s, true
	d.floor = min(d.floor, s.Held) // the scavenger gave some back since
	if !had || s.Allocated < prev.Allocated {
		return false
	}
	quiet := max(d.Rule.Quiet, uint64(d.Rule.QuietFraction*float64(s.Live)))
	if s.Allocated-prev.Allocated >= quiet {
		return false
	}
	excess := max(d.Rule.Excess, uint64(d.Rule.ExcessFraction*float64(s.Live)))
	return s.Held > s.Live+excess && s.Held > d.floor+excess
}

// Trimmed records what the heap holds right after a trim.
func (d *Decider) Trimmed(held uint64) { d.floor = held }

// Read samples this process's runtime.
func Read() Sample {
	ms := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
	}
	metrics.Read(ms)
	v := func(i int) uint64 {
		if ms[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return ms[i].Value.Uint64()
	}
	return Sample{Allocated: v(0), Live: v(1), Held: v(2) + v(3) + v(4)}
}

// Trim collects and returns every free page to the system, and reports
// what the heap held before and after.
func Trim() (before, after Sample) {
	before = Read()
	debug.FreeOSMemory()
	return before, Read()
}

// Follow checks every interval, until ctx ends, and trims when the rule
// says so, logging each trim at info. It returns at once.
func Follow(ctx context.Context, every time.Duration, rule Rule, logger *slog.Logger) {
	d := &Decider{Rule: rule}
	d.Observe(Read())
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !d.Observe(Read()) {
				continue
			}
			start := time.Now()
			before, after := Trim()
			d.Trimmed(after.Held)
			d.Observe(after) // the trim's own allocations do not count
			logger.Info("heap trimmed at rest", "held_mib", before.Held>>20, "now_mib", after.Held>>20,
				"live_mib", after.Live>>20, "took", time.Since(start).Round(time.Millisecond))
		}
	}()
}
