package memtrim

import (
	"runtime"
	"testing"
)

const mib = 1 << 20

func TestDeciderTrimsOnlyAtRestAndWhenWorthIt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		samples []Sample
		want    []bool
	}{
		{"the first sample has no interval", []Sample{{Allocated: 0, Live: 100 * mib, Held: 900 * mib}}, []bool{false}},
		{"at rest and holding 3x live", []Sample{{Allocated: 1000 * mib, Live: 300 * mib, Held: 900 * mib}, {Allocated: 1001 * mib, Live: 300 * mib, Held: 900 * mib}}, []bool{false, true}},
		{"busy: 40 MiB allocated in the interval", []Sample{{Allocated: 1000 * mib, Live: 300 * mib, Held: 900 * mib}, {Allocated: 1040 * mib, Live: 300 * mib, Held: 900 * mib}}, []bool{false, false}},
		{"busy relative to a large heap: 1% of 4 GiB", []Sample{{Allocated: 0, Live: 4096 * mib, Held: 9000 * mib}, {Allocated: 41 * mib, Live: 4096 * mib, Held: 9000 * mib}}, []bool{false, false}},
		{"quiet relative to a large heap", []Sample{{Allocated: 0, Live: 4096 * mib, Held: 9000 * mib}, {Allocated: 30 * mib, Live: 4096 * mib, Held: 9000 * mib}}, []bool{false, true}},
		{"not worth it: 50 MiB over a small heap", []Sample{{Allocated: 0, Live: 20 * mib, Held: 70 * mib}, {Allocated: 1 * mib, Live: 20 * mib, Held: 70 * mib}}, []bool{false, false}},
		{"not worth it: a fifth over a large heap", []Sample{{Allocated: 0, Live: 1000 * mib, Held: 1200 * mib}, {Allocated: 1 * mib, Live: 1000 * mib, Held: 1200 * mib}}, []bool{false, false}},
		{"a counter that went back is no interval", []Sample{{Allocated: 100 * mib, Live: 300 * mib, Held: 900 * mib}, {Allocated: 10 * mib, Live: 300 * mib, Held: 900 * mib}}, []bool{false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &Decider{Rule: DefaultRule}
			for i, s := range tc.samples {
				if got := d.Observe(s); got != tc.want[i] {
					t.Fatalf("sample %d (%+v): trim %v, want %v", i, s, got, tc.want[i])
				}
			}
		})
	}
}

func TestDeciderDoesNotTrimWhatATrimLeft(t *testing.T) {
	d := &Decider{Rule: DefaultRule}
	d.Observe(Sample{Allocated: 0, Live: 300 * mib, Held: 900 * mib})
	if !d.Observe(Sample{Allocated: mib, Live: 300 * mib, Held: 900 * mib}) {
		t.Fatal("no trim at rest holding 3x live")
	}
	// Spans partly in use stay: the trim left 450 MiB for 300 live.
	d.Trimmed(450 * mib)
	for i := range 5 {
		if d.Observe(Sample{Allocated: uint64(2+i) * mib, Live: 300 * mib, Held: 450 * mib}) {
			t.Fatalf("interval %d: trimmed again what the last trim could not give back", i)
		}
	}
	// A burst grows the heap, then the process rests again.
	d.Observe(Sample{Allocated: 500 * mib, Live: 300 * mib, Held: 800 * mib})
	if !d.Observe(Sample{Allocated: 501 * mib, Live: 300 * mib, Held: 800 * mib}) {
		t.Fatal("no trim after the heap grew by more than the excess since the last trim")
	}
}

func TestDeciderFloorFollowsTheScavenger(t *testing.T) {
	d := &Decider{Rule: DefaultRule}
	d.Observe(Sample{Allocated: 0, Live: 300 * mib, Held: 1000 * mib})
	d.Observe(Sample{Allocated: mib, Live: 300 * mib, Held: 1000 * mib})
	d.Trimmed(1000 * mib) // nothing given back
	// The runtime handed memory back on its own, then a burst came.
	d.Observe(Sample{Allocated: 2 * mib, Live: 200 * mib, Held: 300 * mib})
	d.Observe(Sample{Allocated: 800 * mib, Live: 300 * mib, Held: 900 * mib})
	if !d.Observe(Sample{Allocated: 801 * mib, Live: 300 * mib, Held: 900 * mib}) {
		t.Fatal("the floor stayed at what the heap held before the scavenger gave memory back")
	}
}

// TestTrimGivesBackFreedMemory allocates 256 MiB, drops it, and checks
// that a trim leaves the heap holding much less (the runtime's own
// collector would keep it mapped until its next cycle and beyond).
var sink [][]byte

func TestTrimGivesBackFreedMemory(t *testing.T) {
	runtime.GC()
	for range 256 {
		sink = append(sink, make([]byte, mib))
	}
	for _, b := range sink {
		b[0] = 1 // touched: resident
	}
	held := Read().Held
	if held < 256*mib {
		t.Fatalf("the heap holds %d MiB with 256 MiB allocated", held/mib)
	}
	sink = nil
	before, after := Trim()
	if before.Held < 256*mib {
		t.Fatalf("before the trim the heap held %d MiB, want at least 256", before.Held/mib)
	}
	if after.Held > 64*mib {
		t.Fatalf("after the trim the heap holds %d MiB (live %d MiB), want at most 64", after.Held/mib, after.Live/mib)
	}
}
