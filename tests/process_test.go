package tests

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// failoverDeadline bounds how long the cluster may take to notice a dead
// owner and move its topics. It is a deadline for polling, not a speed
// goal: with the fast SWIM preset this takes a few seconds.
const failoverDeadline = 45 * time.Second

// TestProcessCluster runs the user's story on three `shoal node`
// processes: assign, lookup from every node, produce and fetch; kill -9 the
// owner and see the topic move to a new owner at a higher epoch that takes
// new records; restart the killed node and see it rejoin with a new
// generation; stop a node with SIGTERM and see it leave with exit 0 and no
// topic left without a live owner.
func TestProcessCluster(t *testing.T) {
	c := startCluster(t, 3)
	all := c.servers()

	// Metrics endpoints of a running node.
	n1 := c.node("n1")
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready", "/metrics": "shoal_"} {
		code, body, err := httpGet("http://" + n1.metrics + path)
		if err != nil || code != 200 || !strings.Contains(body, want) {
			c.fatalf("GET %s: %d %v, want 200 with %q in the body", path, code, err, want)
		}
	}

	// Assign, and look up from every node.
	var a assignment
	c.must(all, &a, "assign", "topic-blue", "--owner", "n2")
	if a.Owner != "n2" || a.Epoch == 0 || a.OwnerAddr != c.node("n2").client {
		c.fatalf("assign: %+v, want owner n2 at %s with an epoch", a, c.node("n2").client)
	}
	firstEpoch := a.Epoch
	for _, p := range c.nodes {
		c.eventually(10*time.Second, "lookup from "+p.id, func() (bool, string) {
			var l assignment
			if ok, why := c.ctlJSON([]string{p.client}, &l, "lookup", "topic-blue"); !ok {
				return false, why
			}
			return l.Owner == "n2" && l.Epoch == firstEpoch && l.Shard == a.Shard, fmt.Sprintf("%+v", l)
		})
	}

	// Produce and fetch at the owner.
	for i, msg := range []string{"hello", "world"} {
		var pr produced
		c.must(all, &pr, "produce", "topic-blue", msg)
		if pr.Offset != uint64(i) || pr.Epoch != firstEpoch {
			c.fatalf("produce %q: %+v, want offset %d at epoch %d", msg, pr, i, firstEpoch)
		}
	}
	var f fetched
	c.must(all, &f, "fetch", "topic-blue", "--from", "0")
	if len(f.Records) != 2 || f.Records[0].Value != "hello" || f.Records[1].Value != "world" || f.Records[1].Offset != 1 {
		c.fatalf("fetch: %+v", f)
	}

	// kill -9 the owner.
	var before members
	c.must(all, &before, "members")
	n2Before, ok := before.find("n2")
	if !ok || n2Before.State != "alive" {
		c.fatalf("members before the kill: %+v", before)
	}
	n2 := c.node("n2")
	c.signal(n2, syscall.SIGKILL)
	survivors := c.servers()
	var moved assignment
	c.eventually(failoverDeadline, "topic-blue moves off the killed n2", func() (bool, string) {
		if ok, why := c.ctlJSON(survivors, &moved, "lookup", "topic-blue", "--linearizable"); !ok {
			return false, why
		}
		return moved.Owner != "" && moved.Owner != "n2" && moved.Epoch > firstEpoch, fmt.Sprintf("%+v", moved)
	})
	// The new owner takes new records at the new epoch, and serves them.
	var pr produced
	c.eventually(15*time.Second, "produce at the new owner "+moved.Owner, func() (bool, string) {
		ok, why := c.ctlJSON(survivors, &pr, "produce", "topic-blue", "after-failover")
		return ok, why
	})
	if pr.Epoch < moved.Epoch {
		c.fatalf("produce after failover: %+v, want epoch >= %d", pr, moved.Epoch)
	}
	c.must(survivors, &f, "fetch", "topic-blue", "--from", strconv.FormatUint(pr.Offset, 10))
	if len(f.Records) == 0 || f.Records[0].Value != "after-failover" || f.Records[0].Offset != pr.Offset {
		c.fatalf("fetch from the new owner at offset %d: %+v", pr.Offset, f)
	}

	// Restart the killed node: it rejoins under a new generation.
	c.start(n2)
	c.eventually(60*time.Second, "n2 rejoins with a new generation", func() (bool, string) {
		var m members
		if ok, why := c.ctlJSON(survivors, &m, "members"); !ok {
			return false, why
		}
		x, _ := m.find("n2")
		return x.State == "alive" && x.Generation > n2Before.Generation,
			fmt.Sprintf("n2 was generation %d; now %+v", n2Before.Generation, x)
	})
	c.waitReady(n2, 3)

	// As an operator would before stopping another node: wait until every
	// shard again has all three replicas as voters and a known leader.
	c.waitSettled(3)

	// SIGTERM a node that owns a topic: it leaves, exits 0, and its topics
	// move to a live node.
	var green assignment
	c.must(c.servers(), &green, "assign", "topic-green", "--owner", "n3")
	if green.Owner != "n3" {
		c.fatalf("assign topic-green: %+v", green)
	}
	n3 := c.node("n3")
	c.signal(n3, syscall.SIGTERM)
	if code := c.waitExit(n3, 60*time.Second); code != 0 {
		c.fatalf("n3 exited %d after SIGTERM, want 0", code)
	}
	rest := c.servers()
	c.eventually(failoverDeadline, "n3 shown as left", func() (bool, string) {
		var m members
		if ok, why := c.ctlJSON(rest, &m, "members"); !ok {
			return false, why
		}
		x, found := m.find("n3")
		return !found || x.State == "left" || x.State == "dead", fmt.Sprintf("%+v", x)
	})
	for _, topic := range []string{"topic-blue", "topic-green"} {
		c.eventually(failoverDeadline, topic+" has a live owner", func() (bool, string) {
			var l assignment
			if ok, why := c.ctlJSON(rest, &l, "lookup", topic, "--linearizable"); !ok {
				return false, why
			}
			return l.Owner == "n1" || l.Owner == "n2", fmt.Sprintf("%+v", l)
		})
	}
	if !strings.Contains(n3.output.String(), "leaving the cluster") {
		c.fatalf("n3's log does not show a graceful leave")
	}
}

// TestProcessBadInput checks that bad command lines, to shoal and to
// shoalctl, fail with one clear line and a non-zero exit, and that a node
// that cannot start says why.
func TestProcessBadInput(t *testing.T) {
	shoal, shoalctl := binaries(t)
	dir := t.TempDir()
	node := []string{"node", "--id", "n1", "--data", filepath.Join(dir, "n1"),
		"--client-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0", "--swim-addr", "127.0.0.1:0"}
	badConf := filepath.Join(dir, "bad.conf")
	if err := os.WriteFile(badConf, []byte("id = n1\ncolour = blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	down, _ := freePorts(t, 1, 0)
	cases := []struct {
		bin  string
		args []string
		code int
		want string
	}{
		{shoal, nil, 2, "shoal: missing command"},
		{shoal, []string{"serve"}, 2, `shoal: unknown command "serve"`},
		{shoal, append(slices.Clone(node), "--frobnicate"), 2, "shoal node: unknown flag --frobnicate"},
		{shoal, append([]string{"node"}, node[3:]...), 2, "shoal node: missing --id"},
		{shoal, append(slices.Clone(node), "--client-addr", "localhost"), 2, `shoal node: --client-addr "localhost": missing port in address`},
		{shoal, append(slices.Clone(node), "--swim-addr", "127.0.0.1:99999"), 2, `shoal node: --swim-addr "127.0.0.1:99999": port "99999" is not a number`},
		{shoal, append(slices.Clone(node), "--join", "127.0.0.1"), 2, `shoal node: --join "127.0.0.1"`},
		{shoal, append(slices.Clone(node), "--config", badConf), 2, `unknown setting "colour"`},
		{shoal, []string{"dev", "--nodes", "0"}, 2, "shoal dev: --nodes 0"},
		{shoalctl, []string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{shoalctl, []string{"lookup"}, 2, "lookup: missing TOPIC"},
		// A command-line argument is capped by the kernel (128 KiB), so the
		// long topic is 100 KB here; shoalctl's own tests try 10 MB.
		{shoalctl, []string{"lookup", strings.Repeat("x", 100_000)}, 2, "topic name is 100000 bytes long"},
		{shoalctl, []string{"--servers", down[0], "members"}, 3, "server unreachable"},
	}
	for _, c := range cases {
		cmd := exec.Command(c.bin, c.args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(c.bin) + " " + strings.Join(c.args, " ")
		if len(name) > 120 {
			name = name[:120] + "…"
		}
		msg := stderr.String()
		if code != c.code || !strings.Contains(msg, c.want) || strings.Count(msg, "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit %d and one line with %q", name, code, stdout.String(), msg, c.code, c.want)
		}
	}

	// A port already taken: the node cannot start, says so, exits 1.
	taken, _ := freePorts(t, 1, 0)
	ln, err := net.Listen("tcp", taken[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cmd := exec.Command(shoal, append(slices.Clone(node), "--client-addr", taken[0])...)
	out, err := cmd.CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "shoal node: ") {
		t.Errorf("node on a taken port: err %v, output %q; want exit 1 and a shoal node: line", err, out)
	}
}

// devRun is a running `shoal dev`.
type devRun struct {
	cmd       *exec.Cmd
	stderr    *syncBuffer
	lines     chan string // stdout, line by line; closed at exit
	exited    chan error
	base      int
	nodeLines []string // the lines before the ready line
	ready     string
}

// startDev runs `shoal dev` with args on a random base port and waits for
// its ready line.
func startDev(t *testing.T, shoal string, args ...string) *devRun {
	t.Helper()
	// The dev layout needs base+1..base+303 free. A random base below the
	// kernel's ephemeral range makes a clash unlikely; a clash is retried.
	var d *devRun
	for attempt := 0; ; attempt++ {
		d = &devRun{base: 10000 + 400*rand.IntN(50), stderr: &syncBuffer{}, exited: make(chan error, 1)}
		d.cmd = exec.Command(shoal, append([]string{"dev", "--base-port", strconv.Itoa(d.base)}, args...)...)
		stdout, err := d.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		d.cmd.Stderr = d.stderr
		if err := d.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 16)
		go func(cmd *exec.Cmd, exited chan<- error) {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
			exited <- cmd.Wait()
		}(d.cmd, d.exited)
		first, ok := <-lines
		if ok {
			d.lines = prepend(first, lines)
			break
		}
		err = <-d.exited
		if attempt < 3 && strings.Contains(d.stderr.String(), "address already in use") {
			continue
		}
		t.Fatalf("shoal dev: %v; stderr:\n%s", err, d.stderr.String())
	}
	t.Cleanup(func() { _ = d.cmd.Process.Kill() }) // an error once it exited
	timeout := time.After(90 * time.Second)
	for d.ready == "" {
		select {
		case l, ok := <-d.lines:
			if !ok {
				t.Fatalf("shoal dev ended before its ready line; stderr:\n%s", d.stderr.String())
			}
			if strings.HasPrefix(l, "ready") {
				d.ready = l
			} else {
				d.nodeLines = append(d.nodeLines, l)
			}
		case <-timeout:
			t.Fatalf("no ready line within 90s; lines %q; stderr:\n%s", d.nodeLines, d.stderr.String())
		}
	}
	return d
}

// servers are the dev cluster's client addresses, checked against its
// node lines.
func (d *devRun) servers(t *testing.T, nodes int) []string {
	t.Helper()
	if len(d.nodeLines) != nodes {
		t.Fatalf("node lines %q, want %d", d.nodeLines, nodes)
	}
	var servers []string
	for i, l := range d.nodeLines {
		client := "127.0.0.1:" + strconv.Itoa(d.base+i+1)
		if !strings.HasPrefix(l, "n"+strconv.Itoa(i+1)+" ") || !strings.Contains(l, "client "+client) {
			t.Fatalf("node line %d: %q, want n%d with client %s", i+1, l, i+1, client)
		}
		servers = append(servers, client)
	}
	if !strings.Contains(d.ready, "shoalctl --servers "+strings.Join(servers, ",")) {
		t.Fatalf("ready line %q does not name the servers %v", d.ready, servers)
	}
	return servers
}

// dataDir is the directory the ready line names.
func (d *devRun) dataDir(t *testing.T) string {
	t.Helper()
	_, dir, _ := strings.Cut(d.ready, "data in ")
	dir, _, _ = strings.Cut(dir, " ")
	dir = strings.TrimSuffix(dir, ";")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("ready line %q names data dir %q: %v", d.ready, dir, err)
	}
	return dir
}

// interrupt sends SIGINT and checks for exit 0 within 30 s; it returns
// the lines printed after the ready line.
func (d *devRun) interrupt(t *testing.T) []string {
	t.Helper()
	if err := d.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var rest []string
	for l := range d.lines {
		rest = append(rest, l)
	}
	select {
	case err := <-d.exited:
		if err != nil {
			t.Fatalf("shoal dev after SIGINT: %v; stderr:\n%s", err, d.stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("shoal dev did not stop within 30s of SIGINT")
	}
	return rest
}

// TestProcessDev runs `shoal dev`, waits for its ready line, uses the
// cluster with shoalctl, and stops it with SIGINT: exit 0 and the
// temporary data directory removed.
func TestProcessDev(t *testing.T) {
	shoal, shoalctl := binaries(t)
	d := startDev(t, shoal, "--nodes", "3")
	servers := d.servers(t, 3)
	dataDir := d.dataDir(t)

	c := &cluster{t: t, shoal: shoal, shoalctl: shoalctl}
	var a assignment
	c.must(servers, &a, "assign", "topic-blue")
	var pr produced
	c.must(servers, &pr, "produce", "topic-blue", "hello")
	var f fetched
	c.must(servers, &f, "fetch", "topic-blue")
	if len(f.Records) != 1 || f.Records[0].Value != "hello" {
		t.Fatalf("fetch: %+v", f)
	}

	d.interrupt(t)
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Fatalf("temporary data dir %s still there after exit: %v", dataDir, err)
	}
}

// TestProcessDevProcesses runs `shoal dev --processes`, kills one node's
// process with SIGKILL by the pid it printed, sees the topic move and the
// death reported, then stops the rest with SIGINT: exit 0, no node process
// left behind, the temporary directory removed.
func TestProcessDevProcesses(t *testing.T) {
	shoal, shoalctl := binaries(t)
	d := startDev(t, shoal, "--nodes", "3", "--processes")
	servers := d.servers(t, 3)
	dataDir := d.dataDir(t)
	pids := make([]int, 3)
	for i, l := range d.nodeLines {
		f := strings.Fields(l)
		if len(f) < 3 || f[1] != "pid" {
			t.Fatalf("node line %q has no pid", l)
		}
		pids[i], _ = strconv.Atoi(f[2])
	}

	c := &cluster{t: t, shoal: shoal, shoalctl: shoalctl}
	var a assignment
	c.must(servers, &a, "assign", "topic-blue", "--owner", "n2")
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	survivors := []string{servers[0], servers[2]}
	c.eventually(failoverDeadline, "topic-blue moves off n2", func() (bool, string) {
		var l assignment
		if ok, why := c.ctlJSON(survivors, &l, "lookup", "topic-blue", "--linearizable"); !ok {
			return false, why
		}
		return l.Owner != "n2" && l.Epoch > a.Epoch, fmt.Sprintf("%+v", l)
	})

	rest := d.interrupt(t)
	if len(rest) == 0 || !strings.HasPrefix(rest[0], "n2 exited (signal: killed); restart it with: ") {
		t.Fatalf("lines after ready: %q, want n2's death reported first", rest)
	}
	for _, pid := range []int{pids[0], pids[2]} {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Fatalf("node process %d still runs after shoal dev exited", pid)
		}
	}
	if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
		t.Fatalf("temporary data dir %s still there after exit: %v", dataDir, err)
	}
}

// prepend returns a channel that yields first, then what in yields.
func prepend(first string, in <-chan string) chan string {
	out := make(chan string, 16)
	go func() {
		out <- first
		for l := range in {
			out <- l
		}
		close(out)
	}()
	return out
}

// TestProcessCrashKeepsAcknowledged kills every node with SIGKILL right
// after a burst of acknowledged writes, restarts them all, and checks that
// nothing acknowledged was lost: every assignment, with its owner, and
// every produced record at its offset.
func TestProcessCrashKeepsAcknowledged(t *testing.T) {
	c := startCluster(t, 3)
	const perTopic = 5
	topics := map[string]string{"topic-a": "n1", "topic-b": "n2", "topic-c": "n3"}
	assigned := map[string]assignment{}
	for topic, owner := range topics {
		var a assignment
		c.must(c.servers(), &a, "assign", topic, "--owner", owner)
		assigned[topic] = a
		for i := range perTopic {
			var pr produced
			c.must(c.servers(), &pr, "produce", topic, fmt.Sprintf("%s-%d", topic, i))
			if pr.Offset != uint64(i) {
				c.fatalf("produce %s #%d: offset %d", topic, i, pr.Offset)
			}
		}
	}
	for _, p := range c.nodes {
		c.signal(p, syscall.SIGKILL)
	}
	for _, p := range c.nodes {
		c.start(p)
	}
	for _, p := range c.nodes {
		c.waitReady(p, 3)
	}
	for topic, owner := range topics {
		var l assignment
		c.eventually(30*time.Second, topic+" assignment after the crash", func() (bool, string) {
			ok, why := c.ctlJSON(c.servers(), &l, "lookup", topic, "--linearizable")
			return ok, why
		})
		if l.Owner != owner || l.Epoch < assigned[topic].Epoch {
			c.fatalf("%s after the crash: %+v, want owner %s at epoch >= %d", topic, l, owner, assigned[topic].Epoch)
		}
		var f fetched
		c.eventually(30*time.Second, topic+" records after the crash", func() (bool, string) {
			ok, why := c.ctlJSON(c.servers(), &f, "fetch", topic, "--from", "0")
			return ok, why
		})
		if len(f.Records) != perTopic {
			c.fatalf("%s after the crash: %d records, want %d: %+v", topic, len(f.Records), perTopic, f)
		}
		for i, r := range f.Records {
			if r.Offset != uint64(i) || r.Value != fmt.Sprintf("%s-%d", topic, i) {
				c.fatalf("%s record %d after the crash: %+v", topic, i, r)
			}
		}
		var pr produced
		c.must(c.servers(), &pr, "produce", topic, "after-restart")
		if pr.Offset != perTopic {
			c.fatalf("%s: produce after the restart at offset %d, want %d", topic, pr.Offset, perTopic)
		}
	}
}
