//go:build linux

// Command scaleout measures how a cluster's capacity grows with its nodes:
// it starts clusters of real `shoal node` processes (bench/proccluster) of
// each size in turn, holds every node to the same CPU share with a cgroup
// cpu quota and the load generator to a group of its own, runs the
// `shoalctl bench` workload against each, and prints throughput per size
// and the scaling efficiency against the first size.
//
//	sudo go run ./bench/scaleout -sizes 3,6,9 -node-cores 0.15 -op assign -clients 256 -duration 15s
//	sudo go run ./bench/scaleout -sizes 3,9 -op lookup-lin -json
//
// It needs root for the cgroups; without root it says so and exits 1.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the whole command: 0 done, 1 failed, 2 a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, ue.msg)
		return 2
	}
	if os.Geteuid() != 0 {
		fmt.Fprintln(stderr, "scaleout: needs root, to hold each node to a CPU share with a cgroup cpu quota")
		return 1
	}
	groups, err := newCgroups()
	if err != nil {
		fmt.Fprintln(stderr, "scaleout:", err)
		return 1
	}
	code := measure(ctx, o, groups, stdout, stderr)
	if err := groups.remove(); err != nil {
		fmt.Fprintln(stderr, "scaleout:", err)
		code = 1
	}
	return code
}

// measure builds what it was not given and runs every size.
func measure(ctx context.Context, o *options, groups *cgroups, stdout, stderr io.Writer) int {
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	if o.shoal == "" || o.shoalctl == "" {
		dir, err := os.MkdirTemp("", "scaleout-bin-")
		if err != nil {
			fmt.Fprintln(stderr, "scaleout:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		for _, b := range []struct {
			path *string
			name string
		}{{&o.shoal, "shoal"}, {&o.shoalctl, "shoalctl"}} {
			if *b.path != "" {
				continue
			}
			logf("building %s", b.name)
			if *b.path, err = build(ctx, dir, b.name); err != nil {
				fmt.Fprintln(stderr, "scaleout:", err)
				return 1
			}
		}
	}
	clients := o.clients
	if o.clientsPerNode > 0 {
		clients = 0
	}
	r := &result{Op: o.op, Clients: clients, ClientsPerNode: o.clientsPerNode, Rate: o.rate, DurationS: o.duration.Seconds(), Shards: o.shards,
		NodeCores: o.nodeCores, LoadCores: o.loadCore}
	for _, n := range o.sizes {
		s, err := runSize(ctx, o, groups, n, logf)
		if err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(stderr, "scaleout: interrupted; the cluster and its cgroups were removed")
			} else {
				fmt.Fprintln(stderr, "scaleout:", err)
			}
			return 1
		}
		r.Sizes = append(r.Sizes, s)
		r.fillEfficiency()
		logf("%d nodes: %.0f ops/s, p99 %.1f ms, %d errors", n, s.OpsPerS, s.P99ms, s.Errors)
	}
	if err := r.write(stdout, o.json); err != nil {
		fmt.Fprintln(stderr, "scaleout:", err)
		return 1
	}
	return 0
}

// build builds ./cmd/NAME of the module this command is run in, pure Go
// (CGO_ENABLED=0, as the process tests do), into dir.
func build(ctx context.Context, dir, name string) (string, error) {
	bin := filepath.Join(dir, name)
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/shoalmq/shoal/cmd/"+name)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s (run inside the module, or give -%s PATH): %v\n%s", name, name, err, out)
	}
	return bin, nil
}

// clientsAt is the number of clients driving a cluster of n nodes.
func (o *options) clientsAt(n int) int {
	if o.clientsPerNode > 0 {
		return o.clientsPerNode * n
	}
	return o.clients
}

// benchSummary is the part of shoalctl bench --json that a size reports.
type benchSummary struct {
	Ops     uint64  `json:"ops"`
	Errors  uint64  `json:"errors"`
	OpsPerS float64 `json:"ops_per_s"`
	P50ms   float64 `json:"p50_ms"`
	P99ms   float64 `json:"p99_ms"`
	Seconds float64 `json:"duration_s"`
}

// runBench runs shoalctl bench against servers in the group at dir and
// decodes its summary; its progress goes to stderr.
func runBench(ctx context.Context, o *options, dir string, servers []string, stderr io.Writer) (benchSummary, error) {
	args := []string{"--servers", strings.Join(servers, ","), "--json", "bench", "--op", o.op,
		"--clients", strconv.Itoa(o.clientsAt(len(servers))), "--duration", o.duration.String(), "--topics", strconv.Itoa(o.topics)}
	if o.rate > 0 {
		args = append(args, "--rate", strconv.Itoa(o.rate))
	}
	name, args := enterCommand(dir, o.shoalctl, args)
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		return benchSummary{}, fmt.Errorf("shoalctl bench: %w", err)
	}
	var s benchSummary
	if err := json.Unmarshal(out.Bytes(), &s); err != nil {
		return benchSummary{}, fmt.Errorf("shoalctl bench printed %q: %w", clip(out.String()), err)
	}
	return s, nil
}

// clip shortens s for an error message.
func clip(s string) string {
	const maxLen = 200
	if len(s) > maxLen {
		return s[:maxLen] + "…"
	}
	return s
}
