//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

// massReport is the result of -mode mass: per trial, -topics topics owned
// by one node, that node killed, and the time until every one of them
// took a produce at a new owner.
type massReport struct {
	Mode    string `json:"mode"`
	Nodes   int    `json:"nodes"`
	Shards  int    `json:"shards"`
	Preset  string `json:"preset"`
	Topics  int    `json:"topics"`
	Trials  int    `json:"trials"`
	Clients int    `json:"clients"`
	Follow  bool   `json:"follow"` // the client followed routes
	// Probe: how the topics were produced to after the kill (-probe).
	Probe  string  `json:"probe"`
	ReadyS float64 `json:"ready_s"`
	// AllWritableP50S and AllWritableMaxS are over the trials: from the
	// kill until the last of the victim's topics took a produce at a
	// higher epoch.
	AllWritableP50S float64 `json:"all_writable_p50_s"`
	AllWritableMaxS float64 `json:"all_writable_max_s"`
	// TopicP50Ms is over every topic of every trial.
	TopicP50Ms   float64     `json:"topic_p50_ms"`
	TrialResults []massTrial `json:"trial_results"`
}

type massTrial struct {
	Trial  int    `json:"trial"`
	Victim string `json:"victim"`
	// AssignS: assigning the topics to the victim; SweepS: a produce to
	// each of them, healthy, before the kill (what touching every topic
	// once costs this benchmark's clients, a floor under AllWritableS).
	AssignS float64 `json:"assign_s"`
	SweepS  float64 `json:"sweep_s"`
	// AllWritableS: from the kill until every topic took a produce at a
	// higher epoch (-1: not all within -trial-timeout; NotWritten did not).
	AllWritableS float64 `json:"all_writable_s"`
	// OpenedS: from the kill until the survivors held every topic the
	// victim held (their Status.TopicsOwned rose by the victim's): the
	// cluster's side of the failover, before the leases and the clients'
	// retries (-1: not within -trial-timeout).
	OpenedS float64 `json:"opened_s"`
	// MovedP50Ms and MovedMaxMs (-probe moved): from the kill until the
	// watch said a topic moved off the victim (its shard applied the
	// move), over the topics it named.
	MovedP50Ms float64 `json:"moved_p50_ms,omitempty"`
	MovedMaxMs float64 `json:"moved_max_ms,omitempty"`
	// SweepAfterS: a produce to each topic again once all were writable,
	// at the survivors (what touching every topic once costs the clients
	// there, a floor under AllWritableS less OpenedS).
	SweepAfterS float64 `json:"sweep_after_s"`
	TopicP50Ms  float64 `json:"topic_p50_ms"`
	TopicMaxMs  float64 `json:"topic_max_ms"`
	NotWritten  int     `json:"not_written"`
	Produces    int64   `json:"produces"` // sent after the kill, failures included
	RecoverS    float64 `json:"recover_s"`
}

// massTopic is one of a trial's topics: its epoch at the victim, and when
// a produce was first acknowledged above it after the kill.
type massTopic struct {
	name  string
	epoch uint64
	at    time.Duration
	done  bool
	moved time.Duration // when the watch said it moved (0: it did not)
}

func runMass(ctx context.Context, o *options, bin string, logf func(string, ...any)) (*massReport, error) {
	r := &massReport{Mode: "mass", Nodes: o.nodes, Shards: o.shards, Preset: o.preset, Topics: o.topics,
		Trials: o.trials, Clients: o.clients, Follow: o.follow, Probe: o.probe}
	c, ready, err := startCluster(ctx, o, bin, logf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r.ReadyS = ready
	run := strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)
	var all []time.Duration
	var whole []time.Duration
	for trial := 1; trial <= o.trials; trial++ {
		victim := (trial - 1) % o.nodes
		tr, lat, err := massTrialRun(ctx, c, o, fmt.Sprintf("mass-%s-%d", run, trial), victim, logf)
		if err != nil {
			return nil, withLogs(c, fmt.Errorf("trial %d (kill %s): %w", trial, c.Node(victim).ID, err))
		}
		tr.Trial = trial
		r.TrialResults = append(r.TrialResults, *tr)
		all = append(all, lat...)
		if tr.AllWritableS >= 0 {
			whole = append(whole, time.Duration(tr.AllWritableS*float64(time.Second)))
		}
		logf("trial %d: %d topics of %s writable elsewhere %.2fs after the kill (topic p50 %.0f ms); sweep when healthy %.2fs",
			trial, o.topics, tr.Victim, tr.AllWritableS, tr.TopicP50Ms, tr.SweepS)
	}
	if len(whole) > 0 {
		r.AllWritableP50S = percentile(whole, 50).Seconds()
		r.AllWritableMaxS = slices.Max(whole).Seconds()
	}
	if len(all) > 0 {
		r.TopicP50Ms = ms(percentile(all, 50))
	}
	return r, nil
}

// massTrialRun assigns the topics to victim, sweeps them once, kills it and
// sweeps them until each took a produce at a higher epoch; it returns the
// trial and each topic's time.
func massTrialRun(ctx context.Context, c *proccluster.Cluster, o *options, prefix string, victim int, logf func(string, ...any)) (*massTrial, []time.Duration, error) {
	v := c.Node(victim)
	tr := &massTrial{Victim: v.ID, AllWritableS: -1}
	cl, err := client.New(client.Config{Servers: c.ClientAddrs(victim), RequestTimeout: time.Second, MaxRetries: 2,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, FollowRoutes: o.follow})
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()

	topics := make([]massTopic, o.topics)
	for i := range topics {
		topics[i].name = fmt.Sprintf("%s-%d", prefix, i)
	}
	// Assign every topic to the victim.
	actx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	t := time.Now()
	err = parallel(actx, o.clients, len(topics), func(i int) bool {
		a, err := cl.Assign(actx, topics[i].name, client.AssignOptions{Owner: v.ID})
		return err == nil && a.Owner == v.ID
	})
	if err != nil {
		return nil, nil, fmt.Errorf("assign to %s: %w", v.ID, err)
	}
	tr.AssignS = time.Since(t).Seconds()
	logf("assigned %d topics to %s in %.1fs", len(topics), v.ID, tr.AssignS)

	// A produce to each, so that every one is served by the victim.
	t = time.Now()
	err = parallel(actx, o.clients, len(topics), func(i int) bool {
		res, err := cl.Produce(actx, topics[i].name, [][]byte{[]byte("before")})
		if err != nil {
			return false
		}
		topics[i].epoch = res.Epoch
		return true
	})
	if err != nil {
		return nil, nil, fmt.Errorf("produce before the kill: %w", err)
	}
	tr.SweepS = time.Since(t).Seconds()

	// The kill, then produce to every topic until it is acknowledged at a
	// higher epoch.
	victimOwned, err := ownedBy(actx, cl, []string{v.ClientAddr})
	if err != nil {
		return nil, nil, err
	}
	survivors := c.ClientAddrs(victim)
	ownedBefore, err := ownedBy(actx, cl, survivors)
	if err != nil {
		return nil, nil, err
	}
	// The moved probe learns of the moves from a watch of the trial's
	// topics, begun before the kill.
	var moves *client.Watcher
	if o.probe == "moved" {
		if moves, err = cl.Watch(actx, client.WatchOptions{Prefix: prefix + "-"}); err != nil {
			return nil, nil, fmt.Errorf("watch of the trial's topics: %w", err)
		}
	}
	t0 := time.Now()
	if err := c.Kill(victim); err != nil {
		return nil, nil, err
	}
	tr.OpenedS = -1
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		for time.Since(t0) < o.trialTimeout && ctx.Err() == nil {
			if n, err := ownedBy(ctx, cl, survivors); err == nil && n >= ownedBefore+victimOwned {
				tr.OpenedS = time.Since(t0).Seconds()
				return
			}
			_ = sleep(ctx, 50*time.Millisecond)
		}
	}()
	profiled := profileSurvivors(ctx, c, o, victim, prefix)
	defer profiled()
	sctx, cancel := context.WithTimeout(ctx, o.trialTimeout)
	defer cancel()
	var sent atomic.Int64
	produce := func(i int) bool {
		sent.Add(1)
		res, err := cl.Produce(sctx, topics[i].name, [][]byte{[]byte("after")})
		if err != nil || res.Epoch <= topics[i].epoch {
			return false
		}
		topics[i].at, topics[i].done = time.Since(t0), true
		return true
	}
	if moves != nil {
		movedAt := func(i int) { topics[i].moved = time.Since(t0) }
		_ = probeMoved(sctx, moves, prefix+"-", v.ID, o.clients, len(topics), produce, movedAt, logf)
	} else {
		_ = parallel(sctx, o.clients, len(topics), produce)
	}
	tr.Produces = sent.Load()
	<-opened
	var lat, moved []time.Duration
	for _, tp := range topics {
		if tp.moved > 0 {
			moved = append(moved, tp.moved)
		}
		if !tp.done {
			tr.NotWritten++
			continue
		}
		lat = append(lat, tp.at)
	}
	if len(lat) > 0 {
		tr.TopicP50Ms = ms(percentile(lat, 50))
		tr.TopicMaxMs = ms(slices.Max(lat))
		if tr.NotWritten == 0 {
			tr.AllWritableS = slices.Max(lat).Seconds()
		}
	}
	if len(moved) > 0 {
		tr.MovedP50Ms = ms(percentile(moved, 50))
		tr.MovedMaxMs = ms(slices.Max(moved))
	}
	if tr.NotWritten == 0 {
		t = time.Now()
		pctx, cancel := context.WithTimeout(ctx, o.timeout)
		err := parallel(pctx, o.clients, len(topics), func(i int) bool {
			_, err := cl.Produce(pctx, topics[i].name, [][]byte{[]byte("again")})
			return err == nil
		})
		cancel()
		if err != nil {
			return nil, nil, fmt.Errorf("produce after the failover: %w", err)
		}
		tr.SweepAfterS = time.Since(t).Seconds()
	}

	// Make the cluster whole again.
	t = time.Now()
	if err := c.Restart(victim); err != nil {
		return nil, nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		return nil, nil, fmt.Errorf("after the kill: %w", err)
	}
	tr.RecoverS = time.Since(t).Seconds()
	return tr, lat, nil
}

// ownedBy sums the topics the nodes at addrs hold (Status.TopicsOwned).
func ownedBy(ctx context.Context, cl *client.Client, addrs []string) (int, error) {
	sum := 0
	for _, a := range addrs {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cl.Status(sctx, a)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("status of %s: %w", a, err)
		}
		sum += int(st.TopicsOwned)
	}
	return sum, nil
}

// probeMoved runs do, on workers goroutines, for each index below n as
// soon as the watch w says its topic (prefix and the index) moved off
// victim, each until do reports true, and calls moved with each index as
// the watch names it: an index that fails goes to the
// back of the line of moved ones, after a short pause of its worker. If
// the watch fails, every index not yet handed out joins the line. It
// returns ctx's error if some index never succeeded.
func probeMoved(ctx context.Context, w *client.Watcher, prefix, victim string, workers, n int, do func(i int) bool, moved func(i int), logf func(string, ...any)) error {
	work := make(chan int, n)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		queued := make([]bool, n)
		enqueued := 0
		for enqueued < n {
			ch, err := w.Next(wctx)
			if err != nil {
				if wctx.Err() == nil {
					logf("watch of the moves failed (%v): the topics not yet moved are produced to in turn", err)
					for i, q := range queued {
						if !q {
							work <- i
						}
					}
				}
				return
			}
			i, ok := topicIndex(ch.Topic, prefix, n)
			if !ok || queued[i] || ch.Owner == "" || ch.Owner == victim {
				continue
			}
			queued[i] = true
			moved(i)
			enqueued++
			work <- i
		}
	}()
	err := drain(ctx, workers, n, work, do)
	stop()
	<-watched
	return err
}

// topicIndex parses the index of a trial's topic named prefix and a
// number below n.
func topicIndex(topic, prefix string, n int) (int, bool) {
	rest, ok := strings.CutPrefix(topic, prefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	if err != nil || i < 0 || i >= n {
		return 0, false
	}
	return i, true
}

// parallel runs do for every index below n on workers goroutines, each
// index until do reports true: an index that fails goes to the back of
// the line, after a short pause of its worker. It returns ctx's error if
// some index never succeeded.
func parallel(ctx context.Context, workers, n int, do func(i int) bool) error {
	work := make(chan int, n)
	for i := range n {
		work <- i
	}
	return drain(ctx, workers, n, work, do)
}

// drain runs do, on workers goroutines, for the indexes work hands out
// until n of them succeeded: an index that fails goes back into work,
// after a short pause of its worker. It returns ctx's error if fewer
// succeeded.
func drain(ctx context.Context, workers, n int, work chan int, do func(i int) bool) error {
	var left atomic.Int64
	left.Store(int64(n))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for left.Load() > 0 && ctx.Err() == nil {
				var i int
				select {
				case i = <-work:
				case <-ctx.Done():
					return
				case <-time.After(10 * time.Millisecond):
					continue
				}
				if do(i) {
					left.Add(-1)
					continue
				}
				work <- i
				_ = sleep(ctx, 20*time.Millisecond)
			}
		})
	}
	wg.Wait()
	if left.Load() > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%d of %d not done: %w", left.Load(), n, err)
		}
	}
	return nil
}

func (r *massReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	follow := ""
	if r.Follow {
		follow = ", following routes"
	}
	fmt.Fprintf(tw, "%d nodes, %d shards, preset %s, %d topics on the victim, %d clients%s, probe %s\n", r.Nodes, r.Shards, r.Preset, r.Topics, r.Clients, follow, r.Probe)
	fmt.Fprintln(tw, "trial\tvictim\tassign s\tsweep s\tmoved p50, max ms\topened s\tall writable s\ttopic p50 ms\ttopic max ms\tnot written\tproduces\tsweep after s")
	for _, t := range r.TrialResults {
		fmt.Fprintf(tw, "%d\t%s\t%.1f\t%.2f\t%.0f, %.0f\t%.2f\t%.2f\t%.0f\t%.0f\t%d\t%d\t%.2f\n", t.Trial, t.Victim, t.AssignS, t.SweepS, t.MovedP50Ms, t.MovedMaxMs, t.OpenedS, t.AllWritableS, t.TopicP50Ms, t.TopicMaxMs, t.NotWritten, t.Produces, t.SweepAfterS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "every topic writable at a new owner after the kill: p50 %.2f s, max %.2f s over %d trials; per topic p50 %.0f ms\n",
		r.AllWritableP50S, r.AllWritableMaxS, len(r.TrialResults), r.TopicP50Ms)
	return err
}

// profileSurvivors starts a CPU profile of every node but victim, over
// o.profileTime from o.profileFrom after now, each written to o.profile;
// wait waits for them. Nothing without -profile.
func profileSurvivors(ctx context.Context, c *proccluster.Cluster, o *options, victim int, prefix string) (wait func()) {
	if o.profile == "" {
		return func() {}
	}
	if err := os.MkdirAll(o.profile, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "clusterbench: profiles: %v\n", err)
		return func() {}
	}
	var wg sync.WaitGroup
	for i, nd := range c.Nodes() {
		if i == victim || nd.MetricsAddr == "" {
			continue
		}
		path := filepath.Join(o.profile, fmt.Sprintf("%s-%s.pprof", prefix, nd.ID))
		url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", nd.MetricsAddr, int(o.profileTime.Seconds()))
		wg.Go(func() {
			if sleep(ctx, o.profileFrom) != nil {
				return
			}
			if err := fetchTo(ctx, url, path); err != nil {
				fmt.Fprintf(os.Stderr, "clusterbench: profile of %s: %v\n", nd.ID, err)
			}
		})
	}
	return wg.Wait
}

// fetchTo writes what a GET of url answers to path.
func fetchTo(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
