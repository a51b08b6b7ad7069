package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

func testMembers(n, racks int) []Member {
	ms := make([]Member, n)
	for i := range ms {
		ms[i] = Member{ID: fmt.Sprintf("n%d", i+1), Rack: fmt.Sprintf("r%d", i%racks)}
	}
	return ms
}

// mustRing builds a rendezvous ring, or a token ring of v tokens per node
// when v > 0.
func mustRing(t testing.TB, ms []Member, v int) *Ring {
	t.Helper()
	w := WalkRendezvous
	if v > 0 {
		w = WalkTokens
	}
	r, err := NewRing(ms, RingConfig{Walk: w, VNodes: v})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestShardOf(t *testing.T) {
	keys := []string{"", "a", "topic-blue", "orders.eu-west.17"}
	for _, k := range keys {
		for _, s := range []uint32{1, 7, 1024, 10000} {
			got := ShardOf([]byte(k), s)
			if got >= s {
				t.Fatalf("ShardOf(%q, %d) = %d, out of range", k, s, got)
			}
			if want := uint32(xxh3.HashString(k) % uint64(s)); got != want {
				t.Fatalf("ShardOf(%q, %d) = %d, want xxh3 mod S = %d", k, s, got, want)
			}
			if gs := ShardOfString(k, s); gs != got {
				t.Fatalf("ShardOfString(%q, %d) = %d, ShardOf = %d", k, s, gs, got)
			}
		}
		if ShardOf([]byte(k), 0) != 0 || ShardOfString(k, 0) != 0 {
			t.Fatalf("shard count 0 must map to shard 0")
		}
	}
	if n := testing.AllocsPerRun(100, func() { ShardOfString("topic-blue", 1024) }); n != 0 {
		t.Fatalf("ShardOfString allocates %v", n)
	}
}

func TestNewRingRejectsBadMembers(t *testing.T) {
	cases := []struct {
		name string
		ms   []Member
		cfg  RingConfig
		want error
	}{
		{"empty id", []Member{{ID: "n1"}, {ID: ""}}, RingConfig{}, ErrEmptyID},
		{"duplicate", []Member{{ID: "n1", Rack: "a"}, {ID: "n1", Rack: "b"}}, RingConfig{}, ErrDuplicateMember},
		{"negative vnodes", []Member{{ID: "n1"}}, RingConfig{VNodes: -1}, ErrConfig},
		{"too many vnodes", []Member{{ID: "n1"}}, RingConfig{VNodes: MaxVNodes + 1}, ErrConfig},
		{"unknown walk", []Member{{ID: "n1"}}, RingConfig{Walk: 9}, ErrConfig},
	}
	for _, c := range cases {
		if _, err := NewRing(c.ms, c.cfg); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestEmptyRing(t *testing.T) {
	r := mustRing(t, nil, 0)
	if got := r.Replicas(3, 3, nil); len(got) != 0 {
		t.Fatalf("empty ring replicas = %v", got)
	}
	p := r.Placement(16, 3)
	if p.Leader(3) != "" || len(p.Replicas(3, nil)) != 0 {
		t.Fatalf("empty placement has a leader")
	}
}

// The walk of the seed's example: leader at position 100 in rack 1, the node
// at 120 skipped because rack 1 is taken, 150 (rack 2) and 180 (rack 3)
// selected as followers.
func TestWalkSeedExample(t *testing.T) {
	ms := []Member{{"node1", "rack1"}, {"node2", "rack1"}, {"node3", "rack2"}, {"node4", "rack3"}}
	single := []Member{{"node1", "rack1"}, {"node2", "rack1"}, {"node3", "rack1"}, {"node4", "rack1"}}
	twoRacks := []Member{{"node1", "rack1"}, {"node2", "rack1"}, {"node3", "rack2"}, {"node4", "rack2"}}
	cases := []struct {
		name    string
		members []Member
		start   int // token index the walk starts at
		rf      int
		want    []string
	}{
		{"seed example", ms, 0, 3, []string{"node1", "node3", "node4"}},
		{"rf 2 skips same rack", ms, 0, 2, []string{"node1", "node3"}},
		{"rf 1 is the first node", ms, 1, 1, []string{"node2"}},
		{"start at node2", ms, 1, 3, []string{"node2", "node3", "node4"}},
		{"start at node3 wraps", ms, 2, 3, []string{"node3", "node4", "node1"}},
		{"racks exhausted: next distinct", ms, 0, 4, []string{"node1", "node3", "node4", "node2"}},
		{"one rack: plain walk", single, 0, 3, []string{"node1", "node2", "node3"}},
		{"two racks rf 3", twoRacks, 0, 3, []string{"node1", "node3", "node4"}},
		{"rf above members", ms, 0, 9, []string{"node1", "node3", "node4", "node2"}},
		{"rf 0", ms, 0, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &Ring{vnodes: 1}
			r.nodes = slices.Clone(c.members)
			for _, m := range r.nodes {
				r.racks = append(r.racks, m.Rack)
			}
			slices.Sort(r.racks)
			r.racks = slices.Compact(r.racks)
			for _, m := range r.nodes {
				ri, _ := slices.BinarySearch(r.racks, m.Rack)
				r.rackOf = append(r.rackOf, uint32(ri))
			}
			r.setTokens([]token{{180, 3}, {100, 0}, {150, 2}, {120, 1}})
			var out [MaxReplicas]uint32
			k := r.walkFrom(c.start, c.rf, &out)
			var got []string
			for _, n := range out[:k] {
				got = append(got, r.nodes[n].ID)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("walk = %v, want %v", got, c.want)
			}
		})
	}
}

// The seed's example on the rendezvous walk, where the walk order is
// descending score: node1 leads, node2 is skipped for its rack.
func TestRendezvousSeedExample(t *testing.T) {
	ms := []Member{{"node1", "rack1"}, {"node2", "rack1"}, {"node3", "rack2"}, {"node4", "rack3"}}
	scores := map[string]uint64{"node1": 400, "node2": 380, "node3": 350, "node4": 320}
	cases := []struct {
		rf     int
		scores map[string]uint64
		want   []string
	}{
		{3, scores, []string{"node1", "node3", "node4"}},
		{2, scores, []string{"node1", "node3"}},
		{1, scores, []string{"node1"}},
		{4, scores, []string{"node1", "node3", "node4", "node2"}},
		{3, map[string]uint64{"node1": 1, "node2": 9, "node3": 5, "node4": 7}, []string{"node2", "node4", "node3"}},
		{3, map[string]uint64{"node1": 5, "node2": 5, "node3": 5, "node4": 5}, []string{"node1", "node3", "node4"}}, // ties to the lower id
	}
	r := mustRing(t, ms, 0)
	for _, c := range cases {
		var out [MaxReplicas]uint32
		k := r.pickByScore(func(n uint32) uint64 { return c.scores[r.nodes[n].ID] }, c.rf, &out)
		var got []string
		for _, n := range out[:k] {
			got = append(got, r.nodes[n].ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("rf %d scores %v: %v, want %v", c.rf, c.scores, got, c.want)
		}
	}
}

func TestPlacementIndependentOfMemberOrder(t *testing.T) {
	for _, v := range []int{0, 64} {
		testPlacementIndependentOfMemberOrder(t, v)
	}
}

func testPlacementIndependentOfMemberOrder(t *testing.T, v int) {
	ms := testMembers(13, 4)
	want := mustRing(t, ms, v).Placement(512, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		shuffled := slices.Clone(ms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		r := mustRing(t, shuffled, v)
		got := r.Placement(512, 3)
		for s := range uint32(512) {
			if a, b := want.Replicas(s, nil), got.Replicas(s, nil); !slices.Equal(a, b) {
				t.Fatalf("shard %d: %v vs %v after shuffling members", s, a, b)
			}
			if a, b := mustRing(t, ms, v).Replicas(s, 3, nil), r.Replicas(s, 3, nil); !slices.Equal(a, b) {
				t.Fatalf("shard %d walk: %v vs %v after shuffling members", s, a, b)
			}
		}
	}
}

func racksOf(ms []Member, ids []string) int {
	rack := map[string]string{}
	for _, m := range ms {
		rack[m.ID] = m.Rack
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[rack[id]] = true
	}
	return len(seen)
}

func TestReplicasSpreadOverRacks(t *testing.T) {
	cases := []struct{ nodes, racks, rf int }{
		{10, 3, 3}, {12, 4, 3}, {5, 2, 3}, {7, 7, 3}, {9, 3, 5}, {4, 1, 3}, {2, 2, 3},
	}
	for _, c := range cases {
		for _, v := range []int{0, 32} {
			testSpread(t, c.nodes, c.racks, c.rf, v)
		}
	}
}

func testSpread(t *testing.T, nodes, racks, rf, v int) {
	ms := testMembers(nodes, racks)
	r := mustRing(t, ms, v)
	wantRacks := min(rf, racks, nodes)
	for s := range uint32(1024) {
		reps := r.Replicas(s, rf, nil)
		if len(reps) != min(rf, nodes) {
			t.Fatalf("%d nodes %d racks rf %d v %d shard %d: %d replicas", nodes, racks, rf, v, s, len(reps))
		}
		if len(slices.Compact(slices.Sorted(slices.Values(reps)))) != len(reps) {
			t.Fatalf("%d nodes %d racks rf %d v %d shard %d: duplicate replicas %v", nodes, racks, rf, v, s, reps)
		}
		if got := racksOf(ms, reps); got != wantRacks {
			t.Fatalf("%d nodes %d racks rf %d v %d shard %d: %v spans %d racks, want %d", nodes, racks, rf, v, s, reps, got, wantRacks)
		}
	}
}

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

func TestMembershipChangeMovesOnlyAffectedShards(t *testing.T) {
	for _, v := range []int{0, 64} {
		// A joiner in an existing rack, and one in a rack of its own.
		for _, rack := range []string{"r1", "r9"} {
			testMovement(t, v, rack)
		}
	}
}

func testMovement(t *testing.T, v int, rack string) {
	const shards = 2048
	ms := testMembers(10, 3)
	base := mustRing(t, ms, v)
	joiner := Member{ID: "n11", Rack: rack}
	joined := mustRing(t, append(slices.Clone(ms), joiner), v)
	left := mustRing(t, ms[1:], v)
	leaver := ms[0].ID
	movedJoin, movedLeave := 0, 0
	for s := range uint32(shards) {
		b := base.Replicas(s, 3, nil)
		if j := joined.Replicas(s, 3, nil); !sameSet(b, j) {
			movedJoin++
			if !slices.Contains(j, joiner.ID) {
				t.Fatalf("shard %d changed on join without gaining the new node: %v -> %v", s, b, j)
			}
		}
		if l := left.Replicas(s, 3, nil); !sameSet(b, l) {
			movedLeave++
			if !slices.Contains(b, leaver) {
				t.Fatalf("shard %d changed on leave without holding the leaver: %v -> %v", s, b, l)
			}
		}
	}
	if movedJoin == 0 || movedLeave == 0 {
		t.Fatalf("no shard moved (join %d, leave %d)", movedJoin, movedLeave)
	}
}

func TestPlacementBalancesLeaders(t *testing.T) {
	const shards = 4096
	r := mustRing(t, testMembers(10, 3), 0)
	p := r.Placement(shards, 3)
	led := map[string]int{}
	for s := range uint32(shards) {
		reps := p.Replicas(s, nil)
		if !sameSet(reps, r.Replicas(s, 3, nil)) {
			t.Fatalf("shard %d: placement %v is not the walk's set %v", s, reps, r.Replicas(s, 3, nil))
		}
		if reps[0] != p.Leader(s) {
			t.Fatalf("shard %d: leader %q is not the first replica of %v", s, p.Leader(s), reps)
		}
		led[reps[0]]++
	}
	bound := float64(shards) / 10 * (1 + LeaderSlack)
	for id, n := range led {
		if float64(n) > bound+1 {
			t.Errorf("%s leads %d shards, bound %.1f", id, n, bound)
		}
	}
	if p.Leader(shards) != "" || p.Replicas(shards, nil) != nil {
		t.Fatalf("shard outside the table has replicas")
	}
}

func TestReplicasAllocateNothing(t *testing.T) {
	r := mustRing(t, testMembers(10, 3), 0)
	p := r.Placement(1024, 3)
	dst := make([]string, 0, 8)
	idx := make([]int, 0, 8)
	s := uint32(0)
	if n := testing.AllocsPerRun(200, func() {
		s++
		dst = r.Replicas(s%1024, 3, dst[:0])
		idx = r.ReplicaIndexes(s%1024, 3, idx[:0])
		dst = p.Replicas(s%1024, dst[:0])
	}); n != 0 {
		t.Fatalf("replica lookups allocate %v per run", n)
	}
	for i, n := range idx {
		if r.Member(n).ID != r.Replicas(s%1024, 3, nil)[i] {
			t.Fatalf("ReplicaIndexes and Replicas disagree")
		}
	}
}
