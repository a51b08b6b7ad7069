package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/security"
)

// devOptions is a parsed `shoal dev` command line.
type devOptions struct {
	nodes       int
	dir         string
	basePort    int
	shards      uint32
	replicas    int
	metricsAddr string
	processes   bool
	logFormat   string
	logLevel    slog.Level
}

// Defaults of `shoal dev`.
const (
	defaultDevNodes    = 3
	defaultDevBasePort = 7100
	// defaultDevShards: none given, the node's default (born with
	// node.DefaultShards, split as topics, load and members grow).
	defaultDevShards = 0
	maxDevNodes      = 99 // ports are base+1..base+99 per kind
	devRack          = "r1"
)

const devUsage = `usage: shoal dev [--nodes 3] [--dir DIR] [--base-port 7100] [flags]

Runs a local cluster of --nodes nodes in this process (or, with
--processes, as child processes), on 127.0.0.1, until
Ctrl-C. Node i (n1, n2, ...) listens for clients on base-port+i, for peers
on base-port+100+i and for SWIM on base-port+200+i, so shoalctl's default
--servers (127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103) reaches the
default cluster.

flags:
  --nodes N             number of nodes, 1 to 99 (default 3)
  --dir DIR             data directory, one subdirectory per node, kept on exit
                        (default: a new temporary directory, removed on exit)
  --base-port P         port layout base (default 7100)
  --shards N            metadata shards, a fixed layout (default: born with 8,
                        split by their leaders as topics and load grow)
  --replicas N          replicas per shard (default min(3, nodes))
  --metrics-addr H:P    serve Prometheus /metrics (labelled node="nI"), /healthz, /readyz
  --processes           run each node as a child "shoal node" process (pids printed),
                        so that one can be killed alone; each serves metrics on
                        base-port+300+i and logs to DIR/nI.log
  --log-format F        text (default) or json, on stderr
  --log-level L         debug, info, warn (default) or error
`

func parseDevArgs(args []string) (*devOptions, error) {
	o := &devOptions{shards: defaultDevShards}
	var levelArg string
	fs := newFlagSet("shoal dev")
	fs.IntVar(&o.nodes, "nodes", defaultDevNodes, "")
	fs.StringVar(&o.dir, "dir", "", "")
	fs.IntVar(&o.basePort, "base-port", defaultDevBasePort, "")
	fs.Func("shards", "", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 || n > maxShards {
			return fmt.Errorf("want a number of shards from 1 to %d", maxShards)
		}
		o.shards = uint32(n)
		return nil
	})
	fs.IntVar(&o.replicas, "replicas", 0, "")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "")
	fs.BoolVar(&o.processes, "processes", false, "")
	fs.StringVar(&o.logFormat, "log-format", "text", "")
	fs.StringVar(&levelArg, "log-level", "warn", "")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	if o.nodes < 1 || o.nodes > maxDevNodes {
		return nil, usagef("--nodes %d: must be 1 to %d", o.nodes, maxDevNodes)
	}
	top := 200 + o.nodes
	if o.processes {
		top += 100 // metrics ports
	}
	if o.basePort < 1 || o.basePort+top > 65535 {
		return nil, usagef("--base-port %d: the ports base+1 to base+%d must be 1 to 65535", o.basePort, top)
	}
	if o.processes && o.metricsAddr != "" {
		return nil, usagef("--metrics-addr: with --processes each node serves its metrics on base-port+300+i")
	}
	if o.replicas == 0 {
		o.replicas = min(3, o.nodes)
	}
	if o.replicas < 1 || o.replicas > o.nodes {
		return nil, usagef("--replicas %d: must be 1 to --nodes (%d)", o.replicas, o.nodes)
	}
	if o.metricsAddr != "" {
		if err := checkHTTPAddr(o.metricsAddr); err != nil {
			return nil, usagef("--metrics-addr %q: %v", clip(o.metricsAddr), err)
		}
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return nil, usagef("--log-format %q: want text or json", clip(o.logFormat))
	}
	lvl, err := parseLevel(levelArg)
	if err != nil {
		return nil, err
	}
	o.logLevel = lvl
	return o, nil
}

// devAddrs are node i's (1-based) client, peer and SWIM addresses.
func (o *devOptions) devAddrs(i int) (client, peer, swim string) {
	at := func(off int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(o.basePort+off+i)) }
	return at(0), at(100), at(200)
}

// devDir returns the cluster's data directory: dir, made with its parents
// if missing, or a new temporary one when dir is "".
func devDir(dir string) (string, bool, error) {
	if dir == "" {
		d, err := os.MkdirTemp("", "shoal-dev-")
		return d, true, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("--dir: %w", err)
	}
	return dir, false, nil
}

// runDev runs a local cluster until ctx is cancelled.
func runDev(ctx context.Context, o *devOptions, stdout, stderr io.Writer) (err error) {
	logger := newLogger(stderr, o.logFormat, o.logLevel)
	dir, temporary, err := devDir(o.dir)
	if err != nil {
		return err
	}
	if temporary {
		defer func() {
			if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
				err = rmErr
			}
		}()
	}

	keep := "removed on exit"
	if !temporary {
		keep = "kept on exit"
	}
	if o.processes {
		return runDevProcesses(ctx, o, dir, keep, stdout)
	}

	seeds := make([]string, o.nodes)
	for i := range o.nodes {
		_, _, seeds[i] = o.devAddrs(i + 1)
	}
	nodes := make([]*node.Node, 0, o.nodes)
	ids := make([]string, 0, o.nodes)
	defer func() { closeAll(nodes, logger) }()
	for i := 1; i <= o.nodes; i++ {
		id := "n" + strconv.Itoa(i)
		client, peer, swim := o.devAddrs(i)
		n, err := node.New(node.Config{
			ID: id, Rack: devRack, DataDir: filepath.Join(dir, id),
			ClientAddr: client, PeerAddr: peer, SwimAddr: swim,
			Join: seeds, BootstrapExpect: o.nodes,
			Shards: o.shards, Replicas: o.replicas,
			SwimPreset: "fast",
			// On loopback, without credentials, on purpose.
			Security: security.Security{InsecureOK: true},
			Logger:   logger,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		nodes = append(nodes, n)
		ids = append(ids, id)
	}

	var ms *metricsServer
	if o.metricsAddr != "" {
		if ms, err = startMetrics(o.metricsAddr, logger, nodes, false); err != nil {
			return err
		}
		defer ms.close()
	}

	// All at once: a node's start may wait for the others (bootstrap).
	start := time.Now()
	startErrs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { startErrs[i] = n.Start(context.WithoutCancel(ctx)) })
	}
	wg.Wait()
	for i, e := range startErrs {
		if e != nil {
			return fmt.Errorf("%s: start: %w", ids[i], e)
		}
	}

	for i, n := range nodes {
		client, peer, swim := n.Addrs()
		fmt.Fprintf(stdout, "%s  client %s  peer %s  swim %s  data %s\n",
			ids[i], client, peer, swim, filepath.Join(dir, ids[i]))
	}
	if ms != nil {
		fmt.Fprintf(stdout, "metrics http://%s/metrics\n", ms.addr())
	}

	for _, n := range nodes {
		select {
		case <-n.Ready():
		case <-ctx.Done():
			fmt.Fprintln(stdout, "stopping")
			return nil
		}
	}
	fmt.Fprintf(stdout, "ready in %s: %d nodes, %s, data in %s (%s); Ctrl-C stops; try: %s assign topic-blue\n",
		time.Since(start).Round(10*time.Millisecond), o.nodes, o.shardsText(), dir, keep, shoalctlFor(clientAddrs(nodes)))
	<-ctx.Done()
	fmt.Fprintln(stdout, "stopping")
	return nil
}

// shoalctlFor is the shoalctl command that reaches nodes at these client
// addresses: plain when they are shoalctl's default.
func shoalctlFor(addrs []string) string {
	servers := strings.Join(addrs, ",")
	if servers == "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103" {
		return "shoalctl"
	}
	return "shoalctl --servers " + servers
}

func clientAddrs(nodes []*node.Node) []string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i], _, _ = n.Addrs()
	}
	return addrs
}

// closeAll closes the nodes concurrently: the cluster goes away as a whole,
// so there is nobody to hand leadership to.
func closeAll(nodes []*node.Node, logger *slog.Logger) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			if err := n.Close(); err != nil {
				logger.Warn("close", "err", err)
			}
		})
	}
	wg.Wait()
}

// shardsText says what shards the cluster is born with.
func (o *devOptions) shardsText() string {
	if o.shards == 0 {
		return fmt.Sprintf("%d shards (splitting as they grow)", node.DefaultShards)
	}
	return fmt.Sprintf("%d shards", o.shards)
}
