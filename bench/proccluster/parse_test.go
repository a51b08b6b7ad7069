//go:build linux

package proccluster

import (
	"encoding/binary"
	"os"
	"testing"
	"time"
)

func TestParseStatTicks(t *testing.T) {
	// A command name with spaces and parentheses; utime 1234, stime 56.
	line := "4242 (shoal (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 1234 56 0 0 20 0 9 0 777 1000 200 18446744073709551615\n"
	got, err := parseStatTicks([]byte(line))
	if err != nil || got != 1290 {
		t.Fatalf("parseStatTicks = %d, %v; want 1290", got, err)
	}
	for _, bad := range []string{"", "1 (x S 1 2", "1 (x) S 1 2 3", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u 5 0"} {
		if _, err := parseStatTicks([]byte(bad)); err == nil {
			t.Errorf("parseStatTicks(%q): no error", bad)
		}
	}
}

func TestParseStatusRSS(t *testing.T) {
	status := "Name:\tshoal\nVmPeak:\t  99999 kB\nVmRSS:\t   20480 kB\nThreads:\t9\n"
	got, err := parseStatusRSS([]byte(status))
	if err != nil || got != 20480<<10 {
		t.Fatalf("parseStatusRSS = %d, %v; want %d", got, err, 20480<<10)
	}
	for _, bad := range []string{"Name:\tx\n", "VmRSS:\t12 MB\n", "VmRSS:\tx kB\n"} {
		if _, err := parseStatusRSS([]byte(bad)); err == nil {
			t.Errorf("parseStatusRSS(%q): no error", bad)
		}
	}
}

func TestOwnProcess(t *testing.T) {
	// Burn some CPU so that the reading is above zero.
	start := time.Now()
	for x := 0; time.Since(start) < 50*time.Millisecond; x++ {
		_ = x * x
	}
	cpu, err := ProcCPUTime(os.Getpid())
	if err != nil || cpu <= 0 {
		t.Fatalf("ProcCPUTime(self) = %v, %v", cpu, err)
	}
	rss, err := ProcRSS(os.Getpid())
	if err != nil || rss < 1<<20 {
		t.Fatalf("ProcRSS(self) = %d, %v", rss, err)
	}
	if _, err := ProcCPUTime(0); err == nil {
		t.Fatal("ProcCPUTime(0): no error")
	}
}

func TestAuxvClockTicks(t *testing.T) {
	word := func(k, v uint64) []byte {
		b := binary.NativeEndian.AppendUint64(nil, k)
		return binary.NativeEndian.AppendUint64(b, v)
	}
	var auxv []byte
	auxv = append(auxv, word(6, 4096)...) // AT_PAGESZ
	auxv = append(auxv, word(17, 250)...)
	auxv = append(auxv, word(0, 0)...)
	if hz := auxvClockTicks(auxv); hz != 250 {
		t.Fatalf("auxvClockTicks = %d, want 250", hz)
	}
	if hz := auxvClockTicks(append(word(6, 4096), word(0, 0)...)); hz != 0 {
		t.Fatalf("auxvClockTicks without AT_CLKTCK = %d", hz)
	}
	if hz := clockTicks(); hz <= 0 {
		t.Fatalf("clockTicks = %d", hz)
	}
}

func TestParseMetrics(t *testing.T) {
	body := `# HELP shoal_swim_dropped_total SWIM datagrams dropped, by reason.
# TYPE shoal_swim_dropped_total counter
shoal_swim_dropped_total{node="n1",reason="auth"} 2
shoal_swim_dropped_total{node="n1",reason="we}ird \"q\""} 3
shoal_lease_grants_total{node="n1"} 1.5e+06
go_goroutines 42
process_start_time_seconds 1.7e9 1700000000000
`
	m, err := ParseMetrics([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"shoal_swim_dropped_total": 5, "shoal_lease_grants_total": 1.5e6, "go_goroutines": 42, "process_start_time_seconds": 1.7e9}
	for k, v := range want {
		if m.Value(k) != v {
			t.Errorf("%s = %v, want %v", k, m.Value(k), v)
		}
	}
	if len(m) != len(want) {
		t.Errorf("%d metrics, want %d: %v", len(m), len(want), m)
	}
	for _, bad := range []string{"x{a=\"1\" 2\n", "x\n", "x one\n", "x 1 2 3\n"} {
		if _, err := ParseMetrics([]byte(bad)); err == nil {
			t.Errorf("ParseMetrics(%q): no error", bad)
		}
	}
}

func TestTags(t *testing.T) {
	a, b := newTag(), newTag()
	if a == b || len(a) != 7 || len(b) != 7 {
		t.Fatalf("tags %q %q", a, b)
	}
	if tagPID(a) != os.Getpid() {
		t.Fatalf("tagPID(%q) = %d, want %d", a, tagPID(a), os.Getpid())
	}
	for _, bad := range []string{"", "abc", "!!!!!00"} {
		if tagPID(bad) != 0 {
			t.Errorf("tagPID(%q) = %d", bad, tagPID(bad))
		}
	}
	// The longest names fit the kernel's 15 bytes.
	if n := len("pcv" + a + "-250"); n > 15 {
		t.Fatalf("veth name of %d bytes", n)
	}
}
