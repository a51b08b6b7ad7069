//go:build linux

package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseArgsDefaults(t *testing.T) {
	o, err := parseArgs(nil, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.mode != "idle" || o.nodes != 3 || o.shards != 10000 || o.topics != 10000 || o.preset != "lan" ||
		o.window != 30*time.Second || o.settle != 10*time.Second || o.netns || o.json {
		t.Fatalf("idle defaults: %+v", o)
	}
	o, err = parseArgs([]string{"-mode", "failover"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.shards != 64 || o.preset != "fast" || o.fault != "kill" || o.trials != 20 || o.trialTopics != 4 ||
		o.pause != 10*time.Second || o.netns {
		t.Fatalf("failover defaults: %+v", o)
	}
	o, err = parseArgs([]string{"-mode", "mass"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 5 || o.shards != 256 || o.preset != "fast" || o.topics != 10000 || o.trials != 5 || o.clients != 128 ||
		o.trialTimeout != time.Minute || o.probe != "moved" {
		t.Fatalf("mass defaults: %+v", o)
	}
	o, err = parseArgs([]string{"-mode", "volume"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 3 || o.shards != 256 || o.preset != "lan" || o.topics != 5_000_000 || o.clients != 256 ||
		o.settle != 30*time.Second || o.lookupWindow != 20*time.Second {
		t.Fatalf("volume defaults: %+v", o)
	}
	o, err = parseArgs([]string{"-mode", "volume", "-nodes", "1", "-topics", "20000000", "-clients", "8", "-settle", "0s", "-lookup-window", "1s", "-preset", "fast"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.nodes != 1 || o.topics != 20_000_000 || o.clients != 8 || o.settle != 0 || o.lookupWindow != time.Second || o.preset != "fast" {
		t.Fatalf("volume flags: %+v", o)
	}
	o, err = parseArgs([]string{"-mode", "failover", "-shards", "16", "-preset", "lan", "-fault", "pause", "-pause", "3s", "-json"}, false)
	if err != nil {
		t.Fatal(err)
	}
	if o.shards != 16 || o.preset != "lan" || o.fault != "pause" || o.pause != 3*time.Second || !o.json {
		t.Fatalf("failover flags: %+v", o)
	}
	if o, err := parseArgs([]string{"-mode", "idle", "-topics", "0"}, false); err != nil || o.topics != 0 {
		t.Fatalf("-topics 0: %+v %v", o, err)
	}
	// cut implies namespaces, as root.
	if o, err := parseArgs([]string{"-mode", "failover", "-fault", "cut"}, true); err != nil || !o.netns {
		t.Fatalf("-fault cut as root: %+v %v", o, err)
	}
}

func TestParseArgsRefuses(t *testing.T) {
	full := filepath.Join(t.TempDir(), "full")
	if err := os.MkdirAll(filepath.Join(full, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		root bool
		want string
	}{
		{[]string{"-mode", "busy"}, false, `-mode "busy": want idle, failover, mass or volume`},
		{[]string{"-mode", "volume", "-topics", "0"}, false, "-topics 0: want 1 to 20000000 for -mode volume"},
		{[]string{"-mode", "volume", "-topics", "20000001"}, false, "-topics 20000001: want 1 to 20000000 for -mode volume"},
		{[]string{"-mode", "volume", "-lookup-window", "10ms"}, false, "-lookup-window 10ms: want at least 100ms"},
		{[]string{"-mode", "volume", "-clients", "0"}, false, "-clients 0"},
		{[]string{"-mode", "volume", "-window", "5s"}, false, "-window does not apply to -mode volume"},
		{[]string{"-mode", "volume", "-trials", "2"}, false, "-trials does not apply to -mode volume"},
		{[]string{"-mode", "volume", "-fault", "kill"}, false, "-fault does not apply to -mode volume"},
		{[]string{"-mode", "volume", "-probe", "sweep"}, false, "-probe does not apply to -mode volume"},
		{[]string{"-mode", "volume", "-profile", "/tmp/p"}, false, "-profile does not apply to -mode volume"},
		{[]string{"-mode", "idle", "-lookup-window", "5s"}, false, "-lookup-window does not apply to -mode idle"},
		{[]string{"-mode", "mass", "-lookup-window", "5s"}, false, "-lookup-window does not apply to -mode mass"},
		{[]string{"-mode", "failover", "-lookup-window", "5s"}, false, "-lookup-window does not apply to -mode failover"},
		{[]string{"-mode", "idle", "-topics", "5000000"}, false, "-topics 5000000: want 0 to 1000000"},
		{[]string{"-mode", "mass", "-nodes", "2"}, false, "-nodes 2: want 3 to 250 for -mode mass"},
		{[]string{"-mode", "mass", "-clients", "0"}, false, "-clients 0"},
		{[]string{"-mode", "mass", "-topics", "0"}, false, "-topics 0: want at least 1 for -mode mass"},
		{[]string{"-mode", "mass", "-fault", "pause"}, false, "-fault does not apply to -mode mass"},
		{[]string{"-mode", "mass", "-probe", "all"}, false, `-probe "all": want moved or sweep`},
		{[]string{"-mode", "idle", "-probe", "sweep"}, false, "-probe does not apply to -mode idle"},
		{[]string{"-mode", "failover", "-clients", "8"}, false, "-clients does not apply to -mode failover"},
		{[]string{"-nodes", "0"}, false, "-nodes 0"},
		{[]string{"-nodes", "251"}, false, "-nodes 251"},
		{[]string{"-mode", "failover", "-nodes", "2"}, false, "-nodes 2: want 3 to 250 for -mode failover"},
		{[]string{"-shards", "0"}, false, "-shards 0"},
		{[]string{"-shards", "x"}, false, `-shards "x": not a valid value`},
		{[]string{"-preset", "wan"}, false, `-preset "wan"`},
		{[]string{"-topics", "-1"}, false, "-topics -1"},
		{[]string{"-window", "0s"}, false, "-window 0s"},
		{[]string{"-settle", "-1s"}, false, "-settle -1s"},
		{[]string{"-timeout", "0s"}, false, "-timeout 0s"},
		{[]string{"-log-level", "loud"}, false, `-log-level "loud"`},
		{[]string{"-mode", "failover", "-fault", "crash"}, false, `-fault "crash"`},
		{[]string{"-mode", "failover", "-trials", "0"}, false, "-trials 0"},
		{[]string{"-mode", "failover", "-trial-topics", "0"}, false, "-trial-topics 0"},
		{[]string{"-mode", "failover", "-pause", "0s"}, false, "-pause 0s"},
		{[]string{"-mode", "failover", "-trial-timeout", "0s"}, false, "-trial-timeout 0s"},
		{[]string{"-mode", "failover", "-fault", "cut"}, false, "cut needs root"},
		{[]string{"-netns"}, false, "-netns needs root"},
		{[]string{"-mode", "idle", "-fault", "kill"}, false, "-fault does not apply to -mode idle"},
		{[]string{"-mode", "idle", "-trials", "3"}, false, "-trials does not apply to -mode idle"},
		{[]string{"-mode", "failover", "-topics", "5"}, false, "-topics does not apply to -mode failover"},
		{[]string{"-mode", "failover", "-window", "5s"}, false, "-window does not apply to -mode failover"},
		{[]string{"-shoal", "/nonexistent/shoal"}, false, "-shoal /nonexistent/shoal: not a file"},
		{[]string{"-dir", full}, false, "is not empty"},
		{[]string{"-bogus"}, false, "unknown flag -bogus"},
		{[]string{"-nodes"}, false, "flag -nodes needs a value"},
		{[]string{"idle"}, false, `unexpected argument "idle"`},
	}
	for _, c := range cases {
		_, err := parseArgs(c.args, c.root)
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("%q: error %v, want a usage error", c.args, err)
			continue
		}
		if !strings.Contains(ue.msg, c.want) || strings.Contains(ue.msg, "\n") {
			t.Errorf("%q: %q, want one line with %q", c.args, ue.msg, c.want)
		}
	}
}

// TestRunExitCodes: -h prints the usage and exits 0; a bad command line
// prints one line on stderr and exits 2, before anything is built or
// started.
func TestRunExitCodes(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, &out, &errOut); code != 0 || !strings.HasPrefix(out.String(), "usage: clusterbench") {
		t.Fatalf("-h: exit %d, stdout %q", code, out.String())
	}
	for _, args := range [][]string{{"-nodes", "x"}, {"-mode", "failover", "-trials", "0"}} {
		out.Reset()
		errOut.Reset()
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
		if out.Len() != 0 || strings.Count(errOut.String(), "\n") != 1 {
			t.Errorf("%q: stdout %q, stderr %q: want one line on stderr", args, out.String(), errOut.String())
		}
	}
	if os.Geteuid() != 0 {
		errOut.Reset()
		if code := run(context.Background(), []string{"-mode", "failover", "-fault", "cut"}, &out, &errOut); code != 2 || errOut.String() != "cut needs root\n" {
			t.Errorf("cut without root: exit %d, stderr %q", code, errOut.String())
		}
	}
}
