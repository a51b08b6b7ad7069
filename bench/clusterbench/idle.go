//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/shoalmq/shoal/bench/proccluster"
	"github.com/shoalmq/shoal/client"
)

// idleReport is the result of -mode idle.
type idleReport struct {
	Mode    string     `json:"mode"`
	Nodes   int        `json:"nodes"`
	Shards  int        `json:"shards"`
	Topics  int        `json:"topics"`
	Preset  string     `json:"preset"`
	Netns   bool       `json:"netns"`
	ReadyS  float64    `json:"ready_s"`  // start until every node was ready with all members alive
	AssignS float64    `json:"assign_s"` // the assigns until every node owned its topics
	SettleS float64    `json:"settle_s"`
	WindowS float64    `json:"window_s"`
	PerNode []idleNode `json:"per_node"`

	CPUPctSum float64 `json:"cpu_pct_sum"` // all nodes, % of one core
	CPUPctMax float64 `json:"cpu_pct_max"`
	RSSMax    uint64  `json:"rss_bytes_max"`
	// LeaseMsgsPerSPerPair and LeaseBytesPerSPerPair are what one node
	// pair exchanges, both directions: the sum over senders divided by the
	// number of pairs.
	LeaseMsgsPerSPerPair  float64 `json:"lease_msgs_per_s_per_pair"`
	LeaseBytesPerSPerPair float64 `json:"lease_bytes_per_s_per_pair"`
	LeaseBytesPerSSum     float64 `json:"lease_bytes_per_s_sum"`
	FramesPerSSum         float64 `json:"frames_per_s_sum"`
	SwimBytesPerSSum      float64 `json:"swim_bytes_per_s_sum"`
	// LinkBytesPerSSum is every byte the nodes sent over their links
	// (TCP and UDP, headers included): namespace mode only.
	LinkBytesPerSSum *float64 `json:"link_bytes_per_s_sum,omitempty"`
	Note             string   `json:"note"`
}

// idleNode is one node's figures over the window.
type idleNode struct {
	Node        string  `json:"node"`
	TopicsOwned int     `json:"topics_owned"`
	CPUPct      float64 `json:"cpu_pct"` // of one core
	RSSBytes    uint64  `json:"rss_bytes"`
	// What the node sent to each peer: its counter divided by nodes-1.
	LeaseMsgsPerSPerPeer  float64  `json:"lease_msgs_per_s_to_each_peer"`
	LeaseBytesPerSPerPeer float64  `json:"lease_bytes_per_s_to_each_peer"`
	LeaseMsgsPerS         float64  `json:"lease_msgs_per_s"`
	LeaseBytesPerS        float64  `json:"lease_bytes_per_s"`
	FramesPerS            float64  `json:"frames_per_s"` // TCP frames, clients and peers
	SwimBytesPerS         float64  `json:"swim_bytes_per_s"`
	SwimPacketsPerS       float64  `json:"swim_packets_per_s"`
	LinkBytesPerS         *float64 `json:"link_bytes_per_s,omitempty"`
}

const (
	noteLoopback = "no counter of all TCP bytes exists: lease bytes (shoal_lease_sent_bytes_total), TCP frames (shoal_frames_sent_total, frames, not bytes) and SWIM UDP bytes only; -netns adds every byte sent over each node's link"
	noteNetns    = "link bytes are everything a node sent over its link (TCP and UDP, with Ethernet, IP and TCP/UDP headers); no per-node counter of all TCP bytes exists"
)

// The counters the idle window reads.
const (
	mLeaseMsgs   = "shoal_lease_messages_sent_total"
	mLeaseBytes  = "shoal_lease_sent_bytes_total"
	mLeaseGrants = "shoal_lease_grants_total"
	mFrames      = "shoal_frames_sent_total"
	mSwimBytes   = "shoal_swim_sent_bytes_total"
	mSwimPackets = "shoal_swim_packets_sent_total"
	mTopicsOwned = "shoal_topics_owned"
)

// assignWorkers is how many assigns are in flight at once.
const assignWorkers = 32

func runIdle(ctx context.Context, o *options, bin string, logf func(string, ...any)) (*idleReport, error) {
	r := &idleReport{Mode: "idle", Nodes: o.nodes, Shards: o.shards, Topics: o.topics, Preset: o.preset, Netns: o.netns,
		SettleS: o.settle.Seconds(), WindowS: o.window.Seconds(), Note: noteLoopback}
	if o.netns {
		r.Note = noteNetns
	}
	logf("starting %d nodes, %d shards, preset %s", o.nodes, o.shards, o.preset)
	start := time.Now()
	c, err := startCluster(ctx, o, bin)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r.ReadyS = time.Since(start).Seconds()
	logf("ready in %.1fs", r.ReadyS)

	owned := make([]int, o.nodes)
	for i := range o.topics {
		owned[i%o.nodes]++
	}
	if o.topics > 0 {
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, o.timeout)
		err := assignIdle(wctx, c, o, owned, logf)
		cancel()
		if err != nil {
			return nil, withLogs(c, err)
		}
		r.AssignS = time.Since(start).Seconds()
		logf("every node owns its topics and leases are granted, %.1fs", r.AssignS)
	}
	logf("settling %v", o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return nil, err
	}

	logf("measuring %v", o.window)
	before, err := readAll(ctx, c, true)
	if err != nil {
		return nil, withLogs(c, err)
	}
	if err := sleep(ctx, o.window); err != nil {
		return nil, err
	}
	after, err := readAll(ctx, c, false)
	if err != nil {
		return nil, withLogs(c, err)
	}
	pairs := float64(o.nodes*(o.nodes-1)) / 2
	for i, nd := range c.Nodes() {
		b, a := before[i], after[i]
		rate := func(name string) float64 {
			return (a.m.Value(name) - b.m.Value(name)) / a.scraped.Sub(b.scraped).Seconds()
		}
		n := idleNode{
			Node:            nd.ID,
			TopicsOwned:     int(a.m.Value(mTopicsOwned)),
			CPUPct:          100 * float64(a.cpu-b.cpu) / float64(a.cpuAt.Sub(b.cpuAt)),
			RSSBytes:        a.rss,
			LeaseMsgsPerS:   rate(mLeaseMsgs),
			LeaseBytesPerS:  rate(mLeaseBytes),
			FramesPerS:      rate(mFrames),
			SwimBytesPerS:   rate(mSwimBytes),
			SwimPacketsPerS: rate(mSwimPackets),
		}
		if o.nodes > 1 {
			n.LeaseMsgsPerSPerPeer = n.LeaseMsgsPerS / float64(o.nodes-1)
			n.LeaseBytesPerSPerPeer = n.LeaseBytesPerS / float64(o.nodes-1)
		}
		if o.netns {
			v := float64(a.link-b.link) / a.linkAt.Sub(b.linkAt).Seconds()
			n.LinkBytesPerS = &v
			if r.LinkBytesPerSSum == nil {
				r.LinkBytesPerSSum = new(float64)
			}
			*r.LinkBytesPerSSum += v
		}
		r.PerNode = append(r.PerNode, n)
		r.CPUPctSum += n.CPUPct
		r.CPUPctMax = max(r.CPUPctMax, n.CPUPct)
		r.RSSMax = max(r.RSSMax, n.RSSBytes)
		r.LeaseBytesPerSSum += n.LeaseBytesPerS
		r.FramesPerSSum += n.FramesPerS
		r.SwimBytesPerSSum += n.SwimBytesPerS
		if pairs > 0 {
			r.LeaseMsgsPerSPerPair += n.LeaseMsgsPerS / pairs
			r.LeaseBytesPerSPerPair += n.LeaseBytesPerS / pairs
		}
	}
	return r, nil
}

// startCluster starts the cluster the options ask for.
func startCluster(ctx context.Context, o *options, bin string) (*proccluster.Cluster, error) {
	return proccluster.Start(ctx, proccluster.Config{
		Binary: bin, Nodes: o.nodes, Shards: o.shards, Preset: o.preset, Netns: o.netns, Dir: o.dir,
		Args: []string{"--log-level", "warn"}, ReadyTimeout: o.timeout,
	})
}

// withLogs adds the last lines of every node's log to err.
func withLogs(c *proccluster.Cluster, err error) error {
	s := err.Error()
	for i, nd := range c.Nodes() {
		if t := c.Tail(i, 10); t != "" {
			s += fmt.Sprintf("\n---- last lines of %s's log (%s) ----\n%s", nd.ID, nd.LogPath, t)
		}
	}
	return errors.New(s)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// assignIdle assigns o.topics topics, topic k to node k mod nodes, then
// waits until every node owns as many as it was given (owned) and the
// lease grants counted by the nodes rise.
func assignIdle(ctx context.Context, c *proccluster.Cluster, o *options, owned []int, logf func(string, ...any)) error {
	cl, err := client.New(client.Config{Servers: c.ClientAddrs()})
	if err != nil {
		return err
	}
	defer cl.Close()
	logf("assigning %d topics", o.topics)
	next := atomic.Int64{}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(assignWorkers, o.topics) {
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= o.topics || ctx.Err() != nil {
					return
				}
				topic := "idle-" + strconv.Itoa(k)
				owner := c.Node(k % o.nodes).ID
				if err := assignTo(ctx, cl, topic, owner); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	cl.Close() // no client traffic in the window

	logf("waiting until every node owns its topics")
	for {
		done := true
		var why string
		for i := range c.Nodes() {
			v, err := c.Counter(ctx, i, mTopicsOwned)
			if err != nil {
				return err
			}
			if int(v) != owned[i] {
				done, why = false, fmt.Sprintf("%s owns %v topics, want %d", c.Node(i).ID, v, owned[i])
				break
			}
		}
		if done {
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("topics owned: %w: %s", err, why)
		}
	}
	grants := func() (float64, error) {
		var sum float64
		for i := range c.Nodes() {
			v, err := c.Counter(ctx, i, mLeaseGrants)
			if err != nil {
				return 0, err
			}
			sum += v
		}
		return sum, nil
	}
	g0, err := grants()
	if err != nil {
		return err
	}
	for {
		g, err := grants()
		if err != nil {
			return err
		}
		if g > g0 {
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("lease grants did not rise: %w", err)
		}
	}
}

// assignTo assigns topic to owner, retrying until it is done or ctx ends:
// right after the start a shard may still be electing its leader.
func assignTo(ctx context.Context, cl *client.Client, topic, owner string) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 10*time.Second)
		a, err := cl.Assign(actx, topic, client.AssignOptions{Owner: owner})
		cancel()
		if err == nil && a.Owner == owner {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("owner %s, want %s", a.Owner, owner)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("assign %s to %s: %w (last: %v)", topic, owner, ctx.Err(), err)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("assign %s to %s: %w", topic, owner, err)
		}
	}
}

// reading is one node's counters, CPU time, RSS and link bytes, each with
// the moment it was read.
type reading struct {
	m       proccluster.Metrics
	scraped time.Time
	cpu     time.Duration
	cpuAt   time.Time
	rss     uint64
	link    uint64
	linkAt  time.Time
}

// readAll reads every node. The scrape costs the node CPU and sends bytes
// over its link, so it is kept out of the window: at the window's start
// it comes first, at its end last.
func readAll(ctx context.Context, c *proccluster.Cluster, start bool) ([]reading, error) {
	out := make([]reading, len(c.Nodes()))
	for i, nd := range c.Nodes() {
		r := &out[i]
		scrape := func() error {
			m, err := c.Scrape(ctx, i)
			r.m, r.scraped = m, time.Now()
			return err
		}
		if start {
			if err := scrape(); err != nil {
				return nil, err
			}
		}
		var err error
		if r.cpu, err = nd.CPUTime(); err != nil {
			return nil, err
		}
		r.cpuAt = time.Now()
		if c.Netns() {
			if r.link, _, err = c.LinkBytes(i); err != nil {
				return nil, err
			}
			r.linkAt = time.Now()
		}
		if !start {
			if r.rss, err = nd.RSS(); err != nil {
				return nil, err
			}
			if err := scrape(); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

func (r *idleReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	where := "127.0.0.1"
	if r.Netns {
		where = "network namespaces"
	}
	fmt.Fprintf(w, "idle: %d nodes, %d shards, %d topics, preset %s, %s; ready in %.1fs, topics owned and leased in %.1fs; window %.0fs after %.0fs settling\n",
		r.Nodes, r.Shards, r.Topics, r.Preset, where, r.ReadyS, r.AssignS, r.WindowS, r.SettleS)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	link := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.0f", *v)
	}
	fmt.Fprintln(tw, "NODE\tTOPICS\tCPU %\tRSS MiB\tLEASE MSG/S TO EACH PEER\tLEASE B/S TO EACH PEER\tFRAMES/S\tSWIM B/S\tLINK B/S")
	for _, n := range r.PerNode {
		fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.1f\t%.2f\t%.0f\t%.1f\t%.0f\t%s\n", n.Node, n.TopicsOwned, n.CPUPct,
			float64(n.RSSBytes)/(1<<20), n.LeaseMsgsPerSPerPeer, n.LeaseBytesPerSPerPeer, n.FramesPerS, n.SwimBytesPerS, link(n.LinkBytesPerS))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "all nodes: CPU %.2f%% of one core (max %.2f%%), RSS max %.1f MiB; per node pair, both directions: %.2f lease msg/s, %.0f lease B/s; sent in all: %.0f lease B/s, %.1f frames/s, %.0f SWIM B/s, link %s B/s\n",
		r.CPUPctSum, r.CPUPctMax, float64(r.RSSMax)/(1<<20), r.LeaseMsgsPerSPerPair, r.LeaseBytesPerSPerPair,
		r.LeaseBytesPerSSum, r.FramesPerSSum, r.SwimBytesPerSSum, link(r.LinkBytesPerSSum))
	_, err := fmt.Fprintf(w, "note: %s\n", r.Note)
	return err
}
