package main

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

// FuzzParseArgs: any command line parses to a runnable invocation or to a
// usage error of one short line; nothing panics.
func FuzzParseArgs(f *testing.F) {
	for _, s := range []string{
		"assign\x00topic-blue\x00--owner\x00n2",
		"--json\x00lookup\x00t\x00--linearizable=false",
		"produce\x00t\x00--\x00-x",
		"fetch\x00--from\x0018446744073709551615\x00t\x00--max-bytes=1",
		"--servers=127.0.0.1:1,[::1]:2\x00status\x00127.0.0.1:3",
		"-h", "", "--timeout\x00-1s\x00members",
		"bench\x00--op\x00mix\x00--clients=8\x00--rate\x00100\x00--duration=2s",
		"--version", "help\x00fetch", "completion\x00zsh", "fetch\x00t\x00--format\x00raw", "produce\x00t\x00-",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Split(line, "\x00")
		inv, err := parseArgs(args, env(nil))
		if inv == nil {
			t.Fatal("nil invocation")
		}
		if err != nil {
			var ue *usageError
			if !errors.Is(err, errHelp) && !errors.Is(err, errVersion) && !errors.As(err, &ue) {
				t.Fatalf("error %v is neither help, version nor a usage error", err)
			}
			if msg := err.Error(); len(msg) > 1024 {
				t.Fatalf("message of %d bytes", len(msg))
			}
			return
		}
		if _, ok := commands[inv.cmd]; !ok {
			t.Fatalf("unknown command %q accepted", inv.cmd)
		}
		if req := commands[inv.cmd].required; len(req) > 0 && req[0] == "TOPIC" && (inv.topic == "" || len(inv.topic) > wire.MaxTopicLen) {
			t.Fatalf("topic of %d bytes accepted", len(inv.topic))
		}
		if b := inv.bench; inv.cmd == "bench" && (!slices.Contains(benchOps, b.op) || b.clients < 1 || b.duration <= 0 ||
			b.topics < 1 || b.valueSize < 0 || b.valueSize > wire.MaxRecordLen) {
			t.Fatalf("bench settings %+v accepted", b)
		}
		if inv.cmd == "completion" && !slices.Contains(completionShells, inv.shell) ||
			inv.cmd == "fetch" && !slices.Contains(fetchFormats, inv.format) {
			t.Fatalf("shell %q, format %q accepted", inv.shell, inv.format)
		}
		if len(inv.servers) == 0 || inv.timeout <= 0 {
			t.Fatalf("servers %v, timeout %v", inv.servers, inv.timeout)
		}
	})
}
