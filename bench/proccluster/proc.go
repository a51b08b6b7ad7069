//go:build linux

package proccluster

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ProcCPUTime is the user plus system CPU time process pid used, from
// /proc/PID/stat (utime and stime, in clock ticks).
func ProcCPUTime(pid int) (time.Duration, error) {
	if pid <= 0 {
		return 0, errors.New("proccluster: no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("proccluster: %w", err)
	}
	ticks, err := parseStatTicks(b)
	if err != nil {
		return 0, fmt.Errorf("proccluster: /proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ticks) * time.Second / time.Duration(clockTicks()), nil
}

// parseStatTicks returns utime+stime of a /proc/PID/stat line. The command
// name, field 2, is in parentheses and may hold spaces and parentheses: the
// fields are counted after the last ')'.
func parseStatTicks(b []byte) (uint64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name", len(f))
	}
	utime, err := strconv.ParseUint(f[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("utime: %w", err)
	}
	stime, err := strconv.ParseUint(f[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("stime: %w", err)
	}
	return utime + stime, nil
}

// ProcState is process pid's state letter in /proc/PID/stat: R running,
// S sleeping, T stopped, Z zombie, ...
func ProcState(pid int) (byte, error) {
	if pid <= 0 {
		return 0, errors.New("proccluster: no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("proccluster: %w", err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, fmt.Errorf("proccluster: /proc/%d/stat: no state", pid)
	}
	return b[i+2], nil
}

// ProcRSS is process pid's resident set size in bytes, from VmRSS in
// /proc/PID/status.
func ProcRSS(pid int) (uint64, error) {
	if pid <= 0 {
		return 0, errors.New("proccluster: no process")
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("proccluster: %w", err)
	}
	rss, err := parseStatusRSS(b)
	if err != nil {
		return 0, fmt.Errorf("proccluster: /proc/%d/status: %w", pid, err)
	}
	return rss, nil
}

// parseStatusRSS reads the "VmRSS:  1234 kB" line of /proc/PID/status.
func parseStatusRSS(b []byte) (uint64, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("VmRSS line %q", line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("VmRSS: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("no VmRSS line (a zombie, or a kernel thread)")
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/PID/stat's times:
// AT_CLKTCK of this process's auxiliary vector, 100 if it cannot be read
// (the value on every Linux architecture Go runs on).
var clockTicks = sync.OnceValue(func() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil || strconv.IntSize != 64 {
		return 100
	}
	if hz := auxvClockTicks(b); hz > 0 {
		return hz
	}
	return 100
})

// auxvClockTicks finds AT_CLKTCK (17) in an auxiliary vector of native
// 64-bit words; 0 if it is not there.
func auxvClockTicks(b []byte) int64 {
	const atNull, atClkTck = 0, 17
	for len(b) >= 16 {
		key, val := binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		b = b[16:]
		switch key {
		case atNull:
			return 0
		case atClkTck:
			return int64(val)
		}
	}
	return 0
}
