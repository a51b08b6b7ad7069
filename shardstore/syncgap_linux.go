//go:build linux

package shardstore

import (
	"errors"
	"io"
	"os"
	"sync"
	"syscall"
	"time"
)

var (
	procStatOnce sync.Once
	procStat     *os.File // /proc/stat, kept open; nil if it cannot be
)

// readCPU reads this process's CPU time (getrusage) and the machine's
// busy and total ticks (the first line of /proc/stat; idle and iowait
// count as idle).
func readCPU() (cpuReading, bool) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return cpuReading{}, false
	}
	r := cpuReading{proc: time.Duration(ru.Utime.Nano() + ru.Stime.Nano())}
	procStatOnce.Do(func() { procStat, _ = os.Open("/proc/stat") })
	if procStat != nil {
		var buf [512]byte
		if n, err := procStat.ReadAt(buf[:], 0); n > 0 && (err == nil || errors.Is(err, io.EOF)) {
			r.machineBusy, r.machineTotal, r.machineReadable = parseProcStat(buf[:n])
		}
	}
	return r, true
}
