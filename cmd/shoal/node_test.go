package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/internal/version"
	"github.com/shoalmq/shoal/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		// gnet's package-level worker pool (ants) lives for the process.
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
		goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
		// Pebble's process-wide cache goroutines.
		goleak.IgnoreAnyFunction("github.com/cockroachdb/pebble/v2/internal/cache.(*shard).releaseLoop"),
	)
}

// syncWriter collects log output written from the node's goroutines.
type syncWriter struct {
	ch chan string
}

func (w syncWriter) Write(p []byte) (int, error) {
	select {
	case w.ch <- string(p):
	default: // the test reads only the first lines it looks for
	}
	return len(p), nil
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestRunNode runs a one-node cluster in-process through the command
// line: it becomes ready, serves /healthz, /readyz and /metrics, logs
// JSON, and on cancellation (the signal) leaves and returns nil.
func TestRunNode(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ln.Addr().String()
	_ = ln.Close()
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	clientAddr := ln.Addr().String()
	_ = ln.Close()
	o, err := parseNodeArgs([]string{"--id", "n1", "--data", filepath.Join(t.TempDir(), "n1"),
		"--client-addr", clientAddr, "--peer-addr", "127.0.0.1:0", "--swim-addr", "127.0.0.1:0",
		"--shards", "4", "--replicas", "1", "--swim-preset", "fast",
		"--metrics-addr", metricsAddr, "--pprof", "--log-format", "json"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	logs := syncWriter{ch: make(chan string, 4096)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runNode(ctx, o, logs) }()

	deadline := time.After(30 * time.Second)
	for ready := false; !ready; {
		select {
		case l := <-logs.ch:
			if !strings.HasPrefix(l, "{") {
				t.Fatalf("log line is not JSON: %q", l)
			}
			ready = strings.Contains(l, `"msg":"node ready"`)
			// The one summary line of a start.
			for _, want := range []string{`"members_alive":1`, `"shards_hosted":4`, `"shards_led":4`, `"client_addr":"` + clientAddr + `"`} {
				if ready && !strings.Contains(l, want) {
					t.Errorf("the ready line %q lacks %s", l, want)
				}
			}
		case err := <-done:
			t.Fatalf("runNode returned before ready: %v", err)
		case <-deadline:
			t.Fatal("not ready within 30s")
		}
	}
	base := "http://" + metricsAddr
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 || body != "ready\n" {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	// One request of each outcome the histograms must show.
	cl, err := client.New(client.Config{Servers: []string{clientAddr}, MaxRetries: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if _, err := cl.Assign(rctx, "t", client.AssignOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Lookup(rctx, "nowhere", false); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("lookup: %v", err)
	}
	bi := version.Get()
	code, body := get(t, base+"/metrics")
	for _, want := range []string{
		`shoal_build_info{commit="` + bi.Commit + `",goversion="` + bi.GoVersion + `",version="` + bi.Version + `"} 1`,
		`# TYPE shoal_client_request_duration_seconds histogram`,
		`shoal_client_request_duration_seconds_bucket{code="OK",node="n1",op="assign",le="2.5e-05"}`,
		`shoal_client_request_duration_seconds_count{code="OK",node="n1",op="assign"} 1`,
		`shoal_client_requests_total{code="NotFound",node="n1",op="lookup"} 1`,
		`shoal_raft_commit_duration_seconds_count{node="n1"}`,
		`shoal_storage_sync_duration_seconds_bucket{node="n1",le="+Inf"}`,
		`shoal_raft_snapshot_duration_seconds_count{direction="receive",node="n1"} 0`,
		`shoal_ready{node="n1"} 1`,
		`shoal_members_alive{node="n1"} 1`,
		`shoal_shards_hosted{node="n1"} 4`,
		`# TYPE shoal_raft_fsyncs_total counter`,
		`shoal_swim_dropped_total{node="n1",reason="auth"} 0`,
		`go_goroutines`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics: %d, no %q in:\n%s", code, want, body)
		}
	}

	checkDashboard(t, body)
	if code, body := get(t, base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/: %d %q", code, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runNode after the signal: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("runNode did not return within 30s of the signal")
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("metrics server still answers after the node stopped")
	}
}

// dashboardFile is the Grafana dashboard shipped with Shoal.
const dashboardFile = "../../deploy/grafana/shoal.json"

// metricName finds the metric names in a PromQL expression: the
// identifiers of Shoal's, Go's and the process's families.
var metricName = regexp.MustCompile(`\b(?:shoal|go|process)_[a-zA-Z0-9_]+`)

// checkDashboard checks that every metric the dashboard's queries use is
// one a real node exposed in scrape (its text exposition): a histogram's
// _bucket, _sum and _count series count as its family.
func checkDashboard(t *testing.T, scrape string) {
	t.Helper()
	families := map[string]string{} // name -> type
	for line := range strings.SplitSeq(scrape, "\n") {
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(rest, " ")
			families[name] = typ
		}
	}
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
		Templating struct {
			List []struct{ Query any }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var exprs []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(string); ok {
			exprs = append(exprs, q)
		}
	}
	used := 0
	for _, e := range exprs {
		for _, name := range metricName.FindAllString(e, -1) {
			used++
			if _, ok := families[name]; ok {
				continue
			}
			found := false
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && families[base] == "histogram" {
					found = true
				}
			}
			if !found {
				t.Errorf("the dashboard queries %s, which the node does not expose (in %q)", name, e)
			}
		}
	}
	if used < len(dash.Panels) {
		t.Fatalf("only %d metric names in %d panels: the test reads the dashboard wrong", used, len(dash.Panels))
	}
}

// TestCPUProfileCoversTheStart: --cpu-profile writes a profile that pprof
// reads once stopped (or its time is up), and a path that cannot be
// created is refused before anything starts.
func TestCPUProfileCoversTheStart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stop()
	stop() // a second stop does nothing
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		t.Fatalf("profile %d bytes, %v", len(b), err)
	}
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof"), time.Minute); err == nil {
		t.Fatal("a profile in a directory that does not exist was started")
	}
}
