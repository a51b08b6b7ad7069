//go:build linux

// Command clusterbench measures a cluster of real `shoal node` processes
// (bench/proccluster): what an idle cluster costs, with and without
// topics and their leases, how long a topic is unwritable when its
// owner is killed, paused or cut off, how long every topic of a killed
// node takes to be writable elsewhere, and what a cluster holding
// millions of topics costs in memory, lookups, listing and a restart.
//
//	go run ./bench/clusterbench -mode idle -nodes 3 -shards 10000 -topics 10000 -preset lan -window 30s
//	go run ./bench/clusterbench -mode idle -topics 0                       # the baseline: no leases
//	go run ./bench/clusterbench -mode failover -fault kill -trials 20 -preset fast -shards 64
//	sudo go run ./bench/clusterbench -mode failover -fault cut -pause 10s  # namespaces: root only
//	go run ./bench/clusterbench -mode volume -topics 5000000 -shards 1024
//
// README.md beside this file says what each figure is.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
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
	o, err := parseArgs(args, os.Geteuid() == 0)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usage)
		return 0
	}
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprintln(stderr, ue.msg)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "clusterbench:", err)
		return 1
	}
	logf := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	bin := o.shoal
	if bin == "" {
		dir, err := os.MkdirTemp("", "clusterbench-bin-")
		if err != nil {
			fmt.Fprintln(stderr, "clusterbench:", err)
			return 1
		}
		defer os.RemoveAll(dir)
		logf("building shoal")
		if bin, err = buildShoal(ctx, dir); err != nil {
			fmt.Fprintln(stderr, "clusterbench:", err)
			return 1
		}
	}
	switch o.mode {
	case "idle":
		r, err := runIdle(ctx, o, bin, logf)
		if err != nil {
			return fail(ctx, stderr, err)
		}
		err = r.write(stdout, o.json)
		if err != nil {
			return fail(ctx, stderr, err)
		}
	case "mass":
		r, err := runMass(ctx, o, bin, logf)
		if err != nil {
			return fail(ctx, stderr, err)
		}
		if err := r.write(stdout, o.json); err != nil {
			return fail(ctx, stderr, err)
		}
	case "volume":
		r, err := runVolume(ctx, o, bin, logf)
		if err != nil {
			return fail(ctx, stderr, err)
		}
		if err := r.write(stdout, o.json); err != nil {
			return fail(ctx, stderr, err)
		}
	case "failover":
		r, err := runFailover(ctx, o, bin, logf)
		if err != nil {
			return fail(ctx, stderr, err)
		}
		if err := r.write(stdout, o.json); err != nil {
			return fail(ctx, stderr, err)
		}
	}
	return 0
}

func fail(ctx context.Context, stderr io.Writer, err error) int {
	if ctx.Err() != nil {
		fmt.Fprintln(stderr, "clusterbench: interrupted; the cluster was stopped and removed")
		return 1
	}
	fmt.Fprintln(stderr, "clusterbench:", err)
	return 1
}

// buildShoal builds the node binary of the module this command is run in,
// pure Go (CGO_ENABLED=0, as the process tests do), into dir.
func buildShoal(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "shoal")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/shoalmq/shoal/cmd/shoal")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/shoal (run inside the module, or give -shoal PATH): %v\n%s", err, out)
	}
	return bin, nil
}
