package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

var devServers = []string{"127.0.0.1:7101", "127.0.0.1:7102", "127.0.0.1:7103"}

func TestParseArgs(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want invocation
	}{
		{"assign with defaults", []string{"assign", "topic-blue"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "assign", topic: "topic-blue"}},
		{"flags after the topic", []string{"assign", "t", "--owner", "n2", "--partitions=4"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "assign", topic: "t", owner: "n2", partitions: 4}},
		{"flags before the topic", []string{"assign", "--owner=n2", "--partitions", "4", "t"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "assign", topic: "t", owner: "n2", partitions: 4}},
		{"global flags anywhere", []string{"lookup", "t", "--json", "--servers", "10.0.0.1:1,10.0.0.2:2", "--linearizable"}, nil,
			invocation{servers: []string{"10.0.0.1:1", "10.0.0.2:2"}, json: true, timeout: defaultTimeout, cmd: "lookup", topic: "t", linearizable: true}},
		{"global flags first, single dash", []string{"-json", "-timeout", "3s", "revoke", "t"}, nil,
			invocation{servers: devServers, json: true, timeout: 3 * time.Second, cmd: "revoke", topic: "t"}},
		{"servers from the environment", []string{"members"}, map[string]string{"SHOAL_SERVERS": " 127.0.0.1:9001 , 127.0.0.1:9002 "},
			invocation{servers: []string{"127.0.0.1:9001", "127.0.0.1:9002"}, timeout: defaultTimeout, cmd: "members"}},
		{"flag beats environment", []string{"--servers=127.0.0.1:1", "shards"}, map[string]string{"SHOAL_SERVERS": "127.0.0.1:2"},
			invocation{servers: []string{"127.0.0.1:1"}, timeout: defaultTimeout, cmd: "shards"}},
		{"cluster id and secret from the environment", []string{"status"}, map[string]string{"SHOAL_CLUSTER_ID": "42", "SHOAL_SECRET": "s"},
			invocation{servers: devServers, timeout: defaultTimeout, clusterID: 42, secret: []byte("s"), cmd: "status"}},
		{"produce a message that looks like a flag", []string{"produce", "t", "--", "--not-a-flag"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "produce", topic: "t", msg: "--not-a-flag"}},
		{"produce with spaces", []string{"produce", "t", "hello world"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "produce", topic: "t", msg: "hello world"}},
		{"fetch from an offset", []string{"fetch", "--from", "17", "t", "--max-bytes=4096"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "fetch", topic: "t", from: 17, maxBytes: 4096, format: "text"}},
		{"status of one node", []string{"status", "127.0.0.1:7102"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "status", statusAddr: "127.0.0.1:7102"}},
		{"explicit false", []string{"lookup", "t", "--linearizable=false", "--json=false"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "lookup", topic: "t"}},
		{"token and TLS from the environment", []string{"members"}, map[string]string{"SHOAL_TOKEN": "tok", "SHOAL_TLS_CA": "/etc/ca.crt"},
			invocation{servers: devServers, timeout: defaultTimeout, token: "tok", tlsCA: "/etc/ca.crt", cmd: "members"}},
		{"TLS flags beat the environment", []string{"members", "--tls-ca", "a.crt", "--tls-cert=c.crt", "--tls-key", "c.key"}, map[string]string{"SHOAL_TLS_CA": "/etc/ca.crt"},
			invocation{servers: devServers, timeout: defaultTimeout, tlsCA: "a.crt", tlsCert: "c.crt", tlsKey: "c.key", cmd: "members"}},
		{"drain", []string{"drain", "n3", "--json"}, nil,
			invocation{servers: devServers, json: true, timeout: defaultAdminTimeout, cmd: "drain", node: "n3"}},
		{"drain with a timeout", []string{"drain", "n3", "--timeout", "30s"}, nil,
			invocation{servers: devServers, timeout: 30 * time.Second, cmd: "drain", node: "n3"}},
		{"undrain", []string{"undrain", "n3"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "undrain", node: "n3"}},
		{"transfer-leader", []string{"transfer-leader", "17", "n2"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "transfer-leader", shard: 17, node: "n2"}},
		{"remove with force", []string{"remove", "--force", "n4"}, nil,
			invocation{servers: devServers, timeout: defaultAdminTimeout, cmd: "remove", node: "n4", force: true}},
		{"bench with defaults", []string{"bench", "--op", "assign"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "bench",
				bench: benchArgs{op: "assign", clients: 64, duration: 10 * time.Second, topics: 1000, valueSize: 16}}},
		{"bench with every flag", []string{"--json", "bench", "--op=mix", "--clients", "256", "--duration=1m30s",
			"--rate", "5000", "--topics", "7", "--value-size=0", "--timeout", "2s", "--conns", "3"}, nil,
			invocation{servers: devServers, json: true, timeout: 2 * time.Second, cmd: "bench",
				bench: benchArgs{op: "mix", clients: 256, duration: 90 * time.Second, rate: 5000, topics: 7, conns: 3}}},
		{"bench, flags before the command", []string{"--servers", "127.0.0.1:1", "bench", "--op", "lookup-lin", "--rate=0"}, nil,
			invocation{servers: []string{"127.0.0.1:1"}, timeout: defaultTimeout, cmd: "bench",
				bench: benchArgs{op: "lookup-lin", clients: 64, duration: 10 * time.Second, topics: 1000, valueSize: 16}}},
		{"bench, largest values", []string{"bench", "--op", "produce", "--clients", "10000", "--topics", "1000000",
			"--rate", "10000000", "--value-size", "1048576"}, nil,
			invocation{servers: devServers, timeout: defaultTimeout, cmd: "bench",
				bench: benchArgs{op: "produce", clients: 10000, duration: 10 * time.Second, rate: 10_000_000, topics: 1_000_000, valueSize: 1 << 20}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseArgs(tc.args, env(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("parseArgs(%q) =\n%+v\nwant\n%+v", tc.args, *got, tc.want)
			}
		})
	}
}

func TestParseArgsRejects(t *testing.T) {
	long := strings.Repeat("x", 10<<20)
	tests := []struct {
		name string
		args []string
		want string // part of the message
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"asign", "t"}, `unknown command "asign"`},
		{"missing topic", []string{"assign"}, "assign: missing TOPIC"},
		{"missing message", []string{"produce", "t"}, "produce: missing MSG"},
		{"extra argument", []string{"revoke", "a", "b"}, `revoke: unexpected argument "b"`},
		{"members takes none", []string{"members", "x"}, `members: unexpected argument "x"`},
		{"10 MB topic", []string{"lookup", long}, "lookup: topic name is 10485760 bytes long; the limit is 255 bytes"},
		{"256-byte topic", []string{"assign", long[:256]}, "topic name is 256 bytes long"},
		{"empty topic", []string{"fetch", ""}, "fetch: empty topic name"},
		{"unknown flag", []string{"lookup", "t", "--owner", "n1"}, "lookup: unknown flag --owner"},
		{"command flag before the command", []string{"--owner", "n1", "assign", "t"}, "unknown flag --owner before the command"},
		{"flag without value", []string{"assign", "t", "--owner"}, "--owner needs a value"},
		{"partitions not a number", []string{"assign", "t", "--partitions", "many"}, "--partitions wants an integer in 1..65536"},
		{"partitions zero", []string{"assign", "t", "--partitions=0"}, "--partitions wants an integer in 1..65536"},
		{"partitions too many", []string{"assign", "t", "--partitions=65537"}, "--partitions wants an integer"},
		{"negative offset", []string{"fetch", "t", "--from", "-1"}, "--from wants an integer"},
		{"bad timeout", []string{"--timeout", "soon", "members"}, "--timeout wants a positive duration"},
		{"bad server", []string{"--servers", "localhost", "members"}, `--servers: "localhost" is not a host:port address`},
		{"empty servers", []string{"--servers", ",", "members"}, "--servers: no address given"},
		{"bad bool", []string{"--json=maybe", "members"}, "--json wants true or false"},
		{"bad cluster id", []string{"--cluster-id", "-1", "members"}, "cluster id wants an unsigned integer"},
		{"status of a non-address", []string{"status", "n1"}, `status: "n1" is not a host:port address`},
		{"owner too long", []string{"assign", "t", "--owner", long[:65]}, "node id is at most 64 bytes"},
		{"certificate without key", []string{"members", "--tls-ca", "ca", "--tls-cert", "c"}, "--tls-cert and --tls-key go together"},
		{"certificate without CA", []string{"members", "--tls-cert", "c", "--tls-key", "k"}, "--tls-cert needs --tls-ca"},
		{"bench without --op", []string{"bench", "--clients", "4"}, "bench: missing --op (one of assign, lookup, lookup-lin, produce, fetch, mix)"},
		{"bench, unknown op", []string{"bench", "--op", "revoke"}, `bench: --op wants one of assign, lookup, lookup-lin, produce, fetch, mix, not "revoke"`},
		{"bench, empty op", []string{"bench", "--op="}, "bench: missing --op"},
		{"bench, no clients", []string{"bench", "--op", "assign", "--clients", "0"}, "--clients wants an integer in 1..10000"},
		{"bench, too many clients", []string{"bench", "--op", "assign", "--clients", "10001"}, "--clients wants an integer in 1..10000"},
		{"bench, bad duration", []string{"bench", "--op", "assign", "--duration", "10"}, "--duration wants a positive duration"},
		{"bench, zero duration", []string{"bench", "--op", "assign", "--duration", "0s"}, "--duration wants a positive duration"},
		{"bench, negative rate", []string{"bench", "--op", "assign", "--rate", "-5"}, "--rate wants an integer in 0..10000000"},
		{"bench, fractional rate", []string{"bench", "--op", "assign", "--rate", "2.5"}, "--rate wants an integer"},
		{"bench, no topics", []string{"bench", "--op", "lookup", "--topics", "0"}, "--topics wants an integer in 1..1000000"},
		{"bench, value too large", []string{"bench", "--op", "produce", "--value-size", "1048577"}, "--value-size wants an integer in 0..1048576"},
		{"bench, no connections", []string{"bench", "--op", "lookup", "--conns", "0"}, "--conns wants an integer in 1..64"},
		{"bench, too many connections", []string{"bench", "--op", "lookup", "--conns", "65"}, "--conns wants an integer in 1..64"},
		{"bench, an argument", []string{"bench", "--op", "lookup", "t"}, `bench: unexpected argument "t"`},
		{"bench flag on another command", []string{"lookup", "t", "--clients", "4"}, "lookup: unknown flag --clients"},
		{"bench flag before the command", []string{"--op", "mix", "bench"}, "unknown flag --op before the command"},
		{"bench, value missing", []string{"bench", "--op", "mix", "--rate"}, "--rate needs a value"},
		{"drain without a node", []string{"drain"}, "drain: missing NODE"},
		{"drain of two nodes", []string{"drain", "n1", "n2"}, `drain: unexpected argument "n2"`},
		{"drain of an empty id", []string{"drain", ""}, "drain: empty node id"},
		{"undrain of a long id", []string{"undrain", long[:65]}, "undrain: node id is 65 bytes long; a node id is at most 64 bytes"},
		{"drain --force", []string{"drain", "n1", "--force"}, "drain: unknown flag --force"},
		{"transfer-leader without a node", []string{"transfer-leader", "3"}, "transfer-leader: missing NODE"},
		{"transfer-leader of a non-number", []string{"transfer-leader", "n2", "7"}, `transfer-leader: SHARD wants a shard number in 0..1048575, not "n2"`},
		{"transfer-leader of a negative shard", []string{"transfer-leader", "--", "-1", "n2"}, "SHARD wants a shard number"},
		{"transfer-leader past the last shard", []string{"transfer-leader", "1048576", "n2"}, "SHARD wants a shard number in 0..1048575"},
		{"remove without a node", []string{"remove", "--force"}, "remove: missing NODE"},
		{"remove with a bad force", []string{"remove", "n4", "--force=yes"}, "--force wants true or false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseArgs(tc.args, env(nil))
			var ue *usageError
			if !errors.As(err, &ue) {
				t.Fatalf("parseArgs = %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("message %q does not say %q", err, tc.want)
			}
			if len(err.Error()) > 200 || strings.Contains(err.Error(), "\n") {
				t.Fatalf("message is not one short line: %d bytes", len(err.Error()))
			}
		})
	}
}

func TestParseArgsCredentialsFromTheEnvironment(t *testing.T) {
	for name, vars := range map[string]map[string]string{
		"token and secret": {"SHOAL_TOKEN": "t", "SHOAL_SECRET": "s"},
		"token too long":   {"SHOAL_TOKEN": strings.Repeat("x", 257)},
	} {
		_, err := parseArgs([]string{"members"}, env(vars))
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
		if strings.Contains(err.Error(), "xxxx") {
			t.Errorf("%s: the message shows the token", name)
		}
	}
}

func TestParseArgsKeepsJSONOnError(t *testing.T) {
	inv, err := parseArgs([]string{"--json", "nope"}, env(nil))
	if err == nil || !inv.json {
		t.Fatalf("json %v, err %v: an error must still be printed as JSON", inv.json, err)
	}
}

func TestParseArgsHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"assign", "--help"}} {
		if _, err := parseArgs(args, env(nil)); !errors.Is(err, errHelp) {
			t.Errorf("parseArgs(%q) = %v, want errHelp", args, err)
		}
	}
}
