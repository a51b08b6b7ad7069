//go:build linux

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/shoalmq/shoal/bench/proccluster"
)

const usage = `usage: clusterbench -mode idle|failover|mass|volume [flags]

Starts a cluster of real shoal node processes and measures it; -json
prints one JSON object per run, otherwise a table. Progress goes to
stderr. Every process, namespace, bridge and temporary directory is
removed on exit, also on Ctrl-C.

-mode idle: assign -topics topics spread over the nodes, wait until every
node owns its topics and leases are granted, then until nothing has moved
for -settle, then measure over -window each node's CPU (% of one core),
RSS, lease messages and bytes sent per peer, frames sent and SWIM bytes
sent (and, with -netns, every byte each node sent over its link).
-topics 0 is the baseline: no leases.

-mode failover: -trials times, pick the next node (round-robin) as the
victim, assign it -trial-topics fresh topics, produce to each from one
goroutine through the other nodes, then kill it (SIGKILL), pause it
(SIGSTOP for -pause) or cut its link (-pause long; namespaces, root), and
measure per topic the failover time (first acknowledged produce at a
higher epoch, from the fault) and the unwritable window (the longest gap
between acknowledged produces around the fault); then restart, resume or
heal the victim and wait until the cluster is whole again.

-mode mass: -trials times, assign -topics fresh topics to the next node
(round-robin), produce once to each, kill it (SIGKILL), and measure the
time until every one of its topics took a produce at a higher epoch
through the other nodes (each topic retried until it does, -clients at
a time); then restart it and wait until the cluster is whole again.

-mode volume: assign -topics topics (vol-0, vol-1, ...) spread over the
nodes, -clients at a time, sampling every node's RSS meanwhile; after the
first 10000, pause and measure plain lookups of random ones for
-lookup-window; after the fill, wait -settle, read each node's RSS and heap
at rest, measure lookups over all topics, list them all (ListAll), kill
every node at once (SIGKILL), start them again on their data, and measure
the time until the cluster serves and what the listing then shows.

flags:
  -mode M           idle, failover, mass or volume (default idle)
  -nodes N          node processes (default 3, 5 for mass; failover and mass
                    need at least 3)
  -shards N         metadata shards (default 10000 for idle, 64 for failover,
                    256 for mass and volume)
  -preset P         SWIM and lease timings: lan or fast (default lan for idle
                    and volume, fast for failover and mass)
  -netns            run each node in its own network namespace (root)
  -shoal PATH       the shoal binary (default: build ./cmd/shoal of this module,
                    CGO_ENABLED=0, into a temporary directory)
  -dir DIR          keep the nodes' data and logs in DIR, which must not exist
                    or be empty (default: a temporary directory, removed)
  -timeout D        bound on every wait for the cluster: start, topics owned,
                    recovery after a fault, each topic's assign in volume mode
                    (default 10m)
  -log-level L      the nodes' --log-level: debug, info, warn (default) or error;
                    each node logs to DIR/nI.log
  -json             print one JSON object

idle:
  -topics N         topics to assign, spread round-robin over the nodes (default 10000;
                    mass: the topics of each trial's victim; volume: default
                    5000000, at most 20000000)
  -settle D         before measuring, wait until no shard leader moved (by a
                    transfer or an election), no raft configuration changed and
                    no topic moved for D (default 10s;
                    after a start the leaders of thousands of shards take
                    minutes to balance over the nodes); volume: how long to
                    wait after the fill before reading the memory at rest
                    (default 30s)
  -window D         measured window (default 30s)

failover:
  -fault F          kill, pause or cut (default kill; cut needs root and implies -netns)
  -trials N         faults, one after the other (default 20)
  -trial-topics N   fresh topics per trial, all owned by the victim (default 4)
  -pause D          how long a pause or a cut lasts (default 10s)
  -trial-timeout D  stop producing this long after the fault ended even if a topic
                    was not written again (default 30s; mass: 60s)

mass:
  -trials N         kills (default 5)
  -clients N        produces and assigns in flight (default 128; volume:
                    assigns and lookups in flight, default 256)
  -profile DIR      write a CPU profile of each surviving node over the
                    first -profile-time after each kill to
                    DIR/trialT-NODE.pprof (the nodes serve /debug/pprof)
  -profile-time D   how long each profile runs (default 10s)
  -profile-from D   start each profile D after the kill (default 0)
  -follow           the client follows routes (client.Config.FollowRoutes):
                    a watch of every change keeps its cached routes current
  -probe P          how the topics are produced to after the kill: moved (a
                    watch of the trial's topics says which moved, and those
                    are produced to first, in the order they moved) or sweep
                    (every topic in turn, each retried until it takes one)
                    (default moved)

volume (also -topics, -settle, -clients):
  -lookup-window D  how long each lookup measurement runs (default 20s)
`

type options struct {
	mode                    string
	nodes, shards, topics   int
	preset, shoal, dir      string
	logLevel                string
	netns, json             bool
	timeout, settle, window time.Duration
	fault                   string
	trials, trialTopics     int
	clients                 int
	pause, trialTimeout     time.Duration
	profile                 string
	profileTime             time.Duration
	profileFrom             time.Duration
	follow                  bool
	probe                   string
	lookupWindow            time.Duration
}

// usageError is a command line that cannot be run: its text is the whole
// one-line message, and the exit status is 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

var errHelp = errors.New("help requested")

// Flags that apply to one mode only.
var (
	idleOnly     = []string{"topics", "settle", "window"}
	failoverOnly = []string{"fault", "trials", "trial-topics", "pause", "trial-timeout"}
	massOnly     = []string{"clients", "profile", "profile-time", "profile-from", "follow", "probe"}
	volumeOnly   = []string{"lookup-window"}
)

// Bounds of the flags.
const (
	maxShards       = 1 << 20 // node.MaxShards
	maxTopics       = 1_000_000
	maxVolumeTopics = 20_000_000 // volume mode keeps two listings of 10 bytes a topic
	maxTrials       = 10_000
	maxTrialTopics  = 1000
	maxClients      = 4096
)

// parseArgs parses and validates a command line; root says whether the
// process may make network namespaces.
func parseArgs(args []string, root bool) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("clusterbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.StringVar(&o.mode, "mode", "idle", "")
	fs.IntVar(&o.nodes, "nodes", 3, "")
	fs.IntVar(&o.shards, "shards", 0, "")
	fs.StringVar(&o.preset, "preset", "", "")
	fs.BoolVar(&o.netns, "netns", false, "")
	fs.StringVar(&o.shoal, "shoal", "", "")
	fs.StringVar(&o.dir, "dir", "", "")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "")
	fs.StringVar(&o.logLevel, "log-level", "warn", "")
	fs.BoolVar(&o.json, "json", false, "")
	fs.IntVar(&o.topics, "topics", 10000, "")
	fs.DurationVar(&o.settle, "settle", 10*time.Second, "")
	fs.DurationVar(&o.window, "window", 30*time.Second, "")
	fs.StringVar(&o.fault, "fault", "kill", "")
	fs.IntVar(&o.trials, "trials", 20, "")
	fs.IntVar(&o.trialTopics, "trial-topics", 4, "")
	fs.DurationVar(&o.pause, "pause", 10*time.Second, "")
	fs.DurationVar(&o.trialTimeout, "trial-timeout", 30*time.Second, "")
	fs.IntVar(&o.clients, "clients", 128, "")
	fs.StringVar(&o.profile, "profile", "", "")
	fs.DurationVar(&o.profileTime, "profile-time", 10*time.Second, "")
	fs.DurationVar(&o.profileFrom, "profile-from", 0, "")
	fs.BoolVar(&o.follow, "follow", false, "")
	fs.StringVar(&o.probe, "probe", "moved", "")
	fs.DurationVar(&o.lookupWindow, "lookup-window", 20*time.Second, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, usagef("%s (clusterbench -h shows the flags)", flagError(err))
	}
	if fs.NArg() > 0 {
		return nil, usagef("unexpected argument %q (clusterbench -h shows the flags)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	var other []string
	switch o.mode {
	case "idle":
		other = slices.Concat(failoverOnly, massOnly, volumeOnly)
		if !set["shards"] {
			o.shards = 10000
		}
		if !set["preset"] {
			o.preset = "lan"
		}
	case "failover":
		other = slices.Concat(idleOnly, massOnly, volumeOnly)
		if !set["shards"] {
			o.shards = 64
		}
		if !set["preset"] {
			o.preset = "fast"
		}
	case "mass":
		other = append([]string{"settle", "window", "fault", "trial-topics", "pause"}, volumeOnly...)
		if !set["shards"] {
			o.shards = 256
		}
		if !set["preset"] {
			o.preset = "fast"
		}
		if !set["nodes"] {
			o.nodes = 5
		}
		if !set["trials"] {
			o.trials = 5
		}
		if !set["trial-timeout"] {
			o.trialTimeout = 60 * time.Second
		}
	case "volume":
		other = []string{"window", "fault", "trials", "trial-topics", "pause", "trial-timeout",
			"profile", "profile-time", "profile-from", "follow", "probe"}
		if !set["shards"] {
			o.shards = 256
		}
		if !set["preset"] {
			o.preset = "lan"
		}
		if !set["topics"] {
			o.topics = 5_000_000
		}
		if !set["clients"] {
			o.clients = 256
		}
		if !set["settle"] {
			o.settle = 30 * time.Second
		}
	default:
		return nil, usagef("-mode %q: want idle, failover, mass or volume", o.mode)
	}
	for _, name := range other {
		if set[name] {
			return nil, usagef("-%s does not apply to -mode %s", name, o.mode)
		}
	}
	minNodes := 1
	if o.mode == "failover" || o.mode == "mass" {
		minNodes = 3 // every 3-replica shard keeps a quorum without the victim
	}
	switch {
	case o.nodes < minNodes || o.nodes > proccluster.MaxNodes:
		return nil, usagef("-nodes %d: want %d to %d for -mode %s", o.nodes, minNodes, proccluster.MaxNodes, o.mode)
	case o.shards < 1 || o.shards > maxShards:
		return nil, usagef("-shards %d: want 1 to %d", o.shards, maxShards)
	case o.preset != "lan" && o.preset != "fast":
		return nil, usagef("-preset %q: want lan or fast", o.preset)
	case o.logLevel != "debug" && o.logLevel != "info" && o.logLevel != "warn" && o.logLevel != "error":
		return nil, usagef("-log-level %q: want debug, info, warn or error", o.logLevel)
	case o.timeout <= 0:
		return nil, usagef("-timeout %v: want more than 0", o.timeout)
	case o.mode == "volume" && (o.topics < 1 || o.topics > maxVolumeTopics):
		return nil, usagef("-topics %d: want 1 to %d for -mode volume", o.topics, maxVolumeTopics)
	case o.mode != "volume" && (o.topics < 0 || o.topics > maxTopics):
		return nil, usagef("-topics %d: want 0 to %d", o.topics, maxTopics)
	case o.settle < 0:
		return nil, usagef("-settle %v: want 0 or more", o.settle)
	case o.window < 100*time.Millisecond:
		return nil, usagef("-window %v: want at least 100ms", o.window)
	case o.fault != "kill" && o.fault != "pause" && o.fault != "cut":
		return nil, usagef("-fault %q: want kill, pause or cut", o.fault)
	case o.trials < 1 || o.trials > maxTrials:
		return nil, usagef("-trials %d: want 1 to %d", o.trials, maxTrials)
	case o.trialTopics < 1 || o.trialTopics > maxTrialTopics:
		return nil, usagef("-trial-topics %d: want 1 to %d", o.trialTopics, maxTrialTopics)
	case o.pause <= 0:
		return nil, usagef("-pause %v: want more than 0", o.pause)
	case o.clients < 1 || o.clients > maxClients:
		return nil, usagef("-clients %d: want 1 to %d", o.clients, maxClients)
	case o.mode == "mass" && o.topics < 1:
		return nil, usagef("-topics %d: want at least 1 for -mode mass", o.topics)
	case o.probe != "moved" && o.probe != "sweep":
		return nil, usagef("-probe %q: want moved or sweep", o.probe)
	case o.trialTimeout <= 0:
		return nil, usagef("-trial-timeout %v: want more than 0", o.trialTimeout)
	case o.lookupWindow < 100*time.Millisecond:
		return nil, usagef("-lookup-window %v: want at least 100ms", o.lookupWindow)
	case o.profileTime < time.Second || o.profileTime > 10*time.Minute:
		return nil, usagef("-profile-time %v: want 1s to 10m", o.profileTime)
	case o.profileFrom < 0 || o.profileFrom > 10*time.Minute:
		return nil, usagef("-profile-from %v: want 0 to 10m", o.profileFrom)
	}
	if o.mode == "failover" && o.fault == "cut" {
		if !root {
			return nil, usagef("cut needs root")
		}
		o.netns = true
	}
	if o.netns && !root {
		return nil, usagef("-netns needs root")
	}
	if o.shoal != "" {
		if st, err := os.Stat(o.shoal); err != nil || st.IsDir() {
			return nil, usagef("-shoal %s: not a file", o.shoal)
		}
	}
	if o.dir != "" {
		entries, err := os.ReadDir(o.dir)
		if err != nil && !os.IsNotExist(err) {
			return nil, usagef("-dir %s: %v", o.dir, err)
		}
		if len(entries) > 0 {
			return nil, usagef("-dir %s is not empty", o.dir)
		}
	}
	return o, nil
}

// flagError rewrites the flag package's messages into one short line.
func flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return "unknown flag -" + name
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return "flag -" + name + " needs a value"
	}
	// invalid value "x" for flag -nodes: parse error
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			value, tail := rest[:i], rest[i+len(" for flag -"):]
			name, _, _ := strings.Cut(tail, ":")
			return fmt.Sprintf("-%s %s: not a valid value", name, value)
		}
	}
	return msg
}
