package shardstore

import (
	"bytes"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/shoalmq/shoal/internal/cpulimit"
)

// A sync gap (Config.LogSyncGap) saves CPU only where CPU is what bounds
// the writes: fewer, fuller fdatasyncs leave more of it to the rest. Where
// it is not, the gap is pure wait: one client writing in turn, each write
// waiting for the last one's sync, would write once per gap. So the gap
// holds only while the CPU is busy: this process uses nearly all the CPU
// it may (its cgroup's limit, else every core), or the machine's cores
// are nearly all in use (other nodes, a broker beside it). Otherwise the
// log syncs as soon as asked.

const (
	// busySample is the least time over which the CPU is measured: two
	// cgroup quota periods of 100 ms, so that a throttled process is seen
	// at its average, not in a burst or a pause.
	busySample = 200 * time.Millisecond
	// busyShare: the CPU is busy from this share of what may be used on.
	busyShare = 0.8
)

// cpuReading is one reading of the CPU's use since some fixed moment.
type cpuReading struct {
	proc            time.Duration // CPU this process used
	machineBusy     uint64        // the machine's busy ticks, all cores
	machineTotal    uint64        // its ticks in all, all cores
	machineReadable bool
}

// syncGap decides, after each sync of the log, how long the next waits.
type syncGap struct {
	gap   time.Duration
	limit float64 // cores this process may use
	read  func() (cpuReading, bool)
	now   func() time.Time

	mu   sync.Mutex
	at   time.Time // of last
	last cpuReading
	busy bool
}

// newSyncGap returns the gap for a store's log, measured against the
// CPU this process may use.
func newSyncGap(gap time.Duration) *syncGap {
	limit := float64(runtime.NumCPU())
	if cores, ok, err := cpulimit.Limit(); err == nil && ok && cores < limit {
		limit = cores
	}
	return &syncGap{gap: gap, limit: limit, read: readCPU, now: time.Now}
}

// interval is Pebble's WALMinSyncInterval: the gap while the CPU is busy,
// else none (with no reader, always the gap). Pebble calls it after each
// sync of the log.
func (g *syncGap) interval() time.Duration {
	if g.read == nil {
		return g.gap
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	if since := now.Sub(g.at); g.at.IsZero() || since >= busySample {
		if r, ok := g.read(); ok {
			if !g.at.IsZero() {
				g.busy = cpuBusy(g.last, r, since, g.limit)
			}
			g.last, g.at = r, now
		}
	}
	if g.busy {
		return g.gap
	}
	return 0
}

// cpuBusy reports whether, between readings a and b taken wall apart,
// the process used at least busyShare of limit cores or the machine's
// cores were busy at least busyShare of the time.
func cpuBusy(a, b cpuReading, wall time.Duration, limit float64) bool {
	if wall <= 0 {
		return false
	}
	if used := float64(b.proc-a.proc) / float64(wall); used >= busyShare*limit {
		return true
	}
	if !a.machineReadable || !b.machineReadable || b.machineTotal <= a.machineTotal || b.machineBusy < a.machineBusy {
		return false
	}
	return float64(b.machineBusy-a.machineBusy) >= busyShare*float64(b.machineTotal-a.machineTotal)
}

// parseProcStat reads the machine's busy and total ticks from the "cpu"
// line that /proc/stat begins with: user nice system idle iowait irq
// softirq steal (then guest time, already counted in user and nice);
// idle and iowait are not busy, steal is (the CPU went elsewhere).
func parseProcStat(b []byte) (busy, total uint64, ok bool) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) < 5 || string(fields[0]) != "cpu" {
		return 0, 0, false
	}
	fields = fields[1:min(len(fields), 9)]
	for i, f := range fields {
		v, err := strconv.ParseUint(string(f), 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, true
}
