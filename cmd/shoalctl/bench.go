package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/shoalmq/shoal/bench/load"
	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// benchMix is what --op mix sends, in percent of its requests.
var benchMix = []struct {
	op      string
	percent int
}{{"assign", 10}, {"lookup", 60}, {"produce", 20}, {"fetch", 10}}

// benchConns is the default number of connections kept to each node: one
// per 256 clients, at most 8. Measured against `shoal dev` on two cores
// (nodes and bench sharing them), one connection per node carried 64 and
// 256 clients faster than 2, 3, 4 or 8 did for lookups (15-50% more, up
// to 196,000/s) and level with them for produces, within the noise
// between runs: the requests of many clients then share each system
// call. At 1,024 clients the figures were mixed. Beyond 256 clients more
// connections keep each under the client's 1,024 requests in flight per
// connection; --conns sets the number, e.g. for a cluster on machines
// with cores to spare.
func benchConns(clients int) int { return min((clients+255)/256, 8) }

// benchErrorsShown is how many error codes the summary lists.
const benchErrorsShown = 5

// runBench runs the bench command: it prepares the topics, drives the load
// for --duration (or until ctx ends: Ctrl-C) and prints the summary.
func runBench(ctx context.Context, inv *invocation, stdout, stderr io.Writer) int {
	b := &inv.bench
	cfg, err := clientConfig(inv)
	if err != nil {
		writeError(stderr, "Usage", err.Error(), inv.json)
		return exitUsage
	}
	cfg.ConnsPerServer = b.conns
	if cfg.ConnsPerServer == 0 {
		cfg.ConnsPerServer = benchConns(b.clients)
	}
	c, err := client.New(cfg)
	if err != nil {
		writeError(stderr, "Usage", err.Error(), inv.json)
		return exitUsage
	}
	defer c.Close()
	w := newBenchWorkload(c, inv)
	if err := w.prepare(ctx, stderr); err != nil {
		return fail(stderr, inv, prepareError{err})
	}

	rate := "closed loop"
	if b.rate > 0 {
		rate = fmt.Sprintf("open loop at %d ops/s", b.rate)
	}
	conns := "connections"
	if cfg.ConnsPerServer == 1 {
		conns = "connection"
	}
	fmt.Fprintf(stderr, "bench: %s, %d clients over %d %s to each node, %s, for %v\n",
		b.op, b.clients, cfg.ConnsPerServer, conns, rate, b.duration)
	lc := load.Config{
		Workers:  b.clients,
		Rate:     float64(b.rate),
		Duration: b.duration,
		Code: func(err error) string {
			code, _ := classify(err)
			return code
		},
		Progress: func(t load.Tick) {
			fmt.Fprintf(stderr, "%4.0fs  %8d ops/s  %6d errors  p99 %s ms\n",
				t.Elapsed.Seconds(), t.Ops, t.Errors, ms(t.P99))
		},
	}
	if b.op == "mix" {
		for _, m := range benchMix {
			lc.Kinds = append(lc.Kinds, m.op)
		}
	}
	res := load.Run(ctx, lc, w.do)

	sum := benchResult{args: *b, res: res}
	if err := writeResult(stdout, sum, inv.json); err != nil {
		writeError(stderr, "Output", err.Error(), inv.json)
		return exitFailed
	}
	// With --json, stdout is the one line; the notes go with the progress.
	notes := stdout
	if inv.json {
		notes = stderr
		if len(res.ErrorCodes) > 0 {
			var codes []string
			for _, e := range res.ErrorCodes {
				codes = append(codes, fmt.Sprintf("%s %d", e.Code, e.Count))
			}
			fmt.Fprintf(stderr, "errors by code: %s\n", strings.Join(codes, ", "))
		}
	}
	if res.Late > 0 {
		fmt.Fprintf(notes, "late: %d of %d requests were sent more than %v after their scheduled time; "+
			"their latency counts from it\n", res.Late, res.Ops+res.Errors, load.LateAfter)
	}
	if res.Unsent > 0 {
		fmt.Fprintf(notes, "unsent: %d requests due before the end were never sent: the clients fell behind --rate %d\n",
			res.Unsent, b.rate)
	}
	if res.Interrupted {
		fmt.Fprintf(notes, "interrupted after %.1fs\n", res.Elapsed.Seconds())
	}
	if res.Ops == 0 && res.Errors > 0 {
		return exitFailed
	}
	return exitOK
}

// prepareError is a failure before the run: its message says "bench:"
// where the client's says "client:".
type prepareError struct{ err error }

func (e prepareError) Error() string {
	return "bench: " + strings.TrimPrefix(e.err.Error(), "client: ")
}
func (e prepareError) Unwrap() error { return e.err }

// benchWorkload makes the requests of a run.
type benchWorkload struct {
	c       *client.Client
	op      string
	clients int
	timeout time.Duration // of each request, retries included
	topics  []string      // bench-0 … bench-(K-1)
	records [][]byte      // what produce sends
	// assign: each request assigns a new topic bench-<runID>-<n>, since
	// assigning a topic again changes nothing.
	runID    string
	assigned atomic.Uint64
}

func newBenchWorkload(c *client.Client, inv *invocation) *benchWorkload {
	b := &inv.bench
	w := &benchWorkload{
		c: c, op: b.op, clients: b.clients, timeout: inv.timeout,
		records: [][]byte{make([]byte, b.valueSize)},
		runID:   strconv.FormatInt(time.Now().UnixMilli(), 36),
	}
	if b.op != "assign" {
		w.topics = make([]string, b.topics)
		for i := range w.topics {
			w.topics[i] = "bench-" + strconv.Itoa(i)
		}
	}
	return w
}

// prepare checks that the cluster answers and, for the requests that need
// them, assigns the topics and, for produce, fetch and mix, produces one
// record to each (fetches read it), all before timing starts.
func (w *benchWorkload) prepare(ctx context.Context, stderr io.Writer) error {
	sctx, cancel := context.WithTimeout(ctx, w.timeout)
	_, err := w.c.Status(sctx, "")
	cancel()
	if err != nil || len(w.topics) == 0 {
		return err
	}
	start := time.Now()
	fmt.Fprintf(stderr, "bench: assigning topics %s … %s before timing starts, %d at a time\n",
		w.topics[0], w.topics[len(w.topics)-1], min(w.clients, len(w.topics)))
	err = parallel(ctx, len(w.topics), w.clients, func(ctx context.Context, i int) error {
		ctx, cancel := context.WithTimeout(ctx, w.timeout)
		defer cancel()
		_, err := w.c.Assign(ctx, w.topics[i], client.AssignOptions{})
		return err
	})
	if err != nil {
		return err
	}
	if w.op == "produce" || w.op == "fetch" || w.op == "mix" {
		fmt.Fprintf(stderr, "bench: producing a %d-byte record to each\n", len(w.records[0]))
		err = parallel(ctx, len(w.topics), w.clients, func(ctx context.Context, i int) error {
			return w.produceFirst(ctx, w.topics[i])
		})
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "bench: %d topics ready in %.1fs\n", len(w.topics), time.Since(start).Seconds())
	return nil
}

// produceFirst produces one record to a topic just assigned, within
// --timeout. Its owner refuses it (NotLeaderForTopic) until it has learnt
// of the assignment, which after a burst of assigns takes longer than the
// client's own retries wait: they are started again until the timeout.
func (w *benchWorkload) produceFirst(ctx context.Context, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	for {
		_, err := w.c.Produce(ctx, topic, w.records)
		if err == nil || !errors.Is(err, wire.ErrNotLeaderForTopic) || ctx.Err() != nil {
			return err
		}
	}
}

// do sends one request; its kind is the index of its op in benchMix for
// --op mix, else 0.
func (w *benchWorkload) do(ctx context.Context, _ int) (int, error) {
	op, kind := w.op, 0
	if op == "mix" {
		kind = pickMix(rand.IntN(100))
		op = benchMix[kind].op
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	var err error
	switch op {
	case "assign":
		topic := "bench-" + w.runID + "-" + strconv.FormatUint(w.assigned.Add(1), 10)
		_, err = w.c.Assign(ctx, topic, client.AssignOptions{})
	case "lookup", "lookup-lin":
		_, err = w.c.Lookup(ctx, w.topic(), op == "lookup-lin")
	case "produce":
		_, err = w.c.Produce(ctx, w.topic(), w.records)
	case "fetch":
		// The first record, and no more: at least one is returned.
		_, err = w.c.Fetch(ctx, w.topic(), 0, uint32(max(len(w.records[0]), 1)))
	}
	return kind, err
}

// topic picks one of the prepared topics at random.
func (w *benchWorkload) topic() string { return w.topics[rand.IntN(len(w.topics))] }

// pickMix returns the index in benchMix of the op that a draw in 0..99
// falls on.
func pickMix(draw int) int {
	for i, m := range benchMix {
		if draw < m.percent {
			return i
		}
		draw -= m.percent
	}
	return len(benchMix) - 1
}

// parallel calls f for 0..n-1 from up to workers goroutines and returns
// the first error, after which no new call starts.
func parallel(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, workers) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// benchJSON is the --json summary; its keys are documented (docs/cli.md).
type benchJSON struct {
	Op        string  `json:"op"`
	Clients   int     `json:"clients"`
	Rate      uint64  `json:"rate"`
	DurationS float64 `json:"duration_s"`
	Ops       uint64  `json:"ops"`
	Errors    uint64  `json:"errors"`
	OpsPerS   float64 `json:"ops_per_s"`
	P50ms     float64 `json:"p50_ms"`
	P90ms     float64 `json:"p90_ms"`
	P99ms     float64 `json:"p99_ms"`
	P999ms    float64 `json:"p999_ms"`
	MaxMs     float64 `json:"max_ms"`
}

// benchQuantiles are the latency columns, before the max.
var benchQuantiles = []float64{0.5, 0.9, 0.99, 0.999}

// benchResult is the summary of a run.
type benchResult struct {
	args benchArgs
	res  *load.Result
}

func (r benchResult) jsonValue() any {
	q := r.res.Latency.Quantiles(benchQuantiles...)
	return benchJSON{
		Op: r.args.op, Clients: r.args.clients, Rate: r.args.rate,
		DurationS: round(r.res.Elapsed.Seconds(), 3), Ops: r.res.Ops, Errors: r.res.Errors,
		OpsPerS: round(r.res.OpsPerSecond(), 1),
		P50ms:   msFloat(q[0]), P90ms: msFloat(q[1]), P99ms: msFloat(q[2]), P999ms: msFloat(q[3]),
		MaxMs: msFloat(r.res.Latency.Max()),
	}
}

// table prints one row per op (for mix, one per kind of request, then
// the whole), then the most frequent errors.
func (r benchResult) table(w *tabwriter.Writer) {
	rate := "closed"
	if r.args.rate > 0 {
		rate = u64(r.args.rate)
	}
	secs := r.res.Elapsed.Seconds()
	row(w, "OP", "CLIENTS", "RATE", "SECONDS", "OPS", "ERRORS", "OPS/S", "P50 MS", "P90 MS", "P99 MS", "P99.9 MS", "MAX MS")
	line := func(op string, ops, errs uint64, h *load.Histogram) {
		cells := []string{op, strconv.Itoa(r.args.clients), rate, strconv.FormatFloat(secs, 'f', 2, 64),
			u64(ops), u64(errs), strconv.FormatFloat(float64(ops)/max(secs, 1e-9), 'f', 1, 64)}
		for _, q := range h.Quantiles(benchQuantiles...) {
			cells = append(cells, ms(q))
		}
		row(w, append(cells, ms(h.Max()))...)
	}
	for _, k := range r.res.ByKind {
		line(k.Name, k.Ops, k.Errors, k.Latency)
	}
	line(r.args.op, r.res.Ops, r.res.Errors, r.res.Latency)
	if len(r.res.ErrorCodes) == 0 {
		return
	}
	row(w)
	row(w, "ERROR", "COUNT", "FIRST MESSAGE")
	for i, e := range r.res.ErrorCodes {
		if i == benchErrorsShown {
			var rest uint64
			for _, e := range r.res.ErrorCodes[i:] {
				rest += e.Count
			}
			row(w, fmt.Sprintf("(%d more)", len(r.res.ErrorCodes)-i), u64(rest), "")
			break
		}
		row(w, e.Code, u64(e.Count), clip(oneLine(strings.TrimPrefix(e.Example, "client: "))))
	}
}

// ms shows a duration in milliseconds, to the microsecond.
func ms(d time.Duration) string { return strconv.FormatFloat(msFloat(d), 'f', 3, 64) }

func msFloat(d time.Duration) float64 { return round(float64(d)/float64(time.Millisecond), 3) }

func round(v float64, digits int) float64 {
	p := math.Pow10(digits)
	return math.Round(v*p) / p
}
