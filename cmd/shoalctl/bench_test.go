package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/shoalmq/shoal/client/clienttest"
	"github.com/shoalmq/shoal/wire"
)

var benchKeys = []string{"op", "clients", "rate", "duration_s", "ops", "errors", "ops_per_s",
	"p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms"}

// The built binary against three fake nodes: one JSON line with the
// documented keys, the preparation said on stderr.
func TestShoalctlBench(t *testing.T) {
	cl, servers := startNodes(t, 3)
	o := shoalctl(t, servers, "--json", "bench", "--op", "mix", "--duration", "1s", "--clients", "8", "--topics", "20")
	m := decode(t, o, benchKeys...)
	if m["op"] != "mix" || m["clients"] != 8.0 || m["rate"] != 0.0 || m["errors"] != 0.0 {
		t.Fatalf("summary %v", m)
	}
	if ops, _ := m["ops"].(float64); ops <= 0 {
		t.Fatalf("no ops: %v", m)
	}
	for _, k := range benchKeys[3:] {
		if _, ok := m[k].(float64); !ok {
			t.Fatalf("%s is not a number: %v", k, m)
		}
	}
	if strings.Count(o.stdout, "\n") != 1 {
		t.Fatalf("stdout is not one line: %q", o.stdout)
	}
	if !strings.Contains(o.stderr, "bench: assigning topics bench-0 … bench-19 before timing starts, 8 at a time\n"+
		"bench: producing a 16-byte record to each\n") {
		t.Fatalf("stderr does not tell of the preparation:\n%s", o.stderr)
	}
	// The preparation produced one record to each topic; mix's produces
	// added more.
	if len(cl.Records("bench-0")) == 0 || len(cl.Records("bench-19")) == 0 {
		t.Fatal("the topics were not prepared")
	}
}

func TestShoalctlBenchTable(t *testing.T) {
	_, servers := startNodes(t, 1)
	o := shoalctl(t, servers, "bench", "--op", "assign", "--duration", "300ms", "--clients", "2")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "OP      CLIENTS  RATE    SECONDS  OPS") ||
		!strings.HasPrefix(lines[1], "assign  2        closed  ") {
		t.Fatalf("table:\n%s", o.stdout)
	}
	if strings.Contains(o.stderr, "assigning topics") {
		t.Fatalf("--op assign prepared topics:\n%s", o.stderr)
	}
}

// runIn runs shoalctl in this process with the fake cluster's id.
func runIn(ctx context.Context, stderr *lineWriter, args ...string) (int, string) {
	var stdout bytes.Buffer
	code := run(ctx, args, env(map[string]string{"SHOAL_CLUSTER_ID": "7"}), nil, &stdout, stderr)
	return code, stdout.String()
}

// lineWriter keeps what is written and tells of each line that contains
// want.
type lineWriter struct {
	mu   sync.Mutex
	buf  bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
}

func newLineWriter(want string) *lineWriter {
	return &lineWriter{want: want, seen: make(chan struct{})}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.want != "" && bytes.Contains(p, []byte(w.want)) {
		w.once.Do(func() { close(w.seen) })
	}
	return w.buf.Write(p)
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestBenchOpenLoop(t *testing.T) {
	_, servers := startNodes(t, 2)
	stderr := newLineWriter("")
	code, out := runIn(context.Background(), stderr, "--servers", strings.Join(servers, ","), "--json",
		"bench", "--op", "lookup-lin", "--rate", "100", "--duration", "500ms", "--clients", "4", "--topics", "5")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	// 50 requests were due; a slow machine may send fewer.
	if ops, _ := m["ops"].(float64); m["rate"] != 100.0 || ops <= 0 || ops > 50 {
		t.Fatalf("summary %v", m)
	}
	if !strings.Contains(stderr.String(), "open loop at 100 ops/s") {
		t.Fatalf("stderr:\n%s", stderr)
	}
}

// Errors are counted by their protocol code and the most frequent listed
// under the table.
func TestBenchCountsErrorsByCode(t *testing.T) {
	cl := &clienttest.Cluster{ClusterID: 7}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n.Inject(wire.KindLookup, clienttest.Fault{Err: wire.NewErrorResponse(wire.CodeNotFound, "injected")},
		clienttest.Fault{Err: wire.NewErrorResponse(wire.CodeNotFound, "injected")},
		clienttest.Fault{Err: wire.NewErrorResponse(wire.CodeBadRequest, "injected")})
	stderr := newLineWriter("")
	code, out := runIn(context.Background(), stderr, "--servers", n.Addr(),
		"bench", "--op", "lookup", "--duration", "1s", "--clients", "2", "--topics", "3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 6 || !strings.HasPrefix(lines[1], "lookup  2        closed") ||
		!strings.Contains(lines[1], "  3       ") || lines[2] != "" ||
		!strings.HasPrefix(lines[3], "ERROR       COUNT  FIRST MESSAGE") ||
		!strings.HasPrefix(lines[4], "NotFound    2      lookup \"bench-") ||
		!strings.HasPrefix(lines[5], "BadRequest  1      lookup \"bench-") {
		t.Fatalf("summary:\n%s", out)
	}
}

// A fresh topic's owner may refuse it for longer than the client's own
// retries wait; the preparation keeps trying within --timeout.
func TestBenchWaitsForAFreshTopicsOwner(t *testing.T) {
	cl := &clienttest.Cluster{ClusterID: 7}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	refused := clienttest.Fault{Err: wire.NewErrorResponse(wire.CodeNotLeaderForTopic, "not yet")}
	for range cliMaxRetries + 3 {
		n.Inject(wire.KindProduce, refused)
	}
	stderr := newLineWriter("")
	code, out := runIn(context.Background(), stderr, "--servers", n.Addr(), "--json",
		"bench", "--op", "produce", "--topics", "1", "--duration", "200ms", "--clients", "1")
	if code != exitOK || !strings.Contains(out, `"errors":0`) {
		t.Fatalf("exit %d, stdout %s, stderr:\n%s", code, out, stderr)
	}
	if got := n.Requests(wire.KindProduce); got < cliMaxRetries+4 {
		t.Fatalf("%d produces, want the %d refused and more", got, cliMaxRetries+3)
	}
}

// Ctrl-C (the context ending) stops the run and still prints the summary.
func TestBenchInterrupted(t *testing.T) {
	_, servers := startNodes(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newLineWriter("ops/s")
	go func() {
		<-stderr.seen // the first progress line
		cancel()
	}()
	code, out := runIn(ctx, stderr, "--servers", servers[0], "--json", "bench", "--op", "produce", "--duration", "1h", "--clients", "3")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil || strings.Count(out, "\n") != 1 {
		t.Fatalf("%q: %v", out, err)
	}
	if ops, _ := m["ops"].(float64); ops <= 0 || m["errors"] != 0.0 {
		t.Fatalf("summary %v", m)
	}
	if !strings.Contains(stderr.String(), "interrupted after") {
		t.Fatalf("stderr:\n%s", stderr)
	}
}

// A cluster that cannot be reached fails before the run, in one line.
func TestBenchUnreachable(t *testing.T) {
	cl, servers := startNodes(t, 1)
	cl.Close()
	shoalctl(t, servers, "--timeout", "2s", "bench", "--op", "lookup", "--duration", "1s").
		failsWith(t, exitUnreachable, "shoalctl: bench: status: ")
}

func TestPickMix(t *testing.T) {
	counts := make([]int, len(benchMix))
	for d := range 100 {
		counts[pickMix(d)]++
	}
	for i, m := range benchMix {
		if counts[i] != m.percent {
			t.Errorf("%s drawn %d times in 100, want %d", m.op, counts[i], m.percent)
		}
	}
}

func TestBenchConns(t *testing.T) {
	for clients, want := range map[int]int{1: 1, 64: 1, 256: 1, 257: 2, 1024: 4, 2048: 8, 10000: 8} {
		if got := benchConns(clients); got != want {
			t.Errorf("benchConns(%d) = %d, want %d", clients, got, want)
		}
	}
}
