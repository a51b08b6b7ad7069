package main

import (
	"errors"
	"strings"
	"testing"
)

// FuzzParseNodeArgs: any `shoal node` command line parses to options that
// pass the checks, or to a usage error of one short line; nothing panics.
func FuzzParseNodeArgs(f *testing.F) {
	for _, s := range []string{
		strings.Join(required, "\x00"),
		strings.Join(with("--join", "127.0.0.1:7301,127.0.0.1:7302", "--shards", "64"), "\x00"),
		strings.Join(with("--replicas=5", "--log-format=json", "--log-level=debug"), "\x00"),
		"--id\x00n1\x00--client-addr\x00[::1]:7101",
		"-h", "", "--shards\x00-1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.Contains(line, "config") || strings.Contains(line, "secret") {
			return // these read files named by the input
		}
		o, err := parseNodeArgs(strings.Split(line, "\x00"), noEnv)
		if err != nil {
			var ue *usageError
			if !errors.Is(err, errHelp) && !errors.As(err, &ue) {
				t.Fatalf("error %v is neither help nor a usage error", err)
			}
			if msg := err.Error(); len(msg) > 512 || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("message %q is not one short line", msg)
			}
			return
		}
		if o.id == "" || o.dataDir == "" || o.shards > maxShards || o.replicas < 1 || o.bootstrapExpect < 1 {
			t.Fatalf("accepted %+v", o)
		}
		if o.splits.cfg != nil && o.splits.cfg.Validate() != nil {
			t.Fatalf("accepted automatic splits %+v", *o.splits.cfg)
		}
		for _, a := range append([]string{o.clientAddr, o.peerAddr, o.swimAddr}, o.join...) {
			if checkAddr(a, true) != nil {
				t.Fatalf("accepted address %q", a)
			}
		}
	})
}
