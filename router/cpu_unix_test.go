//go:build unix

package router

import (
	"syscall"
	"testing"
	"time"
)

// cpuClock measures the CPU time (user + system, all threads) the process
// spends, so a benchmark on a shared machine can report CPU per operation
// next to wall time: other processes stretch the wall clock, not this.
type cpuClock struct{ start time.Duration }

func cpuNow() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func startCPU() cpuClock { return cpuClock{start: cpuNow()} }

// report adds a cpu-ns/op metric for the b.N operations since start.
func (c cpuClock) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(cpuNow()-c.start)/float64(b.N), "cpu-ns/op")
	}
}
