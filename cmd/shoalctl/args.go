package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

// Defaults of the global flags.
const (
	// defaultServers are the client ports `shoal dev` listens on.
	defaultServers = "127.0.0.1:7101,127.0.0.1:7102,127.0.0.1:7103"
	defaultTimeout = 10 * time.Second
	// defaultAdminTimeout bounds drain and remove, which wait for the
	// cluster to move what the node held: a node leading hundreds of
	// shards hands them over a few at a time. Each request still gets
	// defaultTimeout.
	defaultAdminTimeout = 10 * time.Minute
)

// invocation is a parsed command line.
type invocation struct {
	servers   []string
	json      bool
	timeout   time.Duration
	clusterID uint64
	secret    []byte
	token     string
	// TLS: the CA file that turns TLS on, and a client certificate and
	// key for nodes that ask for one.
	tlsCA, tlsCert, tlsKey string

	cmd          string
	topic        string
	owner        string
	partitions   uint32
	linearizable bool
	msg          string
	from         uint64
	maxBytes     uint32
	statusAddr   string // status: the node to ask; empty = any server
	prefix       string // watch, topics: the topics whose name starts with it
	position     string // watch --from: where to resume
	limit        int    // topics --limit: the page size
	cursor       string // topics --cursor: the page to list
	all          bool   // topics --all: every page
	splits       bool   // watch --splits: print the shards' splits too
	node         string // drain, undrain, transfer-leader, remove: the node
	shard        uint64 // transfer-leader, split: the shard
	force        bool   // remove --force
	bench        benchArgs
	fromStdin    bool   // produce TOPIC -: records are stdin's lines
	format       string // fetch: one of fetchFormats
	helpCmd      string // help: the command whose usage is asked for; empty = shoalctl's
	shell        string // completion: one of completionShells
}

// fetchFormats are the values of fetch --format.
var fetchFormats = []string{"text", "base64", "raw"}

// benchArgs are the settings of the bench command.
type benchArgs struct {
	op        string // one of benchOps
	clients   int
	duration  time.Duration
	rate      uint64 // total requests per second; 0 = closed loop
	topics    int
	valueSize int
	conns     int // connections to each node; 0 = benchConns(clients)
}

// Defaults and limits of bench.
const (
	defaultBenchClients   = 64
	defaultBenchDuration  = 10 * time.Second
	defaultBenchTopics    = 1000
	defaultBenchValueSize = 16
	maxBenchClients       = 10_000
	maxBenchTopics        = 1_000_000
	maxBenchRate          = 10_000_000
)

// benchOps are the values of bench --op.
var benchOps = []string{"assign", "lookup", "lookup-lin", "produce", "fetch", "mix"}

// errHelp asks for the usage text on stdout and exit 0: shoalctl's, or
// that of invocation.helpCmd when set.
var errHelp = errors.New("help requested")

// errVersion asks for the version line on stdout and exit 0.
var errVersion = errors.New("version requested")

// usageError is a command line that cannot be run; its text is the whole
// message shown.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

const usage = `usage: shoalctl [--servers H:P,...] [--json] [--timeout D] [--cluster-id N] [--tls-ca FILE] COMMAND [ARGS]

commands:
  assign TOPIC [--owner ID] [--partitions N]   assign a topic (to a node, or let its shard leader choose)
  lookup TOPIC [--linearizable]                show who owns a topic
  revoke TOPIC                                 remove a topic's assignment
  produce TOPIC MSG|-                          append MSG (or stdin's lines, with -) to a topic at its owner
  fetch TOPIC [--from N] [--max-bytes N] [--format text|base64|raw]
                                               read a topic's records from offset N
  members                                      list the cluster's members
  shards                                       list the metadata shards, replicas and leaders
  status [H:P]                                 show one node's status (default: the first server that answers)
  watch [TOPIC | --prefix P] [--from POS]      print every change of the topic's (or prefix's) assignment as it
                                               commits, until interrupted; then print the position to resume
                                               from on stderr (default: every topic, from now)
  topics [--prefix P] [--limit N] [--cursor C] list assigned topics across every shard, N per page
                                               (default 1000, at most 10000); --cursor continues at the
                                               "next" cursor a page printed
  topics --all [--prefix P]                    list every assigned topic, ranges of shards at once
  drain NODE                                   move a node's topics and shard leaderships away, and keep them away
  undrain NODE                                 let a drained node take topics and leaderships again
  transfer-leader SHARD NODE                   hand a shard's leadership to NODE, one of its replicas
  split SHARD                                  split a shard in two halves of its hash range
  remove NODE [--force]                        forget a node gone for good and replace its replicas
                                               (--force: even one that is alive, or unknown)
  bench --op OP [--clients N] [--duration D] [--rate R] [--topics K] [--value-size B] [--conns N]
                                               drive a load at the cluster; report ops/s and latency
                                               (OP: assign, lookup, lookup-lin, produce, fetch, mix;
                                               defaults 64 clients, 10s, closed loop, 1000 topics, 16 bytes)
  help [COMMAND]                               show a command's usage (also: COMMAND --help)
  completion bash|zsh|fish                     print a shell completion script

global flags (before or after the command):
  --servers H:P,...   client addresses of nodes to ask (env SHOAL_SERVERS,
                      default ` + defaultServers + `)
  --json              print stable JSON instead of tables; errors as {"error":{"code","message"}}
  --timeout D         give up after D, retries included (default 10s; drain, remove: 10m;
                      bench, topics --all: each request)
  --cluster-id N      the cluster's id (env SHOAL_CLUSTER_ID, default 0)
  --tls-ca FILE       speak TLS, trusting the cluster CA in FILE (env SHOAL_TLS_CA)
  --tls-cert FILE     a client certificate, for nodes that ask for one (env SHOAL_TLS_CERT)
  --tls-key FILE      its key (env SHOAL_TLS_KEY)
  credentials are read from the environment, not the command line:
    SHOAL_TOKEN       this client's token (nodes with client tokens)
    SHOAL_SECRET      the cluster's shared secret (nodes without client tokens)
  --version           print the version, commit and Go version, and exit

Flags may come before or after a command's arguments; "--" ends the flags.
exit status: 0 success, 1 the cluster refused or failed the request,
2 usage error, 3 no server reachable in time.
`

type flagKind uint8

const (
	boolFlag flagKind = iota
	valueFlag
)

var globalFlags = map[string]flagKind{
	"servers": valueFlag, "json": boolFlag, "timeout": valueFlag, "cluster-id": valueFlag,
	"tls-ca": valueFlag, "tls-cert": valueFlag, "tls-key": valueFlag,
	"help": boolFlag, "h": boolFlag, "version": boolFlag,
}

// commands lists each command's flags and its positional arguments: the
// required ones, then the optional ones.
var commands = map[string]struct {
	flags    map[string]flagKind
	required []string
	optional []string
}{
	"assign":          {flags: map[string]flagKind{"owner": valueFlag, "partitions": valueFlag}, required: []string{"TOPIC"}},
	"lookup":          {flags: map[string]flagKind{"linearizable": boolFlag}, required: []string{"TOPIC"}},
	"revoke":          {required: []string{"TOPIC"}},
	"produce":         {required: []string{"TOPIC", "MSG"}},
	"fetch":           {flags: map[string]flagKind{"from": valueFlag, "max-bytes": valueFlag, "format": valueFlag}, required: []string{"TOPIC"}},
	"members":         {},
	"shards":          {},
	"status":          {optional: []string{"H:P"}},
	"drain":           {required: []string{"NODE"}},
	"undrain":         {required: []string{"NODE"}},
	"remove":          {flags: map[string]flagKind{"force": boolFlag}, required: []string{"NODE"}},
	"transfer-leader": {required: []string{"SHARD", "NODE"}},
	"split":           {required: []string{"SHARD"}},
	"watch":           {flags: map[string]flagKind{"prefix": valueFlag, "from": valueFlag, "splits": boolFlag}, optional: []string{"TOPIC"}},
	"topics":          {flags: map[string]flagKind{"prefix": valueFlag, "limit": valueFlag, "cursor": valueFlag, "all": boolFlag}},
	"bench": {flags: map[string]flagKind{"op": valueFlag, "clients": valueFlag, "duration": valueFlag,
		"rate": valueFlag, "topics": valueFlag, "value-size": valueFlag, "conns": valueFlag}},
	"help":       {optional: []string{"COMMAND"}},
	"completion": {required: []string{"SHELL"}},
}

// parseArgs parses a command line (without the program name). getenv
// supplies SHOAL_SERVERS, SHOAL_CLUSTER_ID, SHOAL_SECRET, SHOAL_TOKEN and
// SHOAL_TLS_CA, SHOAL_TLS_CERT, SHOAL_TLS_KEY. The returned
// invocation has json set whenever --json was seen, even with an error, so
// that the error can be printed in the form asked for.
func parseArgs(args []string, getenv func(string) string) (*invocation, error) {
	inv := &invocation{timeout: defaultTimeout}
	values := make(map[string]string)
	var positional []string
	help, showVersion := false, false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(tok) < 2 || tok[0] != '-' {
			if inv.cmd == "" {
				if _, ok := commands[tok]; !ok {
					return inv, usagef("unknown command %q (want one of %s)", clip(tok), strings.Join(commandNames(), ", "))
				}
				inv.cmd = tok
				continue
			}
			positional = append(positional, tok)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(tok, "-"), "-"), "=")
		kind, ok := globalFlags[name]
		if !ok && inv.cmd != "" {
			kind, ok = commands[inv.cmd].flags[name]
		}
		if !ok {
			if inv.cmd == "" {
				return inv, usagef("unknown flag --%s before the command", clip(name))
			}
			return inv, usagef("%s: unknown flag --%s", inv.cmd, clip(name))
		}
		switch kind {
		case boolFlag:
			if !hasValue {
				value = "true"
			}
			b, err := strconv.ParseBool(value)
			if err != nil {
				return inv, usagef("--%s wants true or false, not %q", name, clip(value))
			}
			value = strconv.FormatBool(b)
			if name == "json" {
				inv.json = b
			}
		case valueFlag:
			if !hasValue {
				if i+1 >= len(args) {
					return inv, usagef("--%s needs a value", name)
				}
				i++
				value = args[i]
			}
		}
		if name == "help" || name == "h" {
			help = value == "true"
			continue
		}
		if name == "version" {
			showVersion = value == "true"
			continue
		}
		values[name] = value
	}
	if help {
		inv.helpCmd = inv.cmd
		return inv, errHelp
	}
	if showVersion {
		return inv, errVersion
	}
	if err := inv.globals(values, getenv); err != nil {
		return inv, err
	}
	if inv.cmd == "" {
		return inv, usagef("missing command (try shoalctl --help)")
	}
	spec := commands[inv.cmd]
	if len(positional) < len(spec.required) {
		return inv, usagef("%s: missing %s", inv.cmd, spec.required[len(positional)])
	}
	if len(positional) > len(spec.required)+len(spec.optional) {
		return inv, usagef("%s: unexpected argument %q", inv.cmd, clip(positional[len(spec.required)+len(spec.optional)]))
	}
	return inv, inv.command(positional, values)
}

// globals fills the global settings from flags, then the environment, then
// defaults.
func (inv *invocation) globals(values map[string]string, getenv func(string) string) error {
	servers, ok := values["servers"]
	if !ok {
		servers = getenv("SHOAL_SERVERS")
	}
	if strings.TrimSpace(servers) == "" {
		servers = defaultServers
	}
	for s := range strings.SplitSeq(servers, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if err := client.ValidateAddr(s); err != nil {
			return usagef("--servers: %q is not a host:port address", clip(s))
		}
		inv.servers = append(inv.servers, s)
	}
	if len(inv.servers) == 0 {
		return usagef("--servers: no address given")
	}
	if inv.cmd == "drain" || inv.cmd == "remove" {
		inv.timeout = defaultAdminTimeout
	}
	if v, ok := values["timeout"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return usagef("--timeout wants a positive duration such as 5s or 500ms, not %q", clip(v))
		}
		inv.timeout = d
	}
	id, ok := values["cluster-id"]
	if !ok {
		id = getenv("SHOAL_CLUSTER_ID")
	}
	if id != "" {
		n, err := strconv.ParseUint(id, 10, 64)
		if err != nil {
			return usagef("cluster id wants an unsigned integer, not %q", clip(id))
		}
		inv.clusterID = n
	}
	if s := getenv("SHOAL_SECRET"); s != "" {
		inv.secret = []byte(s)
	}
	inv.token = getenv("SHOAL_TOKEN")
	switch {
	case inv.token != "" && inv.secret != nil:
		return usagef("SHOAL_TOKEN and SHOAL_SECRET are both set: a node with client tokens refuses the cluster secret; unset one")
	case len(inv.token) > wire.MaxTokenLen:
		return usagef("SHOAL_TOKEN is %d bytes long; a token is at most %d bytes", len(inv.token), wire.MaxTokenLen)
	}
	for _, f := range []struct {
		name, env string
		v         *string
	}{{"tls-ca", "SHOAL_TLS_CA", &inv.tlsCA}, {"tls-cert", "SHOAL_TLS_CERT", &inv.tlsCert}, {"tls-key", "SHOAL_TLS_KEY", &inv.tlsKey}} {
		v, ok := values[f.name]
		if !ok {
			v = getenv(f.env)
		}
		*f.v = v
	}
	switch {
	case (inv.tlsCert == "") != (inv.tlsKey == ""):
		return usagef("--tls-cert and --tls-key go together")
	case inv.tlsCert != "" && inv.tlsCA == "":
		return usagef("--tls-cert needs --tls-ca (the CA that signed the nodes' certificates)")
	}
	return nil
}

// command fills the command's arguments and flags and checks them against
// the protocol's limits, so that nothing the cluster would refuse is sent.
func (inv *invocation) command(positional []string, values map[string]string) error {
	if spec := commands[inv.cmd]; (len(spec.required) > 0 && spec.required[0] == "TOPIC") || (inv.cmd == "watch" && len(positional) > 0) {
		topic := positional[0]
		switch {
		case topic == "":
			return usagef("%s: empty topic name", inv.cmd)
		case len(topic) > wire.MaxTopicLen:
			return usagef("%s: topic name is %d bytes long; the limit is %d bytes", inv.cmd, len(topic), wire.MaxTopicLen)
		}
		inv.topic = topic
	}
	var err error
	switch inv.cmd {
	case "assign":
		inv.owner = values["owner"]
		if len(inv.owner) > wire.MaxNodeIDLen {
			return usagef("assign: --owner is %d bytes long; a node id is at most %d bytes", len(inv.owner), wire.MaxNodeIDLen)
		}
		if v, ok := values["partitions"]; ok {
			var n uint64
			if n, err = parseUint("partitions", v, 1, wire.MaxPartitions); err != nil {
				return err
			}
			inv.partitions = uint32(n)
		}
	case "lookup":
		inv.linearizable = values["linearizable"] == "true"
	case "produce":
		inv.msg = positional[1]
		if inv.msg == "-" {
			inv.fromStdin, inv.msg = true, ""
		}
		if len(inv.msg) > wire.MaxRecordLen {
			return usagef("produce: MSG is %d bytes long; the limit is %d bytes", len(inv.msg), wire.MaxRecordLen)
		}
	case "fetch":
		if v, ok := values["from"]; ok {
			if inv.from, err = parseUint("from", v, 0, 1<<64-1); err != nil {
				return err
			}
		}
		if v, ok := values["max-bytes"]; ok {
			var n uint64
			if n, err = parseUint("max-bytes", v, 1, 1<<32-1); err != nil {
				return err
			}
			inv.maxBytes = uint32(n)
		}
		inv.format = "text"
		if v, ok := values["format"]; ok {
			if !slices.Contains(fetchFormats, v) {
				return usagef("fetch: --format wants one of %s, not %q", strings.Join(fetchFormats, ", "), clip(v))
			}
			inv.format = v
		}
		if inv.format == "raw" && inv.json {
			return usagef("fetch: --format raw writes the values' bytes, which --json cannot carry; use --format base64")
		}
	case "status":
		if len(positional) > 0 {
			if client.ValidateAddr(positional[0]) != nil {
				return usagef("status: %q is not a host:port address", clip(positional[0]))
			}
			inv.statusAddr = positional[0]
		}
	case "watch", "topics":
		prefix, hasPrefix := values["prefix"]
		switch {
		case hasPrefix && inv.topic != "":
			return usagef("watch: give a TOPIC or --prefix, not both")
		case len(prefix) > wire.MaxTopicLen:
			return usagef("%s: --prefix is %d bytes long; the limit is %d bytes", inv.cmd, len(prefix), wire.MaxTopicLen)
		}
		inv.prefix = prefix
		inv.position, inv.cursor = values["from"], values["cursor"]
		if v, ok := values["from"]; ok && v == "" {
			return usagef("watch: --from needs a position (printed when a watch stops)")
		}
		inv.splits = values["splits"] == "true"
		if inv.cmd == "topics" {
			inv.limit = client.DefaultListLimit
			inv.all = values["all"] == "true"
			_, limit := values["limit"]
			if _, cursor := values["cursor"]; inv.all && (limit || cursor) {
				return usagef("topics: --all lists every page; give it no --limit or --cursor")
			}
		}
		if v, ok := values["limit"]; ok {
			n, err := parseUint("limit", v, 1, wire.MaxListTopics)
			if err != nil {
				return err
			}
			inv.limit = int(n)
		}
	case "drain", "undrain", "remove":
		inv.force = values["force"] == "true"
		return inv.setNode(positional[0])
	case "transfer-leader":
		if inv.shard, err = strconv.ParseUint(positional[0], 10, 64); err != nil || inv.shard >= maxShards {
			return usagef("transfer-leader: SHARD wants a shard number in 0..%d, not %q", maxShards-1, clip(positional[0]))
		}
		return inv.setNode(positional[1])
	case "split":
		if inv.shard, err = strconv.ParseUint(positional[0], 10, 64); err != nil || inv.shard >= maxShards {
			return usagef("split: SHARD wants a shard number in 0..%d, not %q", maxShards-1, clip(positional[0]))
		}
	case "bench":
		return inv.bench.parse(values)
	case "help":
		if len(positional) > 0 {
			if _, ok := commands[positional[0]]; !ok {
				return usagef("help: unknown command %q (want one of %s)", clip(positional[0]), strings.Join(commandNames(), ", "))
			}
			inv.helpCmd = positional[0]
		}
		return errHelp
	case "completion":
		if !slices.Contains(completionShells, positional[0]) {
			return usagef("completion: want one of %s, not %q", strings.Join(completionShells, ", "), clip(positional[0]))
		}
		inv.shell = positional[0]
	}
	return nil
}

// maxShards bounds a shard number: no cluster has more shards (node.MaxShards).
const maxShards = 1 << 20

// setNode checks and sets the node a command names.
func (inv *invocation) setNode(id string) error {
	switch {
	case id == "":
		return usagef("%s: empty node id", inv.cmd)
	case len(id) > wire.MaxNodeIDLen:
		return usagef("%s: node id is %d bytes long; a node id is at most %d bytes", inv.cmd, len(id), wire.MaxNodeIDLen)
	}
	inv.node = id
	return nil
}

// parse fills the bench settings from its flags.
func (b *benchArgs) parse(values map[string]string) error {
	*b = benchArgs{op: values["op"], clients: defaultBenchClients, duration: defaultBenchDuration,
		topics: defaultBenchTopics, valueSize: defaultBenchValueSize}
	if b.op == "" {
		return usagef("bench: missing --op (one of %s)", strings.Join(benchOps, ", "))
	}
	if !slices.Contains(benchOps, b.op) {
		return usagef("bench: --op wants one of %s, not %q", strings.Join(benchOps, ", "), clip(b.op))
	}
	if v, ok := values["duration"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return usagef("--duration wants a positive duration such as 10s or 1m, not %q", clip(v))
		}
		b.duration = d
	}
	ints := []struct {
		name   string
		v      *int
		lo, hi uint64
	}{
		{"clients", &b.clients, 1, maxBenchClients},
		{"topics", &b.topics, 1, maxBenchTopics},
		{"value-size", &b.valueSize, 0, wire.MaxRecordLen},
		{"conns", &b.conns, 1, client.MaxConnsPerServer},
	}
	for _, f := range ints {
		if v, ok := values[f.name]; ok {
			n, err := parseUint(f.name, v, f.lo, f.hi)
			if err != nil {
				return err
			}
			*f.v = int(n)
		}
	}
	if v, ok := values["rate"]; ok {
		var err error
		if b.rate, err = parseUint("rate", v, 0, maxBenchRate); err != nil {
			return err
		}
	}
	return nil
}

func parseUint(name, v string, lo, hi uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, usagef("--%s wants an integer in %d..%d, not %q", name, lo, hi, clip(v))
	}
	return n, nil
}

// clip shortens what a user typed for an error message: one line, however
// long the input.
func clip(s string) string {
	const max = 64
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "…"
	}
	return s
}
