//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/shoalmq/shoal/bench/proccluster"
	"github.com/shoalmq/shoal/client"
)

// failoverReport is the result of -mode failover. The percentiles are over
// every topic of every trial.
type failoverReport struct {
	Mode           string  `json:"mode"`
	Fault          string  `json:"fault"`
	Nodes          int     `json:"nodes"`
	Shards         int     `json:"shards"`
	Preset         string  `json:"preset"`
	Netns          bool    `json:"netns"`
	Trials         int     `json:"trials"`
	TopicsPerTrial int     `json:"topics_per_trial"`
	PauseS         float64 `json:"pause_s,omitempty"` // pause and cut: how long the fault lasted
	ReadyS         float64 `json:"ready_s"`

	// FailoverP50Ms and FailoverMaxMs are over the topics that failed over.
	FailoverP50Ms float64 `json:"failover_p50_ms"`
	FailoverMaxMs float64 `json:"failover_max_ms"`
	// TopicsFailedOver of Trials×TopicsPerTrial were acknowledged at a
	// higher epoch before the trial ended.
	TopicsFailedOver int `json:"topics_failed_over"`
	// The same percentiles over the topics whose shard the victim led
	// (its successor first waits NewLeaderWait, docs/leases.md) and over
	// the others.
	FailoverLedP50Ms   float64 `json:"failover_victim_led_p50_ms"`
	FailoverLedMaxMs   float64 `json:"failover_victim_led_max_ms"`
	TopicsLed          int     `json:"topics_victim_led_failed_over"`
	FailoverOtherP50Ms float64 `json:"failover_other_p50_ms"`
	FailoverOtherMaxMs float64 `json:"failover_other_max_ms"`
	UnwritableP50Ms    float64 `json:"unwritable_p50_ms"`
	UnwritableMaxMs    float64 `json:"unwritable_max_ms"`
	// TrialsVictimLed is how many trials had a topic whose shard the victim
	// also led when the fault came.
	TrialsVictimLed int `json:"trials_victim_led_shard"`
	// TopicsNotWritten had no produce sent after the fault ended
	// acknowledged within -trial-timeout: their unwritable window is a
	// lower bound.
	TopicsNotWritten int `json:"topics_not_written_after_fault"`
	// TopicsMovedBefore were acknowledged at a higher epoch before the
	// fault: the cluster moved them off the victim on its own. Their
	// failover time is left out of the percentiles.
	TopicsMovedBefore int `json:"topics_moved_before_fault"`

	TrialResults []trialResult `json:"trial_results"`
}

type trialResult struct {
	Trial     int           `json:"trial"`
	Victim    string        `json:"victim"`
	VictimLed bool          `json:"victim_led_shard"`
	Topics    []topicResult `json:"topics"`
	// FaultS is how long the fault lasted (about 0 for kill); RecoverS how
	// long, once the producers stopped, the restart (kill) and the wait
	// until every node was ready and counted every node alive took.
	FaultS   float64 `json:"fault_s"`
	RecoverS float64 `json:"recover_s"`
}

type topicResult struct {
	Topic  string `json:"topic"`
	Shard  uint64 `json:"shard"`
	Leader string `json:"shard_leader"` // before the fault
	Epoch  uint64 `json:"initial_epoch"`
	// LastEpoch is the highest epoch a produce was acknowledged at.
	LastEpoch uint64 `json:"last_epoch"`
	Acks      int    `json:"acks"`
	// Owner, OwnerEpoch and LeaderAfter are the topic's owner and epoch
	// (a linearizable lookup) and its shard's leader when the producers
	// stopped; empty if they could not be read.
	Owner       string `json:"owner_after,omitempty"`
	OwnerEpoch  uint64 `json:"owner_epoch_after,omitempty"`
	LeaderAfter string `json:"shard_leader_after,omitempty"`
	// FailoverMs is nil when no produce was acknowledged at a higher
	// epoch; negative when one was before the fault.
	FailoverMs *float64 `json:"failover_ms"`
	// NotWritten: no produce sent after the fault ended was acknowledged.
	NotWritten   bool    `json:"not_written_after_fault,omitempty"`
	UnwritableMs float64 `json:"unwritable_ms"`
	// LastErr is the last failed produce's error, kept for a topic not
	// written again after the fault ended.
	LastErr string `json:"last_error,omitempty"`
}

// Producer settings: short, so a request stuck on the victim does not
// hide the next ones.
const (
	produceTimeout = 2 * time.Second
	produceBackoff = 5 * time.Millisecond
	firstAckWait   = 30 * time.Second
	beforeFault    = time.Second
	afterFault     = time.Second
)

func runFailover(ctx context.Context, o *options, bin string, logf func(string, ...any)) (*failoverReport, error) {
	r := &failoverReport{Mode: "failover", Fault: o.fault, Nodes: o.nodes, Shards: o.shards, Preset: o.preset,
		Netns: o.netns, Trials: o.trials, TopicsPerTrial: o.trialTopics}
	if o.fault != "kill" {
		r.PauseS = o.pause.Seconds()
	}
	c, ready, err := startCluster(ctx, o, bin, logf)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	r.ReadyS = ready

	// Topic names unique to this run, should -dir hold an earlier one's.
	run := strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36)
	var failovers, windows, led, other []time.Duration
	for trial := 1; trial <= o.trials; trial++ {
		victim := (trial - 1) % o.nodes
		tr, err := runTrial(ctx, c, o, fmt.Sprintf("fo-%s-%d", run, trial), victim)
		if err != nil {
			return nil, withLogs(c, fmt.Errorf("trial %d (%s %s): %w", trial, o.fault, c.Node(victim).ID, err))
		}
		tr.Trial = trial
		r.TrialResults = append(r.TrialResults, *tr)
		if tr.VictimLed {
			r.TrialsVictimLed++
		}
		worstF, worstU := "none", 0.0
		for _, t := range tr.Topics {
			windows = append(windows, msDuration(t.UnwritableMs))
			worstU = max(worstU, t.UnwritableMs)
			if t.NotWritten {
				r.TopicsNotWritten++
			}
			switch {
			case t.FailoverMs == nil:
			case *t.FailoverMs < 0:
				r.TopicsMovedBefore++
			default:
				failovers = append(failovers, msDuration(*t.FailoverMs))
				r.TopicsFailedOver++
				if t.Leader == tr.Victim {
					led = append(led, msDuration(*t.FailoverMs))
				} else {
					other = append(other, msDuration(*t.FailoverMs))
				}
			}
		}
		if f := maxFailover(tr.Topics); f != nil {
			worstF = fmt.Sprintf("%.0f ms", *f)
		}
		logf("trial %d/%d: %s %s: failover %s, unwritable %.0f ms (worst topic), victim led a shard: %v, whole again in %.1fs",
			trial, o.trials, o.fault, tr.Victim, worstF, worstU, tr.VictimLed, tr.RecoverS)
	}
	r.FailoverP50Ms, r.FailoverMaxMs = ms(percentile(failovers, 50)), ms(percentile(failovers, 100))
	r.UnwritableP50Ms, r.UnwritableMaxMs = ms(percentile(windows, 50)), ms(percentile(windows, 100))
	r.FailoverLedP50Ms, r.FailoverLedMaxMs, r.TopicsLed = ms(percentile(led, 50)), ms(percentile(led, 100)), len(led)
	r.FailoverOtherP50Ms, r.FailoverOtherMaxMs = ms(percentile(other, 50)), ms(percentile(other, 100))
	return r, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func msDuration(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func maxFailover(ts []topicResult) *float64 {
	var worst *float64
	for _, t := range ts {
		if t.FailoverMs != nil && (worst == nil || *t.FailoverMs > *worst) {
			worst = t.FailoverMs
		}
	}
	return worst
}

// producer writes to one topic, one request at a time, and records every
// acknowledged produce.
type producer struct {
	topic   string
	mu      sync.Mutex
	acks    []ack
	lastErr error
}

func (p *producer) record(a ack) {
	p.mu.Lock()
	p.acks = append(p.acks, a)
	p.mu.Unlock()
}

// snapshot is the acks so far.
func (p *producer) snapshot() []ack {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]ack(nil), p.acks...)
}

func (p *producer) run(ctx context.Context, cl *client.Client) {
	for i := 0; ctx.Err() == nil; i++ {
		rctx, cancel := context.WithTimeout(ctx, produceTimeout)
		start := time.Now()
		res, err := cl.Produce(rctx, p.topic, [][]byte{[]byte(strconv.Itoa(i))})
		end := time.Now()
		cancel()
		if err == nil {
			p.record(ack{start: start, end: end, epoch: res.Epoch})
			continue
		}
		if ctx.Err() == nil {
			p.mu.Lock()
			p.lastErr = err
			p.mu.Unlock()
		}
		t := time.NewTimer(produceBackoff)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// runTrial makes one fault on node victim and measures its topics.
func runTrial(ctx context.Context, c *proccluster.Cluster, o *options, prefix string, victim int) (*trialResult, error) {
	v := c.Node(victim)
	tr := &trialResult{Victim: v.ID}
	servers := c.ClientAddrs(victim)
	admin, err := client.New(client.Config{Servers: servers})
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	prod, err := client.New(client.Config{Servers: servers, RequestTimeout: time.Second, MaxRetries: 3,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	defer prod.Close()

	// Fresh topics, all owned by the victim.
	actx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for k := range o.trialTopics {
		topic := fmt.Sprintf("%s-%d", prefix, k)
		var a client.Assignment
		for {
			a, err = admin.Assign(actx, topic, client.AssignOptions{Owner: v.ID})
			if err == nil && a.Owner == v.ID {
				break
			}
			if actx.Err() != nil {
				return nil, fmt.Errorf("assign %s to %s: %v (%+v)", topic, v.ID, err, a)
			}
			_ = sleep(actx, 200*time.Millisecond)
		}
		tr.Topics = append(tr.Topics, topicResult{Topic: topic, Shard: a.Shard, Epoch: a.Epoch})
	}

	// Produce until every topic was acknowledged once, then a second more.
	pctx, stopProducers := context.WithCancel(ctx)
	defer stopProducers()
	var wg sync.WaitGroup
	producers := make([]*producer, len(tr.Topics))
	for i, t := range tr.Topics {
		producers[i] = &producer{topic: t.Topic}
		wg.Go(func() { producers[i].run(pctx, prod) })
	}
	stop := func() time.Time {
		at := time.Now()
		stopProducers()
		wg.Wait()
		return at
	}
	deadline := time.Now().Add(firstAckWait)
	for !allAcked(producers, time.Time{}) {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("a topic of %s took no produce within %v", v.ID, firstAckWait)
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			stop()
			return nil, err
		}
	}
	if err := sleep(ctx, beforeFault); err != nil {
		stop()
		return nil, err
	}

	// Who leads the topics' shards now, as a node other than the victim
	// knows.
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	shards, err := admin.Shards(sctx)
	cancel()
	if err != nil {
		stop()
		return nil, fmt.Errorf("shards: %w", err)
	}
	for i := range tr.Topics {
		for _, s := range shards {
			if s.Shard == tr.Topics[i].Shard {
				tr.Topics[i].Leader = s.Leader
			}
		}
		if tr.Topics[i].Leader == v.ID {
			tr.VictimLed = true
		}
	}

	// The fault.
	t0 := time.Now()
	var healed time.Time
	switch o.fault {
	case "kill":
		err = c.Kill(victim) // returns once the process is gone
		healed = time.Now()
	case "pause":
		if err = c.Pause(victim); err == nil {
			_ = sleep(ctx, o.pause)
			err = c.Resume(victim)
			healed = time.Now()
		}
	case "cut":
		if err = c.Cut(victim); err == nil {
			_ = sleep(ctx, o.pause)
			err = c.Heal(victim)
			healed = time.Now()
		}
	}
	if err != nil {
		stop()
		return nil, err
	}
	tr.FaultS = healed.Sub(t0).Seconds()

	// Produce until every topic has taken a write sent after the fault
	// ended (for a kill: after the process was gone), the last of them at
	// least a second ago, and a second has passed since the fault ended;
	// or until -trial-timeout.
	giveUp := healed.Add(o.trialTimeout)
	for ctx.Err() == nil && time.Now().Before(giveUp) {
		if last, ok := lastFirstAfter(producers, healed); ok && time.Since(last) >= afterFault && time.Since(healed) >= afterFault {
			break
		}
		_ = sleep(ctx, 20*time.Millisecond)
	}
	stoppedAt := stop()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	for i, p := range producers {
		acks := p.snapshot()
		t := &tr.Topics[i]
		t.Acks = len(acks)
		for _, a := range acks {
			t.LastEpoch = max(t.LastEpoch, a.epoch)
		}
		if first, ok := firstAbove(acks, t.Epoch); ok {
			f := ms(first.Sub(t0))
			t.FailoverMs = &f
		}
		t.UnwritableMs = ms(longestGap(acks, t0, stoppedAt))
		if _, ok := lastFirstAfter([]*producer{p}, healed); !ok {
			t.NotWritten = true
			if p.lastErr != nil {
				t.LastErr = p.lastErr.Error()
			}
		}
	}

	describeAfter(ctx, admin, tr.Topics)

	// Make the cluster whole again.
	recoverStart := time.Now()
	if o.fault == "kill" {
		if err := c.Restart(victim); err != nil {
			return nil, err
		}
	}
	wctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		return nil, fmt.Errorf("after the fault: %w", err)
	}
	tr.RecoverS = time.Since(recoverStart).Seconds()
	return tr, nil
}

// describeAfter reads each topic's owner and its shard's leader, as the
// nodes other than the victim see them; what cannot be read stays empty.
func describeAfter(ctx context.Context, admin *client.Client, topics []topicResult) {
	for i := range topics {
		t := &topics[i]
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		a, err := admin.Lookup(lctx, t.Topic, true)
		cancel()
		if err == nil {
			t.Owner, t.OwnerEpoch = a.Owner, a.Epoch
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	shards, err := admin.Shards(sctx)
	cancel()
	if err != nil {
		return
	}
	for i := range topics {
		for _, s := range shards {
			if s.Shard == topics[i].Shard {
				topics[i].LeaderAfter = s.Leader
			}
		}
	}
}

// allAcked reports whether every producer has an ack of a request sent
// after since.
func allAcked(ps []*producer, since time.Time) bool {
	_, ok := lastFirstAfter(ps, since)
	return ok
}

// lastFirstAfter is, over the producers, the latest of each one's first
// ack of a request sent after since; false if one has none.
func lastFirstAfter(ps []*producer, since time.Time) (time.Time, bool) {
	var last time.Time
	for _, p := range ps {
		first, ok := firstStartedAfter(p.snapshot(), since)
		if !ok {
			return time.Time{}, false
		}
		if first.After(last) {
			last = first
		}
	}
	return last, true
}

func (r *failoverReport) write(w io.Writer, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(w).Encode(r)
	}
	where := "127.0.0.1"
	if r.Netns {
		where = "network namespaces"
	}
	fault := r.Fault
	if r.Fault != "kill" {
		fault = fmt.Sprintf("%s for %.0fs", r.Fault, r.PauseS)
	}
	fmt.Fprintf(w, "failover: %s, %d trials of %d topics, %d nodes, %d shards, preset %s, %s\n",
		fault, r.Trials, r.TopicsPerTrial, r.Nodes, r.Shards, r.Preset, where)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TRIAL\tVICTIM\tVICTIM LED A SHARD\tFAILOVER MS (WORST TOPIC)\tUNWRITABLE MS (WORST TOPIC)\tWHOLE AGAIN S")
	for _, t := range r.TrialResults {
		f := "none"
		if v := maxFailover(t.Topics); v != nil {
			f = fmt.Sprintf("%.0f", *v)
		}
		var u float64
		for _, x := range t.Topics {
			u = max(u, x.UnwritableMs)
		}
		fmt.Fprintf(tw, "%d\t%s\t%v\t%s\t%.0f\t%.1f\n", t.Trial, t.Victim, t.VictimLed, f, u, t.RecoverS)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	total := r.Trials * r.TopicsPerTrial
	fmt.Fprintf(w, "failover over the %d of %d topics that failed over: p50 %.0f ms, max %.0f ms\n", r.TopicsFailedOver, total, r.FailoverP50Ms, r.FailoverMaxMs)
	fmt.Fprintf(w, "  of which the victim led the shard: %d, p50 %.0f ms, max %.0f ms; the others: %d, p50 %.0f ms, max %.0f ms\n",
		r.TopicsLed, r.FailoverLedP50Ms, r.FailoverLedMaxMs, r.TopicsFailedOver-r.TopicsLed, r.FailoverOtherP50Ms, r.FailoverOtherMaxMs)
	fmt.Fprintf(w, "unwritable over %d topics: p50 %.0f ms, max %.0f ms\n", total, r.UnwritableP50Ms, r.UnwritableMaxMs)
	if r.TopicsNotWritten > 0 {
		fmt.Fprintf(w, "topics not written again within -trial-timeout after the fault ended: %d (their window is a lower bound)\n", r.TopicsNotWritten)
	}
	if r.TopicsMovedBefore > 0 {
		fmt.Fprintf(w, "topics moved off the victim before the fault: %d (no failover time)\n", r.TopicsMovedBefore)
	}
	_, err := fmt.Fprintf(w, "trials where the victim also led a topic's shard: %d of %d\n", r.TrialsVictimLed, r.Trials)
	return err
}
