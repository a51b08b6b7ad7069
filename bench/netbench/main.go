// Command netbench measures netio against a plain goroutine-per-connection
// net server over loopback: request/response at several connection counts
// and pipeline depths, and one-way peer frames.
//
//	go run ./bench/netbench -json
//
// Each request/response server runs in a child process of this binary, so
// that its CPU time per operation is measured apart from the load
// generator's.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"
)

type result struct {
	Case       string  `json:"case"`
	Impl       string  `json:"impl"`
	Run        int     `json:"run,omitempty"` // repetition, from 1, with -runs above 1
	Conns      int     `json:"conns,omitempty"`
	Depth      int     `json:"depth,omitempty"`
	Ops        int64   `json:"ops"`
	OpsPerS    float64 `json:"ops_per_s"`
	P50us      float64 `json:"p50_us"`
	P99us      float64 `json:"p99_us"`
	CPUusPerOp float64 `json:"cpu_us_per_op"`
	CPUScope   string  `json:"cpu_scope"`
	// ClientCPUusPerOp is the load generator's CPU per operation, to show
	// whether the generator rather than the server limits a case.
	ClientCPUusPerOp float64 `json:"client_cpu_us_per_op,omitempty"`
	LoadAvg          string  `json:"loadavg,omitempty"`
	// Read and write system calls per operation, server and generator.
	ServerReadsPerOp  float64 `json:"server_reads_per_op,omitempty"`
	ServerWritesPerOp float64 `json:"server_writes_per_op,omitempty"`
	GenReadsPerOp     float64 `json:"gen_reads_per_op,omitempty"`
	GenWritesPerOp    float64 `json:"gen_writes_per_op,omitempty"`
	DurationS         float64 `json:"duration_s"`
	Dropped           int64   `json:"dropped,omitempty"`
	PayloadSize       int     `json:"payload_bytes"`
}

func main() {
	var (
		asJSON   = flag.Bool("json", false, "print one JSON object per case")
		duration = flag.Duration("duration", 2*time.Second, "measured time per case")
		serve    = flag.String("serve", "", "internal: run a server (netio|netio-async|net|...) and print its address")
		only     = flag.String("impl", "netio,netio-async,net", "implementations to run (also netio-goroutines, netio-async-goroutines, gnet-write, netio:loops=N)")
		cases    = flag.String("cases", "", "comma-separated case names to run (default all)")
		gen      = flag.String("gen", "epoll", "request/response load generator: epoll (one thread) or goroutines (one per connection)")
		runs     = flag.Int("runs", 1, "repetitions of each case, the implementations taking turns within each")
		profile  = flag.String("cpuprofile", "", "write each server child's CPU profile to this prefix + case + impl")
		withTLS  = flag.Bool("tls", false, "compare with TLS 1.3: the implementations default to netio,netio-tls,tls-proxy and the generator to goroutines; the peer case runs netio and netio-tls")
		dir      = flag.String("tls-dir", "", "internal: the certificates a server child uses")
	)
	flag.Parse()
	tlsDir = *dir
	if *serve != "" {
		if err := runServer(*serve, *profile); err != nil {
			fmt.Fprintln(os.Stderr, "netbench:", err)
			os.Exit(1)
		}
		return
	}
	if *gen != "epoll" && *gen != "goroutines" {
		fmt.Fprintf(os.Stderr, "netbench: unknown -gen %q\n", *gen)
		os.Exit(2)
	}
	genMode = *gen
	if *withTLS {
		d, err := makeCerts()
		if err != nil {
			fmt.Fprintln(os.Stderr, "netbench:", err)
			os.Exit(1)
		}
		defer os.RemoveAll(d)
		tlsDir = d
		// crypto/tls needs a goroutine per connection: the plain servers
		// are driven by the same generator, so that only TLS differs.
		genMode = "goroutines"
		implSet := false
		flag.Visit(func(f *flag.Flag) { implSet = implSet || f.Name == "impl" })
		if !implSet {
			*only = "netio,netio-tls,tls-proxy"
		}
	}
	if *runs < 1 {
		fmt.Fprintf(os.Stderr, "netbench: -runs %d\n", *runs)
		os.Exit(2)
	}
	impls := strings.Split(*only, ",")
	var results []result
	emit := func(r result) {
		results = append(results, r)
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		}
	}
	shapes := []struct {
		name         string
		conns, depth int
	}{
		{"rr_1conn_depth1", 1, 1},
		{"rr_1conn_depth64", 1, 64},
		{"rr_64conns_depth16", 64, 16},
	}
	want := func(name string) bool {
		return *cases == "" || slices.Contains(strings.Split(*cases, ","), name)
	}
	for _, s := range shapes {
		if !want(s.name) {
			continue
		}
		for run := 1; run <= *runs; run++ {
			for _, impl := range impls {
				prof := ""
				if *profile != "" {
					prof = *profile + s.name + "." + impl + runSuffix(run, *runs)
				}
				r, err := rrCase(impl, s.conns, s.depth, *duration, prof)
				if err != nil {
					fmt.Fprintf(os.Stderr, "netbench: %s %s: %v\n", s.name, impl, err)
					os.Exit(1)
				}
				r.Case = s.name
				if *runs > 1 {
					r.Run = run
				}
				emit(r)
			}
		}
	}
	peerImpls := []string{"netio", "net"}
	if *withTLS {
		peerImpls = []string{"netio", "netio-tls"}
	}
	if slices.Contains(impls, "netio-goroutines") {
		peerImpls = append(peerImpls, "netio-goroutines")
	}
	for run := 1; run <= *runs && want("peer_oneway_100B"); run++ {
		for _, impl := range peerImpls {
			prof := ""
			if *profile != "" {
				prof = *profile + "peer_oneway_100B." + impl + runSuffix(run, *runs)
			}
			r, err := peerCase(impl, *duration, prof)
			if err != nil {
				fmt.Fprintf(os.Stderr, "netbench: peer %s: %v\n", impl, err)
				os.Exit(1)
			}
			if *runs > 1 {
				r.Run = run
			}
			emit(r)
		}
	}
	if !*asJSON {
		printTable(os.Stdout, results)
		base := "net"
		if *withTLS {
			base = "netio"
		}
		printRatios(os.Stdout, results, base)
	}
}

func runSuffix(run, runs int) string {
	if runs == 1 {
		return ""
	}
	return "." + strconv.Itoa(run)
}

// printRatios prints, for each case and each implementation other than
// base, its ops/s over base's in each repetition and their median, and in
// how many repetitions its p99 was at most base's; then the same for CPU
// per operation.
func printRatios(w io.Writer, rs []result, baseImpl string) {
	type key struct{ c, impl string }
	byRun := make(map[key]map[int]result)
	var order []key
	for _, r := range rs {
		k := key{r.Case, r.Impl}
		if byRun[k] == nil {
			byRun[k] = make(map[int]result)
			order = append(order, k)
		}
		byRun[k][r.Run] = r
	}
	for _, k := range order {
		base := byRun[key{k.c, baseImpl}]
		if k.impl == baseImpl || base == nil {
			continue
		}
		var ratios, cpu []float64
		var line, cpuLine strings.Builder
		p99ok, n := 0, 0
		for run := 0; run <= len(byRun[k]); run++ {
			r, ok1 := byRun[k][run]
			b, ok2 := base[run]
			if !ok1 || !ok2 || b.OpsPerS == 0 {
				continue
			}
			x := r.OpsPerS / b.OpsPerS
			ratios = append(ratios, x)
			fmt.Fprintf(&line, " %.2f", x)
			if b.CPUusPerOp > 0 {
				y := r.CPUusPerOp / b.CPUusPerOp
				cpu = append(cpu, y)
				fmt.Fprintf(&cpuLine, " %.2f", y)
			}
			n++
			if r.P99us <= b.P99us {
				p99ok++
			}
		}
		if n == 0 {
			continue
		}
		slices.Sort(ratios)
		fmt.Fprintf(w, "%-20s %s/%s ops/s:%s (median %.2f); p99 at most %s's in %d of %d\n",
			k.c, k.impl, baseImpl, line.String(), median(ratios), baseImpl, p99ok, n)
		if len(cpu) > 0 {
			slices.Sort(cpu)
			fmt.Fprintf(w, "%-20s %s/%s cpu/op:%s (median %.2f)\n", k.c, k.impl, baseImpl, cpuLine.String(), median(cpu))
		}
	}
}

// median of sorted values.
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func printTable(w io.Writer, rs []result) {
	fmt.Fprintf(w, "%-20s %-12s %12s %9s %9s %10s %10s %11s %11s  %s\n", "case", "impl", "ops/s", "p50 µs", "p99 µs", "cpu µs/op", "gen µs/op", "srv r/w/op", "gen r/w/op", "loadavg")
	for _, r := range rs {
		fmt.Fprintf(w, "%-20s %-12s %12.0f %9.1f %9.1f %10.2f %10.2f %5.3f/%5.3f %5.3f/%5.3f  %s\n", r.Case, r.Impl, r.OpsPerS, r.P50us, r.P99us, r.CPUusPerOp, r.ClientCPUusPerOp,
			r.ServerReadsPerOp, r.ServerWritesPerOp, r.GenReadsPerOp, r.GenWritesPerOp, r.LoadAvg)
	}
}

// server is a running server child.
type server struct {
	cmd   *exec.Cmd
	stdin io.Closer
}

// stop closes the child's stdin, which makes it stop (writing its profile),
// and kills it if it has not exited within a few seconds.
func (s *server) stop() {
	_ = s.stdin.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// startServer runs this binary as a server child and returns its address.
func startServer(impl, profile string) (*server, string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(self, "-serve", impl, "-cpuprofile", profile, "-tls-dir", tlsDir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, "", err
	}
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, "", fmt.Errorf("server did not start: %w", err)
	}
	return &server{cmd: cmd, stdin: stdin}, strings.TrimSpace(line), nil
}

// percentile of sorted nanosecond samples, in microseconds.
func percentile(sorted []int64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i]) / 1e3
}

func sortedLatencies(all [][]int64) []int64 {
	var n int
	for _, l := range all {
		n += len(l)
	}
	out := make([]int64, 0, n)
	for _, l := range all {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// loadAvg is the 1-minute load average from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return ""
	}
	return f[0]
}
