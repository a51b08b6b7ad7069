package shardstore

import (
	"testing"
	"time"
)

func TestCPUBusy(t *testing.T) {
	at := func(proc time.Duration, busy, total uint64) cpuReading {
		return cpuReading{proc: proc, machineBusy: busy, machineTotal: total, machineReadable: true}
	}
	for _, c := range []struct {
		name  string
		a, b  cpuReading
		wall  time.Duration
		limit float64
		want  bool
	}{
		{"idle", at(0, 0, 0), at(10*time.Millisecond, 100, 1000), time.Second, 2, false},
		{"process at its quota", at(0, 0, 0), at(140*time.Millisecond, 100, 1000), time.Second, 0.15, true},
		{"process under its quota", at(0, 0, 0), at(100*time.Millisecond, 100, 1000), time.Second, 0.15, false},
		{"process on both cores", at(0, 0, 0), at(1700*time.Millisecond, 900, 1000), time.Second, 2, true},
		{"machine busy, process not", at(0, 0, 0), at(600*time.Millisecond, 850, 1000), time.Second, 2, true},
		{"machine just under", at(0, 0, 0), at(600*time.Millisecond, 790, 1000), time.Second, 2, false},
		{"machine unreadable", cpuReading{}, cpuReading{proc: 600 * time.Millisecond}, time.Second, 2, false},
		{"machine counters went back", at(0, 900, 1000), at(600*time.Millisecond, 100, 500), time.Second, 2, false},
		{"no time", at(0, 0, 0), at(time.Second, 1000, 1000), 0, 2, false},
	} {
		if got := cpuBusy(c.a, c.b, c.wall, c.limit); got != c.want {
			t.Errorf("%s: busy %v, want %v", c.name, got, c.want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	busy, total, ok := parseProcStat([]byte("cpu  100 5 50 800 40 3 2 0 7 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n"))
	// user+nice+system+irq+softirq+steal = 160; the guest ticks (already in
	// user) are not counted again.
	if !ok || busy != 160 || total != 1000 {
		t.Fatalf("busy %d, total %d, ok %v; want 160, 1000", busy, total, ok)
	}
	for _, bad := range []string{"", "intr 1 2 3\n", "cpu 1 2 x 4 5\n", "cpu 1 2\n"} {
		if _, _, ok := parseProcStat([]byte(bad)); ok {
			t.Errorf("%q: parsed", bad)
		}
	}
}

// The gap follows the CPU: none until a busy sample, held while busy,
// gone once the CPU is idle again; a sample spans at least busySample.
func TestSyncGapFollowsTheCPU(t *testing.T) {
	now := time.Unix(1000, 0)
	var proc time.Duration
	g := &syncGap{gap: 4 * time.Millisecond, limit: 1, now: func() time.Time { return now },
		read: func() (cpuReading, bool) { return cpuReading{proc: proc}, true }}
	step := func(wall, used time.Duration) time.Duration {
		now = now.Add(wall)
		proc += used
		return g.interval()
	}
	if d := g.interval(); d != 0 {
		t.Fatalf("first sync: gap %v, want none", d)
	}
	if d := step(100*time.Millisecond, 100*time.Millisecond); d != 0 {
		t.Fatalf("busy for less than a sample: gap %v, want none yet", d)
	}
	if d := step(100*time.Millisecond, 90*time.Millisecond); d != 4*time.Millisecond {
		t.Fatalf("busy for a sample: gap %v, want 4ms", d)
	}
	if d := step(50*time.Millisecond, 0); d != 4*time.Millisecond {
		t.Fatalf("within the next sample: gap %v, want it held", d)
	}
	if d := step(10*time.Second, 50*time.Millisecond); d != 0 {
		t.Fatalf("after an idle stretch: gap %v, want none", d)
	}
	g.read = nil
	if d := g.interval(); d != 4*time.Millisecond {
		t.Fatalf("no reader: gap %v, want it always", d)
	}
}
