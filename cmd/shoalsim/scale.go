package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/shoalmq/shoal/sim"
)

// Scale mode (sim.Scale): one child process per cluster size, one after
// the other, so that each size's memory and CPU figures are its own.

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 5 {
			return nil, fmt.Errorf("-scale %q: want sizes of at least 5, comma-separated", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// scaleOne runs one measurement and writes it as JSON.
func scaleOne(cfg sim.ScaleConfig, out io.Writer) error {
	res, err := sim.Scale(cfg)
	if err != nil {
		return err
	}
	return json.NewEncoder(out).Encode(res)
}

// scaleRun measures each size in a child process and prints the table, or
// one JSON object per size.
func scaleRun(sizes []int, asJSON bool, out io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var fwd []string
	for _, name := range []string{"seed", "shards", "window", "bound", "cpuprofile"} {
		if f := flag.Lookup(name); f != nil && f.Value.String() != f.DefValue {
			fwd = append(fwd, "-"+name+"="+f.Value.String())
		}
	}
	var results []*sim.ScaleResult
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "scale: %d nodes...\n", n)
		start := time.Now()
		cmd := exec.Command(self, append([]string{"-scale-worker", strconv.Itoa(n)}, fwd...)...)
		cmd.Stderr = os.Stderr
		var buf bytes.Buffer
		cmd.Stdout = &buf
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("scale %d nodes: %w", n, err)
		}
		var r sim.ScaleResult
		if err := json.Unmarshal(buf.Bytes(), &r); err != nil {
			return fmt.Errorf("scale %d nodes: %w", n, err)
		}
		fmt.Fprintf(os.Stderr, "scale: %d nodes done in %v\n", n, time.Since(start).Round(time.Second))
		if asJSON {
			if err := json.NewEncoder(out).Encode(&r); err != nil {
				return err
			}
		}
		results = append(results, &r)
	}
	if !asJSON {
		printScale(out, results)
	}
	broken := 0
	for _, r := range results {
		for _, v := range r.Violations {
			fmt.Fprintf(os.Stderr, "scale %d nodes: %v\n", r.Nodes, v)
			broken++
		}
	}
	if broken > 0 {
		return fmt.Errorf("scale: %d violations", broken)
	}
	return nil
}

// printScale prints the results as two Markdown tables: the figures per
// node against N, and what the bytes are.
func printScale(out io.Writer, rs []*sim.ScaleResult) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintf(out, "seed %d, lan timing, 3 replicas, real raft groups and Pebble stores; per node, over the steady window\n\n", rs[0].Seed)
	fmt.Fprintln(out, "| nodes | shards | msgs/s per node | bytes/s per node | busiest node msgs/s, bytes/s | sim wall ms per node per virtual s | CPU ms per node per virtual s | leaders max/mean | replicas max/mean | join: seen by all / ready / placed | kill: first suspect / dead at all / leaders moved |")
	fmt.Fprintln(out, "|---:|---:|---:|---:|---|---:|---:|---|---|---|---|")
	for _, r := range rs {
		fmt.Fprintf(out, "| %d | %d | %.1f | %.0f | %.1f, %.0f | %.2f | %.2f | %d / %.2f | %d / %.2f | %s / %s / %s | %s / %s / %s |\n",
			r.Nodes, r.Shards, r.Sent.Msgs, r.Sent.Bytes, r.Max.Msgs, r.Max.Bytes,
			r.WallPerNode*1000, r.CPUPerNode*1000,
			r.LeadersMax, r.LeadersMean, r.ReplicasMax, r.ReplicasMean,
			secs(r.JoinSeen), secs(r.JoinReady), secs(r.JoinPlaced),
			secs(r.KillSuspect), secs(r.KillDead), secs(r.KillLeaders))
	}
	classes := []string{"swim", "pushpull", "raft", "lease", "metadata", "ownership", "forward", "other"}
	fmt.Fprintln(out)
	fmt.Fprintf(out, "| nodes | bytes/s per node: %s | window | ready, gossip quiet | heap | peak RSS | load | wall |\n", strings.Join(classes, " | "))
	fmt.Fprintf(out, "|---:|%s---:|---|---:|---:|---:|---:|\n", strings.Repeat("---:|", len(classes)))
	for _, r := range rs {
		fmt.Fprintf(out, "| %d |", r.Nodes)
		for _, c := range classes {
			fmt.Fprintf(out, " %.0f |", r.Classes[c].Bytes)
		}
		fmt.Fprintf(out, " %v | %s, %s | %s | %s | %.1f | %v |\n", r.Window, secs(r.Ready), secs(r.Quiet), mib(r.HeapBytes), mib(r.MaxRSS), r.Load, r.Wall.Round(time.Second))
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out, "Times are virtual seconds (ready and quiet from the nodes' start); \"-\": not within the bound. Wall, CPU, memory and load measure this machine; the rest repeats for a seed.")
}

func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func mib(b uint64) string { return fmt.Sprintf("%d MiB", b>>20) }
