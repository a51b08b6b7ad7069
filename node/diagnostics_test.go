package node

import (
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartupDiagnostics: at the default level, a node waiting for
// --bootstrap-expect members says how many it sees, and a node that
// cannot join says why: nothing answers, another cluster id, another
// secret.
func TestStartupDiagnostics(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	start := func(id string, join []string, expect int, mut func(*Config)) *syncBuffer {
		t.Helper()
		var buf syncBuffer
		cfg := nodeConfig(id, filepath.Join(root, id), join, expect)
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		if mut != nil {
			mut(&cfg)
		}
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		return &buf
	}
	withSecret := func(s string) func(*Config) { return func(c *Config) { c.Secret = []byte(s) } }

	// The seed: alone, expecting three members.
	var seedAddr string
	{
		var buf syncBuffer
		cfg := nodeConfig("seed", filepath.Join(root, "seed"), nil, 3)
		cfg.Secret = []byte("right secret")
		cfg.Logger = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
		n, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := n.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = n.Close() })
		_, _, seedAddr = n.Addrs()
		if l := waitLog(t, &buf, `msg="waiting for members to create the cluster"`); !strings.Contains(l, "seen=1 expect=3 members=[seed]") {
			t.Errorf("the seed logs %q", l)
		}
	}
	cases := []struct {
		id, want string
		join     []string
		mut      func(*Config)
	}{
		{"nowhere", `cause=unreachable`, []string{"127.0.0.1:1"}, nil},
		{"other-cluster", `cause="wrong cluster id"`, []string{seedAddr}, func(c *Config) { c.ClusterID = 43; c.Secret = []byte("right secret") }},
		{"other-secret", `cause=authentication`, []string{seedAddr}, withSecret("wrong secret")},
		{"no-secret", `cause=authentication`, []string{seedAddr}, nil},
	}
	bufs := make([]*syncBuffer, len(cases))
	for i, c := range cases {
		bufs[i] = start(c.id, c.join, 3, c.mut)
	}
	for i, c := range cases {
		line := waitLog(t, bufs[i], `msg="join attempt failed"`)
		if !strings.Contains(line, c.want) || !strings.Contains(line, "seed="+c.join[0]) {
			t.Errorf("%s: %q, want %s", c.id, line, c.want)
		}
		// Not joined: it still waits, and says so.
		if l := waitLog(t, bufs[i], `msg="waiting for members to create the cluster"`); !strings.Contains(l, "seen=1 expect=3") {
			t.Errorf("%s: %q", c.id, l)
		}
	}
}

// waitLog waits until buf holds a line containing want, and returns it.
func waitLog(t *testing.T, buf *syncBuffer, want string) string {
	t.Helper()
	var line string
	waitUntil(t, 10*time.Second, "a log line with "+want, func() bool {
		for l := range strings.SplitSeq(buf.String(), "\n") {
			if strings.Contains(l, want) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}
