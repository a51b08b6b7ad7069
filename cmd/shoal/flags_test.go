package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/version"
	"github.com/shoalmq/shoal/node"
)

// required are the flags every `shoal node` needs.
var required = []string{
	"--id", "n1", "--data", "/tmp/n1",
	"--client-addr", "127.0.0.1:7101", "--peer-addr", "127.0.0.1:7201", "--swim-addr", "127.0.0.1:7301",
}

func with(extra ...string) []string { return append(append([]string{}, required...), extra...) }

func TestParseNodeArgs(t *testing.T) {
	o, err := parseNodeArgs(with(
		"--rack", "r2", "--join", "127.0.0.1:7301,127.0.0.1:7302", "--join", "127.0.0.1:7303",
		"--bootstrap-expect", "3", "--shards", "256", "--replicas", "5",
		"--metrics-addr", ":9100", "--cluster-id", "42", "--swim-preset", "fast",
		"--log-format", "json", "--log-level", "debug", "--metadata-sync-interval", "3s",
		"--store-memtable-mib", "4", "--handoff-timeout", "5s", "--change-log-len", "100",
		"--net-loops", "--store-log-sync", "runtime", "--store-log-sync-gap", "0", "--trim-at-rest", "0",
	), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := &nodeOptions{
		id: "n1", rack: "r2", dataDir: "/tmp/n1",
		clientAddr: "127.0.0.1:7101", peerAddr: "127.0.0.1:7201", swimAddr: "127.0.0.1:7301",
		join:            []string{"127.0.0.1:7301", "127.0.0.1:7302", "127.0.0.1:7303"},
		bootstrapExpect: 3, shards: 256, replicas: 5, metricsAddr: ":9100", clusterID: 42,
		swimPreset: "fast", logFormat: "json", logLevel: slog.LevelDebug, levelArg: "debug",
		metadataSync: 3 * time.Second, memtableMiB: 4, handoffTimeout: 5 * time.Second, changeLogLen: 100,
		netLoops: true, logSync: "runtime", logSyncGap: 0,
	}
	if !reflect.DeepEqual(o, want) {
		t.Fatalf("got  %+v\nwant %+v", o, want)
	}
}

func TestParseNodeArgsDefaults(t *testing.T) {
	o, err := parseNodeArgs(required, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o.rack != "default" || o.shards != 0 || o.splits.cfg != nil || o.replicas != 3 || o.bootstrapExpect != 1 ||
		o.swimPreset != "lan" || o.logFormat != "text" || o.logLevel != slog.LevelInfo || o.join != nil ||
		o.memtableMiB != 32 || o.changeLogLen != 1024 || o.netLoops || o.logSync != "raw" ||
		o.logSyncGap != node.DefaultStoreLogSyncGap || o.trimAtRest != 30*time.Second {
		t.Fatalf("defaults: %+v", o)
	}
}

// --store-log-sync-gap 0 turns the gap off; the node's zero value would
// mean its default.
func TestLogSyncGapReachesTheNode(t *testing.T) {
	for _, c := range []struct {
		arg  string
		want time.Duration
	}{{"0", -1}, {"2ms", 2 * time.Millisecond}} {
		o, err := parseNodeArgs(with("--store-log-sync-gap", c.arg), noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.nodeConfig(nil).StoreLogSyncGap; got != c.want {
			t.Errorf("--store-log-sync-gap %s: node gap %v, want %v", c.arg, got, c.want)
		}
	}
}

func TestParseNodeArgsRejects(t *testing.T) {
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", with("--frobnicate", "1"), "unknown flag --frobnicate"},
		{"missing id", required[2:], "missing --id"},
		{"missing data", append([]string{"--id", "n1"}, required[4:]...), "missing --data"},
		{"missing swim", required[:8], "missing --swim-addr"},
		{"flag without value", with("--join"), "flag --join needs a value"},
		{"address without port", with("--client-addr", "localhost"), `--client-addr "localhost": missing port in address`},
		{"address without host", with("--peer-addr", ":7201"), `--peer-addr ":7201": missing host`},
		{"bad port", with("--swim-addr", "127.0.0.1:http"), `port "http" is not a number`},
		{"port out of range", with("--swim-addr", "127.0.0.1:70000"), `port "70000" is not a number`},
		{"join port 0", with("--join", "127.0.0.1:0"), "port 0 cannot be joined"},
		{"bad join", with("--join", "127.0.0.1:7301,nonsense"), `--join "nonsense"`},
		{"bad metrics", with("--metrics-addr", "9100"), `--metrics-addr "9100"`},
		{"shards zero", with("--shards", "0"), `--shards "0": want a number of shards`},
		{"shards text", with("--shards", "many"), `--shards "many": want a number of shards`},
		{"replicas", with("--replicas", "0"), "--replicas 0"},
		{"trim too often", with("--trim-at-rest", "10ms"), "--trim-at-rest 10ms: want 0 (never) or at least 1s"},
		{"trim not a duration", with("--trim-at-rest", "often"), `--trim-at-rest "often"`},
		{"bootstrap", with("--bootstrap-expect", "-1"), "--bootstrap-expect -1"},
		{"cluster id", with("--cluster-id", "x"), `--cluster-id "x": not a number`},
		{"preset", with("--swim-preset", "wan"), `--swim-preset "wan"`},
		{"sync interval", with("--metadata-sync-interval", "-1s"), "--metadata-sync-interval -1s"},
		{"change log empty", with("--change-log-len", "0"), "--change-log-len 0: must be 1 to 65536"},
		{"change log huge", with("--change-log-len", "65537"), "--change-log-len 65537: must be 1 to 65536"},
		{"memtable zero", with("--store-memtable-mib", "0"), "--store-memtable-mib 0: must be 1 to 1024"},
		{"log sync unknown", with("--store-log-sync", "fast"), `--store-log-sync "fast": must be raw or runtime`},
		{"log sync gap negative", with("--store-log-sync-gap", "-1ms"), "--store-log-sync-gap -1ms: must be 0 to 100ms"},
		{"log sync gap huge", with("--store-log-sync-gap", "1s"), "--store-log-sync-gap 1s: must be 0 to 100ms"},
		{"log sync gap text", with("--store-log-sync-gap", "soon"), `--store-log-sync-gap "soon"`},
		{"handoff timeout", with("--handoff-timeout", "-1s"), "--handoff-timeout -1s: must not be negative"},
		{"memtable huge", with("--store-memtable-mib", "4096"), "--store-memtable-mib 4096: must be 1 to 1024"},
		{"memtable text", with("--store-memtable-mib", "big"), `--store-memtable-mib "big": not a number`},
		{"log format", with("--log-format", "xml"), `--log-format "xml"`},
		{"log level", with("--log-level", "loud"), `--log-level "loud"`},
		{"positional", with("extra"), `unexpected argument "extra"`},
		{"long id", with("--id", strings.Repeat("x", 65)), "--id is 65 bytes long"},
		{"huge address", with("--client-addr", strings.Repeat("x", 10<<20)+":1"), "bytes long; the limit is 256"},
		{"missing config", with("--config", "/nonexistent/shoal.conf"), "--config: open /nonexistent/shoal.conf"},
		{"missing secret", with("--secret-file", "/nonexistent/secret"), "--secret-file: open /nonexistent/secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseNodeArgs(c.args, noEnv)
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("err = %v, want a usage error", err)
			}
			if !strings.Contains(ue.msg, c.want) || strings.Contains(ue.msg, "\n") || len(ue.msg) > 200 {
				t.Fatalf("message %q, want one short line containing %q", ue.msg, c.want)
			}
		})
	}
}

func writeFile(t *testing.T, name, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestConfigFileFlagsWin(t *testing.T) {
	conf := writeFile(t, "shoal.conf", `
# a node
id = n7
rack=r3
data = /var/lib/shoal
client-addr = 127.0.0.1:7101
peer-addr = 127.0.0.1:7201
swim-addr = 127.0.0.1:7301
join = 127.0.0.1:7301, 127.0.0.1:7302
--shards = 128
log-level = warn
`)
	o, err := parseNodeArgs([]string{"--config", conf, "--id", "n8", "--log-level", "error"}, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if o.id != "n8" || o.logLevel != slog.LevelError {
		t.Fatalf("flags must win over the file: id %q level %v", o.id, o.logLevel)
	}
	if o.rack != "r3" || o.dataDir != "/var/lib/shoal" || o.shards != 128 ||
		!reflect.DeepEqual(o.join, []string{"127.0.0.1:7301", "127.0.0.1:7302"}) {
		t.Fatalf("file values not applied: %+v", o)
	}
}

func TestConfigFileRejects(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"unknown key", "colour = blue\n", `line 1: unknown setting "colour"`},
		{"no equals", "\n\nid n1\n", "line 3: want name = value"},
		{"bad value", "shards = lots\n", "line 1: shards \"lots\""},
		{"nested config", "config = other.conf\n", `unknown setting "config"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseNodeArgs(with("--config", writeFile(t, "c.conf", c.text)), noEnv)
			var ue *usageError
			if !errors.As(err, &ue) || !strings.Contains(ue.msg, c.want) {
				t.Fatalf("err = %v, want a usage error containing %q", err, c.want)
			}
		})
	}
}

func TestSecretFile(t *testing.T) {
	o, err := parseNodeArgs(with("--secret-file", writeFile(t, "secret", "s3cret\n")), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if string(o.secret) != "s3cret" {
		t.Fatalf("secret %q", o.secret)
	}
	_, err = parseNodeArgs(with("--secret-file", writeFile(t, "empty", "\n")), noEnv)
	if err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty secret: err = %v", err)
	}
}

func TestParseDevArgs(t *testing.T) {
	o, err := parseDevArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 3 || o.basePort != 7100 || o.replicas != 3 || o.shards != defaultDevShards || o.logLevel != slog.LevelWarn {
		t.Fatalf("defaults: %+v", o)
	}
	c, p, s := o.devAddrs(2)
	if c != "127.0.0.1:7102" || p != "127.0.0.1:7202" || s != "127.0.0.1:7302" {
		t.Fatalf("node 2 addresses: %s %s %s", c, p, s)
	}
	o, err = parseDevArgs([]string{"--nodes", "1", "--base-port", "20000", "--dir", "/tmp/x"})
	if err != nil {
		t.Fatal(err)
	}
	if o.replicas != 1 || o.dir != "/tmp/x" {
		t.Fatalf("one node: %+v", o)
	}
	for _, bad := range [][]string{
		{"--nodes", "0"}, {"--nodes", "100"}, {"--base-port", "65400"}, {"--base-port", "0"},
		{"--replicas", "4"}, {"--frob"}, {"--log-format", "xml"}, {"now"},
	} {
		_, err := parseDevArgs(bad)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: err = %v, want a usage error", bad, err)
		}
	}
}

func TestRunUsage(t *testing.T) {
	cases := []struct {
		args     []string
		code     int
		out, err string
	}{
		{nil, exitUsage, "", "shoal: missing command"},
		{[]string{"frobnicate"}, exitUsage, "", `shoal: unknown command "frobnicate"`},
		{[]string{"help"}, exitOK, "usage: shoal COMMAND", ""},
		{[]string{"node", "--help"}, exitOK, "usage: shoal node", ""},
		{[]string{"dev", "-h"}, exitOK, "usage: shoal dev", ""},
		{[]string{"--version"}, exitOK, version.Get().String("shoal") + "\n", ""},
		{[]string{"version"}, exitOK, "shoal ", ""},
		{[]string{"node", "--id", "n1"}, exitUsage, "", "shoal node: missing --data"},
		{[]string{"dev", "--nodes", "x"}, exitUsage, "", `shoal dev: --nodes "x": not a number`},
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != c.code || !strings.HasPrefix(stdout.String(), c.out) || !strings.HasPrefix(stderr.String(), c.err) {
			t.Errorf("%q: code %d stdout %q stderr %q; want %d, %q, %q", c.args, code, stdout.String(), stderr.String(), c.code, c.out, c.err)
		}
		if c.err != "" && strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%q: stderr is not one line: %q", c.args, stderr.String())
		}
	}
}

// noEnv is an environment with no SHOAL_* variables.
func noEnv(string) string { return "" }

func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// TestEnvPrecedence: a flag on the command line wins over its SHOAL_*
// variable, which wins over --config (itself given as SHOAL_CONFIG here),
// which wins over the default.
func TestEnvPrecedence(t *testing.T) {
	conf := writeFile(t, "shoal.conf", "rack = r-file\nshards = 128\nreplicas = 2\nlog-level = warn\n")
	env := envOf(map[string]string{
		"SHOAL_CONFIG":          conf,
		"SHOAL_RACK":            "r-env",
		"SHOAL_SHARDS":          "256",
		"SHOAL_LOG_LEVEL":       "debug",
		"SHOAL_JOIN":            "127.0.0.1:7302,127.0.0.1:7303",
		"SHOAL_TLS_CLIENT_AUTH": "", // empty: unset
		"SHOAL_PPROF":           "true",
		"SHOAL_METRICS_ADDR":    ":9100",
		"SHOAL_SERVERS":         "not a flag of shoal node: ignored",
	})
	o, err := parseNodeArgs(with("--log-level", "error"), env)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case o.logLevel != slog.LevelError:
		t.Errorf("log level %v: the flag must win", o.logLevel)
	case o.rack != "r-env" || o.shards != 256:
		t.Errorf("rack %q shards %d: the environment must win over the file", o.rack, o.shards)
	case o.replicas != 2:
		t.Errorf("replicas %d: the file must win over the default", o.replicas)
	case o.memtableMiB != 32 || o.tlsClientAuth:
		t.Errorf("memtable %d tls-client-auth %v: defaults", o.memtableMiB, o.tlsClientAuth)
	case !reflect.DeepEqual(o.join, []string{"127.0.0.1:7302", "127.0.0.1:7303"}) || !o.pprof || o.metricsAddr != ":9100":
		t.Errorf("join %v pprof %v metrics %q from the environment", o.join, o.pprof, o.metricsAddr)
	}
	// A flag given both ways is taken from the command line only.
	o, err = parseNodeArgs(with("--join", "127.0.0.1:7304"), env)
	if err != nil || !reflect.DeepEqual(o.join, []string{"127.0.0.1:7304"}) {
		t.Fatalf("join %v, %v", o.join, err)
	}
	// The required flags can all come from the environment.
	o, err = parseNodeArgs(nil, envOf(map[string]string{"SHOAL_ID": "n5", "SHOAL_DATA": "/tmp/n5",
		"SHOAL_CLIENT_ADDR": "127.0.0.1:7105", "SHOAL_PEER_ADDR": "127.0.0.1:7205", "SHOAL_SWIM_ADDR": "127.0.0.1:7305"}))
	if err != nil || o.id != "n5" || o.swimAddr != "127.0.0.1:7305" {
		t.Fatalf("from the environment only: %+v, %v", o, err)
	}
}

func TestEnvRejects(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"SHOAL_SHARDS": "lots"}, `SHOAL_SHARDS="lots": want a number of shards`},
		{map[string]string{"SHOAL_TLS_CLIENT_AUTH": "maybe"}, `SHOAL_TLS_CLIENT_AUTH="maybe"`},
		{map[string]string{"SHOAL_CONFIG": "/nonexistent/shoal.conf"}, "--config: open /nonexistent/shoal.conf"},
		{map[string]string{"SHOAL_PPROF": "true"}, "--pprof needs --metrics-addr"},
	} {
		_, err := parseNodeArgs(required, envOf(c.env))
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(ue.msg, c.want) {
			t.Errorf("%v: err = %v, want a usage error containing %q", c.env, err, c.want)
		}
	}
}

// TestDocsListEveryNodeFlag: the flag table of docs/operations.md names
// each flag of shoal node and its variable.
func TestDocsListEveryNodeFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	newNodeFlagSet(&nodeOptions{}).VisitAll(func(f *flag.Flag) {
		if !strings.Contains(doc, "| `--"+f.Name) || !strings.Contains(doc, "`"+envName(f.Name)+"` |") {
			t.Errorf("docs/operations.md does not list `--%s` with `%s`", f.Name, envName(f.Name))
		}
	})
}

// TestDocsListEveryDevFlag: the flag table of docs/cli.md names each flag
// shoal dev's usage names.
func TestDocsListEveryDevFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	names := regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(devUsage, -1)
	if len(names) == 0 {
		t.Fatal("no flags found in shoal dev's usage")
	}
	for _, m := range names {
		if !strings.Contains(doc, "| `--"+m[1]) {
			t.Errorf("docs/cli.md has no row for shoal dev --%s", m[1])
		}
	}
}

// Any automatic-split flag turns automatic splits on, the triggers not
// given keeping their defaults; a bad value is one line and exit 2.
func TestSplitFlags(t *testing.T) {
	o, err := parseNodeArgs(append(slices.Clone(required), "--shards", "16"), noEnv)
	if err != nil || o.splits.cfg != nil || o.shards != 16 {
		t.Fatalf("--shards alone: %+v %v, want a fixed layout", o, err)
	}
	o, err = parseNodeArgs(append(slices.Clone(required), "--shards", "16", "--split-topics", "500", "--max-shards", "64"), noEnv)
	if err != nil || o.splits.cfg == nil {
		t.Fatalf("--split-topics: %v", err)
	}
	want := node.DefaultSplits(false)
	want.Topics, want.MaxShards = 500, 64
	if *o.splits.cfg != want {
		t.Fatalf("splits %+v, want %+v", *o.splits.cfg, want)
	}
	if o, err := parseNodeArgs(append(slices.Clone(required), "--swim-preset", "fast", "--split-rate", "0"), noEnv); err != nil || o.splits.cfg.Rate != 0 || o.splits.cfg.Window != node.DefaultSplits(true).Window {
		t.Fatalf("--split-rate 0 with the fast preset: %+v %v", o.splits.cfg, err)
	}
	if o, err := parseNodeArgs(append(slices.Clone(required), "--split-mib", "16"), noEnv); err != nil || o.splits.cfg.Bytes != 16<<20 || o.splits.cfg.Topics != node.DefaultSplits(false).Topics {
		t.Fatalf("--split-mib 16: %+v %v", o.splits.cfg, err)
	}
	for _, bad := range [][]string{{"--split-mib", "-2"}, {"--split-mib", "2000000"}, {"--split-window", "0s"}, {"--split-topics", "-1"}, {"--split-rate", "x"}, {"--shards-per-member", "1.5"}} {
		_, err := parseNodeArgs(append(slices.Clone(required), bad...), noEnv)
		var ue *usageError
		if !errors.As(err, &ue) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one usage line", bad, err)
		}
	}
}
