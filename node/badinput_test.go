package node

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

func TestBadRequestsGetTypedErrors(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	addr, _, _ := c.nodes[0].Addrs()
	for _, tc := range []struct {
		name    string
		kind    wire.Kind
		payload []byte
		code    wire.ErrorCode
	}{
		{"garbage assign", wire.KindAssign, []byte{0xff, 0xff}, wire.CodeBadRequest},
		{"empty topic", wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: nil}), wire.CodeBadRequest},
		{"peer frame from a client", wire.KindRaftBatch, nil, wire.CodeBadRequest},
		{"forward from a client", wire.KindForward, nil, wire.CodeBadRequest},
		{"answer kind as a request", wire.KindAssignment, nil, wire.CodeBadRequest},
		{"unknown topic", wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("nope"), Linearizable: true}), wire.CodeNotFound},
		{"revoke unknown topic", wire.KindRevoke, wire.AppendRevoke(nil, &wire.Revoke{Topic: []byte("nope")}), wire.CodeNotFound},
		{"produce to a non-owner", wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("nope"), Epoch: 1, Records: [][]byte{{1}}}), wire.CodeNotLeaderForTopic},
		{"unknown owner", wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: []byte("t"), Owner: []byte("n9")}), wire.CodeBadRequest},
		{"fetch from a non-owner", wire.KindFetch, wire.AppendFetch(nil, &wire.Fetch{Topic: []byte("nope"), Epoch: 1}), wire.CodeNotLeaderForTopic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kind, out := rawRequest(t, addr, tc.kind, tc.payload)
			var e wire.Error
			if kind != wire.KindError || wire.DecodeError(out, &e) != nil || e.Code != tc.code {
				t.Fatalf("answer %v %x, want error code %d", kind, out, tc.code)
			}
		})
	}
	// A single node cluster (bootstrap-expect 1) serves by itself.
	kind, out := rawRequest(t, addr, wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: []byte("solo")}))
	var a wire.Assignment
	if kind != wire.KindAssignment || wire.DecodeAssignment(out, &a) != nil || string(a.Owner) != "n1" || a.Epoch != 1 {
		t.Fatalf("assign on a single node: %v %+v", kind, a)
	}
}

func TestConfigValidation(t *testing.T) {
	base := func() Config {
		return Config{ID: "n1", DataDir: t.TempDir(), ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0"}
	}
	for name, mut := range map[string]func(*Config){
		"no id":         func(c *Config) { c.ID = "" },
		"long id":       func(c *Config) { c.ID = string(make([]byte, 65)) },
		"no data dir":   func(c *Config) { c.DataDir = "" },
		"no swim addr":  func(c *Config) { c.SwimAddr = "" },
		"bad preset":    func(c *Config) { c.SwimPreset = "wan" },
		"replicas":      func(c *Config) { c.Replicas = -1 },
		"shards":        func(c *Config) { c.Shards = MaxShards + 1 },
		"bootstrap":     func(c *Config) { c.BootstrapExpect = -2 },
		"negative tick": func(c *Config) { c.RaftTickInterval = -1 },
		"tiny memtable": func(c *Config) { c.StoreMemTableBytes = 512 << 10 },
		"huge sync gap": func(c *Config) { c.StoreLogSyncGap = time.Second },
	} {
		cfg := base()
		mut(&cfg)
		if n, err := New(cfg); err == nil {
			_ = n.Close()
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := base()
	cfg.StoreMemTableBytes = 4 << 20
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g1 := n.Generation()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if n.Generation() <= g1 {
		t.Fatalf("generation %d after %d", n.Generation(), g1)
	}
}

func TestStartFailureIsCleanedUpByClose(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	_, _, taken := c.nodes[0].Addrs()
	cfg := nodeConfig("n9", t.TempDir(), nil, 1)
	cfg.SwimAddr = taken // in use: SWIM cannot bind
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(t.Context()); err == nil {
		t.Fatal("start on a taken SWIM address succeeded")
	}
	if err := n.Close(); err != nil {
		t.Fatalf("close after a failed start: %v", err)
	}
	if err := n.Start(t.Context()); err == nil {
		t.Fatal("start after close succeeded")
	}
}
