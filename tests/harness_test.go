package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds shoal and shoalctl once per run into a temporary
// directory and returns their paths.
func binaries(t *testing.T) (shoal, shoalctl string) {
	t.Helper()
	buildOnce.Do(func() {
		if binDir, buildErr = os.MkdirTemp("", "shoal-process-test-"); buildErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+string(filepath.Separator),
			"github.com/shoalmq/shoal/cmd/shoal", "github.com/shoalmq/shoal/cmd/shoalctl")
		// Pure Go builds: the race build of the test itself needs cgo, the
		// binaries do not, and pebble's cgo zstd takes minutes to build.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "shoal"), filepath.Join(binDir, "shoalctl")
}

// Listen ports of the test nodes are drawn below the kernel's ephemeral
// range (32768-60999 on Linux by default): a port from that range, freed by
// a killed node, may be taken by an outbound connection before the node
// restarts on it.
const (
	minTestPort = 10000
	maxTestPort = 32000
)

// freePorts reserves tcp ports, and udp ports free for both UDP and TCP
// (SWIM listens on both: datagrams and push-pull exchanges), on 127.0.0.1.
// They were free a moment ago; all are held until all are chosen, so they
// are distinct.
func freePorts(t *testing.T, tcp, udp int) (tcpAddrs, udpAddrs []string) {
	t.Helper()
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	grab := func(alsoUDP bool) string {
		for range 1000 {
			addr := "127.0.0.1:" + strconv.Itoa(minTestPort+rand.IntN(maxTestPort-minTestPort))
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				continue
			}
			closers = append(closers, ln.Close)
			if alsoUDP {
				pc, err := net.ListenPacket("udp", addr)
				if err != nil {
					continue
				}
				closers = append(closers, pc.Close)
			}
			return addr
		}
		t.Fatal("no free port found")
		return ""
	}
	for range tcp {
		tcpAddrs = append(tcpAddrs, grab(false))
	}
	for range udp {
		udpAddrs = append(udpAddrs, grab(true))
	}
	return tcpAddrs, udpAddrs
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test
// reading.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is one `shoal node` process of a test cluster.
type proc struct {
	id                                string
	client, peer, swim, metrics, data string
	args                              []string
	// wrap, when set, runs the node through another command (e.g. ip
	// netns exec NS): wrap[0] with wrap[1:], then the shoal binary and args.
	wrap []string

	cmd    *exec.Cmd
	output *syncBuffer
	exited chan struct{} // closed once Wait returned; err then holds its error
	err    error
}

// cluster is a test cluster of `shoal node` processes.
type cluster struct {
	t                *testing.T
	shoal, shoalctl  string
	nodes            []*proc
	logsAlreadyShown bool
}

// clusterShards keeps startup quick; placement and failover do not depend
// on the count.
const clusterShards = 32

// startCluster starts n `shoal node` processes that form one cluster and
// waits until each says it is ready with n members alive.
func startCluster(t *testing.T, n int) *cluster {
	t.Helper()
	shoal, shoalctl := binaries(t)
	tcp, udp := freePorts(t, 3*n, n)
	c := &cluster{t: t, shoal: shoal, shoalctl: shoalctl}
	root := t.TempDir()
	for i := range n {
		id := "n" + strconv.Itoa(i+1)
		c.nodes = append(c.nodes, &proc{
			id: id, client: tcp[3*i], peer: tcp[3*i+1], metrics: tcp[3*i+2], swim: udp[i],
			data: filepath.Join(root, id),
		})
	}
	for _, p := range c.nodes {
		p.args = []string{"node", "--id", p.id, "--rack", "r" + strconv.Itoa(len(p.id)),
			"--data", p.data, "--client-addr", p.client, "--peer-addr", p.peer, "--swim-addr", p.swim,
			"--join", strings.Join(udp, ","), // own address included: it is skipped
			"--bootstrap-expect", strconv.Itoa(n), "--shards", strconv.Itoa(clusterShards),
			"--swim-preset", "fast", "--metrics-addr", p.metrics}
		c.start(p)
	}
	t.Cleanup(c.stopAll)
	for _, p := range c.nodes {
		c.waitReady(p, n)
	}
	return c
}

// start runs p's process (again, after a kill) with the same arguments.
func (c *cluster) start(p *proc) {
	c.t.Helper()
	if p.output == nil {
		p.output = &syncBuffer{}
	} else {
		// A restart keeps the earlier lives' log, which a failure after it
		// often needs.
		fmt.Fprintf(p.output, "---- %s restarted ----\n", p.id)
	}
	name, args := c.shoal, p.args
	if len(p.wrap) > 0 {
		name = p.wrap[0]
		args = append(append(slices.Clone(p.wrap[1:]), c.shoal), p.args...)
	}
	p.cmd = exec.Command(name, args...)
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start %s: %v", p.id, err)
	}
	p.exited = make(chan struct{})
	go func(cmd *exec.Cmd, exited chan struct{}) {
		p.err = cmd.Wait()
		close(exited)
	}(p.cmd, p.exited)
}

func (p *proc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to p and, for a kill, waits for the process to end.
func (c *cluster) signal(p *proc, sig syscall.Signal) {
	c.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signal %s: %v", p.id, err)
	}
	if sig == syscall.SIGKILL {
		<-p.exited
	}
}

// waitExit waits up to d for p to exit and returns its exit code.
func (c *cluster) waitExit(p *proc, d time.Duration) int {
	c.t.Helper()
	select {
	case <-p.exited:
	case <-time.After(d):
		c.fatalf("%s did not exit within %v", p.id, d)
	}
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		c.fatalf("%s: %v", p.id, p.err)
	}
	return 0
}

// stopAll kills what still runs and, if the test failed, shows each node's
// log tail.
func (c *cluster) stopAll() {
	for _, p := range c.nodes {
		if p.cmd != nil && p.running() {
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	if c.t.Failed() {
		c.showLogs()
	}
	c.keepLogs()
}

// keepLogs writes every node's whole log to $SHOAL_TEST_LOGS/<test>/<node>.log
// when that variable names a directory: a failure's tail is not always
// enough to explain it.
func (c *cluster) keepLogs() {
	root := os.Getenv("SHOAL_TEST_LOGS")
	if root == "" {
		return
	}
	dir := filepath.Join(root, strings.ReplaceAll(c.t.Name(), "/", "_"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		c.t.Logf("keep logs: %v", err)
		return
	}
	for _, p := range c.nodes {
		if p.output == nil {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, p.id+".log"), []byte(p.output.String()), 0o644); err != nil {
			c.t.Logf("keep logs: %v", err)
		}
	}
}

func (c *cluster) showLogs() {
	if c.logsAlreadyShown {
		return
	}
	c.logsAlreadyShown = true
	for _, p := range c.nodes {
		if p.output == nil {
			continue
		}
		lines := strings.Split(p.output.String(), "\n")
		if len(lines) > 60 {
			lines = lines[len(lines)-60:]
		}
		c.t.Logf("---- last lines of %s's log ----\n%s", p.id, strings.Join(lines, "\n"))
	}
}

func (c *cluster) fatalf(format string, args ...any) {
	c.t.Helper()
	c.showLogs()
	c.t.Fatalf(format, args...)
}

func (c *cluster) node(id string) *proc {
	for _, p := range c.nodes {
		if p.id == id {
			return p
		}
	}
	c.fatalf("no node %q", id)
	return nil
}

// servers are the client addresses of the running nodes.
func (c *cluster) servers() []string {
	var s []string
	for _, p := range c.nodes {
		if p.running() {
			s = append(s, p.client)
		}
	}
	return s
}

// outcome is one shoalctl run.
type outcome struct {
	stdout, stderr string
	code           int
}

// ctl runs shoalctl --json against servers.
func ctl(t *testing.T, shoalctl string, servers []string, args ...string) outcome {
	t.Helper()
	full := append([]string{"--json", "--timeout", "5s", "--servers", strings.Join(servers, ",")}, args...)
	cmd := exec.Command(shoalctl, full...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		o.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("shoalctl %q: %v", args, err)
	}
	return o
}

// ctlJSON runs shoalctl and decodes its JSON answer into v; it reports
// false, with the reason, when the command failed.
func (c *cluster) ctlJSON(servers []string, v any, args ...string) (bool, string) {
	c.t.Helper()
	o := ctl(c.t, c.shoalctl, servers, args...)
	if o.code != 0 {
		return false, fmt.Sprintf("shoalctl %q: exit %d: %s", args, o.code, strings.TrimSpace(o.stderr))
	}
	if err := json.Unmarshal([]byte(o.stdout), v); err != nil {
		c.fatalf("shoalctl %q: bad JSON %q: %v", args, o.stdout, err)
	}
	return true, ""
}

// must runs shoalctl and fails the test if it fails.
func (c *cluster) must(servers []string, v any, args ...string) {
	c.t.Helper()
	if ok, why := c.ctlJSON(servers, v, args...); !ok {
		c.fatalf("%s", why)
	}
}

// eventually polls cond every 200 ms until it holds or the deadline
// passes; the test fails with cond's last reason.
func (c *cluster) eventually(d time.Duration, what string, cond func() (bool, string)) {
	c.t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for {
		ok, why := cond()
		if ok {
			c.t.Logf("%s: after %v", what, time.Since(start).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			c.fatalf("%s: not within %v: %s", what, d, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// The JSON shapes shoalctl documents.

type assignment struct {
	Topic      string `json:"topic"`
	Owner      string `json:"owner"`
	OwnerAddr  string `json:"owner_addr"`
	Epoch      uint64 `json:"epoch"`
	Partitions uint32 `json:"partitions"`
	Shard      uint64 `json:"shard"`
}

type produced struct {
	Topic  string `json:"topic"`
	Epoch  uint64 `json:"epoch"`
	Offset uint64 `json:"offset"`
}

type fetched struct {
	Topic   string `json:"topic"`
	Epoch   uint64 `json:"epoch"`
	Records []struct {
		Offset uint64 `json:"offset"`
		Value  string `json:"value"`
	} `json:"records"`
}

type member struct {
	ID          string `json:"id"`
	Generation  uint64 `json:"generation"`
	Incarnation uint64 `json:"incarnation"`
	State       string `json:"state"`
	ClientAddr  string `json:"client_addr"`
}

type members struct {
	Members []member `json:"members"`
}

type status struct {
	Node         string `json:"node"`
	Generation   uint64 `json:"generation"`
	MembersAlive uint32 `json:"members_alive"`
	ShardsHosted uint32 `json:"shards_hosted"`
	ShardsLed    uint32 `json:"shards_led"`
	TopicsOwned  uint64 `json:"topics_owned"`
	Ready        bool   `json:"ready"`
}

func (m members) find(id string) (member, bool) {
	for _, x := range m.Members {
		if x.ID == id {
			return x, true
		}
	}
	return member{}, false
}

// waitReady waits until p reports ready with alive members alive.
func (c *cluster) waitReady(p *proc, alive int) {
	c.t.Helper()
	c.eventually(60*time.Second, p.id+" ready", func() (bool, string) {
		if !p.running() {
			c.fatalf("%s exited: %v", p.id, p.err)
		}
		var s status
		if ok, why := c.ctlJSON([]string{p.client}, &s, "status", p.client); !ok {
			return false, why
		}
		return s.Ready && s.Node == p.id && int(s.MembersAlive) == alive, fmt.Sprintf("status %+v", s)
	})
}

// httpGet returns the status code and body of GET url.
func httpGet(url string) (int, string, error) {
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String(), err
}

type shards struct {
	Shards []struct {
		Shard    uint64   `json:"shard"`
		Replicas []string `json:"replicas"`
		Leader   string   `json:"leader"`
		Term     uint64   `json:"term"`
	} `json:"shards"`
}

// waitSettled waits until every running node shows every shard with
// replicas voters and a leader.
func (c *cluster) waitSettled(replicas int) {
	c.t.Helper()
	for _, p := range c.nodes {
		if !p.running() {
			continue
		}
		c.eventually(60*time.Second, "shards settled as seen by "+p.id, func() (bool, string) {
			var s shards
			if ok, why := c.ctlJSON([]string{p.client}, &s, "shards"); !ok {
				return false, why
			}
			if len(s.Shards) != clusterShards {
				return false, fmt.Sprintf("%d shards listed, want %d", len(s.Shards), clusterShards)
			}
			for _, sh := range s.Shards {
				if len(sh.Replicas) != replicas || sh.Leader == "" {
					return false, fmt.Sprintf("shard %d: replicas %v leader %q", sh.Shard, sh.Replicas, sh.Leader)
				}
			}
			return true, ""
		})
	}
}
