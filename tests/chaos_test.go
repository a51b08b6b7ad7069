package tests

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoalmq/shoal/history"
	"golang.org/x/sys/unix"
)

var (
	chaosFor  = flag.Duration("chaos", 0, "how long TestChaos runs faults on node processes in network namespaces (make chaos; needs root)")
	chaosSeed = flag.Uint64("chaos-seed", 0, "seed of TestChaos's choices; 0 picks one and logs it")
)

// chaosNodes is the chaos cluster's size: with one node cut off or
// paused, every 3-replica shard keeps a quorum.
const chaosNodes = 5

// hostNet is the network of a chaos cluster: one network namespace per
// node, each joined to one bridge by a veth pair, on 10.201.X.0/24; the
// test process, in the host's namespace, has the bridge's address and so
// reaches every node until its link is cut.
type hostNet struct {
	t      *testing.T
	bridge string
	subnet string // "10.201.X"
	ns     []string
	veth   []string // host ends
}

func (h *hostNet) ip(i int) string { return fmt.Sprintf("%s.%d", h.subnet, i+1) }

// sh runs a command, failing the test if it fails.
func (h *hostNet) sh(args ...string) {
	h.t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		h.t.Fatalf("%s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// newHostNet builds the namespaces and links of n nodes; the test's
// cleanup tears them down, also when it fails.
func newHostNet(t *testing.T, n int) *hostNet {
	t.Helper()
	id := os.Getpid() % 10000
	h := &hostNet{t: t, bridge: fmt.Sprintf("shbr%d", id), subnet: fmt.Sprintf("10.201.%d", id%250)}
	t.Cleanup(h.teardown)
	h.sh("ip", "link", "add", h.bridge, "type", "bridge")
	h.sh("ip", "addr", "add", h.subnet+".254/24", "dev", h.bridge)
	h.sh("ip", "link", "set", h.bridge, "up")
	for i := range n {
		ns := fmt.Sprintf("shoal%d-n%d", id, i+1)
		host, peer := fmt.Sprintf("shv%d-%d", id, i+1), fmt.Sprintf("shp%d-%d", id, i+1)
		h.ns = append(h.ns, ns)
		h.veth = append(h.veth, host)
		h.sh("ip", "netns", "add", ns)
		h.sh("ip", "link", "add", host, "type", "veth", "peer", "name", peer)
		h.sh("ip", "link", "set", peer, "netns", ns)
		h.sh("ip", "-n", ns, "link", "set", "lo", "up")
		h.sh("ip", "-n", ns, "addr", "add", h.ip(i)+"/24", "dev", peer)
		h.sh("ip", "-n", ns, "link", "set", peer, "up")
		h.sh("ip", "link", "set", host, "master", h.bridge)
		h.sh("ip", "link", "set", host, "up")
	}
	return h
}

func (h *hostNet) teardown() {
	for _, ns := range h.ns {
		_ = exec.Command("ip", "netns", "del", ns).Run() // takes its veth pair along
	}
	_ = exec.Command("ip", "link", "del", h.bridge).Run()
}

// cut takes node i's link down (up again with heal): it keeps running,
// and clients inside its namespace still reach it.
func (h *hostNet) cut(i int, down bool) {
	state := "up"
	if down {
		state = "down"
	}
	h.sh("ip", "link", "set", h.veth[i], state)
}

// oneWay makes node i unable to send to node j (j still sends to i), or
// heals that.
func (h *hostNet) oneWay(i, j int, on bool) {
	verb := "del"
	if on {
		verb = "add"
	}
	h.sh("ip", "-n", h.ns[i], "route", verb, "blackhole", h.ip(j)+"/32")
}

// dialIn dials from inside network namespace ns: the socket is made on a
// thread that entered ns, which then ends with its goroutine, so no other
// goroutine ever runs in ns.
func dialIn(ns string) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		ch := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
			f, err := os.Open(filepath.Join("/var/run/netns", ns))
			if err != nil {
				ch <- result{nil, err}
				return
			}
			defer f.Close()
			if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
				ch <- result{nil, fmt.Errorf("setns %s: %w", ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			ch <- result{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// startNetCluster starts n `shoal node` processes, each in its own
// namespace of h, and waits until all are ready.
func startNetCluster(t *testing.T, h *hostNet, n int) *cluster {
	t.Helper()
	shoal, shoalctl := binaries(t)
	c := &cluster{t: t, shoal: shoal, shoalctl: shoalctl}
	root := t.TempDir()
	var join []string
	for i := range n {
		join = append(join, h.ip(i)+":7301")
	}
	for i := range n {
		id := "n" + strconv.Itoa(i+1)
		ip := h.ip(i)
		p := &proc{id: id, client: ip + ":7101", peer: ip + ":7201", swim: ip + ":7301", metrics: ip + ":7401",
			data: filepath.Join(root, id), wrap: []string{"ip", "netns", "exec", h.ns[i]}}
		p.args = []string{"node", "--id", id, "--rack", "r" + strconv.Itoa(i%3),
			"--data", p.data, "--client-addr", p.client, "--peer-addr", p.peer, "--swim-addr", p.swim,
			"--join", strings.Join(join, ","), "--bootstrap-expect", strconv.Itoa(n), "--shards", strconv.Itoa(clusterShards),
			"--swim-preset", "fast", "--metrics-addr", p.metrics}
		c.nodes = append(c.nodes, p)
		c.start(p)
	}
	t.Cleanup(c.stopAll)
	for _, p := range c.nodes {
		c.waitReady(p, n)
	}
	return c
}

// TestChaos runs chaosNodes `shoal node` processes, each in its own network
// namespace, under a produce load — a client in the host's namespace that
// reaches every node, and one inside each node's namespace that reaches
// only that node — while it cuts a node off (its link down), cuts one
// direction between two nodes (a blackhole route), or pauses a node
// (SIGSTOP), one fault at a time, for -chaos. Then it heals everything and
// checks the history: no write acknowledged at an epoch after one at a
// higher epoch had completed, no epoch going back, no acknowledged
// assignment lost.
func TestChaos(t *testing.T) {
	// Minutes of real processes under faults do not fit make test's
	// budget: make chaos (and make soak) run it, as root.
	if *chaosFor == 0 {
		t.Skip("runs only with -chaos DURATION: make chaos") // minutes of faults: not in make test's budget
	}
	// Network namespaces and veth pairs need root, which CI and the
	// developers' machines have.
	if os.Geteuid() != 0 {
		t.Skip("skipped: needs root (network namespaces)") // namespaces and veth pairs need root
	}
	seed := *chaosSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos for %v, seed %d (rerun with -chaos-seed %d)", *chaosFor, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	h := newHostNet(t, chaosNodes)
	c := startNetCluster(t, h, chaosNodes)

	l := newLoad()
	admin := loadClient(t, c.servers(), nil)
	owners := map[string]string{}
	var topics []string
	for i, p := range c.nodes {
		for k := range 2 {
			topic := fmt.Sprintf("chaos-%d-%d", i+1, k)
			owners[topic] = p.id
			topics = append(topics, topic)
		}
	}
	slices.Sort(topics)
	l.assignAll(t, admin, owners)
	l.produce("host", loadClient(t, c.servers(), nil), topics, 0)
	for i, p := range c.nodes {
		l.produce("beside-"+p.id, loadClient(t, []string{p.client}, onlyTo(p.client, dialIn(h.ns[i]))), topics, 0)
	}

	type fault struct {
		what       string
		node       int
		start, end time.Time
	}
	var faults []fault
	deadline := time.Now().Add(*chaosFor)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(1000+rng.IntN(1500)) * time.Millisecond)
		i := rng.IntN(chaosNodes)
		hold := time.Duration(3000+rng.IntN(5000)) * time.Millisecond
		f := fault{node: i, start: time.Now()}
		switch rng.IntN(3) {
		case 0:
			f.what = "cut " + c.nodes[i].id
			h.cut(i, true)
			time.Sleep(hold)
			h.cut(i, false)
		case 1:
			j := (i + 1 + rng.IntN(chaosNodes-1)) % chaosNodes
			f.what = fmt.Sprintf("one-way cut %s -> %s", c.nodes[i].id, c.nodes[j].id)
			h.oneWay(i, j, true)
			time.Sleep(hold)
			h.oneWay(i, j, false)
		case 2:
			f.what = "pause " + c.nodes[i].id
			c.signal(c.nodes[i], syscall.SIGSTOP)
			time.Sleep(hold)
			c.signal(c.nodes[i], syscall.SIGCONT)
		}
		f.end = time.Now()
		faults = append(faults, f)
		t.Logf("%s for %v, from %s", f.what, f.end.Sub(f.start).Round(time.Millisecond), f.start.UTC().Format("15:04:05.000"))
		for _, p := range c.nodes {
			c.waitReady(p, chaosNodes)
		}
		// Give every node its topics back, so that each fault finds
		// owners to hurt (and the moves are part of the history).
		l.assignAll(t, admin, owners)
	}
	time.Sleep(2 * time.Second)
	l.stop()
	ops := checkLoad(t, l, finalState(t, admin, topics))

	// How long the topics the faulty node owned could not be written.
	for _, f := range faults {
		var worst gap
		owned := 0
		for _, topic := range topics {
			if ownerAt(ops, topic, f.start) != c.nodes[f.node].id {
				continue
			}
			owned++
			if g := gapWithin(ops, topic, f.start, f.end.Add(5*time.Second)); g.length() > worst.length() {
				worst = g
			}
		}
		if owned == 0 {
			continue
		}
		t.Logf("%s: its %d topics were unwritable for at most %v", f.what, owned, worst.length().Round(time.Millisecond))
		if worst.length() > slowGap {
			t.Logf("  %s from %s to %s; writes refused meanwhile:\n%s", worst.topic,
				worst.from.UTC().Format("15:04:05.000"), worst.to.UTC().Format("15:04:05.000"), refusedWithin(ops, worst))
		}
	}
}

// slowGap: an unwritable stretch longer than this is shown in detail.
const slowGap = 3 * time.Second

// gap is a stretch of time without an acknowledged write to topic.
type gap struct {
	topic    string
	from, to time.Time
}

func (g gap) length() time.Duration { return g.to.Sub(g.from) }

// refusedWithin summarizes the writes to g's topic that failed within g:
// per client and error, how many, the first and the last.
func refusedWithin(ops []history.Op, g gap) string {
	type row struct {
		n           int
		first, last time.Time
	}
	rows := map[string]*row{}
	for _, o := range ops {
		if o.OK || o.Topic != g.topic || o.Kind != history.Produce || o.End.Before(g.from) || o.Start.After(g.to) {
			continue
		}
		k := o.Client + ": " + o.Err
		r := rows[k]
		if r == nil {
			r = &row{first: o.Start}
			rows[k] = r
		}
		r.n++
		r.last = o.End
	}
	var out []string
	for k, r := range rows {
		out = append(out, fmt.Sprintf("    %s ×%d, %s .. %s", k, r.n, r.first.UTC().Format("15:04:05.000"), r.last.UTC().Format("15:04:05.000")))
	}
	slices.Sort(out)
	for _, o := range ops {
		if o.OK && o.Topic == g.topic && o.Kind == history.Produce && o.End.Equal(g.to) {
			out = append(out, fmt.Sprintf("    then written by %s through %s at epoch %d", o.Node, o.Client, o.Epoch))
		}
	}
	return strings.Join(out, "\n")
}

// ownerAt is the node that acknowledged the last write to topic before at.
func ownerAt(ops []history.Op, topic string, at time.Time) string {
	var last history.Op
	for _, o := range ops {
		if o.OK && o.Topic == topic && o.Kind == history.Produce && o.End.Before(at) && o.End.After(last.End) {
			last = o
		}
	}
	return last.Node
}

// gapWithin is the longest stretch within [from, to] without an
// acknowledged write to topic.
func gapWithin(ops []history.Op, topic string, from, to time.Time) gap {
	ends := []time.Time{from}
	for _, o := range ops {
		if o.OK && o.Topic == topic && o.Kind == history.Produce && o.End.After(from) && o.End.Before(to) {
			ends = append(ends, o.End)
		}
	}
	ends = append(ends, to)
	slices.SortFunc(ends, time.Time.Compare)
	worst := gap{topic: topic, from: from, to: from}
	for i := 1; i < len(ends); i++ {
		if g := (gap{topic: topic, from: ends[i-1], to: ends[i]}); g.length() > worst.length() {
			worst = g
		}
	}
	return worst
}
