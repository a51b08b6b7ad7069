//go:build linux

package proccluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says what cluster Start makes.
type Config struct {
	// Binary is the path of the shoal binary. Required.
	Binary string
	// Nodes is the number of node processes, 1 to MaxNodes.
	Nodes int
	// Shards is the number of metadata shards (--shards); 0 gives none,
	// so the cluster is born with the nodes' default and splits on its own.
	Shards int
	// Replicas per shard (--replicas); 0 keeps the node's default.
	Replicas int
	// Preset is the SWIM and lease timing preset (--swim-preset): "lan" or
	// "fast"; empty keeps the node's default (lan).
	Preset string
	// Netns runs each node in its own network namespace, joined to the
	// others and to this process by one bridge, so that a node's link can
	// be cut. It needs root.
	Netns bool
	// Dir holds the nodes' data directories and logs (DIR/nI, DIR/nI.log).
	// Empty: a new temporary directory, removed by Close (or, should this
	// process die first, by a later Start). A given Dir is kept.
	Dir string
	// Args are more `shoal node` flags, given to every node after the ones
	// Start sets (e.g. --log-level warn).
	Args []string
	// Command, when set, is called with each node's command before every
	// start of the node, and may change it: wrap it in another program
	// (set Path and Args), set SysProcAttr.UseCgroupFD and CgroupFD, change
	// its environment. A wrapper must exec the node in the same process
	// (as `ip netns exec` does), or Node.PID, CPUTime and RSS measure the
	// wrapper instead.
	Command func(n *Node, cmd *exec.Cmd) error
	// ReadyTimeout bounds Start's wait for every node to be ready with all
	// members alive. Default 5 minutes.
	ReadyTimeout time.Duration
}

// MaxNodes bounds Config.Nodes: one /24 subnet in namespace mode.
const MaxNodes = 250

// Fixed ports of namespace mode, where every node has its own address.
const (
	netnsClientPort  = 7101
	netnsPeerPort    = 7201
	netnsSwimPort    = 7301
	netnsMetricsPort = 7401
)

// Ports of loopback mode are drawn below the kernel's ephemeral range
// (32768-60999 on Linux by default): a port from that range, freed by a
// killed node, may be taken by an outbound connection before the node
// restarts on it.
const (
	minLoopbackPort = 10000
	maxLoopbackPort = 32000
)

// Polling and probing.
const (
	pollEvery    = 100 * time.Millisecond
	probeTimeout = 2 * time.Second
	// A busy node with thousands of shards may take seconds to answer a
	// scrape.
	scrapeTimeout = 15 * time.Second
	// A node that does not exit within this after SIGKILL is reported; it
	// cannot normally happen.
	killWait = 30 * time.Second
)

// ErrNoNetns is returned by Cut and Heal on a cluster without namespaces.
var ErrNoNetns = errors.New("proccluster: links can be cut only in namespace mode (Config.Netns)")

// Node is one `shoal node` process of a cluster. Its addresses and paths
// stay the same across restarts.
type Node struct {
	ID    string // n1, n2, ...
	Index int    // 0-based
	// ClientAddr, PeerAddr, SwimAddr and MetricsAddr are the node's listen
	// addresses; this process reaches all of them until the node's link is
	// cut.
	ClientAddr, PeerAddr, SwimAddr, MetricsAddr string
	DataDir, LogPath                            string
	// Netns is the node's network namespace, empty in loopback mode.
	Netns string

	args []string // shoal node ...

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed once Wait returned; waitErr then holds its error
	waitErr error
	logFile *os.File
	starts  int
}

// PID is the process id of the node's current or last life (0 before the
// first start).
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil || n.cmd.Process == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// Running reports whether the node's process has been started and has not
// exited (a paused node is running).
func (n *Node) Running() bool {
	n.mu.Lock()
	exited := n.exited
	n.mu.Unlock()
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// ExitErr is how the node's last life ended (nil while it runs or if it
// exited with status 0).
func (n *Node) ExitErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.exited == nil {
		return nil
	}
	select {
	case <-n.exited:
		return n.waitErr
	default:
		return nil
	}
}

// Args are the `shoal node` arguments the node runs with (without the
// binary).
func (n *Node) Args() []string { return slices.Clone(n.args) }

// CPUTime is the user plus system CPU time the node's process used.
func (n *Node) CPUTime() (time.Duration, error) { return ProcCPUTime(n.PID()) }

// RSS is the node process's resident set size in bytes.
func (n *Node) RSS() (uint64, error) { return ProcRSS(n.PID()) }

// Cluster is a running cluster of node processes.
type Cluster struct {
	cfg     Config
	dir     string
	ownDir  bool // dir is a temporary directory Close removes
	nodes   []*Node
	net     *bridgeNet // nil in loopback mode
	http    *http.Client
	closeMu sync.Mutex
	closed  bool
}

// Start starts cfg.Nodes node processes and waits until every one is ready
// (/readyz) and counts every node alive (shoal_members_alive). On error
// everything it made is removed again, and the error ends with the last
// lines of each node's log.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = 5 * time.Minute
	}
	c := &Cluster{cfg: cfg, http: &http.Client{
		Timeout:   scrapeTimeout,
		Transport: &http.Transport{DisableKeepAlives: true},
	}}
	if err := c.start(ctx); err != nil {
		tails := c.tails(15)
		_ = c.Close()
		return nil, fmt.Errorf("%w%s", err, tails)
	}
	return c, nil
}

func (cfg *Config) check() error {
	switch {
	case cfg.Binary == "":
		return errors.New("proccluster: no binary given")
	case cfg.Nodes < 1 || cfg.Nodes > MaxNodes:
		return fmt.Errorf("proccluster: %d nodes, want 1 to %d", cfg.Nodes, MaxNodes)
	case cfg.Shards < 0:
		return fmt.Errorf("proccluster: %d shards, want 0 (the nodes' default) or more", cfg.Shards)
	case cfg.Replicas < 0:
		return fmt.Errorf("proccluster: %d replicas", cfg.Replicas)
	case cfg.Preset != "" && cfg.Preset != "lan" && cfg.Preset != "fast":
		return fmt.Errorf("proccluster: preset %q, want lan or fast", cfg.Preset)
	case cfg.Netns && os.Geteuid() != 0:
		return errors.New("proccluster: network namespaces need root")
	}
	if _, err := os.Stat(cfg.Binary); err != nil {
		return fmt.Errorf("proccluster: binary: %w", err)
	}
	return nil
}

func (c *Cluster) start(ctx context.Context) error {
	if c.cfg.Dir != "" {
		if err := os.MkdirAll(c.cfg.Dir, 0o755); err != nil {
			return fmt.Errorf("proccluster: %w", err)
		}
		c.dir = c.cfg.Dir
	} else {
		sweepStaleDirs()
		d, err := os.MkdirTemp("", dirPrefix())
		if err != nil {
			return fmt.Errorf("proccluster: %w", err)
		}
		c.dir, c.ownDir = d, true
	}
	n := c.cfg.Nodes
	var clientAddrs, peerAddrs, swimAddrs, metricsAddrs []string
	if c.cfg.Netns {
		sweepStale()
		bn, err := newBridgeNet(n)
		c.net = bn // even when partly made: Close removes what exists
		if err != nil {
			return err
		}
		for i := range n {
			ip := bn.ip(i)
			clientAddrs = append(clientAddrs, net.JoinHostPort(ip, strconv.Itoa(netnsClientPort)))
			peerAddrs = append(peerAddrs, net.JoinHostPort(ip, strconv.Itoa(netnsPeerPort)))
			swimAddrs = append(swimAddrs, net.JoinHostPort(ip, strconv.Itoa(netnsSwimPort)))
			metricsAddrs = append(metricsAddrs, net.JoinHostPort(ip, strconv.Itoa(netnsMetricsPort)))
		}
	} else {
		tcp, udp, err := freePorts(3*n, n)
		if err != nil {
			return err
		}
		for i := range n {
			clientAddrs = append(clientAddrs, tcp[3*i])
			peerAddrs = append(peerAddrs, tcp[3*i+1])
			metricsAddrs = append(metricsAddrs, tcp[3*i+2])
			swimAddrs = append(swimAddrs, udp[i])
		}
	}
	for i := range n {
		id := "n" + strconv.Itoa(i+1)
		nd := &Node{
			ID: id, Index: i,
			ClientAddr: clientAddrs[i], PeerAddr: peerAddrs[i], SwimAddr: swimAddrs[i], MetricsAddr: metricsAddrs[i],
			DataDir: filepath.Join(c.dir, id), LogPath: filepath.Join(c.dir, id+".log"),
		}
		if c.net != nil {
			nd.Netns = c.net.ns[i]
		}
		nd.args = []string{"node", "--id", id, "--rack", "r" + strconv.Itoa(i%3),
			"--data", nd.DataDir, "--client-addr", nd.ClientAddr, "--peer-addr", nd.PeerAddr,
			"--swim-addr", nd.SwimAddr, "--metrics-addr", nd.MetricsAddr,
			"--join", strings.Join(swimAddrs, ","), // a node skips its own address
			"--bootstrap-expect", strconv.Itoa(n)}
		if c.cfg.Shards > 0 {
			nd.args = append(nd.args, "--shards", strconv.Itoa(c.cfg.Shards))
		}
		if c.cfg.Replicas > 0 {
			nd.args = append(nd.args, "--replicas", strconv.Itoa(c.cfg.Replicas))
		}
		if c.cfg.Preset != "" {
			nd.args = append(nd.args, "--swim-preset", c.cfg.Preset)
		}
		nd.args = append(nd.args, c.cfg.Args...)
		c.nodes = append(c.nodes, nd)
	}
	for _, nd := range c.nodes {
		if err := c.startNode(nd); err != nil {
			return err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, c.cfg.ReadyTimeout)
	defer cancel()
	return c.WaitHealthy(wctx)
}

// startNode starts nd's process, its output appended to its log.
func (c *Cluster) startNode(nd *Node) error {
	nd.mu.Lock()
	defer nd.mu.Unlock()
	if nd.exited != nil {
		select {
		case <-nd.exited:
		default:
			return fmt.Errorf("proccluster: %s is running", nd.ID)
		}
	}
	logf, err := os.OpenFile(nd.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("proccluster: %s: %w", nd.ID, err)
	}
	if nd.starts > 0 {
		fmt.Fprintf(logf, "---- %s restarted ----\n", nd.ID)
	}
	name, args := c.cfg.Binary, nd.args
	if nd.Netns != "" {
		// ip netns exec execs the node in place: the pid is the node's.
		name, args = "ip", append([]string{"netns", "exec", nd.Netns, c.cfg.Binary}, nd.args...)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, so a Ctrl-C at the terminal reaches only this
	// process, which then cleans up; and killed with this process, should
	// it die without doing so.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if c.cfg.Command != nil {
		if err := c.cfg.Command(nd, cmd); err != nil {
			_ = logf.Close()
			return fmt.Errorf("proccluster: %s: command hook: %w", nd.ID, err)
		}
	}
	if err := spawn(cmd); err != nil {
		_ = logf.Close()
		return fmt.Errorf("proccluster: start %s: %w", nd.ID, err)
	}
	nd.cmd, nd.logFile, nd.waitErr = cmd, logf, nil
	nd.starts++
	exited := make(chan struct{})
	nd.exited = exited
	go func() {
		err := cmd.Wait()
		nd.mu.Lock()
		nd.waitErr = err
		_ = nd.logFile.Close()
		nd.mu.Unlock()
		close(exited)
	}()
	return nil
}

// The parent-death signal is sent when the thread that started the child
// ends (go.dev/issue/27505), not the process, and the Go runtime ends a
// thread whose locked goroutine returns. Every node is therefore started
// from one goroutine locked to its thread for the life of the process.
var (
	spawnOnce sync.Once
	spawnReq  chan spawnRequest
)

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReq = make(chan spawnRequest)
		go func() {
			runtime.LockOSThread() // never unlocked, and the goroutine never returns
			for r := range spawnReq {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	spawnReq <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// Exited returns an error naming the first node whose process is not
// running, nil if all run: a wait that polls the nodes stops at once when
// one died instead of running out its time.
func (c *Cluster) Exited() error {
	for _, nd := range c.nodes {
		if !nd.Running() {
			return fmt.Errorf("proccluster: %s is not running (%v); log %s", nd.ID, nd.ExitErr(), nd.LogPath)
		}
	}
	return nil
}

// Nodes are the cluster's nodes, n1 first.
func (c *Cluster) Nodes() []*Node { return slices.Clone(c.nodes) }

// Node returns node i (0-based).
func (c *Cluster) Node(i int) *Node { return c.nodes[i] }

// Dir is where the nodes' data directories and logs are.
func (c *Cluster) Dir() string { return c.dir }

// Netns reports whether the nodes run in network namespaces.
func (c *Cluster) Netns() bool { return c.net != nil }

// ClientAddrs are the client addresses of every node but those in except
// (0-based indexes).
func (c *Cluster) ClientAddrs(except ...int) []string {
	var out []string
	for _, nd := range c.nodes {
		if !slices.Contains(except, nd.Index) {
			out = append(out, nd.ClientAddr)
		}
	}
	return out
}

func (c *Cluster) signal(i int, sig syscall.Signal) error {
	nd := c.nodes[i]
	if !nd.Running() {
		return fmt.Errorf("proccluster: %s is not running", nd.ID)
	}
	nd.mu.Lock()
	p := nd.cmd.Process
	nd.mu.Unlock()
	if err := p.Signal(sig); err != nil {
		return fmt.Errorf("proccluster: signal %s: %w", nd.ID, err)
	}
	return nil
}

// Kill sends node i SIGKILL and waits until its process has ended.
func (c *Cluster) Kill(i int) error {
	if err := c.signal(i, syscall.SIGKILL); err != nil {
		return err
	}
	return c.waitExit(c.nodes[i])
}

func (c *Cluster) waitExit(nd *Node) error {
	nd.mu.Lock()
	exited := nd.exited
	nd.mu.Unlock()
	select {
	case <-exited:
		return nil
	case <-time.After(killWait):
		return fmt.Errorf("proccluster: %s did not exit within %v of SIGKILL", nd.ID, killWait)
	}
}

// Pause stops node i's process (SIGSTOP) and waits until the kernel shows
// it stopped; Resume continues it.
func (c *Cluster) Pause(i int) error {
	if err := c.signal(i, syscall.SIGSTOP); err != nil {
		return err
	}
	return c.waitStopped(i, true)
}

// Resume continues node i's process (SIGCONT) after Pause, and waits until
// the kernel no longer shows it stopped.
func (c *Cluster) Resume(i int) error {
	if err := c.signal(i, syscall.SIGCONT); err != nil {
		return err
	}
	return c.waitStopped(i, false)
}

// waitStopped waits until node i's process is stopped, or not, as its
// /proc/PID/stat state shows ('T'): a signal is delivered after kill(2)
// returns.
func (c *Cluster) waitStopped(i int, stopped bool) error {
	nd := c.nodes[i]
	deadline := time.Now().Add(killWait)
	for {
		state, err := ProcState(nd.PID())
		if err != nil {
			return err
		}
		if (state == 'T') == stopped {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("proccluster: %s in state %c %v after the signal", nd.ID, state, killWait)
		}
		time.Sleep(time.Millisecond)
	}
}

// Restart starts node i again, after it exited or was killed, with the
// same arguments, data directory and addresses. It does not wait for
// readiness: see WaitReady and WaitHealthy.
func (c *Cluster) Restart(i int) error { return c.startNode(c.nodes[i]) }

// Cut takes node i's link down: the node keeps running but reaches, and is
// reached by, no other node and not this process. Namespace mode only.
func (c *Cluster) Cut(i int) error {
	if c.net == nil {
		return ErrNoNetns
	}
	return c.net.setLink(i, false)
}

// Heal brings node i's link up again after Cut.
func (c *Cluster) Heal(i int) error {
	if c.net == nil {
		return ErrNoNetns
	}
	return c.net.setLink(i, true)
}

// LinkBytes are the bytes node i sent and received over its link,
// Ethernet headers included, since the link was made: everything it sent
// to other nodes and to this process (TCP and UDP). Namespace mode only.
func (c *Cluster) LinkBytes(i int) (sent, received uint64, err error) {
	if c.net == nil {
		return 0, 0, ErrNoNetns
	}
	return c.net.linkBytes(i)
}

// Ready reports whether node i answers /readyz with 200.
func (c *Cluster) Ready(ctx context.Context, i int) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	code, _, err := c.get(ctx, c.nodes[i], "/readyz")
	return err == nil && code == http.StatusOK
}

// WaitReady waits until node i answers /readyz with 200. It fails at once
// if the node's process exits.
func (c *Cluster) WaitReady(ctx context.Context, i int) error {
	return c.poll(ctx, func() (bool, string, error) {
		nd := c.nodes[i]
		if !nd.Running() {
			return false, "", fmt.Errorf("proccluster: %s is not running (%v); log %s", nd.ID, nd.ExitErr(), nd.LogPath)
		}
		return c.Ready(ctx, i), nd.ID + " not ready", nil
	})
}

// WaitHealthy waits until every node is running, ready and counts every
// node of the cluster alive (its gauge shoal_members_alive).
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	want := float64(len(c.nodes))
	return c.poll(ctx, func() (bool, string, error) {
		if err := c.Exited(); err != nil {
			return false, "", err
		}
		for _, nd := range c.nodes {
			if !c.Ready(ctx, nd.Index) {
				return false, nd.ID + " not ready", nil
			}
			m, err := c.Scrape(ctx, nd.Index)
			if err != nil {
				return false, err.Error(), nil
			}
			if alive := m.Value("shoal_members_alive"); alive != want {
				return false, fmt.Sprintf("%s sees %v members alive, want %v", nd.ID, alive, want), nil
			}
		}
		return true, "", nil
	})
}

// poll calls cond every pollEvery until it holds, fails, or ctx ends (then
// the error says what cond last reported).
func (c *Cluster) poll(ctx context.Context, cond func() (bool, string, error)) error {
	for {
		ok, why, err := cond()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("proccluster: %w: %s", context.Cause(ctx), why)
		case <-time.After(pollEvery):
		}
	}
}

// Scrape reads node i's /metrics.
func (c *Cluster) Scrape(ctx context.Context, i int) (Metrics, error) {
	nd := c.nodes[i]
	code, body, err := c.get(ctx, nd, "/metrics")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("proccluster: %s /metrics: status %d", nd.ID, code)
	}
	return ParseMetrics(body)
}

// Counter scrapes node i's /metrics and returns the sum of every series of
// the metric name (e.g. shoal_lease_grants_total); a metric the node does
// not export is an error.
func (c *Cluster) Counter(ctx context.Context, i int, name string) (float64, error) {
	m, err := c.Scrape(ctx, i)
	if err != nil {
		return 0, err
	}
	v, ok := m[name]
	if !ok {
		return 0, fmt.Errorf("proccluster: %s exports no metric %s", c.nodes[i].ID, name)
	}
	return v, nil
}

func (c *Cluster) get(ctx context.Context, nd *Node, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+nd.MetricsAddr+path, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("proccluster: %s: %w", nd.ID, err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(resp.Body); err != nil {
		return 0, nil, fmt.Errorf("proccluster: %s: %w", nd.ID, err)
	}
	return resp.StatusCode, b.Bytes(), nil
}

// Tail returns the last n lines of node i's log.
func (c *Cluster) Tail(i, n int) string {
	b, err := os.ReadFile(c.nodes[i].LogPath)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// tails is the last n lines of every node's log, for an error message.
func (c *Cluster) tails(n int) string {
	var sb strings.Builder
	for i, nd := range c.nodes {
		if t := c.Tail(i, n); t != "" {
			fmt.Fprintf(&sb, "\n---- last lines of %s's log ----\n%s", nd.ID, t)
		}
	}
	return sb.String()
}

// Close kills every node still running (SIGCONT first, for a paused one),
// waits for them, and removes the namespaces, the bridge and, unless
// Config.Dir named it, the directory of data and logs. It is idempotent.
func (c *Cluster) Close() error {
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, nd := range c.nodes {
		if !nd.Running() {
			continue
		}
		nd.mu.Lock()
		p := nd.cmd.Process
		nd.mu.Unlock()
		_ = p.Signal(syscall.SIGKILL)
		_ = p.Signal(syscall.SIGCONT)
		if err := c.waitExit(nd); err != nil {
			errs = append(errs, err)
		}
	}
	if c.net != nil {
		if err := c.net.teardown(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.ownDir {
		if err := os.RemoveAll(c.dir); err != nil {
			errs = append(errs, fmt.Errorf("proccluster: %w", err))
		}
	}
	c.http.CloseIdleConnections()
	return errors.Join(errs...)
}

// dirPrefix names the temporary directories of this process's clusters.
func dirPrefix() string { return "proccluster-" + strconv.Itoa(os.Getpid()) + "-" }

// sweepStaleDirs removes the temporary directories of clusters whose
// process died without closing them. Failures are ignored.
func sweepStaleDirs() {
	entries, err := os.ReadDir(os.TempDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "proccluster-")
		if !ok || !e.IsDir() {
			continue
		}
		digits, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(digits)
		if ok && err == nil && pid > 0 && !alive(pid) {
			_ = os.RemoveAll(filepath.Join(os.TempDir(), e.Name()))
		}
	}
}

// freePorts reserves tcp ports, and udp ports free for both UDP and TCP
// (SWIM listens on both: datagrams and push-pull exchanges), on 127.0.0.1.
// They were free a moment ago; all are held until all are chosen, so they
// are distinct.
func freePorts(tcp, udp int) (tcpAddrs, udpAddrs []string, err error) {
	var closers []func() error
	defer func() {
		for _, c := range closers {
			_ = c()
		}
	}()
	grab := func(alsoUDP bool) (string, error) {
		for range 1000 {
			addr := "127.0.0.1:" + strconv.Itoa(minLoopbackPort+rand.IntN(maxLoopbackPort-minLoopbackPort))
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
			return addr, nil
		}
		return "", errors.New("proccluster: no free port found")
	}
	for range tcp {
		a, err := grab(false)
		if err != nil {
			return nil, nil, err
		}
		tcpAddrs = append(tcpAddrs, a)
	}
	for range udp {
		a, err := grab(true)
		if err != nil {
			return nil, nil, err
		}
		udpAddrs = append(udpAddrs, a)
	}
	return tcpAddrs, udpAddrs, nil
}
