//go:build linux

package proccluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

var shoalBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "proccluster-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shoalBin = filepath.Join(dir, "shoal")
	// A pure Go build: the race build of the test needs cgo, the node
	// does not.
	cmd := exec.Command("go", "build", "-o", shoalBin, "github.com/shoalmq/shoal/cmd/shoal")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		_ = os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func testConfig(netns bool) Config {
	return Config{Binary: shoalBin, Nodes: 3, Shards: 16, Preset: "fast", Netns: netns,
		Args: []string{"--log-level", "warn"}, ReadyTimeout: 90 * time.Second}
}

// TestLoopbackCluster starts three nodes on 127.0.0.1 and runs every
// fault the package has but a cut: kill and restart, pause and resume;
// then Close must leave no process and no directory behind.
func TestLoopbackCluster(t *testing.T) {
	cfg := testConfig(false)
	var hooked atomic.Int32
	cfg.Command = func(n *Node, cmd *exec.Cmd) error {
		hooked.Add(1)
		cmd.Env = append(os.Environ(), "PROCCLUSTER_NODE="+n.ID)
		return nil
	}
	ctx := context.Background()
	c, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if hooked.Load() != 3 {
		t.Fatalf("the command hook ran %d times, want 3", hooked.Load())
	}
	env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Node(1).PID()))
	if err != nil || !contains(env, "PROCCLUSTER_NODE=n2") {
		t.Fatalf("n2's environment lacks what the hook set (%v)", err)
	}
	for _, n := range c.Nodes() {
		if cpu, err := n.CPUTime(); err != nil || cpu <= 0 {
			t.Errorf("%s: CPUTime %v, %v", n.ID, cpu, err)
		}
		if rss, err := n.RSS(); err != nil || rss < 1<<20 {
			t.Errorf("%s: RSS %d, %v", n.ID, rss, err)
		}
		if v, err := c.Counter(ctx, n.Index, "shoal_frames_sent_total"); err != nil || v <= 0 {
			t.Errorf("%s: shoal_frames_sent_total %v, %v", n.ID, v, err)
		}
	}
	if _, err := c.Counter(ctx, 0, "shoal_no_such_metric"); err == nil {
		t.Error("a missing metric read without error")
	}
	if len(c.ClientAddrs(1)) != 2 || c.ClientAddrs(1)[1] != c.Node(2).ClientAddr {
		t.Fatalf("ClientAddrs(1) = %v", c.ClientAddrs(1))
	}
	if err := c.Cut(0); err != ErrNoNetns {
		t.Fatalf("Cut on loopback: %v", err)
	}

	// kill -9 and restart with the same data and addresses.
	oldPID := c.Node(1).PID()
	if err := c.Kill(1); err != nil {
		t.Fatal(err)
	}
	if c.Node(1).Running() || c.Node(1).ExitErr() == nil {
		t.Fatalf("n2 still running after Kill (exit %v)", c.Node(1).ExitErr())
	}
	if err := c.Restart(1); err != nil {
		t.Fatal(err)
	}
	if err := c.Restart(1); err == nil {
		t.Fatal("Restart of a running node: no error")
	}
	if c.Node(1).PID() == oldPID {
		t.Fatal("the restarted node has its old pid")
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}

	// SIGSTOP and SIGCONT: a paused node answers no probe.
	if err := c.Pause(2); err != nil {
		t.Fatal(err)
	}
	if c.Ready(ctx, 2) {
		t.Fatal("a paused node answered /readyz")
	}
	if err := c.Resume(2); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}

	pids := []int{c.Node(0).PID(), c.Node(1).PID(), c.Node(2).PID()}
	dir := c.Dir()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still there after Close", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there after Close (%v)", dir, err)
	}
}

// TestStartFailsCleanly: a node that cannot start makes Start fail with
// its log's last lines, and removes what it made.
func TestStartFailsCleanly(t *testing.T) {
	cfg := testConfig(false)
	cfg.Args = []string{"--no-such-flag"}
	cfg.Dir = filepath.Join(t.TempDir(), "kept")
	_, err := Start(context.Background(), cfg)
	if err == nil {
		t.Fatal("Start with a bad flag: no error")
	}
	if !contains([]byte(err.Error()), "no-such-flag") {
		t.Fatalf("the error does not show the node's log: %v", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.Dir, "n1.log")); err != nil {
		t.Fatalf("a given Dir is kept: %v", err)
	}
	for _, bad := range []Config{{}, {Binary: shoalBin, Nodes: 0, Shards: 1}, {Binary: shoalBin, Nodes: 1, Shards: -1},
		{Binary: shoalBin, Nodes: 1, Shards: 1, Preset: "wan"}, {Binary: "/nonexistent", Nodes: 1, Shards: 1}} {
		if _, err := Start(context.Background(), bad); err == nil {
			t.Errorf("Start(%+v): no error", bad)
		}
	}
}

// TestNetnsCluster starts three nodes in namespaces, cuts one off and
// heals it; Close must remove the namespaces and the bridge.
func TestNetnsCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		// Creating network namespaces and veth pairs needs root, which CI
		// and the developers' machines have; elsewhere there is nothing to
		// run this on.
		t.Skip("network namespaces need root") // nothing to run on without root
	}
	ctx := context.Background()
	c, err := Start(ctx, testConfig(true))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if !c.Netns() || c.Node(0).Netns == "" {
		t.Fatal("not in namespaces")
	}
	sent, received, err := c.LinkBytes(0)
	if err != nil || sent == 0 || received == 0 {
		t.Fatalf("LinkBytes: %d %d %v", sent, received, err)
	}
	// The pid is the node's, not ip's: ip netns exec execs in place.
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c.Node(0).PID()))
	if err != nil || string(comm) != "shoal\n" {
		t.Fatalf("pid %d is %q (%v), want shoal", c.Node(0).PID(), comm, err)
	}
	if err := c.Cut(0); err != nil {
		t.Fatal(err)
	}
	if c.Ready(ctx, 0) {
		t.Fatal("a cut node answered /readyz")
	}
	if err := c.Heal(0); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		t.Fatal(err)
	}
	bridge, ns := c.net.bridge, c.Node(0).Netns
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if linkExists(bridge) {
		t.Errorf("bridge %s still there after Close", bridge)
	}
	if _, err := os.Stat(filepath.Join(nsDir, ns)); !os.IsNotExist(err) {
		t.Errorf("namespace %s still there after Close (%v)", ns, err)
	}
}

// TestSweepStale: namespaces and bridges named for a pid that no longer
// runs are removed; those of a live one are kept.
func TestSweepStale(t *testing.T) {
	if os.Geteuid() != 0 {
		// Creating network namespaces and veth pairs needs root, which CI
		// and the developers' machines have; elsewhere there is nothing to
		// run this on.
		t.Skip("network namespaces need root") // nothing to run on without root
	}
	dead := deadPID(t)
	deadTag := pad(strconv.FormatInt(int64(dead), 36), 5) + "zz"
	liveTag := newTag()
	made := []string{"pcl-" + deadTag + "-n1", "pcl-" + liveTag + "-n1"}
	for _, ns := range made {
		if err := run("ip", "netns", "add", ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, br := range []string{"pcb" + deadTag, "pcb" + liveTag} {
		if err := run("ip", "link", "add", br, "type", "bridge"); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, ns := range made {
			_ = run("ip", "netns", "del", ns)
		}
		_ = run("ip", "link", "del", "pcb"+liveTag)
		_ = run("ip", "link", "del", "pcb"+deadTag)
	})
	sweepStale()
	if _, err := os.Stat(filepath.Join(nsDir, made[0])); !os.IsNotExist(err) {
		t.Errorf("stale namespace %s kept", made[0])
	}
	if linkExists("pcb" + deadTag) {
		t.Errorf("stale bridge kept")
	}
	if _, err := os.Stat(filepath.Join(nsDir, made[1])); err != nil {
		t.Errorf("live namespace %s removed", made[1])
	}
	if !linkExists("pcb" + liveTag) {
		t.Errorf("live bridge removed")
	}
}

// deadPID is a pid no process has.
func deadPID(t *testing.T) int {
	for pid := 4194000; pid > 4000000; pid-- {
		if !alive(pid) {
			return pid
		}
	}
	t.Fatal("no free pid found")
	return 0
}

// TestSweepStaleDirs: the temporary directories of a process that no
// longer runs are removed; this process's are kept.
func TestSweepStaleDirs(t *testing.T) {
	stale := filepath.Join(os.TempDir(), "proccluster-"+strconv.Itoa(deadPID(t))+"-123")
	own, err := os.MkdirTemp("", dirPrefix())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(own); _ = os.RemoveAll(stale) })
	if err := os.MkdirAll(filepath.Join(stale, "n1"), 0o755); err != nil {
		t.Fatal(err)
	}
	sweepStaleDirs()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale %s kept (%v)", stale, err)
	}
	if _, err := os.Stat(own); err != nil {
		t.Errorf("own %s removed: %v", own, err)
	}
}

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
