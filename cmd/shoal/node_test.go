package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
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
	o, err := parseNodeArgs([]string{"--id", "n1", "--data", filepath.Join(t.TempDir(), "n1"),
		"--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--swim-addr", "127.0.0.1:0",
		"--shards", "4", "--replicas", "1", "--swim-preset", "fast",
		"--metrics-addr", metricsAddr, "--log-format", "json"})
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
	code, body := get(t, base+"/metrics")
	for _, want := range []string{
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
