//go:build linux

package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseArgs(t *testing.T) {
	o, err := parseArgs(nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.sizes) != 3 || o.sizes[0] != 3 || o.sizes[2] != 9 || o.nodeCores != 0.15 || o.op != "assign" || o.clients != 256 {
		t.Fatalf("defaults: %+v", o)
	}
	for _, bad := range [][]string{
		{"-sizes", "3,x"}, {"-sizes", "0"}, {"-sizes", "3,3"}, {"-sizes", "251"},
		{"-node-cores", "0"}, {"-node-cores", "0.001"}, {"-load-cores", "-1"},
		{"-op", "write"}, {"-rate", "-5"}, {"-clients", "0"}, {"-shards", "-1"}, {"-duration", "10ms"},
		{"-settle", "-1s"}, {"-timeout", "0s"}, {"extra"}, {"-nope"},
		{"-clients-per-node", "-1"}, {"-clients-per-node", "20000"},
		{"-clients-per-node", "2049638230412172402"}, // times 9 wraps to a small number
		{"-clients", "10", "-clients-per-node", "5"},
	} {
		_, err := parseArgs(bad)
		if _, ok := err.(*usageError); !ok {
			t.Errorf("%v: %v, want a usage error", bad, err)
		}
	}
}

// -clients-per-node gives each size its own count; -clients alone gives
// every size the same.
func TestClientsPerNode(t *testing.T) {
	o, err := parseArgs([]string{"-clients-per-node", "85"})
	if err != nil {
		t.Fatal(err)
	}
	if got := []int{o.clientsAt(3), o.clientsAt(9)}; got[0] != 255 || got[1] != 765 {
		t.Fatalf("clients at 3 and 9 nodes: %v", got)
	}
	if o, err = parseArgs([]string{"-clients", "100"}); err != nil || o.clientsAt(3) != 100 || o.clientsAt(9) != 100 {
		t.Fatalf("-clients 100: %v %v", o, err)
	}
}

// A bad command line is one line and exit 2, before anything else.
func TestRunUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"-sizes", "3,3"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d", code)
	}
	if got := errb.String(); got != "scaleout: -sizes: 3 given twice\n" {
		t.Fatalf("stderr %q", got)
	}
}

func TestEfficiency(t *testing.T) {
	r := &result{Sizes: []sizeResult{{Nodes: 3, OpsPerS: 1000}, {Nodes: 6, OpsPerS: 1500}, {Nodes: 9, Shards: 18, Clients: 765, OpsPerS: 2700}}}
	r.fillEfficiency()
	for i, want := range []struct{ speedup, eff float64 }{{1, 1}, {1.5, 0.75}, {2.7, 0.9}} {
		if s := r.Sizes[i]; s.Speedup != want.speedup || s.Efficiency != want.eff {
			t.Errorf("size %d: speedup %v efficiency %v, want %v %v", s.Nodes, s.Speedup, s.Efficiency, want.speedup, want.eff)
		}
	}
	var b bytes.Buffer
	if err := r.write(&b, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "9      18      765      2700") || !strings.Contains(b.String(), "90%") {
		t.Fatalf("table:\n%s", b.String())
	}
}

// As root: a group holds its quota, a process put in it by the wrapper
// runs there as the same pid, and remove leaves nothing behind.
func TestCgroups(t *testing.T) {
	if os.Geteuid() != 0 {
		// Creating cgroups and moving processes into them needs root,
		// which CI and the developers' machines have; the tool itself
		// refuses to run without it.
		t.Skip("cgroups need root") // the tool itself refuses to run without root
	}
	g, err := newCgroups()
	if err != nil {
		// A root without a cgroup CPU controller (some containers): the
		// tool itself exits with the same error there.
		t.Skipf("no cgroup CPU controller here: %v", err) // the tool exits with the same error here
	}
	dir, err := g.group("n1", 0.25)
	if err != nil {
		t.Fatal(err)
	}
	quota := "cpu.cfs_quota_us"
	want := "25000"
	if g.v2 {
		quota, want = "cpu.max", "25000 100000"
	}
	if b, _ := os.ReadFile(filepath.Join(dir, quota)); strings.TrimSpace(string(b)) != want {
		t.Errorf("%s = %q, want %q", quota, b, want)
	}
	name, args := enterCommand(dir, "/bin/sh", []string{"-c", "cat /proc/self/cgroup; echo pid $$"})
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), filepath.Base(g.parent)+"/n1") {
		t.Errorf("not run in the group:\n%s", out)
	}
	if _, err := g.throttled(dir); err != nil {
		t.Error(err)
	}
	if err := g.remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(g.parent); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", g.parent, err)
	}
}
