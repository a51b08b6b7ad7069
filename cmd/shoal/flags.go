package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// usageError is a command line that cannot be run: its text is the whole
// one-line message, and the exit status is 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp asks for the usage text on stdout and exit 0.
var errHelp = errors.New("help requested")

// maxShards is the node's limit on --shards.
const maxShards = node.MaxShards

// maxConfigBytes bounds a --config file: it holds a few flags, not data.
const maxConfigBytes = 1 << 20

// nodeOptions is a parsed `shoal node` command line.
type nodeOptions struct {
	id, rack, dataDir                string
	clientAddr, peerAddr, swimAddr   string
	join                             []string
	bootstrapExpect                  int
	shards                           uint32
	splits                           splitOptions
	replicas                         int
	metricsAddr                      string
	pprof                            bool
	cpuProfile                       string
	trimAtRest                       time.Duration
	netLoops                         bool
	clusterID                        uint64
	secret                           []byte
	swimPreset                       string
	metadataSync                     time.Duration
	leaseDuration, leaseRenew        time.Duration
	handoffTimeout                   time.Duration
	maxClockDrift                    float64
	memtableMiB                      int
	logSync                          string
	logSyncGap                       time.Duration
	changeLogLen                     int
	logFormat                        string
	logLevel                         slog.Level
	configFile, secretFile, levelArg string

	// Credentials: the files named (kept for a reload on SIGHUP) and what
	// they held.
	tokenFile, swimKeyFile string
	tlsCert, tlsKey, tlsCA string
	tlsClientAuth          bool
	tokens                 []security.Token
	swimKeys               [][]byte
	tls                    *security.TLS
}

const nodeUsage = `usage: shoal node --id ID --data DIR --client-addr H:P --peer-addr H:P --swim-addr H:P [flags]

Runs one node of a Shoal cluster until SIGTERM or SIGINT, which make it
leave the cluster gracefully (exit 0).

required:
  --id ID                 the node's id, shown by every listing (e.g. n1)
  --data DIR              data directory (created if missing)
  --client-addr H:P       address clients connect to (TCP)
  --peer-addr H:P         address other nodes connect to (TCP)
  --swim-addr H:P         membership gossip address (UDP, and TCP for push-pull)

cluster:
  --rack RACK             the node's rack; replicas spread over racks (default "default")
  --join H:P,...          SWIM addresses of nodes to join; the node's own is skipped,
                          so every node can be given the same list
  --bootstrap-expect N    at the cluster's birth, wait until N members are seen
                          before creating the shards (default 1); a node joining
                          a running cluster never creates them
  --shards N              metadata shards the cluster is born with, as a fixed
                          layout: no shard splits on its own (shoalctl split splits
                          one); every node must name the same number. Without it a
                          new cluster is born with 8 and its shard leaders split
                          them as topics, load and members grow; a restarted node
                          takes the count its data dir recorded
  --split-topics N        split a shard holding more than N topics (default 10000)
  --split-mib N           split a shard larger than N MiB in the store, tombstones
                          included (default 4)
  --split-rate N          split a shard applying more than N commands a second
                          (default 2000)
  --split-window D        how long a shard must stay above a split threshold
                          (default 10s, 2s with --swim-preset fast)
  --shards-per-member N   halve every shard until there are at least N per live
                          member, all of one width (default 2; 0: off)
  --max-shards N          split no shard past N shards in the cluster (default 4096)
                          (any --split-* or these two turns automatic splits on
                          with --shards too; 0 turns a trigger off)
  --replicas N            replicas per shard (default 3)
  --cluster-id N          the cluster's id; peers and clients must name the same (default 0)
  --secret-file FILE      file holding the cluster's shared secret: peers prove it to
                          each other; it seals SWIM unless --swim-key-file is given,
                          and clients prove it too unless --client-token-file is given

security (docs/security.md):
  --client-token-file FILE
                          clients authenticate with tokens: one "TOKEN ROLE" per line,
                          ROLE admin, write or read; '#' comments; reread on SIGHUP
  --tls-cert FILE         this node's certificate (PEM), signed by --tls-ca for server
                          and client use: TLS 1.3 on the client and peer ports
  --tls-key FILE          its private key (PEM)
  --tls-ca FILE           the cluster CA (PEM); peers verify each other against it
  --tls-client-auth       the client port also requires a client certificate of --tls-ca
  --swim-key-file FILE    SWIM keys: one base64 AES key (16, 24 or 32 bytes) per line,
                          the primary first; reread on SIGHUP (key rotation)
  --swim-preset NAME      failure-detection timings: lan (default) or fast (one machine, tests)
  --metadata-sync-interval D
                          bound on the staleness of membership, ring and shard-leader
                          table: at least this often pull them from a random peer
                          (e.g. 10s; default 10s, 2s with --swim-preset fast)

ownership leases (see docs/leases.md):
  --lease-duration D      how long an owner may serve its topics after asking its
                          shard leaders for a lease (default 3s, 800ms with
                          --swim-preset fast); failover after an owner dies costs
                          the failure detection or this, whichever is longer
  --lease-renew-interval D
                          how often owners renew their leases, one message per
                          leader node (default 500ms, 200ms with --swim-preset
                          fast); at most a third of --lease-duration
  --max-clock-drift F     bound on how far any node's clock rate may be from true
                          time, as a fraction; lease waits are stretched by it
                          (default 0.01, at most 0.1)
  --handoff-timeout D     how long a moved topic's new owner pulls the previous
                          owner's records before serving without the rest, and a
                          leaving node waits for its topics to be pulled (default 30s)

storage:
  --change-log-len N      changes of topic assignments each shard replica keeps for
                          watchers, 1 to 65536 (default 1024): a watcher further behind
                          is told to list again
  --store-memtable-mib N  Pebble memtable size in MiB, 1 to 1024 (default 32): smaller
                          makes each write cheaper and suits a node whose writes go to
                          few shards; larger flushes less often and keeps a node with
                          many busy shards steadier
  --store-log-sync MODE   how the store syncs its log: raw (default), an fdatasync
                          that keeps its thread's P, less CPU per sync; or runtime,
                          through the Go runtime, which keeps the node serving
                          membership and reads through syncs that stall for seconds
  --store-log-sync-gap D  least time between two syncs of the store's log while the CPU
                          is busy (80% of the node's limit, or of the machine), 0 to
                          100ms (default 4ms; 0: always sync as soon as asked): writes
                          asking within it share the next sync, which saves CPU and
                          adds up to D to a write

network:
  --net-loops             serve plain TCP connections on event loops instead of two
                          goroutines each: less CPU for floods of plain lookups, more
                          for each metadata write (docs/decisions/goroutines-beside-loops.md)

operations:
  --metrics-addr H:P      serve Prometheus /metrics, /healthz and /readyz over HTTP
  --pprof                 also serve Go's profiles under /debug/pprof/ on --metrics-addr
                          (CPU, heap, goroutines, ...: keep that address private)
  --cpu-profile FILE      write a CPU profile of the process's first 60 s (or until it
                          stops) to FILE, its start included, which /debug/pprof cannot show
  --trim-at-rest D        every D, once the process allocated next to nothing over D and
                          holds far more heap than is live, collect and give the free
                          memory back to the system (default 30s; 0: never, as Go does)
  --log-format F          text (default) or json, on stderr
  --log-level L           debug, info (default), warn or error
  --config FILE           read flags from FILE: one "name = value" per line, '#' comments;
                          flags on the command line win over the file

environment: every flag can also be given as SHOAL_ and its name in capitals with
'_' for '-' (SHOAL_CLIENT_ADDR=H:P, SHOAL_TLS_CLIENT_AUTH=true, SHOAL_CONFIG=FILE).
A flag on the command line wins over the environment, which wins over --config,
which wins over the default.
`

// newFlagSet is a flag set that reports errors to its caller only.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// newNodeFlagSet declares the flags of `shoal node` into o.
func newNodeFlagSet(o *nodeOptions) *flag.FlagSet {
	fs := newFlagSet("shoal node")
	fs.StringVar(&o.id, "id", "", "")
	fs.StringVar(&o.rack, "rack", "default", "")
	fs.StringVar(&o.dataDir, "data", "", "")
	fs.StringVar(&o.clientAddr, "client-addr", "", "")
	fs.StringVar(&o.peerAddr, "peer-addr", "", "")
	fs.StringVar(&o.swimAddr, "swim-addr", "", "")
	fs.Func("join", "", func(v string) error {
		for _, a := range strings.Split(v, ",") {
			if a = strings.TrimSpace(a); a != "" {
				o.join = append(o.join, a)
			}
		}
		return nil
	})
	fs.IntVar(&o.bootstrapExpect, "bootstrap-expect", 1, "")
	fs.Func("shards", "", func(v string) error {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 || n > maxShards {
			return fmt.Errorf("want a number of shards from 1 to %d", maxShards)
		}
		o.shards = uint32(n)
		return nil
	})
	o.splits.declare(fs)
	fs.IntVar(&o.replicas, "replicas", 3, "")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "")
	fs.BoolVar(&o.pprof, "pprof", false, "")
	fs.StringVar(&o.cpuProfile, "cpu-profile", "", "")
	fs.DurationVar(&o.trimAtRest, "trim-at-rest", defaultTrimAtRest, "")
	fs.BoolVar(&o.netLoops, "net-loops", false, "")
	fs.StringVar(&o.configFile, "config", "", "")
	fs.Uint64Var(&o.clusterID, "cluster-id", 0, "")
	fs.StringVar(&o.secretFile, "secret-file", "", "")
	fs.StringVar(&o.tokenFile, "client-token-file", "", "")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "")
	fs.StringVar(&o.tlsKey, "tls-key", "", "")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "")
	fs.BoolVar(&o.tlsClientAuth, "tls-client-auth", false, "")
	fs.StringVar(&o.swimKeyFile, "swim-key-file", "", "")
	fs.StringVar(&o.swimPreset, "swim-preset", "lan", "")
	fs.DurationVar(&o.metadataSync, "metadata-sync-interval", 0, "")
	fs.DurationVar(&o.leaseDuration, "lease-duration", 0, "")
	fs.DurationVar(&o.leaseRenew, "lease-renew-interval", 0, "")
	fs.Float64Var(&o.maxClockDrift, "max-clock-drift", 0, "")
	fs.DurationVar(&o.handoffTimeout, "handoff-timeout", 0, "")
	fs.IntVar(&o.memtableMiB, "store-memtable-mib", int(shardstore.DefaultMemTableBytes>>20), "")
	fs.StringVar(&o.logSync, "store-log-sync", "raw", "")
	fs.DurationVar(&o.logSyncGap, "store-log-sync-gap", node.DefaultStoreLogSyncGap, "")
	fs.IntVar(&o.changeLogLen, "change-log-len", security.DefaultChangeLogLen, "")
	fs.StringVar(&o.logFormat, "log-format", "text", "")
	fs.StringVar(&o.levelArg, "log-level", "info", "")
	return fs
}

// parseNodeArgs parses the arguments of `shoal node` (after the word
// "node"), then the SHOAL_* variables getenv gives for the flags not on
// the command line, then --config for the flags still unset; it reads
// --secret-file, and validates everything that can be checked before the
// node starts.
func parseNodeArgs(args []string, getenv func(string) string) (*nodeOptions, error) {
	o := &nodeOptions{}
	fs := newNodeFlagSet(o)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := applyEnv(fs, getenv, set); err != nil {
		return nil, err
	}
	if o.configFile != "" {
		if err := applyConfigFile(fs, o.configFile, set); err != nil {
			return nil, err
		}
	}
	if err := o.splits.settle(set, o.swimPreset == "fast"); err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.secretFile != "" {
		b, err := readSmallFile(o.secretFile)
		if err != nil {
			return nil, usagef("--secret-file: %v", err)
		}
		o.secret = bytes.TrimSpace(b)
		if len(o.secret) == 0 {
			return nil, usagef("--secret-file %s is empty", o.secretFile)
		}
	}
	if err := o.readCredentials(); err != nil {
		return nil, err
	}
	return o, nil
}

// readCredentials reads the token, TLS and SWIM key files named on the
// command line. Errors are usage errors naming the flag (and the line);
// they never show a token or a key.
func (o *nodeOptions) readCredentials() error {
	if o.tokenFile != "" {
		toks, err := readTokens(o.tokenFile)
		if err != nil {
			return usagef("--client-token-file %s: %v", clip(o.tokenFile), err)
		}
		o.tokens = toks
	}
	if o.swimKeyFile != "" {
		keys, err := readSwimKeys(o.swimKeyFile)
		if err != nil {
			return usagef("--swim-key-file %s: %v", clip(o.swimKeyFile), err)
		}
		o.swimKeys = keys
	}
	n := 0
	for _, f := range []string{o.tlsCert, o.tlsKey, o.tlsCA} {
		if f != "" {
			n++
		}
	}
	switch {
	case n == 0 && o.tlsClientAuth:
		return usagef("--tls-client-auth needs --tls-cert, --tls-key and --tls-ca")
	case n == 0:
	case n < 3:
		return usagef("--tls-cert, --tls-key and --tls-ca go together (the node's certificate, its key, the cluster CA)")
	default:
		t, err := security.LoadTLS(o.tlsCert, o.tlsKey, o.tlsCA)
		if err != nil {
			return usagef("%v", err)
		}
		t.VerifyClients = o.tlsClientAuth
		o.tls = t
	}
	return nil
}

func readTokens(path string) ([]security.Token, error) {
	b, err := readSmallFile(path)
	if err != nil {
		return nil, err
	}
	toks, err := security.ParseTokens(bytes.NewReader(b))
	if err != nil {
		return nil, dropPrefix(err, security.ErrTokenFile)
	}
	return toks, nil
}

func readSwimKeys(path string) ([][]byte, error) {
	b, err := readSmallFile(path)
	if err != nil {
		return nil, err
	}
	keys, err := swim.ParseKeys(b)
	if err != nil {
		return nil, dropPrefix(err, swim.ErrKeyFile)
	}
	return keys, nil
}

// dropPrefix is err without the "sentinel: " its message starts with,
// which the flag already says.
func dropPrefix(err, sentinel error) error {
	return errors.New(strings.TrimPrefix(err.Error(), sentinel.Error()+": "))
}

// parseFlags runs fs.Parse and turns its errors into one-line usage errors;
// positional arguments are refused.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return usagef("%s", flagError(err))
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q (flags are --name value)", clip(fs.Arg(0)))
	}
	return nil
}

// flagError rewrites the flag package's messages in the --name form the
// usage text shows.
func flagError(err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return fmt.Sprintf("unknown flag --%s", clip(name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return fmt.Sprintf("flag --%s needs a value", clip(name))
	}
	// "invalid value "x" for flag -shards: parse error"
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		if i := strings.Index(rest, " for flag -"); i >= 0 {
			value, tail := rest[:i], rest[i+len(" for flag -"):]
			name, why, _ := strings.Cut(tail, ": ")
			switch why {
			case "parse error":
				why = "not a number"
			case "value out of range":
				why = "number out of range"
			}
			return fmt.Sprintf("--%s %s: %s", name, clip(value), why)
		}
	}
	return clip(msg)
}

// envName is the environment variable of a flag: SHOAL_ and the flag's
// name in capitals, '_' for '-'.
func envName(flagName string) string {
	return "SHOAL_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// applyEnv sets every flag not in set whose variable getenv gives (an
// empty value counts as unset), and adds it to set.
func applyEnv(fs *flag.FlagSet, getenv func(string) string, set map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] {
			return
		}
		name := envName(f.Name)
		v := getenv(name)
		if v == "" {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = usagef("%s=%q: %v", name, clip(v), e)
			return
		}
		set[f.Name] = true
	})
	return err
}

// applyConfigFile sets, from a file of "name = value" lines, every flag
// not already set on the command line or by the environment.
func applyConfigFile(fs *flag.FlagSet, path string, set map[string]bool) error {
	b, err := readSmallFile(path)
	if err != nil {
		return usagef("--config: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 4096), maxConfigBytes)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || text[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(text, "=")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		name = strings.TrimLeft(name, "-")
		if !ok || name == "" {
			return usagef("config %s line %d: want name = value, got %q", path, line, clip(text))
		}
		if name == "config" || fs.Lookup(name) == nil {
			return usagef("config %s line %d: unknown setting %q", path, line, clip(name))
		}
		if set[name] {
			continue
		}
		if err := fs.Set(name, value); err != nil {
			return usagef("config %s line %d: %s %q: %v", path, line, name, clip(value), err)
		}
	}
	if err := sc.Err(); err != nil {
		return usagef("config %s: %v", path, err)
	}
	return nil
}

func readSmallFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxConfigBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxConfigBytes)
	}
	return b, nil
}

func (o *nodeOptions) validate() error {
	if o.id == "" {
		return usagef("missing --id (the node's id, e.g. --id n1)")
	}
	if len(o.id) > wire.MaxNodeIDLen {
		return usagef("--id is %d bytes long; the limit is %d", len(o.id), wire.MaxNodeIDLen)
	}
	if len(o.rack) > wire.MaxRackLen {
		return usagef("--rack is %d bytes long; the limit is %d", len(o.rack), wire.MaxRackLen)
	}
	if o.dataDir == "" {
		return usagef("missing --data (the node's data directory)")
	}
	for _, a := range []struct{ name, v string }{
		{"client-addr", o.clientAddr}, {"peer-addr", o.peerAddr}, {"swim-addr", o.swimAddr},
	} {
		if a.v == "" {
			return usagef("missing --%s (host:port)", a.name)
		}
		if err := checkAddr(a.v, true); err != nil {
			return usagef("--%s %q: %v", a.name, clip(a.v), err)
		}
	}
	for _, a := range o.join {
		if err := checkAddr(a, false); err != nil {
			return usagef("--join %q: %v", clip(a), err)
		}
	}
	if o.metricsAddr != "" {
		if err := checkHTTPAddr(o.metricsAddr); err != nil {
			return usagef("--metrics-addr %q: %v", clip(o.metricsAddr), err)
		}
	}
	if o.trimAtRest != 0 && o.trimAtRest < time.Second {
		return usagef("--trim-at-rest %s: want 0 (never) or at least 1s", o.trimAtRest)
	}
	if o.pprof && o.metricsAddr == "" {
		return usagef("--pprof needs --metrics-addr (the profiles are served there)")
	}
	if o.bootstrapExpect < 1 {
		return usagef("--bootstrap-expect %d: must be 1 or more", o.bootstrapExpect)
	}
	if o.replicas < 1 || o.replicas > wire.MaxReplicas {
		return usagef("--replicas %d: must be 1 to %d", o.replicas, wire.MaxReplicas)
	}
	if o.swimPreset != "lan" && o.swimPreset != "fast" {
		return usagef("--swim-preset %q: want lan or fast", clip(o.swimPreset))
	}
	if o.metadataSync < 0 {
		return usagef("--metadata-sync-interval %v: must not be negative", o.metadataSync)
	}
	if o.leaseDuration < 0 {
		return usagef("--lease-duration %v: must not be negative", o.leaseDuration)
	}
	if o.leaseRenew < 0 {
		return usagef("--lease-renew-interval %v: must not be negative", o.leaseRenew)
	}
	if o.leaseDuration > 0 && o.leaseRenew > 0 && 3*o.leaseRenew > o.leaseDuration {
		return usagef("--lease-renew-interval %v: must be at most a third of --lease-duration %v", o.leaseRenew, o.leaseDuration)
	}
	if o.handoffTimeout < 0 {
		return usagef("--handoff-timeout %v: must not be negative", o.handoffTimeout)
	}
	if o.maxClockDrift < 0 || o.maxClockDrift > 0.1 {
		return usagef("--max-clock-drift %v: must be 0 to 0.1", o.maxClockDrift)
	}
	if o.changeLogLen < 1 || o.changeLogLen > security.MaxChangeLogLen {
		return usagef("--change-log-len %d: must be 1 to %d", o.changeLogLen, security.MaxChangeLogLen)
	}
	if o.logSync != "raw" && o.logSync != "runtime" {
		return usagef("--store-log-sync %q: must be raw or runtime", o.logSync)
	}
	if o.logSyncGap < 0 || o.logSyncGap > shardstore.MaxLogSyncGap {
		return usagef("--store-log-sync-gap %v: must be 0 to %v", o.logSyncGap, shardstore.MaxLogSyncGap)
	}
	if o.memtableMiB < 1 || o.memtableMiB > 1024 {
		return usagef("--store-memtable-mib %d: must be 1 to 1024", o.memtableMiB)
	}
	if o.logFormat != "text" && o.logFormat != "json" {
		return usagef("--log-format %q: want text or json", clip(o.logFormat))
	}
	lvl, err := parseLevel(o.levelArg)
	if err != nil {
		return err
	}
	o.logLevel = lvl
	return nil
}

// checkAddr checks a host:port: a host is required and the port must be a
// number; port 0 (any free port) only where the address is one to listen on.
func checkAddr(a string, listen bool) error {
	if len(a) > wire.MaxAddrLen {
		return fmt.Errorf("%d bytes long; the limit is %d", len(a), wire.MaxAddrLen)
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return addrErr(err)
	}
	if host == "" {
		return errors.New("missing host (use 127.0.0.1:PORT or an interface's address)")
	}
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", clip(port))
	}
	if p == 0 && !listen {
		return errors.New("port 0 cannot be joined")
	}
	return nil
}

// checkHTTPAddr checks an HTTP listen address, where an empty host means
// every interface.
func checkHTTPAddr(a string) error {
	_, port, err := net.SplitHostPort(a)
	if err != nil {
		return addrErr(err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number from 0 to 65535", clip(port))
	}
	return nil
}

// addrErr drops the address that net's errors repeat.
func addrErr(err error) error {
	var ae *net.AddrError
	if errors.As(err, &ae) {
		return errors.New(ae.Err)
	}
	return err
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level %q: want debug, info, warn or error", clip(s))
	}
	return l, nil
}

// newLogger builds the process's logger on w.
func newLogger(w io.Writer, format string, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// clip shortens a user-supplied string for an error message, so that a
// 10 MB argument does not become a 10 MB line, and replaces control
// characters, so that the message stays one line.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
