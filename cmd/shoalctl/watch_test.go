package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node"
)

// watchProcess is a running shoalctl watch.
type watchProcess struct {
	cmd    *exec.Cmd
	lines  *bufio.Scanner
	stderr *strings.Builder
}

func startWatch(t *testing.T, servers []string, args ...string) *watchProcess {
	t.Helper()
	cmd := exec.Command(shoalctlBinary(t), append([]string{"watch"}, args...)...)
	cmd.Env = append(os.Environ(), "SHOAL_SERVERS="+strings.Join(servers, ","), "SHOAL_CLUSTER_ID=7", "SHOAL_SECRET=", "SHOAL_TOKEN=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	w := &watchProcess{cmd: cmd, lines: bufio.NewScanner(out), stderr: &strings.Builder{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return w
}

func (w *watchProcess) line(t *testing.T) string {
	t.Helper()
	if !w.lines.Scan() {
		t.Fatalf("watch ended: %v; stderr %q", w.lines.Err(), w.stderr.String())
	}
	return w.lines.Text()
}

// stop interrupts the watch and returns the position it printed.
func (w *watchProcess) stop(t *testing.T) string {
	t.Helper()
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for w.lines.Scan() {
		t.Errorf("more output after the changes: %q", w.lines.Text())
	}
	if err := w.cmd.Wait(); err != nil {
		t.Fatalf("interrupted watch: %v; stderr %q", err, w.stderr.String())
	}
	m := regexp.MustCompile(`^shoalctl: watch stopped; resume with --from (\S+)\n$`).FindStringSubmatch(w.stderr.String())
	if m == nil {
		t.Fatalf("stderr %q does not give the position", w.stderr.String())
	}
	return m[1]
}

func TestShoalctlWatchAndTopics(t *testing.T) {
	_, servers := startRealClusterWith(t, 3, func(c *node.Config) { c.ChangeLogLen = 6 })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ok := func(args ...string) outcome {
		t.Helper()
		o := shoalctl(t, servers, args...)
		if o.code != 0 {
			t.Fatalf("shoalctl %q: exit %d: %s", args, o.code, o.stderr)
		}
		return o
	}
	// The table's header comes once the watch knows where it starts: every
	// change after it is shown.
	w := startWatch(t, servers, "--prefix", "t-")
	if h := w.line(t); !strings.HasPrefix(h, "CHANGE    TOPIC") {
		t.Fatalf("header %q", h)
	}
	ok("assign", "t-a", "--owner", "n1")
	ok("assign", "t-a", "--owner", "n2")
	cl, err := client.New(client.Config{Servers: servers, ClusterID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.UpdatePartitions(ctx, "t-a", 3); err != nil {
		t.Fatal(err)
	}
	ok("revoke", "t-a")
	var got []string
	for range 4 {
		got = append(got, strings.Join(strings.Fields(w.line(t)), " "))
	}
	want := []string{"assigned t-a n1 " + servers[0] + " 1 1", "moved t-a n2 " + servers[1] + " 2 1",
		"updated t-a n2 " + servers[1] + " 2 3", "revoked t-a - - 3 0"}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]+" ") {
			t.Fatalf("watch line %d: %q, want %q and the shard", i, got[i], want[i])
		}
	}
	pos := w.stop(t)

	// Resumed with --json: one object per change with exactly its keys.
	ok("assign", "t-b", "--owner", "n3")
	w = startWatch(t, servers, "--json", "--prefix", "t-", "--from", pos)
	line := w.line(t)
	var ch map[string]any
	if err := json.Unmarshal([]byte(line), &ch); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	var keys []string
	for k := range ch {
		keys = append(keys, k)
	}
	if !sameSet(keys, []string{"topic", "change", "owner", "owner_addr", "epoch", "partitions", "shard"}) ||
		ch["topic"] != "t-b" || ch["change"] != "assigned" || ch["owner"] != "n3" || ch["owner_addr"] != servers[2] || ch["epoch"] != 1.0 {
		t.Fatalf("watch --json line %q", line)
	}
	w.stop(t)

	// Topics, a page at a time.
	ok("assign", "t-c", "--owner", "n1")
	ok("assign", "other", "--owner", "n1")
	var listed []string
	cursor := ""
	for pages := 0; ; pages++ {
		args := []string{"--json", "topics", "--prefix", "t-", "--limit", "1"}
		if cursor != "" {
			args = append(args, "--cursor", cursor)
		}
		page := decode(t, ok(args...), "topics", "next")
		topics, _ := page["topics"].([]any)
		if len(topics) > 1 || pages > 3 {
			t.Fatalf("page %d: %v", pages, page)
		}
		for _, tp := range topics {
			m := tp.(map[string]any)
			var keys []string
			for k := range m {
				keys = append(keys, k)
			}
			if !sameSet(keys, []string{"topic", "owner", "owner_addr", "epoch", "partitions", "shard"}) {
				t.Fatalf("topic keys %v", keys)
			}
			listed = append(listed, m["topic"].(string))
		}
		if cursor, _ = page["next"].(string); cursor == "" {
			break
		}
	}
	slices.Sort(listed)
	if !slices.Equal(listed, []string{"t-b", "t-c"}) {
		t.Fatalf("listed %q", listed)
	}
	if o := ok("topics"); !strings.HasPrefix(o.stdout, "TOPIC") || !strings.Contains(o.stdout, "other") || strings.Contains(o.stdout, "next page") {
		t.Fatalf("topics table:\n%s", o.stdout)
	}

	// A position older than the nodes keep: the watch says so, exit 1.
	for i := range 8 {
		ok("assign", "t-b", "--owner", []string{"n1", "n2"}[i%2])
	}
	shoalctl(t, servers, "watch", "t-b", "--from", pos).failsWith(t, 1, "compacted")
	shoalctl(t, servers, "--json", "watch", "t-b", "--from", pos).failsWith(t, 1, `"code":"Compacted"`)
	shoalctl(t, servers, "watch", "--from", "garbage").failsWith(t, 2, "bad position")
	shoalctl(t, servers, "watch", "a", "b").failsWith(t, 2, `unexpected argument "b"`)
	shoalctl(t, servers, "topics", "--limit", "0").failsWith(t, 2, "--limit wants an integer")
	shoalctl(t, servers, "topics", "--cursor", "garbage").failsWith(t, 2, "bad position")

	// With --splits, a split of a watched shard is a line of its own, and
	// the watch goes on in the halves.
	a := decode(t, ok("--json", "lookup", "t-c"), "topic", "owner", "owner_addr", "epoch", "partitions", "shard")
	shard := uint64(a["shard"].(float64))
	w = startWatch(t, servers, "--json", "--splits", "--prefix", "t-")
	sp := decode(t, ok("--json", "split", strconv.FormatUint(shard, 10)), "shard", "leader", "term", "low", "high")
	line = w.line(t)
	var split struct {
		Change string    `json:"change"`
		Shard  uint64    `json:"shard"`
		Halves [2]uint64 `json:"halves"`
		Index  uint64    `json:"index"`
	}
	if err := json.Unmarshal([]byte(line), &split); err != nil || split.Change != "split" || split.Shard != shard || split.Index == 0 ||
		float64(split.Halves[0]) != sp["low"] || float64(split.Halves[1]) != sp["high"] {
		t.Fatalf("watch --splits line %q after a split of shard %d into %v and %v", line, shard, sp["low"], sp["high"])
	}
	ok("assign", "t-c", "--owner", "n2")
	if err := json.Unmarshal([]byte(w.line(t)), &ch); err != nil || ch["topic"] != "t-c" || ch["change"] != "moved" ||
		(uint64(ch["shard"].(float64)) != split.Halves[0] && uint64(ch["shard"].(float64)) != split.Halves[1]) {
		t.Fatalf("after the split: %v, %v", ch, err)
	}
	w.stop(t)
}
