package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/client/clienttest"
	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/wire"
)

// TestMain removes the binary built for the tests and checks for leaked
// goroutines once all tests ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(
			// The admin and watch tests run real nodes: gnet's worker pool
			// (ants) and Pebble's cache goroutines live for the process.
			goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).purgeStaleWorkers"),
			goleak.IgnoreTopFunction("github.com/panjf2000/ants/v2.(*poolCommon).ticktock"),
			goleak.IgnoreAnyFunction("github.com/cockroachdb/pebble/v2/internal/cache.(*shard).releaseLoop"),
		); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	binDir    string
)

// shoalctlBinary builds the command once per test run.
func shoalctlBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "shoalctl-test-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "shoalctl")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			buildErr = errors.New("go build: " + err.Error() + "\n" + string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

type outcome struct {
	stdout, stderr string
	code           int
}

// shoalctl runs the built binary with args and SHOAL_SERVERS set to servers.
func shoalctl(t *testing.T, servers []string, args ...string) outcome {
	t.Helper()
	return shoalctlEnv(t, nil, servers, args...)
}

// shoalctlEnv is shoalctl with more environment variables.
func shoalctlEnv(t *testing.T, env []string, servers []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(shoalctlBinary(t), args...)
	cmd.Env = append(os.Environ(), "SHOAL_SERVERS="+strings.Join(servers, ","), "SHOAL_CLUSTER_ID=7", "SHOAL_SECRET=",
		"SHOAL_TOKEN=", "SHOAL_TLS_CA=", "SHOAL_TLS_CERT=", "SHOAL_TLS_KEY=")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// failsWith checks a failed run: the exit code, nothing on stdout, and
// exactly one line on stderr containing want.
func (o outcome) failsWith(t *testing.T, code int, want string) {
	t.Helper()
	if o.code != code {
		t.Fatalf("exit %d, want %d (stderr %q)", o.code, code, o.stderr)
	}
	if o.stdout != "" {
		t.Fatalf("stdout %q on failure", o.stdout)
	}
	if strings.Count(o.stderr, "\n") != 1 || !strings.HasSuffix(o.stderr, "\n") {
		t.Fatalf("stderr is not one line: %q", o.stderr)
	}
	if !strings.Contains(o.stderr, want) {
		t.Fatalf("stderr %q does not say %q", o.stderr, want)
	}
}

func startNodes(t *testing.T, n int) (*clienttest.Cluster, []string) {
	t.Helper()
	cl := &clienttest.Cluster{ClusterID: 7}
	var addrs []string
	for i := range n {
		node, err := cl.Start("n" + string(rune('1'+i)))
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, node.Addr())
	}
	t.Cleanup(cl.Close)
	return cl, addrs
}

// decode parses one line of --json output into a map, checking its keys.
func decode(t *testing.T, o outcome, keys ...string) map[string]any {
	t.Helper()
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(o.stdout), &m); err != nil {
		t.Fatalf("stdout %q: %v", o.stdout, err)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	if !sameSet(got, keys) {
		t.Fatalf("keys %v, want %v", got, keys)
	}
	return m
}

func sameSet(a, b []string) bool {
	set := func(s []string) map[string]bool {
		m := make(map[string]bool)
		for _, v := range s {
			m[v] = true
		}
		return m
	}
	return len(a) == len(b) && reflect.DeepEqual(set(a), set(b))
}

func TestShoalctlHappyPath(t *testing.T) {
	_, servers := startNodes(t, 3)
	assignKeys := []string{"topic", "owner", "owner_addr", "epoch", "partitions", "shard"}

	a := decode(t, shoalctl(t, servers, "--json", "assign", "topic-blue", "--owner", "n2"), assignKeys...)
	if a["owner"] != "n2" || a["owner_addr"] != servers[1] || a["epoch"] != 1.0 || a["partitions"] != 1.0 {
		t.Fatalf("assign: %v", a)
	}
	for _, s := range servers {
		// Every node answers the lookup.
		l := decode(t, shoalctl(t, []string{s}, "lookup", "topic-blue", "--json", "--linearizable"), assignKeys...)
		if !reflect.DeepEqual(l, a) {
			t.Fatalf("lookup via %s: %v, assign said %v", s, l, a)
		}
	}
	p := decode(t, shoalctl(t, servers, "produce", "topic-blue", "hello", "--json"), "topic", "epoch", "offset")
	if p["offset"] != 0.0 || p["epoch"] != 1.0 {
		t.Fatalf("produce: %v", p)
	}
	f := decode(t, shoalctl(t, servers, "--json", "fetch", "topic-blue", "--from", "0"), "topic", "epoch", "records")
	recs, _ := f["records"].([]any)
	if len(recs) != 1 || !reflect.DeepEqual(recs[0], map[string]any{"offset": 0.0, "epoch": 1.0, "value": "hello"}) {
		t.Fatalf("fetch: %v", f)
	}
	m := decode(t, shoalctl(t, servers, "--json", "members"), "members")
	members, _ := m["members"].([]any)
	if len(members) != 3 {
		t.Fatalf("members: %v", m)
	}
	var mkeys []string
	for k := range members[0].(map[string]any) {
		mkeys = append(mkeys, k)
	}
	if !sameSet(mkeys, []string{"id", "generation", "incarnation", "state", "rack", "swim_addr", "client_addr", "peer_addr"}) {
		t.Fatalf("member keys %v", mkeys)
	}
	decode(t, shoalctl(t, servers, "--json", "shards"), "shards")
	st := decode(t, shoalctl(t, servers, "--json", "status", servers[2]),
		"node", "generation", "members_alive", "shards_hosted", "shards_led", "topics_owned", "ready")
	if st["node"] != "n3" || st["ready"] != true {
		t.Fatalf("status: %v", st)
	}
	r := decode(t, shoalctl(t, servers, "--json", "revoke", "topic-blue"), "topic", "epoch")
	if r["epoch"] != 2.0 {
		t.Fatalf("revoke: %v", r)
	}

	// The default output is a table.
	shoalctl(t, servers, "assign", "topic-red", "--owner=n1")
	o := shoalctl(t, servers, "lookup", "topic-red")
	want := "TOPIC      OWNER  OWNER ADDR"
	if o.code != 0 || !strings.HasPrefix(o.stdout, want) || !strings.Contains(o.stdout, "topic-red  n1     "+servers[0]) {
		t.Fatalf("lookup table:\n%s%s", o.stdout, o.stderr)
	}
}

func TestShoalctlBadInput(t *testing.T) {
	cl, servers := startNodes(t, 1)
	// One argument of the command line is at most 128 KiB on Linux, so this
	// is the longest topic a shell can pass; run is tested with 10 MB below.
	longest := strings.Repeat("x", 128<<10-1)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unknown command", []string{"frobnicate"}, exitUsage, `shoalctl: unknown command "frobnicate"`},
		{"no command", nil, exitUsage, "shoalctl: missing command"},
		{"missing topic", []string{"assign"}, exitUsage, "shoalctl: assign: missing TOPIC"},
		{"missing topic for fetch", []string{"fetch", "--from", "3"}, exitUsage, "shoalctl: fetch: missing TOPIC"},
		{"huge topic", []string{"lookup", longest}, exitUsage, "topic name is 131071 bytes long; the limit is 255 bytes"},
		{"unknown flag", []string{"lookup", "t", "--fast"}, exitUsage, "lookup: unknown flag --fast"},
		{"topic never assigned", []string{"lookup", "nothing-here"}, exitFailed, "not found"},
		{"unknown owner", []string{"assign", "t", "--owner", "n9"}, exitFailed, "bad request"},
		{"json error", []string{"--json", "lookup", "nothing-here"}, exitFailed, `{"error":{"code":"NotFound","message":"lookup \"nothing-here\": shoal: not found`},
		{"json usage error", []string{"--json", "revoke"}, exitUsage, `{"error":{"code":"Usage","message":"revoke: missing TOPIC"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			shoalctl(t, servers, tc.args...).failsWith(t, tc.code, tc.want)
		})
	}
	if cl.Records("t") != nil {
		t.Fatal("a refused command changed the cluster")
	}
}

func TestShoalctlServerDown(t *testing.T) {
	cl, servers := startNodes(t, 2)
	cl.Close()
	shoalctl(t, servers, "members").failsWith(t, exitUnreachable, "server unreachable")
	shoalctl(t, servers, "--json", "lookup", "t").failsWith(t, exitUnreachable, `{"error":{"code":"Unreachable"`)
}

func TestShoalctlTimeout(t *testing.T) {
	cl := &clienttest.Cluster{ClusterID: 7}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n.Inject(wire.KindMembers, clienttest.Fault{Stall: true})
	shoalctl(t, []string{n.Addr()}, "--timeout", "200ms", "--json", "members").
		failsWith(t, exitUnreachable, `{"error":{"code":"Timeout"`)
}

// run itself, in process: a 10 MB topic (more than a command line can
// carry) is refused before anything is dialled.
func TestRunRefusesA10MBTopic(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--servers", "127.0.0.1:1", "assign", strings.Repeat("t", 10<<20)}, env(nil), nil, &stdout, &stderr)
	if code != exitUsage || stdout.Len() != 0 {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
	want := "shoalctl: assign: topic name is 10485760 bytes long; the limit is 255 bytes\n"
	if stderr.String() != want {
		t.Fatalf("stderr %q, want %q", stderr.String(), want)
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, env(nil), nil, &stdout, &stderr); code != exitOK ||
		!strings.HasPrefix(stdout.String(), "usage: shoalctl") || stderr.Len() != 0 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}

func TestShoalctlSkipsADownServer(t *testing.T) {
	cl, servers := startNodes(t, 3)
	cl.SetOwner("t", "n3")
	// The first two servers are stopped; the third answers everything,
	// and produce goes to the owner it names.
	down := &clienttest.Cluster{ClusterID: 7}
	n, err := down.Start("gone")
	if err != nil {
		t.Fatal(err)
	}
	gone := n.Addr()
	down.Close()
	o := shoalctl(t, []string{gone, servers[2]}, "--json", "produce", "t", "hi")
	p := decode(t, o, "topic", "epoch", "offset")
	if p["offset"] != 0.0 {
		t.Fatalf("produce: %v", p)
	}
}

func TestShoalctlSecret(t *testing.T) {
	cl := &clienttest.Cluster{ClusterID: 7, Secret: []byte("shh")}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	servers := []string{n.Addr()}
	decode(t, shoalctlEnv(t, []string{"SHOAL_SECRET=shh"}, servers, "--json", "status"),
		"node", "generation", "members_alive", "shards_hosted", "shards_led", "topics_owned", "ready")
	shoalctlEnv(t, []string{"SHOAL_SECRET=guess"}, servers, "--json", "status").
		failsWith(t, exitFailed, `{"error":{"code":"Unauthorized"`)
	shoalctlEnv(t, []string{"SHOAL_SECRET=shh", "SHOAL_CLUSTER_ID=8"}, servers, "status").
		failsWith(t, exitFailed, "handshake failed")
}

// TestShoalctlTokenAndTLS: a token from SHOAL_TOKEN, TLS with the CA from
// --tls-ca or SHOAL_TLS_CA; a refused token is Unauthorized, a CA that did
// not sign the node a handshake failure.
func TestShoalctlTokenAndTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	_, _, caFile := ca.WriteFiles(t, t.TempDir(), "n1", ca.Node(t, "n1"))
	cl := &clienttest.Cluster{ClusterID: 7, Tokens: []string{"the-right-token-0123"},
		TLS: &tls.Config{Certificates: []tls.Certificate{ca.Node(t, "n1").TLS}, MinVersion: tls.VersionTLS13}}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	servers := []string{n.Addr()}
	decode(t, shoalctlEnv(t, []string{"SHOAL_TOKEN=the-right-token-0123"}, servers, "--json", "--tls-ca", caFile, "status"),
		"node", "generation", "members_alive", "shards_hosted", "shards_led", "topics_owned", "ready")
	decode(t, shoalctlEnv(t, []string{"SHOAL_TOKEN=the-right-token-0123", "SHOAL_TLS_CA=" + caFile}, servers, "--json", "status"),
		"node", "generation", "members_alive", "shards_hosted", "shards_led", "topics_owned", "ready")
	shoalctlEnv(t, []string{"SHOAL_TOKEN=a-wrong-token-0123456", "SHOAL_TLS_CA=" + caFile}, servers, "--json", "status").
		failsWith(t, exitFailed, `{"error":{"code":"Unauthorized"`)
	_, _, otherCA := testcerts.NewCA(t, "other").WriteFiles(t, t.TempDir(), "x", ca.Node(t, "x"))
	shoalctlEnv(t, []string{"SHOAL_TOKEN=the-right-token-0123"}, servers, "--tls-ca", otherCA, "status").
		failsWith(t, exitFailed, "handshake failed")
	shoalctlEnv(t, []string{"SHOAL_TOKEN=t", "SHOAL_SECRET=s"}, servers, "status").
		failsWith(t, exitUsage, "SHOAL_TOKEN and SHOAL_SECRET are both set")
	shoalctlEnv(t, nil, servers, "--tls-ca", "/nonexistent/ca.crt", "status").
		failsWith(t, exitUsage, "--tls-ca: open /nonexistent/ca.crt")

	// bench speaks with the same credentials.
	m := decode(t, shoalctlEnv(t, []string{"SHOAL_TOKEN=the-right-token-0123", "SHOAL_TLS_CA=" + caFile}, servers,
		"--json", "bench", "--op", "lookup", "--duration", "300ms", "--clients", "2", "--topics", "3"), benchKeys...)
	if ops, _ := m["ops"].(float64); ops <= 0 || m["errors"] != 0.0 {
		t.Fatalf("bench over TLS with a token: %v", m)
	}
	shoalctlEnv(t, []string{"SHOAL_TOKEN=the-right-token-0123"}, servers, "--tls-ca", "/nonexistent/ca.crt",
		"bench", "--op", "lookup", "--duration", "300ms").
		failsWith(t, exitUsage, "--tls-ca: open /nonexistent/ca.crt")
}
