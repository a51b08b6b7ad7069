//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os/exec"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/shoalmq/shoal/bench/proccluster"
)

// Metrics read while settling.
const (
	mShardsLed = "shoal_shards_led"
	mTransfers = "shoal_raft_leader_transfers_total"
	mShards    = "shoal_shards"
)

// balanceShare: a cluster counts as balanced once every node leads at
// least this share of shards/nodes (the ring's preferred leaders spread
// them evenly; a node that leads fewer would leave its CPU idle).
const balanceShare = 0.8

// pollEvery is how often settling scrapes the nodes.
const pollEvery = time.Second

// sizeResult is one cluster size's run.
type sizeResult struct {
	Nodes   int `json:"nodes"`
	Clients int `json:"clients"`
	// Shards is the live shards after the run (they grow where the
	// cluster splits on its own).
	Shards  int     `json:"shards"`
	Ops     uint64  `json:"ops"`
	Errors  uint64  `json:"errors"`
	OpsPerS float64 `json:"ops_per_s"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	// NodeCPUPerOpUs is the CPU all nodes used during the run over the
	// requests answered, in microseconds.
	NodeCPUPerOpUs float64 `json:"node_cpu_per_op_us"`
	// NodeCPUCores is the nodes' mean CPU during the run, in cores each.
	NodeCPUCores float64 `json:"node_cpu_cores"`
	// ThrottledPct is the share of the run the nodes spent held back by
	// their quota, in percent, averaged over the nodes.
	ThrottledPct float64 `json:"throttled_pct"`
	// Speedup is OpsPerS over the first size's; Efficiency is Speedup
	// over the growth in nodes (1 is linear).
	Speedup    float64 `json:"speedup"`
	Efficiency float64 `json:"efficiency"`
}

// result is a whole run.
type result struct {
	Op      string `json:"op"`
	Clients int    `json:"clients"`
	// ClientsPerNode, when set, gave each size that many clients per
	// node (Clients is then 0; each size reports its own).
	ClientsPerNode int          `json:"clients_per_node,omitempty"`
	Rate           int          `json:"rate"`
	DurationS      float64      `json:"duration_s"`
	Shards         int          `json:"shards"`
	NodeCores      float64      `json:"node_cores"`
	LoadCores      float64      `json:"load_cores"`
	Sizes          []sizeResult `json:"sizes"`
}

// fillEfficiency sets every size's speedup and efficiency against the
// first size.
func (r *result) fillEfficiency() {
	if len(r.Sizes) == 0 {
		return
	}
	base := r.Sizes[0]
	for i := range r.Sizes {
		s := &r.Sizes[i]
		if base.OpsPerS <= 0 {
			s.Speedup, s.Efficiency = 0, 0
			continue
		}
		s.Speedup = round(s.OpsPerS/base.OpsPerS, 3)
		s.Efficiency = round(s.Speedup/(float64(s.Nodes)/float64(base.Nodes)), 3)
	}
}

func (r *result) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	load := "no quota"
	if r.LoadCores > 0 {
		load = strconv.FormatFloat(r.LoadCores, 'g', -1, 64) + " of a core"
	}
	loop := "closed loop"
	if r.Rate > 0 {
		loop = fmt.Sprintf("open loop at %d/s", r.Rate)
	}
	clients := strconv.Itoa(r.Clients) + " clients"
	if r.ClientsPerNode > 0 {
		clients = strconv.Itoa(r.ClientsPerNode) + " clients per node"
	}
	shards := strconv.Itoa(r.Shards) + " shards"
	if r.Shards == 0 {
		shards = "shards born with the nodes' default, split on their own"
	}
	fmt.Fprintf(w, "scaleout: %s, %s, %s, %.0fs per size, %s; each node held to %g of a core, the load generator %s\n",
		r.Op, loop, clients, r.DurationS, shards, r.NodeCores, load)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODES\tSHARDS\tCLIENTS\tOPS/S\tP50 MS\tP99 MS\tERRORS\tNODE CPU/OP US\tNODE CPU (CORES)\tTHROTTLED %\tSPEEDUP\tEFFICIENCY")
	for _, s := range r.Sizes {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%d\t%.0f\t%.3f\t%.0f\t%.2f\t%.0f%%\n", s.Nodes, s.Shards, s.Clients, s.OpsPerS, s.P50ms, s.P99ms,
			s.Errors, s.NodeCPUPerOpUs, s.NodeCPUCores, s.ThrottledPct, s.Speedup, 100*s.Efficiency)
	}
	return tw.Flush()
}

// runSize starts a cluster of n nodes in their groups, waits until it is
// balanced and quiet, runs the workload and removes the cluster.
func runSize(ctx context.Context, o *options, groups *cgroups, n int, logf func(string, ...any)) (sizeResult, error) {
	dirs := make([]string, n)
	for i := range n {
		d, err := groups.group("n"+strconv.Itoa(i+1), o.nodeCores)
		if err != nil {
			return sizeResult{}, err
		}
		dirs[i] = d
	}
	loadDir, err := groups.group("load", o.loadCore)
	if err != nil {
		return sizeResult{}, err
	}
	logf("%d nodes: starting, %d shards, each node held to %g of a core", n, o.shards, o.nodeCores)
	start := time.Now()
	c, err := proccluster.Start(ctx, proccluster.Config{
		Binary: o.shoal, Nodes: n, Shards: o.shards, Args: []string{"--log-level", o.logLevel},
		ReadyTimeout: o.timeout,
		Command: func(nd *proccluster.Node, cmd *exec.Cmd) error {
			cmd.Path, cmd.Args = wrap(dirs[nd.Index], cmd.Path, cmd.Args[1:])
			return nil
		},
	})
	if err != nil {
		return sizeResult{}, err
	}
	defer c.Close()
	logf("%d nodes: ready in %.1fs; waiting until each leads %.0f%% of its share of the shards and no leader moved for %v",
		n, time.Since(start).Seconds(), 100*balanceShare, o.settle)
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	err = waitBalanced(wctx, c, o.shards, o.settle)
	cancel()
	if err != nil {
		return sizeResult{}, err
	}
	logf("%d nodes: settled after %.1fs; running shoalctl bench --op %s for %v", n, time.Since(start).Seconds(), o.op, o.duration)

	cpu0, err := nodesCPU(c)
	if err != nil {
		return sizeResult{}, err
	}
	thr0, err := throttled(groups, dirs)
	if err != nil {
		return sizeResult{}, err
	}
	began := time.Now()
	b, err := runBench(ctx, o, loadDir, c.ClientAddrs(), logWriter{logf})
	if err != nil {
		return sizeResult{}, err
	}
	wall := time.Since(began)
	cpu1, err := nodesCPU(c)
	if err != nil {
		return sizeResult{}, err
	}
	thr1, err := throttled(groups, dirs)
	if err != nil {
		return sizeResult{}, err
	}
	s := sizeResult{Nodes: n, Clients: o.clientsAt(n), Ops: b.Ops, Errors: b.Errors, OpsPerS: b.OpsPerS, P50ms: b.P50ms, P99ms: b.P99ms}
	if _, _, live, err := leaderSpread(ctx, c); err == nil {
		s.Shards = int(live)
	}
	// The nodes' CPU covers the bench's preparation too (a status call,
	// and the topics of ops other than assign): the per-op figure is
	// meant for assign, where there is none to speak of.
	cpu := cpu1 - cpu0
	if b.Ops > 0 {
		s.NodeCPUPerOpUs = round(float64(cpu.Microseconds())/float64(b.Ops), 1)
	}
	s.NodeCPUCores = round(cpu.Seconds()/wall.Seconds()/float64(n), 3)
	s.ThrottledPct = round(100*(thr1-thr0).Seconds()/wall.Seconds()/float64(n), 1)
	if err := c.Exited(); err != nil {
		return sizeResult{}, err
	}
	return s, nil
}

// wrap returns a command's path and argv (argv[0] included) that enter the
// group at dir and then exec path with args.
func wrap(dir, path string, args []string) (string, []string) {
	name, argv := enterCommand(dir, path, args)
	return name, append([]string{name}, argv...)
}

// nodesCPU is the CPU every node of c used so far, summed.
func nodesCPU(c *proccluster.Cluster) (time.Duration, error) {
	var sum time.Duration
	for _, nd := range c.Nodes() {
		t, err := nd.CPUTime()
		if err != nil {
			return 0, fmt.Errorf("cpu time of %s: %w", nd.ID, err)
		}
		sum += t
	}
	return sum, nil
}

// throttled is how long the groups at dirs were held back, summed.
func throttled(groups *cgroups, dirs []string) (time.Duration, error) {
	var sum time.Duration
	for _, d := range dirs {
		t, err := groups.throttled(d)
		if err != nil {
			return 0, err
		}
		sum += t
	}
	return sum, nil
}

// waitBalanced waits until every node of c leads at least balanceShare of
// shards/nodes (shards 0: the live shards the nodes count, which grow
// while a cluster born with the default splits) and no node transferred
// a leadership, nor any shard split, for quiet.
func waitBalanced(ctx context.Context, c *proccluster.Cluster, shards int, quiet time.Duration) error {
	nodes := c.Nodes()
	last, lastLive, since := -1.0, -1.0, time.Now()
	why := "no scrape yet"
	for {
		if err := c.Exited(); err != nil {
			return err
		}
		minLed, transfers, live, err := leaderSpread(ctx, c)
		if shards > 0 {
			live = float64(shards)
		}
		want := math.Floor(balanceShare * live / float64(len(nodes)))
		switch {
		case err != nil:
			why = err.Error()
		case minLed < want:
			why = fmt.Sprintf("a node leads %.0f of %.0f shards, want %.0f", minLed, live, want)
			last, lastLive, since = transfers, live, time.Now()
		case transfers != last || live != lastLive:
			why = fmt.Sprintf("%.0f leader transfers so far, %.0f shards", transfers, live)
			last, lastLive, since = transfers, live, time.Now()
		case time.Since(since) >= quiet:
			return nil
		}
		t := time.NewTimer(pollEvery)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("settle: %w: %s", ctx.Err(), why)
		}
	}
}

// leaderSpread returns the fewest shards a node of c leads, the leader
// transfers of all nodes so far, and the most live shards a node counts.
func leaderSpread(ctx context.Context, c *proccluster.Cluster) (minLed, transfers, live float64, err error) {
	minLed = math.Inf(1)
	for i := range c.Nodes() {
		m, err := c.Scrape(ctx, i)
		if err != nil {
			return 0, 0, 0, err
		}
		minLed = min(minLed, m.Value(mShardsLed))
		transfers += m.Value(mTransfers)
		live = max(live, m.Value(mShards))
	}
	return minLed, transfers, live, nil
}

// logWriter passes the bench's progress lines on, indented.
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("  %s", trimNewline(p))
	return len(p), nil
}

func trimNewline(p []byte) string {
	for len(p) > 0 && p[len(p)-1] == '\n' {
		p = p[:len(p)-1]
	}
	return string(p)
}

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}
