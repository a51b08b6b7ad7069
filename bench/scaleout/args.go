//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoalmq/shoal/bench/proccluster"
)

const usage = `usage: scaleout [flags]

Starts clusters of real shoal node processes, one size after the other,
each node held to -node-cores of one core by a cgroup cpu quota (v1 cpu
controller, or v2 cpu.max) and the load generator (shoalctl bench) in a
group of its own; runs the same closed-loop workload against each size
and prints throughput per size and the scaling efficiency against the
first size. Needs root, for the cgroups. Progress goes to stderr. Every
process, cgroup and temporary directory is removed on exit, Ctrl-C
included.

flags:
  -sizes N,N,...    cluster sizes, in nodes, run in this order (default 3,6,9)
  -node-cores F     CPU share of each node, in cores (default 0.15)
  -load-cores F     CPU share of the load generator, 0 for no quota (default 0)
  -op OP            shoalctl bench --op: assign, lookup, lookup-lin, produce,
                    fetch or mix (default assign)
  -clients N        concurrent clients, one request in flight each (default 256)
  -clients-per-node N
                    instead of -clients: N clients per node at each size, so
                    the offered load grows with the cluster (default 0: off)
  -duration D       measured run per size (default 15s)
  -rate R           open loop: R requests a second in all, latency counted from
                    each one's scheduled send time (default 0: closed loop)
  -topics K         topics prepared for ops other than assign (default 1000)
  -shards N         metadata shards, a fixed layout (default 1024); 0: the nodes'
                    default, born with 8 and split on their own
  -settle D         before measuring, wait until every node leads its share of
                    the shards and no leader moved for D (default 5s)
  -shoal PATH       the shoal binary (default: built from this module)
  -shoalctl PATH    the shoalctl binary (default: built from this module)
  -timeout D        bound on the start and settling of each cluster (default 10m)
  -log-level L      the nodes' --log-level (default warn)
  -json             print one JSON object
`

type options struct {
	sizes               []int
	nodeCores, loadCore float64
	op                  string
	clients, topics     int
	clientsPerNode      int
	rate                int
	shards              int
	duration, settle    time.Duration
	timeout             time.Duration
	shoal, shoalctl     string
	logLevel            string
	json                bool
}

// usageError is a command line that cannot be run: its text is the whole
// one-line message, and the exit status is 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: "scaleout: " + fmt.Sprintf(format, args...)}
}

var errHelp = errors.New("help requested")

// Bounds of the flags.
const (
	maxShards  = 1 << 20 // node.MaxShards
	maxClients = 100_000
	maxTopics  = 1_000_000
	maxRate    = 10_000_000
	// minCores is the smallest quota the kernel takes: 1 ms per 100 ms.
	minCores = 0.01
	maxCores = 64
)

// ops are the values of -op, as shoalctl bench --op takes them.
var ops = []string{"assign", "lookup", "lookup-lin", "produce", "fetch", "mix"}

func parseArgs(args []string) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("scaleout", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	sizes := fs.String("sizes", "3,6,9", "")
	fs.Float64Var(&o.nodeCores, "node-cores", 0.15, "")
	fs.Float64Var(&o.loadCore, "load-cores", 0, "")
	fs.StringVar(&o.op, "op", "assign", "")
	fs.IntVar(&o.clients, "clients", 256, "")
	fs.IntVar(&o.clientsPerNode, "clients-per-node", 0, "")
	fs.DurationVar(&o.duration, "duration", 15*time.Second, "")
	fs.IntVar(&o.rate, "rate", 0, "")
	fs.IntVar(&o.topics, "topics", 1000, "")
	fs.IntVar(&o.shards, "shards", 1024, "")
	fs.DurationVar(&o.settle, "settle", 5*time.Second, "")
	fs.StringVar(&o.shoal, "shoal", "", "")
	fs.StringVar(&o.shoalctl, "shoalctl", "", "")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "")
	fs.StringVar(&o.logLevel, "log-level", "warn", "")
	fs.BoolVar(&o.json, "json", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usagef("%v", err)
	}
	clientsGiven := false
	fs.Visit(func(f *flag.Flag) { clientsGiven = clientsGiven || f.Name == "clients" })
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q", fs.Arg(0))
	}
	var err error
	if o.sizes, err = parseSizes(*sizes); err != nil {
		return nil, err
	}
	switch {
	case o.nodeCores < minCores || o.nodeCores > maxCores:
		return nil, usagef("-node-cores %g, want %g to %d", o.nodeCores, minCores, maxCores)
	case o.loadCore != 0 && (o.loadCore < minCores || o.loadCore > maxCores):
		return nil, usagef("-load-cores %g, want 0 (no quota) or %g to %d", o.loadCore, minCores, maxCores)
	case !slices.Contains(ops, o.op):
		return nil, usagef("-op %q, want one of %s", o.op, strings.Join(ops, ", "))
	case o.clients < 1 || o.clients > maxClients:
		return nil, usagef("-clients %d, want 1 to %d", o.clients, maxClients)
	case o.clientsPerNode < 0 || o.clientsPerNode > maxClients/slices.Max(o.sizes):
		return nil, usagef("-clients-per-node %d, want 0 (off) to %d at %d nodes", o.clientsPerNode, maxClients/slices.Max(o.sizes), slices.Max(o.sizes))
	case o.clientsPerNode > 0 && clientsGiven:
		return nil, usagef("-clients and -clients-per-node together; give one")
	case o.rate < 0 || o.rate > maxRate:
		return nil, usagef("-rate %d, want 0 (closed loop) to %d", o.rate, maxRate)
	case o.topics < 1 || o.topics > maxTopics:
		return nil, usagef("-topics %d, want 1 to %d", o.topics, maxTopics)
	case o.shards < 0 || o.shards > maxShards:
		return nil, usagef("-shards %d, want 0 (automatic) to %d", o.shards, maxShards)
	case o.duration < time.Second:
		return nil, usagef("-duration %v, want at least 1s", o.duration)
	case o.settle < 0:
		return nil, usagef("-settle %v is negative", o.settle)
	case o.timeout <= 0:
		return nil, usagef("-timeout %v, want more than 0", o.timeout)
	}
	return o, nil
}

// parseSizes parses -sizes: distinct node counts, 1 to proccluster.MaxNodes.
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > proccluster.MaxNodes {
			return nil, usagef("-sizes: %q is not a node count from 1 to %d", f, proccluster.MaxNodes)
		}
		if slices.Contains(out, n) {
			return nil, usagef("-sizes: %d given twice", n)
		}
		out = append(out, n)
	}
	return out, nil
}
