package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/security"
)

// startRealCluster starts size nodes of cluster 7 in this process and
// returns them with their client addresses.
func startRealCluster(t *testing.T, size int) ([]*node.Node, []string) {
	t.Helper()
	return startRealClusterWith(t, size, nil)
}

// startRealClusterWith is startRealCluster with each node's config passed
// through mut first (when not nil).
func startRealClusterWith(t *testing.T, size int, mut func(*node.Config)) ([]*node.Node, []string) {
	t.Helper()
	root := t.TempDir()
	var nodes []*node.Node
	var servers []string
	var seed string
	for i := range size {
		id := fmt.Sprintf("n%d", i+1)
		var join []string
		if seed != "" {
			join = []string{seed}
		}
		cfg := node.Config{
			ID: id, DataDir: filepath.Join(root, id),
			ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0",
			Join: join, BootstrapExpect: size, Shards: 16, Replicas: 3,
			ClusterID: 7, SwimPreset: "fast", Logger: slog.New(slog.DiscardHandler),
		}
		if mut != nil {
			mut(&cfg)
		}
		n, err := node.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		client, _, swimAddr := n.Addrs()
		if seed == "" {
			seed = swimAddr
		}
		nodes = append(nodes, n)
		servers = append(servers, client)
	}
	for _, n := range nodes {
		select {
		case <-n.Ready():
		case <-time.After(20 * time.Second):
			t.Fatalf("%s not ready", n.ID())
		}
	}
	return nodes, servers
}

func TestShoalctlAdminCommands(t *testing.T) {
	nodes, servers := startRealCluster(t, 4)
	for i := range 6 {
		if o := shoalctl(t, servers, "assign", fmt.Sprintf("admin-%d", i), "--owner", "n3"); o.code != 0 {
			t.Fatalf("assign: %s", o.stderr)
		}
	}

	o := shoalctl(t, servers, "--json", "drain", "n3")
	d := decode(t, o, "node", "topics_moved", "leaders_moved", "duration_s")
	if d["node"] != "n3" || d["topics_moved"] != 6.0 {
		t.Fatalf("drain: %v", d)
	}
	if !strings.Contains(o.stderr, "drain n3: ") || !strings.Contains(o.stderr, " left\n") {
		t.Fatalf("drain showed no progress: %q", o.stderr)
	}
	if st := nodes[2].Status(); st.TopicsOwned != 0 || st.ShardsLed != 0 {
		t.Fatalf("drained n3: %+v", st)
	}
	u := shoalctl(t, servers, "--json", "undrain", "n3")
	if m := decode(t, u, "node"); m["node"] != "n3" {
		t.Fatalf("undrain: %v", m)
	}
	table := shoalctl(t, servers, "drain", "n1")
	if table.code != 0 || !strings.HasPrefix(table.stdout, "NODE  TOPICS MOVED  LEADERS MOVED  DURATION\nn1") {
		t.Fatalf("drain table:\n%s%s", table.stdout, table.stderr)
	}
	shoalctl(t, servers, "undrain", "n1")

	// A shard, a voter of it that does not lead it, and a node that is not
	// a replica of it, as shards shows them.
	sh := decode(t, shoalctl(t, servers, "--json", "shards"), "shards")
	shard, to, stranger := -1, "", ""
	for _, e := range sh["shards"].([]any) {
		row := e.(map[string]any)
		var reps []string
		for _, r := range row["replicas"].([]any) {
			reps = append(reps, r.(string))
		}
		if len(reps) != 3 || row["leader"] == "" {
			continue
		}
		for _, n := range nodes {
			switch {
			case !slices.Contains(reps, n.ID()):
				stranger = n.ID()
			case n.ID() != row["leader"]:
				to = n.ID()
			}
		}
		shard = int(row["shard"].(float64))
		break
	}
	if shard < 0 || to == "" || stranger == "" {
		t.Fatalf("no shard with a follower and a stranger: %v", sh)
	}
	tl := decode(t, shoalctl(t, servers, "--json", "transfer-leader", fmt.Sprint(shard), to), "shard", "leader", "term")
	if tl["shard"] != float64(shard) || tl["leader"] != to {
		t.Fatalf("transfer-leader: %v", tl)
	}
	shoalctl(t, servers, "transfer-leader", fmt.Sprint(shard), stranger).failsWith(t, exitFailed, "is not a replica of shard")
	shoalctl(t, servers, "transfer-leader", "16", to).failsWith(t, exitFailed, "shard 16 does not exist")
	shoalctl(t, servers, "drain", "n9").failsWith(t, exitFailed, `no member "n9"`)
	shoalctl(t, servers, "remove", "n4").failsWith(t, exitFailed, "n4 is alive; stop it first, or --force")

	if err := nodes[3].Close(); err != nil {
		t.Fatal(err)
	}
	r := shoalctl(t, servers[:3], "--json", "--timeout", "60s", "remove", "n4", "--force")
	if m := decode(t, r, "node", "shards_replaced"); m["node"] != "n4" || m["shards_replaced"].(float64) == 0 {
		t.Fatalf("remove: %v (stderr %q)", m, r.stderr)
	}
	if !strings.Contains(r.stderr, "remove n4: ") {
		t.Fatalf("remove showed no progress: %q", r.stderr)
	}
}

func TestShoalctlAdminNeedsTheAdminRole(t *testing.T) {
	const admin, writer = "admin-token-0123456789", "write-token-0123456789"
	n, err := node.New(node.Config{
		ID: "n1", DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0",
		BootstrapExpect: 1, Shards: 4, Replicas: 1, ClusterID: 7, SwimPreset: "fast", Logger: slog.New(slog.DiscardHandler),
		Security: security.Security{ClientTokens: []security.Token{{Value: admin, Role: security.RoleAdmin}, {Value: writer, Role: security.RoleWrite}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	<-n.Ready()
	addr, _, _ := n.Addrs()
	for _, args := range [][]string{{"drain", "n1"}, {"undrain", "n1"}, {"transfer-leader", "0", "n1"}, {"remove", "n2"}} {
		shoalctlEnv(t, []string{"SHOAL_TOKEN=" + writer}, []string{addr}, append([]string{"--json"}, args...)...).
			failsWith(t, exitFailed, `"code":"Unauthorized"`)
	}
	o := shoalctlEnv(t, []string{"SHOAL_TOKEN=" + admin}, []string{addr}, "--json", "transfer-leader", "0", "n1")
	if m := decode(t, o, "shard", "leader", "term"); m["leader"] != "n1" {
		t.Fatalf("transfer-leader with the admin token: %v", m)
	}
}
