package load

import (
	"cmp"
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// LateAfter is how far behind its scheduled time an open-loop request may
// be sent before it counts as late in Result.Late.
const LateAfter = time.Millisecond

// Config describes a run.
type Config struct {
	// Workers is the number of workers, each with one request in flight.
	// At least 1.
	Workers int
	// Rate is the total requests per second of an open loop: request i
	// (counting from 0 over all workers) is scheduled at i/Rate seconds
	// after the start, worker w sending requests w, w+Workers, w+2·Workers,
	// …, and its latency counts from that scheduled time. A worker still
	// waiting for an earlier answer sends late, and the wait shows in the
	// latency. 0 runs a closed loop: each worker sends its next request as
	// soon as the last is answered, latency counted from the send.
	Rate float64
	// Duration is how long requests are started for. The requests in
	// flight at the end are waited for and counted.
	Duration time.Duration
	// Kinds names the kinds of request that Do returns, by index. With
	// more than one, Result.ByKind has each one's figures.
	Kinds []string
	// Code names an error for Result.Errors, e.g. its protocol error code.
	// Default: every error is "error".
	Code func(error) string
	// Progress, when set, is called every second while requests run, from
	// one goroutine, with the figures of that second.
	Progress func(Tick)
}

// Do sends one request for worker w (0 ≤ w < Workers) and returns its kind
// (an index into Config.Kinds; 0 when there are none) and its error. ctx
// ends when the run is interrupted, not at the end of Duration: a request
// bounds its own time.
type Do func(ctx context.Context, w int) (kind int, err error)

// Tick is one second of a run.
type Tick struct {
	Elapsed time.Duration // since the start
	Ops     uint64        // requests that succeeded in this second
	Errors  uint64        // requests that failed in this second
	P99     time.Duration // of the successful ones
}

// Result is what a run measured. Latencies are of the successful
// requests; a request cut short by the end of the run's context counts
// neither as an op nor as an error.
type Result struct {
	Elapsed     time.Duration // from the start until the last request ended
	Ops         uint64        // successful requests
	Errors      uint64        // failed requests
	Late        uint64        // open loop: requests sent more than LateAfter after their scheduled time
	Unsent      uint64        // open loop: requests due before the end that were never sent (0 if interrupted)
	Interrupted bool          // the context ended before Duration did
	Latency     *Histogram
	ByKind      []KindResult // with more than one kind
	ErrorCodes  []ErrorCount // most frequent first
}

// KindResult is the share of one kind of request.
type KindResult struct {
	Name    string
	Ops     uint64
	Errors  uint64
	Latency *Histogram
}

// ErrorCount is how many requests failed with one error code, and the
// message of the first.
type ErrorCount struct {
	Code    string
	Count   uint64
	Example string
}

// OpsPerSecond is Ops over Elapsed.
func (r *Result) OpsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Ops) / r.Elapsed.Seconds()
}

// run is the shared state of one Run.
type run struct {
	cfg     Config
	ctx     context.Context
	total   *Histogram
	kinds   []kindStats
	second  atomic.Pointer[Histogram] // the current second's latencies
	errSec  atomic.Uint64             // the current second's errors
	late    atomic.Uint64
	sent    atomic.Uint64
	errMu   sync.Mutex
	errs    map[string]*ErrorCount
	workers sync.WaitGroup
}

type kindStats struct {
	errors atomic.Uint64
	hist   *Histogram
}

// Run sends requests with do as cfg says until cfg.Duration has passed or
// ctx ends, and returns what it measured.
func Run(ctx context.Context, cfg Config, do Do) *Result {
	cfg.Workers = max(cfg.Workers, 1)
	if cfg.Code == nil {
		cfg.Code = func(error) string { return "error" }
	}
	r := &run{cfg: cfg, ctx: ctx, total: NewHistogram(), errs: make(map[string]*ErrorCount)}
	r.kinds = make([]kindStats, max(len(cfg.Kinds), 1))
	for i := range r.kinds {
		r.kinds[i].hist = NewHistogram()
	}
	r.second.Store(NewHistogram())

	start := time.Now()
	sending, stop := context.WithDeadline(ctx, start.Add(cfg.Duration))
	defer stop()
	for w := range cfg.Workers {
		r.workers.Add(1)
		go func() {
			defer r.workers.Done()
			if cfg.Rate > 0 {
				r.openLoop(sending, do, w, start)
			} else {
				r.closedLoop(sending, do, w)
			}
		}()
	}
	done := make(chan struct{})
	var reporter sync.WaitGroup
	if cfg.Progress != nil {
		reporter.Add(1)
		go func() {
			defer reporter.Done()
			r.report(start, done)
		}()
	}
	r.workers.Wait()
	elapsed := time.Since(start)
	close(done)
	reporter.Wait()
	return r.result(elapsed)
}

func (r *run) closedLoop(sending context.Context, do Do, w int) {
	for sending.Err() == nil {
		t0 := time.Now()
		kind, err := do(r.ctx, w)
		r.record(kind, err, time.Since(t0))
	}
}

func (r *run) openLoop(sending context.Context, do Do, w int, start time.Time) {
	deadline, _ := sending.Deadline()
	// A stopped timer: Reset arms it, and since Go 1.23 no stale tick is
	// left in its channel.
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for i := w; ; i += r.cfg.Workers {
		at := start.Add(r.offset(i))
		if !at.Before(deadline) {
			return
		}
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-sending.Done():
				return
			}
		} else if sending.Err() != nil {
			return
		}
		if time.Since(at) > LateAfter {
			r.late.Add(1)
		}
		r.sent.Add(1)
		kind, err := do(r.ctx, w)
		r.record(kind, err, time.Since(at))
	}
}

// offset is when open-loop request i is due, after the start.
func (r *run) offset(i int) time.Duration {
	return time.Duration(float64(i) / r.cfg.Rate * float64(time.Second))
}

// due is the number of open-loop requests due before the end of Duration.
func (r *run) due() uint64 {
	n := int(math.Ceil(r.cfg.Rate * r.cfg.Duration.Seconds()))
	for n > 0 && r.offset(n-1) >= r.cfg.Duration {
		n--
	}
	for r.offset(n) < r.cfg.Duration {
		n++
	}
	return uint64(n)
}

// record counts one request's outcome.
func (r *run) record(kind int, err error, d time.Duration) {
	if r.ctx.Err() != nil {
		return // cut short by the interruption
	}
	k := &r.kinds[min(max(kind, 0), len(r.kinds)-1)]
	if err != nil {
		k.errors.Add(1)
		r.errSec.Add(1)
		code := r.cfg.Code(err)
		r.errMu.Lock()
		e := r.errs[code]
		if e == nil {
			e = &ErrorCount{Code: code, Example: err.Error()}
			r.errs[code] = e
		}
		e.Count++
		r.errMu.Unlock()
		return
	}
	r.total.Record(d)
	if len(r.kinds) > 1 {
		k.hist.Record(d)
	}
	// A worker may still be recording into the second just swapped out;
	// that value is then missing from the progress line only.
	r.second.Load().Record(d)
}

// report calls Progress every second until done is closed.
func (r *run) report(start time.Time, done <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-t.C:
			h := r.second.Swap(NewHistogram())
			r.cfg.Progress(Tick{Elapsed: now.Sub(start), Ops: h.Count(), Errors: r.errSec.Swap(0), P99: h.Quantile(0.99)})
		}
	}
}

func (r *run) result(elapsed time.Duration) *Result {
	res := &Result{
		Elapsed: elapsed, Ops: r.total.Count(), Late: r.late.Load(), Latency: r.total,
		Interrupted: r.ctx.Err() != nil,
	}
	for i := range r.kinds {
		res.Errors += r.kinds[i].errors.Load()
	}
	if r.cfg.Rate > 0 && !res.Interrupted {
		res.Unsent = r.due() - min(r.due(), r.sent.Load())
	}
	if len(r.kinds) > 1 {
		for i, name := range r.cfg.Kinds {
			k := &r.kinds[i]
			res.ByKind = append(res.ByKind, KindResult{Name: name, Ops: k.hist.Count(), Errors: k.errors.Load(), Latency: k.hist})
		}
	}
	for _, e := range r.errs {
		res.ErrorCodes = append(res.ErrorCodes, *e)
	}
	slices.SortFunc(res.ErrorCodes, func(a, b ErrorCount) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Compare(a.Code, b.Code)
	})
	return res
}
