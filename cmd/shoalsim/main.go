// Command shoalsim runs Shoal's deterministic simulator (package sim) over
// many seeds, in parallel processes, or replays one seed with its report,
// or measures what each node costs as the cluster grows (scale mode).
//
//	shoalsim -seeds 10000 -from 1    # seeds 1..10000 on every core
//	shoalsim -seeds 300 -budget 3m   # from a random seed; none starts after 3 min
//	shoalsim -seed 4711              # replay one: violations and trace
//	shoalsim -scale 100,300,1000     # per-node cost against N (sim.Scale)
//	shoalsim -scale 300 -json        # the same as one JSON object per size
//
// A run of many seeds prints the range it runs, its progress every few
// seconds, then every failing seed with the command that replays it and
// the records lost in the ways docs/ownership.md documents; it exits 1 if any
// failed. With -budget it stops handing out seeds once that much wall
// time has passed, lets those running finish, and prints the range it
// ran. Each worker is a process of its own: a run replaces
// crypto/rand.Reader, so runs cannot share a process. Scale mode measures
// one size at a time, each in a process of its own, and prints a table
// (-seed, default 1, picks the run; -window and -bound set the steady
// window and the bound on each convergence, both virtual).
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/sim"
)

type outcome struct {
	Seed       uint64              `json:"seed"`
	Violations []string            `json:"violations,omitempty"`
	Err        string              `json:"err,omitempty"`
	Wall       float64             `json:"wall"`
	Ops        int                 `json:"ops"`
	Records    history.RecordStats `json:"records"`
	Splits     int                 `json:"splits"`
	Grown      int                 `json:"grown"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "shoalsim:", err)
		os.Exit(2)
	}
}

func run() error {
	var (
		seed    = flag.Uint64("seed", 0, "replay this one seed and print its report")
		seeds   = flag.Int("seeds", 0, "run this many seeds, from -from")
		from    = flag.Uint64("from", 0, "first seed of -seeds (0: a random one)")
		budget  = flag.Duration("budget", 0, "stop handing out seeds of -seeds after this much wall time (0: none)")
		jobs    = flag.Int("j", runtime.NumCPU(), "worker processes")
		nodes   = flag.Int("nodes", 0, "nodes per cluster, 3 to 9 (default 5)")
		shards  = flag.Uint("shards", 0, "metadata shards (default 64)")
		faulty  = flag.Duration("faulty", 0, "virtual time under faults (default 60s)")
		calm    = flag.Duration("calm", 0, "virtual time after the faults, before the liveness checks (default 20s)")
		auto    = flag.String("auto-splits", "odd", "which seeds run with the shard leaders' automatic splits, born with 4 shards: odd, all or none")
		trace   = flag.Int("trace", 60, "trace lines to print for a replayed seed (0: all kept)")
		worker  = flag.Bool("worker", false, "internal: run the seeds read from stdin")
		verbose = flag.Bool("v", false, "print every seed's outcome")

		scale       = flag.String("scale", "", "scale mode: measure clusters of these sizes, e.g. 100,300,1000 (seed: -seed, default 1)")
		window      = flag.Duration("window", 0, "scale: the steady window, virtual (default one period of SWIM's push-pull at the size: 90s at 100 nodes, 180s at 1000)")
		bound       = flag.Duration("bound", 0, "scale: bound on each convergence measurement, virtual (default 60s)")
		jsonOut     = flag.Bool("json", false, "scale: print one JSON object per size instead of the table")
		cpuProfile  = flag.String("cpuprofile", "", "scale: write a CPU profile of each size's window to FILE.N")
		scaleWorker = flag.Int("scale-worker", 0, "internal: run one scale measurement of this size and print it as JSON")
	)
	flag.Parse()
	if flag.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", flag.Arg(0))
	}
	if *nodes != 0 && (*nodes < 3 || *nodes > 9) {
		return fmt.Errorf("-nodes %d: want 3 to 9", *nodes)
	}
	if *jobs < 1 {
		return fmt.Errorf("-j %d: want at least 1", *jobs)
	}
	if *scaleWorker > 0 || *scale != "" {
		sc := sim.ScaleConfig{Seed: *seed, Shards: uint32(*shards), Window: *window, Bound: *bound}
		if sc.Seed == 0 {
			sc.Seed = 1
		}
		if *scaleWorker > 0 {
			sc.Nodes = *scaleWorker
			sc.Progress = func(s string) { fmt.Fprintln(os.Stderr, "scale:", s) }
			if *cpuProfile != "" {
				f, err := os.Create(fmt.Sprintf("%s.%d", *cpuProfile, sc.Nodes))
				if err != nil {
					return err
				}
				defer f.Close()
				sc.CPUProfile = f
			}
			return scaleOne(sc, os.Stdout)
		}
		sizes, err := parseSizes(*scale)
		if err != nil {
			return err
		}
		return scaleRun(sizes, *jsonOut, os.Stdout)
	}
	if _, err := autoSplits(*auto, 0); err != nil {
		return err
	}
	cfg := sim.Config{Nodes: *nodes, Shards: uint32(*shards), Faulty: *faulty, Calm: *calm}
	switch {
	case *worker:
		return work(cfg, *auto, os.Stdin, os.Stdout)
	case *seed != 0 && *seeds != 0:
		return errors.New("-seed and -seeds: give one")
	case *seed != 0:
		return replay(cfg, *auto, *seed, *trace)
	case *seeds > 0:
		first := *from
		if first == 0 {
			first = 1 + rand.Uint64N(1<<32)
		}
		failed, err := sweep(first, *seeds, *jobs, *budget, *verbose)
		if err != nil {
			return err
		}
		if failed > 0 {
			os.Exit(1)
		}
		return nil
	}
	return errors.New("give -seed N or -seeds N")
}

// autoSplits reports whether seed runs with automatic splits under the
// -auto-splits rule: the odd seeds, all or none. A sweep and a replay of
// one of its seeds apply the same rule.
func autoSplits(rule string, seed uint64) (bool, error) {
	switch rule {
	case "odd":
		return seed%2 == 1, nil
	case "all":
		return true, nil
	case "none":
		return false, nil
	}
	return false, fmt.Errorf("-auto-splits %q: want odd, all or none", rule)
}

func replay(cfg sim.Config, rule string, seed uint64, traceLines int) error {
	cfg.Seed = seed
	cfg.AutoSplits, _ = autoSplits(rule, seed)
	if cfg.AutoSplits {
		fmt.Printf("seed %d runs with automatic splits (-auto-splits %s)\n", seed, rule)
	}
	start := time.Now()
	res, err := sim.Run(cfg)
	if err != nil {
		return err
	}
	if !res.Failed() {
		fmt.Printf("seed %d passed: %d requests (%d acknowledged), %d splits, %d shards grown, %v virtual in %v, history %s\n",
			seed, res.Ops, res.Acked, res.Splits, res.Grown, res.Virtual, time.Since(start).Round(time.Millisecond), res.Digest)
		fmt.Printf("records: %v\n", res.Records)
		return nil
	}
	if traceLines > 0 && len(res.Trace) > traceLines {
		res.Trace = res.Trace[len(res.Trace)-traceLines:]
	}
	fmt.Print(res.Report())
	os.Exit(1)
	return nil
}

// work runs the seeds it reads, one per line, and writes one JSON outcome
// per seed.
func work(cfg sim.Config, rule string, in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	enc := json.NewEncoder(out)
	for sc.Scan() {
		seed, err := strconv.ParseUint(sc.Text(), 10, 64)
		if err != nil {
			return fmt.Errorf("worker: bad seed %q", sc.Text())
		}
		c := cfg
		c.Seed = seed
		c.AutoSplits, _ = autoSplits(rule, seed)
		start := time.Now()
		o := outcome{Seed: seed}
		res, err := sim.Run(c)
		if err != nil {
			o.Err = err.Error()
		} else {
			for _, v := range res.Violations {
				o.Violations = append(o.Violations, v.String())
			}
			o.Ops, o.Records, o.Splits, o.Grown = res.Ops, res.Records, res.Splits, res.Grown
		}
		o.Wall = time.Since(start).Seconds()
		if err := enc.Encode(&o); err != nil {
			return err
		}
	}
	return sc.Err()
}

// sweep runs count seeds from first on jobs worker processes, handing each
// the next seed as it finishes one; with a budget, it hands out no seed
// once that much wall time has passed. The seeds it ran are always a range
// from first on: it prints the range.
func sweep(first uint64, count, jobs int, budget time.Duration, verbose bool) (int, error) {
	fmt.Printf("seeds %d..%d (replay one with make sim SEED=N, the range with make sim SEEDS=%d FROM=%d)\n",
		first, first+uint64(count)-1, count, first)
	if r := flag.Lookup("auto-splits").Value.String(); r != "none" {
		fmt.Printf("seeds with the shard leaders' automatic splits, born with 4 shards: %s\n", r)
	}
	if budget > 0 {
		fmt.Printf("wall-time budget %v: no seed starts after it\n", budget)
	}
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	jobs = min(jobs, count)
	seeds := make(chan uint64)
	results := make(chan outcome)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for runWorker(self, seeds, results) {
				// The worker died (a panic: its stack went to stderr) and
				// its seed was reported failed; the next one runs the rest.
			}
		})
	}
	var over <-chan time.Time // stays nil without a budget
	if budget > 0 {
		over = time.After(budget)
	}
	go func() {
		defer close(seeds)
		for i := range uint64(count) {
			select {
			case seeds <- first + i:
			case <-over:
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	start := time.Now()
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	var done, failed, ops, splits, grown int
	var wall float64
	var failures []outcome
	recs := history.RecordStats{Lost: make(map[history.LossKind]int)}
	report := func() {
		el := time.Since(start)
		fmt.Printf("%d/%d seeds, %d failed, %.1f seeds/s, %.2f s per seed, %v elapsed\n",
			done, count, failed, float64(done)/el.Seconds(), wall/float64(max(done, 1)), el.Round(time.Second))
	}
	for {
		select {
		case o, ok := <-results:
			if !ok {
				report()
				if done < count {
					fmt.Printf("the budget of %v ended the sweep: ran seeds %d..%d, %d of %d\n", budget, first, first+uint64(done)-1, done, count)
				}
				fmt.Printf("records: %v\n", recs)
				fmt.Printf("splits: %d applied; the shards grew by %d\n", splits, grown)
				for _, f := range failures {
					fmt.Printf("seed %d failed: replay with: make sim SEED=%d\n", f.Seed, f.Seed)
					if f.Err != "" {
						fmt.Printf("  error: %s\n", f.Err)
					}
					for i, v := range f.Violations {
						if i == 3 {
							fmt.Printf("  ... %d more\n", len(f.Violations)-3)
							break
						}
						fmt.Printf("  %s\n", firstLine(v))
					}
				}
				return failed, nil
			}
			done++
			wall += o.Wall
			ops += o.Ops
			splits += o.Splits
			grown += o.Grown
			recs.Acked += o.Records.Acked
			recs.Read += o.Records.Read
			recs.Found += o.Records.Found
			for k, n := range o.Records.Lost {
				recs.Lost[k] += n
			}
			if o.Err != "" || len(o.Violations) > 0 {
				failed++
				failures = append(failures, o)
				fmt.Printf("seed %d FAILED: %s\n", o.Seed, firstLine(append(o.Violations, o.Err)[0]))
			} else if verbose {
				fmt.Printf("seed %d ok (%d requests, %.2f s)\n", o.Seed, o.Ops, o.Wall)
			}
		case <-tick.C:
			report()
		}
	}
}

// runWorker starts a worker process and hands it seeds until they run
// out; it reports each seed's outcome, and a seed the worker died on as
// failed. died says whether the worker died (then the caller starts
// another for the seeds left), also when it could not start one (then the
// seed it would have run is reported failed with that error).
func runWorker(self string, seeds <-chan uint64, results chan<- outcome) (died bool) {
	cmd := exec.Command(self, append([]string{"-worker"}, forwarded()...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	var stdout io.ReadCloser
	if err == nil {
		stdout, err = cmd.StdoutPipe()
	}
	if err == nil {
		err = cmd.Start()
	}
	if err != nil {
		if s, ok := <-seeds; ok {
			results <- outcome{Seed: s, Err: fmt.Sprintf("no worker: %v", err)}
			return true
		}
		return false
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	dec := json.NewDecoder(stdout)
	for s := range seeds {
		var o outcome
		if _, err := fmt.Fprintln(stdin, s); err != nil {
			results <- outcome{Seed: s, Err: fmt.Sprintf("worker died: %v", err)}
			return true
		}
		if err := dec.Decode(&o); err != nil {
			results <- outcome{Seed: s, Err: fmt.Sprintf("worker died running it (its output is above): %v", err)}
			return true
		}
		results <- o
	}
	return false
}

// forwarded are the flags a worker needs to run the same configuration.
func forwarded() []string {
	var out []string
	for _, name := range []string{"nodes", "shards", "faulty", "calm", "auto-splits"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != f.DefValue {
			out = append(out, "-"+name+"="+f.Value.String())
		}
	}
	return out
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}
