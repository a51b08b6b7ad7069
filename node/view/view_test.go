package view

import (
	"bytes"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
)

func raftID(id string) uint64 { return xxh3.HashString(id) | 1 }

// world is a node as the view room sees it: marks judged from a table,
// raft's and the network's calls recorded, a manual clock.
type world struct {
	now              time.Time
	drained, removed map[string]bool
	calls            []string
}

func (w *world) Marks([]swim.Member) (map[string]bool, map[string]bool) { return w.drained, w.removed }
func (w *world) NodeDead(id uint64)                                     { w.calls = append(w.calls, "dead "+w.name(id)) }
func (w *world) NodeAlive(id uint64)                                    { w.calls = append(w.calls, "alive "+w.name(id)) }
func (w *world) SetPeerAddr(id, addr string)                            { w.calls = append(w.calls, "addr "+id+" "+addr) }
func (w *world) Now() time.Time                                         { return w.now }

func (w *world) name(id uint64) string {
	for _, m := range []string{"n1", "n2", "n3", "n4"} {
		if raftID(m) == id {
			return m
		}
	}
	return "?"
}

func newBuilder(t *testing.T, w *world, log *bytes.Buffer, rid func(string) uint64) *Builder {
	t.Helper()
	b, err := New(Config{Self: "n1", RaftID: rid, Shards: 8, Replicas: 3, Logger: slog.New(slog.NewTextHandler(log, nil)), Env: w})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func member(id string, st swim.State) swim.Member {
	return swim.Member{ID: id, State: st, PeerAddr: id + ":7000"}
}

// A view holds the live members sorted, the dead, the suspects and when
// the live set last changed; the placement spreads every shard over the
// live members but the drained as leaders; the peers' addresses are
// recorded; the same members again give the same view.
func TestRebuild(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	var log bytes.Buffer
	b := newBuilder(t, w, &log, raftID)
	old := Empty()
	ms := []swim.Member{member("n1", swim.StateAlive), member("n2", swim.StateSuspect), member("n3", swim.StateAlive), member("n4", swim.StateDead)}
	v := b.Rebuild(old, ms, false, nil)
	if !slices.Equal(v.Live, []string{"n1", "n2", "n3"}) || !v.Dead["n4"] || v.Suspects != 1 || !v.Changed.Equal(w.now) {
		t.Fatalf("view %+v", v.View)
	}
	if !v.Alive("n2") || v.Alive("n4") || v.Placement() == nil || v.Rec() != &v.View {
		t.Fatal("view's questions")
	}
	if want := []string{"addr n2 n2:7000", "addr n3 n3:7000", "addr n4 n4:7000"}; !slices.Equal(w.calls, want) {
		t.Fatalf("calls %v, want %v", w.calls, want)
	}
	for _, m := range []string{"n1", "n2", "n3", "n4"} {
		if name, ok := b.NameOf(raftID(m)); !ok || name != m {
			t.Fatalf("name of %s: %q %v", m, name, ok)
		}
	}
	if b.Rebuild(v, slices.Clone(ms), false, nil) != v {
		t.Fatal("the same members built a new view")
	}
	// The marks changed: a new view, on the same placement while no
	// drained member is live.
	w.now = w.now.Add(time.Second)
	v2 := b.Rebuild(v, ms, true, nil)
	if v2 == v || v2.Placement() != v.Placement() || !v2.Changed.Equal(v.Changed) {
		t.Fatal("a dirty rebuild of the same members")
	}
	// n3 drained: a new placement in which it leads nothing.
	w.drained = map[string]bool{"n3": true}
	v3 := b.Rebuild(v2, ms, true, nil)
	if v3.Placement() == v2.Placement() || !v3.Drained("n3") {
		t.Fatal("no new placement for a drained member")
	}
	for s := range uint32(8) {
		if v3.Placement().Leader(s) == "n3" {
			t.Fatalf("drained n3 leads shard %d", s)
		}
	}
	// n2 dies: the live set changes, and when.
	w.now = w.now.Add(time.Second)
	ms = slices.Clone(ms) // SWIM hands out a new slice each time
	ms[1].State = swim.StateDead
	v4 := b.Rebuild(v3, ms, false, nil)
	if !slices.Equal(v4.Live, []string{"n1", "n3"}) || !v4.Dead["n2"] || v4.Suspects != 0 || !v4.Changed.Equal(w.now) {
		t.Fatalf("after n2 died: %+v", v4.View)
	}
	// A shard splits: a new view on the same ring, whose placement
	// places the halves and not the shard that split.
	sm, err := router.NewShardMap(8)
	if err != nil {
		t.Fatal(err)
	}
	v5 := b.Rebuild(v4, ms, false, sm)
	if sm, err = sm.Split(3); err != nil {
		t.Fatal(err)
	}
	v6 := b.Rebuild(v5, ms, false, sm)
	if v6 == v5 || v6.Ring != v5.Ring || v6.Placement() == v5.Placement() {
		t.Fatal("a split made no new placement on the same ring")
	}
	if b.Rebuild(v6, ms, false, sm) != v6 {
		t.Fatal("the same members and shards built a new view")
	}
	low, high, _ := sm.Space().Children(3)
	for _, h := range []uint32{low, high} {
		if len(v6.Placement().Replicas(h, nil)) != 2 || v6.Placement().Leader(h) == "n3" {
			t.Fatalf("half %d placed on %v, led by %s", h, v6.Placement().Replicas(h, nil), v6.Placement().Leader(h))
		}
	}
}

// A removed member is dead to the view and to raft, told once; back as a
// new node, raft hears it is alive. This node's own removal tells raft
// nothing.
func TestRebuildRemoved(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	var log bytes.Buffer
	b := newBuilder(t, w, &log, raftID)
	ms := []swim.Member{member("n1", swim.StateAlive), member("n2", swim.StateAlive)}
	v := b.Rebuild(Empty(), ms, false, nil)
	w.calls = nil
	w.removed = map[string]bool{"n2": true}
	v = b.Rebuild(v, ms, true, nil)
	if !v.Dead["n2"] || slices.Contains(v.Live, "n2") || !v.Removed("n2") || !slices.Equal(w.calls, []string{"dead n2"}) {
		t.Fatalf("removed n2: %+v, calls %v", v.View, w.calls)
	}
	v = b.Rebuild(v, ms, true, nil)
	if !slices.Equal(w.calls, []string{"dead n2"}) {
		t.Fatalf("raft told twice: %v", w.calls)
	}
	w.calls, w.removed = nil, map[string]bool{"n1": true}
	v = b.Rebuild(v, ms, true, nil)
	if !slices.Equal(w.calls, []string{"alive n2", "addr n2 n2:7000"}) || !v.Dead["n1"] {
		t.Fatalf("n2 back, n1 removed: %+v, calls %v", v.View, w.calls)
	}
}

// A member whose raft id is another's is left out of the view and said
// so in the log.
func TestRebuildIDCollision(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	var log bytes.Buffer
	b := newBuilder(t, w, &log, func(id string) uint64 {
		if id == "n3" {
			return raftID("n2")
		}
		return raftID(id)
	})
	v := b.Rebuild(Empty(), []swim.Member{member("n1", swim.StateAlive), member("n2", swim.StateAlive), member("n3", swim.StateAlive)}, false, nil)
	if slices.Contains(v.Live, "n3") || !strings.Contains(log.String(), "raft id collision") {
		t.Fatalf("collision: %+v\n%s", v.View, log.String())
	}
	if name, _ := b.NameOf(raftID("n2")); name != "n2" {
		t.Fatalf("raft id of n2 names %q", name)
	}
}

// A replica is accepted only for a shard of the shard space that the
// view's ring places on this node, sent by a member this node knows.
func TestAcceptsFollowsPlacement(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	var log bytes.Buffer
	b, err := New(Config{Self: "n1", RaftID: raftID, Shards: 8, Replicas: 1, Logger: slog.New(slog.NewTextHandler(&log, nil)), Env: w})
	if err != nil {
		t.Fatal(err)
	}
	peer := raftID("n2")
	if b.Accepts(Empty(), 0, peer) || b.Accepts(nil, 0, peer) {
		t.Fatal("accepted without a placement")
	}
	v := b.Rebuild(Empty(), []swim.Member{member("n1", swim.StateAlive), member("n2", swim.StateAlive), member("n3", swim.StateAlive)}, false, nil)
	var here, elsewhere int64 = -1, -1
	for s := range uint32(8) {
		placed := v.Placement().Replicas(s, nil)
		switch {
		case len(placed) == 1 && placed[0] == "n1" && here < 0:
			here = int64(s)
		case len(placed) == 1 && placed[0] != "n1" && elsewhere < 0:
			elsewhere = int64(s)
		}
	}
	if here < 0 || elsewhere < 0 {
		t.Fatalf("placement puts no shard here (%d) or none elsewhere (%d)", here, elsewhere)
	}
	childHere := uint32(8)
	for v.Placement().Leader(childHere) != "n1" {
		childHere++
	}
	for _, tc := range []struct {
		name        string
		shard, from uint64
		want        bool
	}{
		{"a shard placed here, from a member", uint64(here), peer, true},
		{"a shard placed elsewhere", uint64(elsewhere), peer, false},
		{"a split's child placed here", uint64(childHere), peer, true},
		{"a shard past the shard space", uint64(router.ShardSpace(8).Capacity()), peer, false},
		{"a shard id near 2^64", 1<<64 - 2, peer, false},
		{"a sender no member maps to", uint64(here), raftID("mallory"), false},
	} {
		if got := b.Accepts(v, tc.shard, tc.from); got != tc.want {
			t.Errorf("%s: Accepts(%d, %d) = %v, want %v", tc.name, tc.shard, tc.from, got, tc.want)
		}
	}
}
