package swim_test

import (
	"errors"
	"fmt"
	"hash/fnv"
	"testing"
	"time"

	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/swim/simnet"
)

func newSim(t *testing.T, n int, seed uint64, cfg swim.Config) *simnet.Net {
	t.Helper()
	net, err := simnet.New(simnet.Config{N: n, Seed: seed, LatencyMin: time.Millisecond, LatencyMax: 5 * time.Millisecond, Node: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return net
}

func aliveCount(h *simnet.Host) int {
	c := 0
	for _, m := range h.Node.Members() {
		if m.State == swim.StateAlive {
			c++
		}
	}
	return c
}

func TestPingReqPathKeepsACutLinkAlive(t *testing.T) {
	net := newSim(t, 3, 1, swim.LocalConfig())
	var suspects int
	net.OnEvent = func(_ int, ev swim.Event) {
		if ev.Kind == swim.EventSuspect || ev.Kind == swim.EventDead {
			suspects++
		}
	}
	net.JoinAll()
	net.Run(2 * time.Second)
	// Cut n0 <-> n1; n2 still reaches both.
	net.Blocked = func(a, b int) bool { return (a == 0 && b == 1) || (a == 1 && b == 0) }
	net.Run(20 * time.Second)
	if suspects != 0 {
		t.Fatalf("%d suspicions with an indirect path available", suspects)
	}
	st := net.Hosts[0].Node.Stats()
	if st.PingReqs == 0 {
		t.Fatal("no ping-req sent over a cut link")
	}
	if aliveCount(net.Hosts[0]) != 3 {
		t.Fatalf("n0 sees %d alive", aliveCount(net.Hosts[0]))
	}
	// Cut n1 from everyone: now it is suspected, then declared dead.
	net.Blocked = func(a, b int) bool { return a == 1 || b == 1 }
	net.Run(10 * time.Second)
	if m, _ := net.Hosts[0].Node.Member("n1"); m.State != swim.StateDead {
		t.Fatalf("isolated n1 is %v at n0", m.State)
	}
}

func TestClusterConvergesDetectsCrashAndReadmitsRestart(t *testing.T) {
	const n = 24
	net := newSim(t, n, 2, swim.LocalConfig())
	net.JoinAll()
	net.Run(3 * time.Second)
	for _, h := range net.Hosts {
		if c := aliveCount(h); c != n {
			t.Fatalf("%s sees %d alive after join", h.Addr, c)
		}
	}
	net.Crash(7)
	net.Run(6 * time.Second)
	for _, h := range net.Hosts {
		if h.Index == 7 {
			continue
		}
		if m, _ := h.Node.Member("n7"); m.State != swim.StateDead {
			t.Fatalf("%s sees n7 %v after crash", h.Addr, m.State)
		}
	}
	if err := net.Restart(7, []string{net.Hosts[0].Addr}); err != nil {
		t.Fatal(err)
	}
	net.Run(4 * time.Second)
	for _, h := range net.Hosts {
		m, _ := h.Node.Member("n7")
		if m.State != swim.StateAlive || m.Generation != 2 {
			t.Fatalf("%s sees n7 %v gen %d after restart", h.Addr, m.State, m.Generation)
		}
		if c := aliveCount(h); c != n {
			t.Fatalf("%s sees %d alive after restart", h.Addr, c)
		}
	}
}

func TestPartitionHealsWithNewGeneration(t *testing.T) {
	const n = 8
	net := newSim(t, n, 3, swim.LocalConfig())
	net.JoinAll()
	net.Run(3 * time.Second)
	net.Blocked = func(a, b int) bool { return (a == 5) != (b == 5) }
	net.Run(8 * time.Second)
	if m, _ := net.Hosts[0].Node.Member("n5"); m.State != swim.StateDead {
		t.Fatalf("n5 is %v during the partition", m.State)
	}
	net.Blocked = nil
	net.Run(15 * time.Second)
	for _, h := range net.Hosts {
		if c := aliveCount(h); c != n {
			t.Fatalf("%s sees %d alive after the partition healed", h.Addr, c)
		}
	}
	if g := net.Hosts[5].Node.Self().Generation; g < 2 {
		t.Fatalf("n5 generation %d, want a new one", g)
	}
}

func TestPausedNodeIsNotDeclaredDead(t *testing.T) {
	const n = 32
	net, err := simnet.New(simnet.Config{N: n, Seed: 4, Loss: 0.05, LatencyMin: time.Millisecond, LatencyMax: 10 * time.Millisecond, Node: swim.LANConfig()})
	if err != nil {
		t.Fatal(err)
	}
	dead := 0
	net.OnEvent = func(_ int, ev swim.Event) {
		if ev.Kind == swim.EventDead {
			dead++
		}
	}
	net.JoinAll()
	net.Run(10 * time.Second)
	net.Pause(9, time.Second)
	net.Run(30 * time.Second)
	if dead != 0 {
		t.Fatalf("%d dead declarations after a 1 s pause", dead)
	}
}

func TestSameSeedSameRun(t *testing.T) {
	run := func() uint64 {
		net, err := simnet.New(simnet.Config{N: 12, Seed: 9, Loss: 0.1, LatencyMin: time.Millisecond, LatencyMax: 20 * time.Millisecond, Node: swim.LocalConfig()})
		if err != nil {
			t.Fatal(err)
		}
		h := fnv.New64a()
		net.OnEvent = func(i int, ev swim.Event) {
			fmt.Fprintf(h, "%d %v %d %s %v %d %d\n", i, net.Elapsed(), ev.Kind, ev.Member.ID, ev.Member.State, ev.Member.Generation, ev.Member.Incarnation)
		}
		net.JoinAll()
		net.Run(2 * time.Second)
		net.Crash(3)
		net.Run(5 * time.Second)
		fmt.Fprintf(h, "%d %d", net.Packets, net.Bytes)
		return h.Sum64()
	}
	if a, b := run(), run(); a != b {
		t.Fatalf("two runs of one seed differ: %x %x", a, b)
	}
}

func TestLeaveIsSeenAsLeft(t *testing.T) {
	net := newSim(t, 10, 5, swim.LocalConfig())
	net.JoinAll()
	net.Run(2 * time.Second)
	net.Hosts[4].Node.Leave()
	net.Kick(4)
	net.Run(2 * time.Second)
	net.Crash(4)
	net.Run(3 * time.Second)
	for _, h := range net.Hosts {
		if h.Index == 4 {
			continue
		}
		if m, _ := h.Node.Member("n4"); m.State != swim.StateLeft {
			t.Fatalf("%s sees n4 %v, want left", h.Addr, m.State)
		}
	}
}

func TestShardLeaderAndVersionSpread(t *testing.T) {
	net := newSim(t, 20, 6, swim.LocalConfig())
	got := map[int]bool{}
	vers := map[int]bool{}
	net.OnEvent = func(i int, ev swim.Event) {
		if ev.Kind == swim.EventShardLeader && ev.Shard == 3 && ev.Term == 9 && ev.Leader == "n2" {
			got[i] = true
		}
		if ev.Kind == swim.EventMetadataVersion && ev.Leader == "n2" && ev.Version == 4 {
			vers[i] = true
		}
	}
	net.JoinAll()
	net.Run(2 * time.Second)
	net.Hosts[2].Node.AnnounceShardLeader(3, "n2", 9)
	net.Hosts[2].Node.SetMetadataVersion(1, 4)
	net.Kick(2)
	net.Run(2 * time.Second)
	if len(got) != 20 || len(vers) != 19 {
		t.Fatalf("shard leader known at %d nodes, version at %d", len(got), len(vers))
	}
	if l, term, ok := net.Hosts[17].Node.ShardLeader(3); !ok || l != "n2" || term != 9 {
		t.Fatalf("n17: %s %d %v", l, term, ok)
	}
}

func TestSetMetaSpreadsWithAHigherIncarnation(t *testing.T) {
	net := newSim(t, 10, 7, swim.LocalConfig())
	updated := map[int]bool{}
	net.OnEvent = func(i int, ev swim.Event) {
		if ev.Kind == swim.EventUpdated && ev.Member.ID == "n2" && string(ev.Member.Meta) == "drained" {
			updated[i] = true
		}
	}
	net.JoinAll()
	net.Run(2 * time.Second)
	h := net.Hosts[2]
	before := h.Node.Self().Incarnation
	if err := h.Node.SetMeta([]byte("drained")); err != nil {
		t.Fatal(err)
	}
	if err := h.Node.SetMeta([]byte("drained")); err != nil {
		t.Fatal(err)
	}
	if got := h.Node.Self().Incarnation; got != before+1 {
		t.Fatalf("incarnation %d after setting the metadata twice to the same value, want %d", got, before+1)
	}
	net.Kick(2)
	net.Run(2 * time.Second)
	if len(updated) != 9 {
		t.Fatalf("the new metadata reached %d of 9 members", len(updated))
	}
	m, ok := net.Hosts[7].Node.Member("n2")
	if !ok || string(m.Meta) != "drained" {
		t.Fatalf("n7 sees n2 as %+v", m)
	}
	if err := h.Node.SetMeta(make([]byte, 513)); !errors.Is(err, swim.ErrMetaTooLarge) {
		t.Fatalf("513 bytes of metadata: %v", err)
	}
}

// TestIslandsMergeThroughTheirSeeds: nodes that each joined only within
// their side of a partition, knowing nothing of the other side, find it
// once the partition heals, through a seed no live member of theirs
// answers at (as after a whole cluster restarted at once, the nodes back
// first joining each other before the others were up).
func TestIslandsMergeThroughTheirSeeds(t *testing.T) {
	const n = 6
	cfg := swim.LocalConfig()
	net := newSim(t, n, 11, cfg)
	side := func(i int) bool { return i < n/2 }
	net.Blocked = func(a, b int) bool { return side(a) != side(b) }
	var seeds []string
	for _, h := range net.Hosts {
		seeds = append(seeds, h.Addr)
	}
	for i := range net.Hosts {
		// Each host tries the other side's seeds first.
		h := net.Hosts[(i+n/2)%n]
		h.Node.Join(append(append([]string(nil), seeds[n/2:]...), seeds[:n/2]...))
		net.Kick(h.Index)
	}
	net.Run(5 * time.Second)
	for _, h := range net.Hosts {
		if c := aliveCount(h); c != n/2 {
			t.Fatalf("%s sees %d alive during the partition, want its side's %d", h.Addr, c, n/2)
		}
	}
	net.Blocked = nil
	// The periodic push-pull comes within 1.5 intervals of the start.
	net.Run(2 * cfg.PushPullInterval)
	for _, h := range net.Hosts {
		if c := aliveCount(h); c != n {
			t.Fatalf("%s sees %d alive after the partition healed, want %d", h.Addr, c, n)
		}
	}
}
