//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/shoalmq/shoal/bench/proccluster"
	"github.com/shoalmq/shoal/client"
)

// volumeReport is the result of -mode volume: a cluster filled with
// -topics topics, its memory while they are assigned and at rest, lookups
// with few topics and with all of them, a listing of every topic, and a
// crash of every node at once followed by a restart on the same data.
type volumeReport struct {
	Mode     string  `json:"mode"`
	Nodes    int     `json:"nodes"`
	Shards   int     `json:"shards"`
	Replicas int     `json:"replicas"` // per shard: min(3, nodes), the nodes' default
	Preset   string  `json:"preset"`
	Topics   int     `json:"topics"`
	Clients  int     `json:"clients"`
	ReadyS   float64 `json:"ready_s"`
	// FillS is the time spent assigning the topics, the pause for the
	// baseline lookups left out; FillPerS the topics assigned a second.
	FillS    float64 `json:"fill_s"`
	FillPerS float64 `json:"fill_per_s"`
	// AssignRetries counts the assigns that failed and were sent again.
	AssignRetries int64   `json:"assign_retries"`
	SettleS       float64 `json:"settle_s"`
	// TopicReplicasPerNode is topics × replicas / nodes: the assignments a
	// node holds a copy of, on average.
	TopicReplicasPerNode float64 `json:"topic_replicas_per_node"`
	// BytesPerTopicReplicaMax is the largest of the nodes' RSS at rest
	// divided by TopicReplicasPerNode.
	BytesPerTopicReplicaMax float64      `json:"bytes_per_topic_replica_max"`
	PerNode                 []volumeNode `json:"per_node"`
	// LookupBaseline is over the first topics only, when no others were
	// assigned yet; LookupFull over all of them, after the settle.
	LookupBaseline volumeLookups `json:"lookup_baseline"`
	LookupFull     volumeLookups `json:"lookup_full"`
	// The listing (ListAll) before the kill: ListMismatch is set when it
	// did not hand over exactly Topics topics.
	Listed       int     `json:"listed"`
	ListMismatch bool    `json:"list_mismatch"`
	ListS        float64 `json:"list_s"`
	ListPerS     float64 `json:"list_per_s"`
	// RestartServingS is from the restart of every node until the cluster
	// served: the latest of RestartReadyS (every node's status says
	// ready), RestartSampleS (each sampled topic looked up at the owner
	// and epoch the listing before the kill showed, or at a higher epoch)
	// and RestartAssignS (a new topic assigned).
	RestartServingS float64 `json:"restart_serving_s"`
	RestartReadyS   float64 `json:"restart_ready_s"`
	RestartSampleS  float64 `json:"restart_sample_s"`
	RestartAssignS  float64 `json:"restart_assign_s"`
	RestartSampled  int     `json:"restart_sampled"`
	// RestartSampleMoved: sampled topics answered at another owner or a
	// higher epoch than before the kill.
	RestartSampleMoved int `json:"restart_sample_moved"`
	// The listing after the restart, compared topic by topic with the one
	// before the kill: Lost were listed before and not after; Changed
	// have another owner or epoch, ChangedOwner another owner.
	Relisted       int     `json:"relisted"`
	RelistMismatch bool    `json:"relist_mismatch"` // relisted != topics
	RelistS        float64 `json:"relist_s"`
	Lost           int     `json:"lost"`
	Changed        int     `json:"changed"`
	ChangedOwner   int     `json:"changed_owner"`
	// What the nodes counted since the restart, summed: members declared
	// dead and topics the cluster moved (shoal_topics_reassigned_total),
	// which account for changed owners.
	DeadDeclaredAfterRestart     float64 `json:"dead_declared_after_restart"`
	TopicsReassignedAfterRestart float64 `json:"topics_reassigned_after_restart"`
	// TopicsResentAfterRestart: topics whose Open or Close a new shard
	// leader owed again (its predecessors may have died owing them);
	// OpensSent and ClosesSent, the OpenTopic and CloseTopic messages sent.
	TopicsResentAfterRestart float64 `json:"topics_resent_after_restart"`
	OpensSentAfterRestart    float64 `json:"opens_sent_after_restart"`
	ClosesSentAfterRestart   float64 `json:"closes_sent_after_restart"`
	RSSAfterRestartMax       uint64  `json:"rss_bytes_after_restart_max"`
}

// volumeNode is one node's memory over the run.
type volumeNode struct {
	Node string `json:"node"`
	// TopicsOwned is the node's shoal_topics_owned at rest.
	TopicsOwned int `json:"topics_owned"`
	// PeakRSSAssigning is the highest RSS sampled while topics were being
	// assigned.
	PeakRSSAssigning uint64 `json:"peak_rss_bytes_assigning"`
	RSSAtRest        uint64 `json:"rss_bytes_at_rest"`
	// HeapAllocAtRest is go_memstats_heap_alloc_bytes, absent if the node
	// does not export it.
	HeapAllocAtRest      *uint64 `json:"heap_alloc_bytes_at_rest,omitempty"`
	BytesPerTopicReplica float64 `json:"bytes_per_topic_replica"`
	// After the restart, once the second listing is done.
	RSSAfterRestart       uint64  `json:"rss_bytes_after_restart"`
	HeapAllocAfterRestart *uint64 `json:"heap_alloc_bytes_after_restart,omitempty"`
}

// volumeLookups is one lookup measurement: plain lookups (any node
// answers) of topics drawn at random among the first Topics.
type volumeLookups struct {
	Topics  int     `json:"topics"`
	WindowS float64 `json:"window_s"`
	Lookups int     `json:"lookups"` // answered
	PerS    float64 `json:"per_s"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	P999Ms  float64 `json:"p99_9_ms"`
	Errors  int     `json:"errors"`
}

const (
	volumePrefix = "vol-"
	// volumeBaselineTopics are assigned before the fill pauses for the
	// baseline lookups.
	volumeBaselineTopics = 10_000
	// volumeRestartSample topics are looked up after the restart.
	volumeRestartSample = 1000
	// rssEvery is how often RSS is sampled during the fill.
	rssEvery = 2 * time.Second
	// mHeapAlloc is the Go runtime's heap in use, live or not yet
	// collected.
	mHeapAlloc  = "go_memstats_heap_alloc_bytes"
	mResent     = "shoal_topics_resent_total"
	mOpensSent  = "shoal_topic_opens_sent_total"
	mClosesSent = "shoal_topic_closes_sent_total"
)

func volumeTopic(k int) string { return volumePrefix + strconv.Itoa(k) }

func runVolume(ctx context.Context, o *options, bin string, logf func(string, ...any)) (*volumeReport, error) {
	r := &volumeReport{Mode: "volume", Nodes: o.nodes, Shards: o.shards, Replicas: min(3, o.nodes), Preset: o.preset,
		Topics: o.topics, Clients: o.clients, SettleS: o.settle.Seconds()}
	r.TopicReplicasPerNode = float64(o.topics) * float64(r.Replicas) / float64(o.nodes)
	c, ready, err := startCluster(ctx, o, bin, logf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r.ReadyS = ready
	cl, err := client.New(client.Config{Servers: c.ClientAddrs()})
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	lookers, err := lookupClients(c)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, l := range lookers {
			l.Close()
		}
	}()
	r.PerNode = make([]volumeNode, o.nodes)
	for i, nd := range c.Nodes() {
		r.PerNode[i].Node = nd.ID
	}

	// The fill, paused after the first topics for the baseline lookups.
	f := &filler{c: c, cl: cl, o: o, logf: logf, peak: make([]uint64, o.nodes)}
	first := min(volumeBaselineTopics, o.topics)
	logf("assigning the first %d topics", first)
	if err := f.fill(ctx, 0, first); err != nil {
		return nil, withLogs(c, err)
	}
	logf("measuring lookups among %d topics for %v", first, o.lookupWindow)
	if r.LookupBaseline, err = measureLookups(ctx, lookers, o.clients, first, o.lookupWindow); err != nil {
		return nil, err
	}
	if first < o.topics {
		logf("assigning the other %d topics", o.topics-first)
		if err := f.fill(ctx, first, o.topics); err != nil {
			return nil, withLogs(c, err)
		}
	}
	r.FillS = f.took.Seconds()
	r.FillPerS = float64(o.topics) / r.FillS
	r.AssignRetries = f.retries.Load()
	for i := range r.PerNode {
		r.PerNode[i].PeakRSSAssigning = f.peak[i]
	}
	logf("%d topics assigned in %.1fs (%.0f/s), %d assigns retried", o.topics, r.FillS, r.FillPerS, r.AssignRetries)

	// At rest.
	logf("waiting %v", o.settle)
	if err := sleep(ctx, o.settle); err != nil {
		return nil, err
	}
	for i := range r.PerNode {
		rss, heap, m, err := nodeMemory(ctx, c, i)
		if err != nil {
			return nil, withLogs(c, err)
		}
		n := &r.PerNode[i]
		n.RSSAtRest, n.HeapAllocAtRest, n.TopicsOwned = rss, heap, int(m.Value(mTopicsOwned))
		n.BytesPerTopicReplica = float64(rss) / r.TopicReplicasPerNode
		r.BytesPerTopicReplicaMax = max(r.BytesPerTopicReplicaMax, n.BytesPerTopicReplica)
	}
	logf("measuring lookups among all %d topics for %v", o.topics, o.lookupWindow)
	if r.LookupFull, err = measureLookups(ctx, lookers, o.clients, o.topics, o.lookupWindow); err != nil {
		return nil, err
	}

	// The listing, kept to compare with the one after the restart.
	logf("listing every topic")
	before, err := listVolume(ctx, c, cl, o, logf)
	if err != nil {
		return nil, withLogs(c, err)
	}
	r.Listed, r.ListS = before.listed, before.took.Seconds()
	r.ListPerS = float64(before.listed) / r.ListS
	r.ListMismatch = before.listed != o.topics
	if r.ListMismatch {
		logf("MISMATCH: the listing handed over %d topics, %d were assigned", before.listed, o.topics)
	}
	logf("listed %d topics in %.1fs", before.listed, r.ListS)

	// The crash: SIGKILL to every node at once, then all started again
	// on their data and ports.
	cl.Close()
	logf("killing every node")
	kills := make([]error, o.nodes)
	var wg sync.WaitGroup
	for i := range o.nodes {
		wg.Go(func() { kills[i] = c.Kill(i) })
	}
	wg.Wait()
	if err := errors.Join(kills...); err != nil {
		return nil, err
	}
	t0 := time.Now()
	for i := range o.nodes {
		if err := c.Restart(i); err != nil {
			return nil, err
		}
	}
	// Short attempts and retries, so that the times are those of the
	// cluster, not of the client's backoff.
	rc, err := client.New(client.Config{Servers: c.ClientAddrs(), RequestTimeout: time.Second, MaxRetries: 2,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if err := awaitServing(ctx, c, rc, o, before, t0, r); err != nil {
		return nil, withLogs(c, fmt.Errorf("after the restart: %w", err))
	}
	logf("serving %.1fs after the restart (ready %.1fs, sample %.1fs, new topic %.1fs); %d of %d sampled topics moved",
		r.RestartServingS, r.RestartReadyS, r.RestartSampleS, r.RestartAssignS, r.RestartSampleMoved, r.RestartSampled)

	logf("listing every topic again")
	lc, err := client.New(client.Config{Servers: c.ClientAddrs()})
	if err != nil {
		return nil, err
	}
	defer lc.Close()
	after, err := listVolume(ctx, c, lc, o, logf)
	if err != nil {
		return nil, withLogs(c, err)
	}
	r.Relisted, r.RelistS = after.listed, after.took.Seconds()
	r.RelistMismatch = after.listed != o.topics
	if r.RelistMismatch {
		logf("MISMATCH: the listing after the restart handed over %d topics, %d were assigned", after.listed, o.topics)
	}
	r.Lost, r.Changed, r.ChangedOwner = compareListings(before, after)
	logf("listed %d topics in %.1fs: %d lost, %d changed (%d of them another owner)", r.Relisted, r.RelistS, r.Lost, r.Changed, r.ChangedOwner)
	for i := range r.PerNode {
		rss, heap, m, err := nodeMemory(ctx, c, i)
		if err != nil {
			return nil, withLogs(c, err)
		}
		r.PerNode[i].RSSAfterRestart, r.PerNode[i].HeapAllocAfterRestart = rss, heap
		r.RSSAfterRestartMax = max(r.RSSAfterRestartMax, rss)
		r.DeadDeclaredAfterRestart += m.Value(mDeadDeclared)
		r.TopicsReassignedAfterRestart += m.Value(mReassigned)
		r.TopicsResentAfterRestart += m.Value(mResent)
		r.OpensSentAfterRestart += m.Value(mOpensSent)
		r.ClosesSentAfterRestart += m.Value(mClosesSent)
	}
	return r, nil
}

// filler assigns the volume topics, topic k to node k mod nodes, and
// samples the nodes' RSS while it does.
type filler struct {
	c       *proccluster.Cluster
	cl      *client.Client
	o       *options
	logf    func(string, ...any)
	peak    []uint64      // per node, the highest RSS sampled
	took    time.Duration // the fills' time, summed
	retries atomic.Int64
}

// fill assigns the topics [from, to), o.clients at a time, each retried
// until it is assigned or o.timeout passed since its first attempt. It
// samples each node's RSS every rssEvery and once more at the end; a node
// that exited ends the fill.
func (f *filler) fill(ctx context.Context, from, to int) error {
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	var next, done atomic.Int64
	next.Store(int64(from))
	start := time.Now()
	sctx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		logged := time.Now()
		for {
			if err := f.sampleRSS(); err != nil {
				fail(err)
				return
			}
			if time.Since(logged) >= 10*time.Second {
				logged = time.Now()
				n := done.Load()
				f.logf("  %d of %d assigned, %.0f/s", int64(from)+n, f.o.topics, float64(n)/time.Since(start).Seconds())
			}
			if sleep(sctx, rssEvery) != nil {
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for range min(f.o.clients, to-from) {
		wg.Go(func() {
			for ctx.Err() == nil {
				k := int(next.Add(1) - 1)
				if k >= to {
					return
				}
				if err := f.assign(ctx, volumeTopic(k), f.c.Node(k%f.o.nodes).ID); err != nil {
					fail(err)
					return
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	f.took += time.Since(start)
	stopSampling()
	<-sampled
	if err := context.Cause(ctx); err != nil {
		return err
	}
	return f.sampleRSS()
}

// sampleRSS raises each node's peak to its RSS now; it fails if a node's
// process exited (run out of memory, say).
func (f *filler) sampleRSS() error {
	for i, nd := range f.c.Nodes() {
		rss, err := nd.RSS()
		if err != nil {
			if err := f.c.Exited(); err != nil {
				return err
			}
			continue
		}
		f.peak[i] = max(f.peak[i], rss)
	}
	return nil
}

// assign assigns topic to owner, sending it again after a failure (right
// after the start a shard may still be electing its leader) until
// o.timeout passed since the first attempt.
func (f *filler) assign(ctx context.Context, topic, owner string) error {
	start := time.Now()
	for {
		_, err := f.cl.Assign(ctx, topic, client.AssignOptions{Owner: owner})
		if err == nil || ctx.Err() != nil {
			return err
		}
		if time.Since(start) > f.o.timeout {
			return fmt.Errorf("assign %s to %s: not done within %v: %w", topic, owner, f.o.timeout, err)
		}
		f.retries.Add(1)
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// lookupClients makes one client per node, each with every node as a
// seed but its own first: a plain lookup goes to the seed that answered
// last, so lookups spread over the clients are spread over the nodes, as
// those of many clients would be.
func lookupClients(c *proccluster.Cluster) ([]*client.Client, error) {
	addrs := c.ClientAddrs()
	var out []*client.Client
	for i := range addrs {
		cl, err := client.New(client.Config{Servers: append(slices.Clone(addrs[i:]), addrs[:i]...)})
		if err != nil {
			for _, x := range out {
				x.Close()
			}
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// measureLookups runs plain lookups of topics drawn at random among the
// first n for window, workers in flight spread over clients, and reports
// how many were answered and how fast. A lookup still in flight when the
// window ends is not counted.
func measureLookups(ctx context.Context, clients []*client.Client, workers, n int, window time.Duration) (volumeLookups, error) {
	wctx, cancel := context.WithTimeout(ctx, window)
	defer cancel()
	lat := make([][]time.Duration, workers)
	errs := make([]int, workers)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range workers {
		cl := clients[w%len(clients)]
		wg.Go(func() {
			for wctx.Err() == nil {
				t := time.Now()
				_, err := cl.Lookup(wctx, volumeTopic(rand.IntN(n)), false)
				switch {
				case err == nil:
					lat[w] = append(lat[w], time.Since(t))
				case wctx.Err() == nil:
					errs[w]++
					_ = sleep(wctx, 10*time.Millisecond) // no busy loop against a failing node
				}
			}
		})
	}
	wg.Wait()
	took := time.Since(start)
	if err := ctx.Err(); err != nil {
		return volumeLookups{}, err
	}
	all := slices.Concat(lat...)
	return volumeLookups{
		Topics:  n,
		WindowS: took.Seconds(),
		Lookups: len(all),
		PerS:    float64(len(all)) / took.Seconds(),
		P50Ms:   ms(percentile(all, 50)),
		P99Ms:   ms(percentile(all, 99)),
		P999Ms:  ms(percentile(all, 99.9)),
		Errors:  sumInts(errs),
	}, nil
}

func sumInts(xs []int) int {
	s := 0
	for _, x := range xs {
		s += x
	}
	return s
}

// nodeMemory reads node i's RSS, then scrapes it: the heap in use (nil if
// the node does not export it) and the whole scrape.
func nodeMemory(ctx context.Context, c *proccluster.Cluster, i int) (rss uint64, heap *uint64, m proccluster.Metrics, err error) {
	if rss, err = c.Node(i).RSS(); err != nil {
		return 0, nil, nil, err
	}
	if m, err = c.Scrape(ctx, i); err != nil {
		return 0, nil, nil, err
	}
	if v, ok := m[mHeapAlloc]; ok {
		h := uint64(v)
		heap = &h
	}
	return rss, heap, m, nil
}

// volumeListing is what a listing showed of the volume topics, per topic
// index: its owner (1 + the node's index; 0 not listed, unknownOwner a
// node that is not one of the cluster's) and epoch, 10 bytes a topic.
type volumeListing struct {
	owner  []uint16
	epoch  []uint64
	nodes  []string // the node ids, by index
	listed int      // every assignment the listing handed over
	took   time.Duration
}

const unknownOwner = math.MaxUint16

// ownerCode is owner's code in a listing.
func (l *volumeListing) ownerCode(owner string) uint16 {
	if i := slices.Index(l.nodes, owner); i >= 0 {
		return uint16(i + 1)
	}
	return unknownOwner
}

// listVolume lists every volume topic with ListAll; a listing that fails
// is started again, until o.timeout passed.
func listVolume(ctx context.Context, c *proccluster.Cluster, cl *client.Client, o *options, logf func(string, ...any)) (*volumeListing, error) {
	var nodes []string
	for _, nd := range c.Nodes() {
		nodes = append(nodes, nd.ID)
	}
	start := time.Now()
	for {
		l := &volumeListing{owner: make([]uint16, o.topics), epoch: make([]uint64, o.topics), nodes: nodes}
		t := time.Now()
		// ListAll calls this one page at a time.
		_, err := cl.ListAll(ctx, client.ListAllOptions{Prefix: volumePrefix}, func(as []client.Assignment) error {
			for _, a := range as {
				l.listed++
				if k, ok := topicIndex(a.Topic, volumePrefix, o.topics); ok {
					l.owner[k], l.epoch[k] = l.ownerCode(a.Owner), a.Epoch
				}
			}
			return nil
		})
		if err == nil {
			l.took = time.Since(t)
			return l, nil
		}
		if ctx.Err() != nil || time.Since(start) > o.timeout {
			return nil, fmt.Errorf("listing: %w", err)
		}
		logf("listing failed (%v): listing again", err)
		if err := sleep(ctx, time.Second); err != nil {
			return nil, err
		}
	}
}

// compareListings compares, topic by topic, the listing after the restart
// with the one before the kill: lost topics were listed before and not
// after; changed ones have another owner or epoch (changedOwner another
// owner). A topic not listed before is not compared.
func compareListings(before, after *volumeListing) (lost, changed, changedOwner int) {
	for k, o := range before.owner {
		switch {
		case o == 0:
		case after.owner[k] == 0:
			lost++
		case after.owner[k] != o:
			changed++
			changedOwner++
		case after.epoch[k] != before.epoch[k]:
			changed++
		}
	}
	return lost, changed, changedOwner
}

// sampleListed draws up to n distinct topic indexes at random among those
// the listing showed.
func sampleListed(l *volumeListing, n int) []int {
	var listed int
	for _, o := range l.owner {
		if o != 0 {
			listed++
		}
	}
	n = min(n, listed)
	seen := map[int]bool{}
	out := make([]int, 0, n)
	for len(out) < n {
		k := rand.IntN(len(l.owner))
		if l.owner[k] != 0 && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// awaitServing waits, from the restart at t0, until the cluster serves:
// every node's status says ready; each of a sample of topics is looked up
// (plainly, as a client would) at an epoch at least the one before the
// kill; a new topic is assigned. The three run at once, each until it
// holds, within o.timeout; r gets the time each took and the latest.
func awaitServing(ctx context.Context, c *proccluster.Cluster, cl *client.Client, o *options, before *volumeListing, t0 time.Time, r *volumeReport) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	sample := sampleListed(before, volumeRestartSample)
	r.RestartSampled = len(sample)
	var moved atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := waitStatusReady(ctx, c, cl); err != nil {
			fail(err) // a node exited: the other checks cannot hold
			return
		}
		r.RestartReadyS = time.Since(t0).Seconds()
	})
	wg.Go(func() {
		err := parallel(ctx, o.clients, len(sample), func(j int) bool {
			k := sample[j]
			a, err := cl.Lookup(ctx, volumeTopic(k), false)
			if err != nil || a.Epoch < before.epoch[k] {
				return false // not up yet, or not caught up
			}
			if a.Epoch != before.epoch[k] || before.ownerCode(a.Owner) != before.owner[k] {
				moved.Add(1)
			}
			return true
		})
		if err == nil {
			r.RestartSampleS = time.Since(t0).Seconds()
		}
	})
	wg.Go(func() {
		topic := "restart-probe-" + strconv.FormatInt(time.Now().UnixNano(), 36)
		for {
			if _, err := cl.Assign(ctx, topic, client.AssignOptions{}); err == nil {
				r.RestartAssignS = time.Since(t0).Seconds()
				return
			}
			if sleep(ctx, 20*time.Millisecond) != nil {
				return
			}
		}
	})
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		if !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		var pending []string
		if r.RestartReadyS == 0 {
			pending = append(pending, "not every node ready")
		}
		if r.RestartSampleS == 0 {
			pending = append(pending, "not every sampled topic looked up as before the kill")
		}
		if r.RestartAssignS == 0 {
			pending = append(pending, "no new topic assigned")
		}
		return fmt.Errorf("not serving within -timeout %v: %s", o.timeout, strings.Join(pending, "; "))
	}
	r.RestartServingS = max(r.RestartReadyS, r.RestartSampleS, r.RestartAssignS)
	r.RestartSampleMoved = int(moved.Load())
	return nil
}

// waitStatusReady waits until every node's Status says it is ready; it
// fails at once if a node's process exited.
func waitStatusReady(ctx context.Context, c *proccluster.Cluster, cl *client.Client) error {
	for {
		if err := c.Exited(); err != nil {
			return err
		}
		ready := true
		for _, nd := range c.Nodes() {
			sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			st, err := cl.Status(sctx, nd.ClientAddr)
			cancel()
			if err != nil || !st.Ready {
				ready = false
				break
			}
		}
		if ready {
			return nil
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

func (r *volumeReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	fmt.Fprintf(w, "volume: %d nodes, %d shards (%d replicas), preset %s, %d topics, %d clients; ready in %.1fs\n",
		r.Nodes, r.Shards, r.Replicas, r.Preset, r.Topics, r.Clients, r.ReadyS)
	fmt.Fprintf(w, "fill: %d topics assigned in %.1fs (%.0f/s), %d assigns retried; then %.0fs at rest\n",
		r.Topics, r.FillS, r.FillPerS, r.AssignRetries, r.SettleS)
	heap := func(v *uint64) string {
		if v == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", mib(*v))
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tTOPICS OWNED\tPEAK RSS MiB ASSIGNING\tRSS MiB AT REST\tHEAP MiB AT REST\tB PER TOPIC-REPLICA\tRSS MiB AFTER RESTART\tHEAP MiB AFTER RESTART")
	for _, n := range r.PerNode {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%.0f\t%.1f\t%s\n", n.Node, n.TopicsOwned, mib(n.PeakRSSAssigning),
			mib(n.RSSAtRest), heap(n.HeapAllocAtRest), n.BytesPerTopicReplica, mib(n.RSSAfterRestart), heap(n.HeapAllocAfterRestart))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "bytes per topic-replica (RSS at rest over %d × %d / %d = %.0f topic-replicas a node): max %.0f\n",
		r.Topics, r.Replicas, r.Nodes, r.TopicReplicasPerNode, r.BytesPerTopicReplicaMax)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LOOKUPS AMONG\tLOOKUPS\tPER S\tP50 MS\tP99 MS\tP99.9 MS\tERRORS")
	for _, l := range []volumeLookups{r.LookupBaseline, r.LookupFull} {
		fmt.Fprintf(tw, "%d topics\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%d\n", l.Topics, l.Lookups, l.PerS, l.P50Ms, l.P99Ms, l.P999Ms, l.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if r.ListMismatch {
		fmt.Fprintf(w, "LISTING MISMATCH: the listing handed over %d topics, %d were assigned\n", r.Listed, r.Topics)
	}
	fmt.Fprintf(w, "listing: %d topics in %.1fs (%.0f/s)\n", r.Listed, r.ListS, r.ListPerS)
	fmt.Fprintf(w, "every node killed at once and restarted: serving after %.1fs (every node ready %.1fs, %d sampled topics as before the kill %.1fs, a new topic assigned %.1fs); %d sampled topics moved\n",
		r.RestartServingS, r.RestartReadyS, r.RestartSampled, r.RestartSampleS, r.RestartAssignS, r.RestartSampleMoved)
	if r.RelistMismatch {
		fmt.Fprintf(w, "LISTING MISMATCH AFTER THE RESTART: the listing handed over %d topics, %d were assigned\n", r.Relisted, r.Topics)
	}
	_, err := fmt.Fprintf(w, "after the restart: listed %d topics in %.1fs; %d lost, %d changed (%d another owner); since the restart %.0f members declared dead, %.0f topics moved, %.0f topics owed again (%.0f opens, %.0f closes sent); RSS max %.1f MiB\n",
		r.Relisted, r.RelistS, r.Lost, r.Changed, r.ChangedOwner, r.DeadDeclaredAfterRestart, r.TopicsReassignedAfterRestart,
		r.TopicsResentAfterRestart, r.OpensSentAfterRestart, r.ClosesSentAfterRestart, mib(r.RSSAfterRestartMax))
	return err
}
