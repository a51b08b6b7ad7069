package node

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/wire"
)

const testShards = 64

func testLogger() *slog.Logger {
	if os.Getenv("SHOAL_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.DiscardHandler)
}

type testCluster struct {
	t     testing.TB
	nodes []*Node
	dirs  []string
	seed  string
	mut   func(*Config) // startClusterWith's, applied again on a restart
}

func nodeConfig(id, dir string, join []string, expect int) Config {
	return Config{
		ID: id, Rack: "r-" + id, DataDir: dir,
		ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0",
		Join: join, BootstrapExpect: expect, Shards: testShards, Replicas: 3,
		ClusterID: 42, SwimPreset: "fast", Logger: testLogger().With("n", id),
	}
}

// startCluster starts size nodes born together, and waits until each is
// ready.
//
// Its nodes listen on ports the kernel picks and keep their data in the
// test's own temp dir, so tests that start clusters call t.Parallel(): they
// spend most of their time waiting. A test stays serial when it measures
// the process (its heap) or fails on any delay a neighbour's load can
// cause (a SWIM suspicion), and says so.
func startCluster(t testing.TB, size int) *testCluster {
	t.Helper()
	return startClusterWith(t, size, nil)
}

// startClusterWith is startCluster with each node's config passed through
// mut first (when not nil).
func startClusterWith(t testing.TB, size int, mut func(*Config)) *testCluster {
	t.Helper()
	if mut == nil {
		return startClusterHooked(t, size, nil)
	}
	c := startClusterHooked(t, size, func(cfg *Config, _ *testHooks) { mut(cfg) })
	c.mut = mut
	return c
}

// startClusterHooked is startClusterWith with each node's test seams too.
func startClusterHooked(t testing.TB, size int, mut func(*Config, *testHooks)) *testCluster {
	t.Helper()
	c := &testCluster{t: t}
	root := t.TempDir()
	for i := range size {
		id := fmt.Sprintf("n%d", i+1)
		dir := filepath.Join(root, id)
		var join []string
		if c.seed != "" {
			join = []string{c.seed}
		}
		cfg := nodeConfig(id, dir, join, size)
		var hooks testHooks
		if mut != nil {
			mut(&cfg, &hooks)
		}
		n, err := newHooked(cfg, hooks)
		if err != nil {
			t.Fatalf("New %s: %v", id, err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatalf("Start %s: %v", id, err)
		}
		if c.seed == "" {
			_, _, c.seed = n.Addrs()
		}
		c.nodes = append(c.nodes, n)
		c.dirs = append(c.dirs, dir)
	}
	t.Cleanup(c.close)
	for _, n := range c.nodes {
		select {
		case <-n.Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready: %+v", n.ID(), n.Status())
		}
	}
	return c
}

// add starts one more node joining the cluster.
func (c *testCluster) add(id string) *Node {
	c.t.Helper()
	dir := filepath.Join(c.t.TempDir(), id)
	n, err := New(nodeConfig(id, dir, []string{c.seed}, len(c.nodes)))
	if err != nil {
		c.t.Fatalf("New %s: %v", id, err)
	}
	if err := n.Start(context.Background()); err != nil {
		c.t.Fatalf("Start %s: %v", id, err)
	}
	c.nodes = append(c.nodes, n)
	c.dirs = append(c.dirs, dir)
	return n
}

func (c *testCluster) close() {
	for _, n := range c.nodes {
		_ = n.Close()
	}
}

func (c *testCluster) node(id string) *Node {
	for _, n := range c.nodes {
		if n.ID() == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// clientOf returns a client that talks to node n only.
func clientOf(t testing.TB, n *Node) *client.Client {
	t.Helper()
	addr, _, _ := n.Addrs()
	cl, err := client.New(client.Config{Servers: []string{addr}, ClusterID: 42, RequestTimeout: 3 * time.Second, MaxRetries: 20, Logger: testLogger()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// handleNow runs a client request through n's request path and waits for
// its answer.
func handleNow(n *Node, kind wire.Kind, payload []byte) (wire.Kind, []byte) {
	ch := make(chan serve.Answer, 1)
	n.disp.Handle(kind, payload, 0, func(a serve.Answer) { ch <- a })
	a := <-ch
	return a.Kind, a.Payload
}

// held returns how n holds topic.
func held(n *Node, topic string) (ownership.Topic, bool) {
	return n.lease.Holding([]byte(topic))
}

func waitUntil(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
