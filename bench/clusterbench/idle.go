//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
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
	Mode    string  `json:"mode"`
	Nodes   int     `json:"nodes"`
	Shards  int     `json:"shards"`
	Topics  int     `json:"topics"`
	Preset  string  `json:"preset"`
	Netns   bool    `json:"netns"`
	ReadyS  float64 `json:"ready_s"`  // start until every node was ready with all members alive
	AssignS float64 `json:"assign_s"` // the assigns until every node owned its topics
	// SettleS is how long it took until nothing had moved for QuietS
	// (-settle): shard leaders are balanced over the nodes after the
	// start, which with thousands of shards takes minutes.
	SettleS float64 `json:"settle_s"`
	// BalancedS is how long after the start every shard had a leader and
	// the leaderships were spread over the nodes within balancedWithin
	// of the mean (0: not before the window began).
	BalancedS float64 `json:"balanced_s"`
	// LeadersMaxMean is the busiest node's leaderships over the mean,
	// when the window began.
	LeadersMaxMean float64    `json:"leaders_max_mean"`
	QuietS         float64    `json:"quiet_s"`
	WindowS        float64    `json:"window_s"`
	PerNode        []idleNode `json:"per_node"`

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
	// TopicsOffTheirNode moved off the node they were assigned to before
	// the window (see assignIdle); the per-node counts are as measured.
	TopicsOffTheirNode int `json:"topics_off_their_node"`
	// What happened during the window that a quiet cluster does not do:
	// members declared dead, topics moved (the nodes' counters).
	DeadDeclaredInWindow     float64 `json:"dead_declared_in_window"`
	TopicsReassignedInWindow float64 `json:"topics_reassigned_in_window"`
	// LeaderTableChangesInWindow: changes of the nodes' shard-leader
	// tables (summed), leaderships won by elections included.
	LeaderTableChangesInWindow float64 `json:"leader_table_changes_in_window"`
	Note                       string  `json:"note"`
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
	mLeaseMsgs    = "shoal_lease_messages_sent_total"
	mLeaseBytes   = "shoal_lease_sent_bytes_total"
	mLeaseGrants  = "shoal_lease_grants_total"
	mFrames       = "shoal_frames_sent_total"
	mSwimBytes    = "shoal_swim_sent_bytes_total"
	mSwimPackets  = "shoal_swim_packets_sent_total"
	mTopicsOwned  = "shoal_topics_owned"
	mDeadDeclared = "shoal_swim_dead_declared_total"
	mReassigned   = "shoal_topics_reassigned_total"
	mTransfers    = "shoal_raft_leader_transfers_total"
	mConfChanges  = "shoal_raft_conf_changes_total"
	mLeaderTable  = "shoal_shard_leader_table_version"
	mShardsLed    = "shoal_shards_led"
)

// balancedWithin: leaderships are balanced when the busiest node leads at
// most this much more than the mean.
const balancedWithin = 0.1

// assignWorkers is how many assigns are in flight at once.
const assignWorkers = 32

func runIdle(ctx context.Context, o *options, bin string, logf func(string, ...any)) (*idleReport, error) {
	r := &idleReport{Mode: "idle", Nodes: o.nodes, Shards: o.shards, Topics: o.topics, Preset: o.preset, Netns: o.netns,
		QuietS: o.settle.Seconds(), WindowS: o.window.Seconds(), Note: noteLoopback}
	if o.netns {
		r.Note = noteNetns
	}
	start := time.Now()
	c, ready, err := startCluster(ctx, o, bin, logf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r.ReadyS = ready
	balanced := make(chan float64, 1)
	bctx, stopBalance := context.WithCancel(ctx)
	defer stopBalance()
	began := start
	go func() {
		for bctx.Err() == nil {
			if mm, ok := leadersMaxMean(bctx, c, o.shards); ok && mm <= 1+balancedWithin {
				balanced <- time.Since(began).Seconds()
				return
			}
			_ = sleep(bctx, time.Second)
		}
	}()

	owned := make([]int, o.nodes)
	for i := range o.topics {
		owned[i%o.nodes]++
	}
	if o.topics > 0 {
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, o.timeout)
		off, err := assignIdle(wctx, c, o, owned, logf)
		cancel()
		if err != nil {
			return nil, withLogs(c, err)
		}
		r.TopicsOffTheirNode = off
		r.AssignS = time.Since(start).Seconds()
		logf("every node owns its topics and leases are granted, %.1fs", r.AssignS)
	}
	logf("waiting until no leader moved, no raft configuration changed and no topic moved for %v", o.settle)
	start = time.Now()
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	err = waitQuiet(wctx, c, o.settle)
	cancel()
	if err != nil {
		return nil, withLogs(c, err)
	}
	r.SettleS = time.Since(start).Seconds()
	logf("settled in %.1fs", r.SettleS)

	select {
	case r.BalancedS = <-balanced:
		logf("leaderships balanced %.1fs after the start", r.BalancedS)
	default:
		stopBalance()
	}
	r.LeadersMaxMean, _ = leadersMaxMean(ctx, c, o.shards)
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
		r.DeadDeclaredInWindow += a.m.Value(mDeadDeclared) - b.m.Value(mDeadDeclared)
		r.TopicsReassignedInWindow += a.m.Value(mReassigned) - b.m.Value(mReassigned)
		r.LeaderTableChangesInWindow += a.m.Value(mLeaderTable) - b.m.Value(mLeaderTable)
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

// startCluster starts the cluster the options ask for, and says how long
// it took to be ready.
func startCluster(ctx context.Context, o *options, bin string, logf func(string, ...any)) (c *proccluster.Cluster, readyS float64, err error) {
	args := []string{"--log-level", o.logLevel}
	if o.profile != "" {
		args = append(args, "--pprof")
	}
	logf("starting %d nodes, %d shards, preset %s", o.nodes, o.shards, o.preset)
	start := time.Now()
	c, err = proccluster.Start(ctx, proccluster.Config{
		Binary: bin, Nodes: o.nodes, Shards: o.shards, Preset: o.preset, Netns: o.netns, Dir: o.dir,
		Args: args, ReadyTimeout: o.timeout,
	})
	if err != nil {
		return nil, 0, err
	}
	readyS = time.Since(start).Seconds()
	logf("ready in %.1fs", readyS)
	return c, readyS, nil
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

// leadersMaxMean returns the busiest node's shard leaderships over the
// mean; ok is false until the nodes lead every shard between them.
func leadersMaxMean(ctx context.Context, c *proccluster.Cluster, shards int) (float64, bool) {
	var sum, most float64
	for i := range c.Nodes() {
		m, err := c.Scrape(ctx, i)
		if err != nil {
			return 0, false
		}
		led := m.Value(mShardsLed)
		sum += led
		most = max(most, led)
	}
	if sum < float64(shards) || sum == 0 {
		return 0, false
	}
	return most / (sum / float64(len(c.Nodes()))), true
}

// waitQuiet waits until, for quiet, no node transferred a shard's
// leadership, changed a raft configuration or moved a topic, and no node's
// shard-leader table changed (a leadership won by an election, which no
// transfer counter counts, changes it).
func waitQuiet(ctx context.Context, c *proccluster.Cluster, quiet time.Duration) error {
	moves := func() (float64, error) {
		var sum float64
		for i := range c.Nodes() {
			m, err := c.Scrape(ctx, i)
			if err != nil {
				return 0, err
			}
			sum += m.Value(mTransfers) + m.Value(mConfChanges) + m.Value(mReassigned) + m.Value(mLeaderTable)
		}
		return sum, nil
	}
	last, since := -1.0, time.Now()
	why := "no scrape yet"
	for {
		if err := c.Exited(); err != nil {
			return err
		}
		v, err := moves()
		switch {
		case err != nil:
			why = err.Error()
		case v != last:
			last, since = v, time.Now()
			why = fmt.Sprintf("%.0f leader transfers, configuration changes, topic moves and leader table changes so far", v)
		case time.Since(since) >= quiet:
			return nil
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("settle: %w: %s", err, why)
		}
	}
}

// assignIdle assigns o.topics topics, topic k to node k mod nodes (want[i]
// topics to node i), waits until the nodes own them, and then until the
// lease grants the nodes count rise. It returns how many topics ended up
// on another node than the one they were assigned to.
//
// The cluster may move a topic on its own (a leader moves the topics of an
// owner it has not heard from), so when the nodes' counts settle on
// another spread, the misplaced topics are assigned back once, and the
// spread that then settles is measured as it is.
func assignIdle(ctx context.Context, c *proccluster.Cluster, o *options, want []int, logf func(string, ...any)) (int, error) {
	cl, err := client.New(client.Config{Servers: c.ClientAddrs()})
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	owner := func(k int) string { return c.Node(k % o.nodes).ID }
	all := make([]int, o.topics)
	for k := range all {
		all[k] = k
	}
	logf("assigning %d topics", o.topics)
	if err := forEachTopic(ctx, all, logf, "assigned", func(k int) error {
		return assignTo(ctx, cl, idleTopic(k), owner(k))
	}); err != nil {
		return 0, err
	}
	logf("waiting until every node owns its topics")
	owned, err := waitPlaced(ctx, c, want)
	if err != nil {
		return 0, err
	}
	if off := offTheirNode(owned, want); off > 0 {
		logf("%d topics are not on the node they were assigned to (owned %v, want %v): assigning them back", off, owned, want)
		var mu sync.Mutex
		var misplaced []int
		if err := forEachTopic(ctx, all, logf, "looked up", func(k int) error {
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			a, err := cl.Lookup(lctx, idleTopic(k), false)
			cancel()
			if err == nil && a.Owner != owner(k) {
				mu.Lock()
				misplaced = append(misplaced, k)
				mu.Unlock()
			}
			return nil // a topic not looked up stays where it is
		}); err != nil {
			return 0, err
		}
		if err := forEachTopic(ctx, misplaced, logf, "assigned back", func(k int) error {
			return assignTo(ctx, cl, idleTopic(k), owner(k))
		}); err != nil {
			return 0, err
		}
		if owned, err = waitPlaced(ctx, c, want); err != nil {
			return 0, err
		}
	}
	cl.Close() // no client traffic in the window

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
	g0 := -1.0
	for {
		if err := c.Exited(); err != nil {
			return 0, err
		}
		g, err := grants()
		switch {
		case err != nil: // a slow scrape: again
		case g0 < 0:
			g0 = g
		case g > g0:
			return offTheirNode(owned, want), nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return 0, fmt.Errorf("lease grants did not rise: %w", err)
		}
	}
}

func idleTopic(k int) string { return "idle-" + strconv.Itoa(k) }

// offTheirNode is how many topics the nodes own beyond what they were
// given: the topics that moved.
func offTheirNode(owned, want []int) int {
	n := 0
	for i := range want {
		n += max(0, owned[i]-want[i])
	}
	return n
}

// settledPolls: how many polls in a row (placePoll apart) must show the
// same counts, all topics owned, before a spread other than the one
// assigned is taken as settled.
const (
	settledPolls = 6
	placePoll    = 500 * time.Millisecond
)

// waitPlaced waits until every node owns the topics it was given, or
// until the nodes together own them all and their counts have not changed
// for settledPolls polls; it returns the counts.
func waitPlaced(ctx context.Context, c *proccluster.Cluster, want []int) ([]int, error) {
	total := 0
	for _, w := range want {
		total += w
	}
	var last []int
	same := 0
	why := "no scrape yet"
	for {
		if err := c.Exited(); err != nil {
			return nil, err
		}
		owned := make([]int, len(want))
		sum := 0
		var err error
		for i := range want {
			// A scrape that fails (a node busy with its shards answers
			// slowly) is tried again at the next poll.
			var v float64
			if v, err = c.Counter(ctx, i, mTopicsOwned); err != nil {
				why = err.Error()
				break
			}
			owned[i] = int(v)
			sum += owned[i]
		}
		if err == nil {
			if slices.Equal(owned, want) {
				return owned, nil
			}
			if sum == total && slices.Equal(owned, last) {
				same++
			} else {
				same = 0
			}
			if same >= settledPolls {
				return owned, nil
			}
			last = owned
			why = fmt.Sprintf("the nodes own %v topics, want %v", owned, want)
		}
		if err := sleep(ctx, placePoll); err != nil {
			return nil, fmt.Errorf("topics owned: %w: %s", err, why)
		}
	}
}

// forEachTopic runs fn on every topic index of ks from assignWorkers
// goroutines, logging progress every 10 s; the first error stops it.
func forEachTopic(ctx context.Context, ks []int, logf func(string, ...any), what string, fn func(k int) error) error {
	next, done := atomic.Int64{}, atomic.Int64{}
	progress, stopProgress := context.WithCancel(ctx)
	defer stopProgress()
	go func() {
		for sleep(progress, 10*time.Second) == nil {
			logf("  %d of %d %s", done.Load(), len(ks), what)
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range min(assignWorkers, len(ks)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ks) || ctx.Err() != nil {
					return
				}
				if err := fn(ks[i]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
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
	balanced := "not before the window"
	if r.BalancedS > 0 {
		balanced = fmt.Sprintf("%.1fs after the start", r.BalancedS)
	}
	fmt.Fprintf(w, "idle: %d nodes, %d shards, %d topics, preset %s, %s; ready in %.1fs, topics owned and leased in %.1fs, settled (%.0fs without a move) in %.1fs; window %.0fs\n",
		r.Nodes, r.Shards, r.Topics, r.Preset, where, r.ReadyS, r.AssignS, r.QuietS, r.SettleS, r.WindowS)
	fmt.Fprintf(w, "leaderships balanced (max/mean at most %.1f): %s; max/mean %.2f when the window began\n", 1+balancedWithin, balanced, r.LeadersMaxMean)
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
	if r.TopicsOffTheirNode > 0 || r.DeadDeclaredInWindow > 0 || r.TopicsReassignedInWindow > 0 || r.LeaderTableChangesInWindow > 0 {
		fmt.Fprintf(w, "not quiet: %d topics off the node they were assigned to; in the window %.0f members declared dead, %.0f topics moved, %.0f leader table changes\n",
			r.TopicsOffTheirNode, r.DeadDeclaredInWindow, r.TopicsReassignedInWindow, r.LeaderTableChangesInWindow)
	}
	_, err := fmt.Fprintf(w, "note: %s\n", r.Note)
	return err
}
