package router

import (
	"errors"
	"fmt"
	"math"
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

// pickByScore is the rendezvous walk as its definition reads, one pick at a
// time: the best-scoring node not taken whose rack is unused while an unused
// rack remains, else the best-scoring node not taken; ties to the lower
// index. It is the oracle for Ring.rendezvous.
func pickByScore(r *Ring, score func(n uint32) uint64, rf int) []uint32 {
	want := min(rf, len(r.nodes), MaxReplicas)
	var out []uint32
	usedRacks := map[uint32]bool{}
	for len(out) < want {
		best, bestScore := -1, uint64(0)
		for n := range uint32(len(r.nodes)) {
			if slices.Contains(out, n) || usedRacks[r.rackOf[n]] && len(usedRacks) < len(r.racks) {
				continue
			}
			if sc := score(n); best < 0 || sc > bestScore {
				best, bestScore = int(n), sc
			}
		}
		out = append(out, uint32(best))
		usedRacks[r.rackOf[best]] = true
	}
	return out
}

// unmix64 inverts mix64, so a test can give nodes the scores it wants.
func unmix64(k uint64) uint64 {
	inv := func(c uint64) uint64 {
		x := c // correct to 3 bits for odd c; Newton doubles that each step
		for range 5 {
			x *= 2 - c*x
		}
		return x
	}
	k ^= k >> 33
	k *= inv(0xc4ceb9fe1a85ec53)
	k ^= k >> 33
	k *= inv(0xff51afd7ed558ccd)
	k ^= k >> 33
	return k
}

// setScores makes node n score scores[n] against shard token t.
func setScores(r *Ring, t uint64, scores []uint64) {
	for n, sc := range scores {
		r.nodeHash[n] = unmix64(sc) ^ t
	}
}

// The seed's example on the rendezvous walk, where the walk order is
// descending score: node1 leads, node2 is skipped for its rack.
func TestRendezvousSeedExample(t *testing.T) {
	ms := []Member{{"node1", "rack1"}, {"node2", "rack1"}, {"node3", "rack2"}, {"node4", "rack3"}}
	cases := []struct {
		rf     int
		scores []uint64 // node1..node4
		want   []string
	}{
		{3, []uint64{400, 380, 350, 320}, []string{"node1", "node3", "node4"}},
		{2, []uint64{400, 380, 350, 320}, []string{"node1", "node3"}},
		{1, []uint64{400, 380, 350, 320}, []string{"node1"}},
		{4, []uint64{400, 380, 350, 320}, []string{"node1", "node3", "node4", "node2"}},
		{3, []uint64{1, 9, 5, 7}, []string{"node2", "node4", "node3"}},
		{3, []uint64{5, 5, 5, 5}, []string{"node1", "node3", "node4"}}, // ties to the lower id
		{4, []uint64{5, 5, 5, 5}, []string{"node1", "node3", "node4", "node2"}},
	}
	r := mustRing(t, ms, 0)
	if mix64(unmix64(12345)) != 12345 {
		t.Fatal("unmix64 does not invert mix64")
	}
	for _, c := range cases {
		const tok = 0xfeed
		setScores(r, tok, c.scores)
		var out [MaxReplicas]uint32
		k := r.rendezvous(tok, c.rf, &out)
		var got []string
		for _, n := range out[:k] {
			got = append(got, r.nodes[n].ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("rf %d scores %v: %v, want %v", c.rf, c.scores, got, c.want)
		}
	}
}

// The one-pass rendezvous walk agrees with its definition on random
// memberships and scores, ties included.
func TestRendezvousMatchesDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 3000 {
		n := 1 + rng.IntN(12)
		ms := make([]Member, n)
		racks := 1 + rng.IntN(5)
		for i := range ms {
			ms[i] = Member{ID: fmt.Sprintf("n%02d", i), Rack: fmt.Sprintf("r%d", rng.IntN(racks))}
		}
		r := mustRing(t, ms, 0)
		scores := make([]uint64, n)
		spread := uint64(1 + rng.IntN(1000)) // small spreads force ties
		for i := range scores {
			scores[i] = rng.Uint64N(spread)
		}
		tok := rng.Uint64()
		setScores(r, tok, scores)
		rf := 1 + rng.IntN(7)
		var out [MaxReplicas]uint32
		got := out[:r.rendezvous(tok, rf, &out)]
		want := pickByScore(r, func(n uint32) uint64 { return scores[n] }, rf)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: members %v scores %v rf %d: %v, want %v", round, ms, scores, rf, got, want)
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

// TestPlacementBalancesLeaders: every node leads within LeaderSlack of
// the mean (one shard of rounding aside), from above and from below, and
// the leader of a shard is one of the walk's replicas.
func TestPlacementBalancesLeaders(t *testing.T) {
	for _, c := range []struct {
		nodes, racks int
		shards       uint32
	}{{10, 3, 4096}, {15, 15, 1024}, {9, 9, 1024}, {30, 3, 1024}, {5, 5, 256}, {64, 4, 4096}} {
		r := mustRing(t, testMembers(c.nodes, c.racks), 0)
		p := r.Placement(c.shards, 3)
		led := map[string]int{}
		for s := range c.shards {
			reps := p.Replicas(s, nil)
			if !sameSet(reps, r.Replicas(s, 3, nil)) {
				t.Fatalf("shard %d: placement %v is not the walk's set %v", s, reps, r.Replicas(s, 3, nil))
			}
			if reps[0] != p.Leader(s) {
				t.Fatalf("shard %d: leader %q is not the first replica of %v", s, p.Leader(s), reps)
			}
			led[reps[0]]++
		}
		mean := float64(c.shards) / float64(c.nodes)
		for _, m := range testMembers(c.nodes, c.racks) {
			if n := float64(led[m.ID]); n > mean*(1+LeaderSlack)+1 || n < mean*(1-LeaderSlack)-1 {
				t.Errorf("%d nodes, %d shards: %s leads %.0f shards, mean %.1f", c.nodes, c.shards, m.ID, n, mean)
			}
		}
		if out := ShardSpace(c.shards).Capacity(); p.Leader(out) != "" || p.Replicas(out, nil) != nil {
			t.Fatalf("shard outside the table's space has replicas")
		}
		// A split's children are placed by their own ids: the walk's
		// replicas, its first that may lead preferred; over many
		// children, every node holds and leads some.
		space := ShardSpace(c.shards)
		holds, leads := map[string]int{}, map[string]int{}
		for s := range min(c.shards, 64) {
			low, high, _ := space.Children(s)
			for _, child := range []uint32{low, high} {
				reps := p.Replicas(child, nil)
				if !slices.Equal(reps, r.Replicas(child, 3, nil)) || reps[0] != p.Leader(child) {
					t.Fatalf("child %d placed on %v, its walk %v, leader %q", child, reps, r.Replicas(child, 3, nil), p.Leader(child))
				}
				for _, n := range reps {
					holds[n]++
				}
				leads[reps[0]]++
			}
		}
		if want := min(c.nodes, 2*int(min(c.shards, 64))); len(holds) != c.nodes || len(leads) < want*3/4 {
			t.Fatalf("%d nodes: children held by %d, led by %d", c.nodes, len(holds), len(leads))
		}
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
		if m, ok := r.Member(n); !ok || m.ID != r.Replicas(s%1024, 3, nil)[i] {
			t.Fatalf("ReplicaIndexes and Replicas disagree")
		}
	}
	if _, ok := r.Member(-1); ok {
		t.Fatal("Member(-1) reported a member")
	}
	if _, ok := r.Member(r.Len()); ok {
		t.Fatal("Member(Len()) reported a member")
	}
	if i, ok := r.Index("n3"); !ok || r.nodes[i].ID != "n3" {
		t.Fatalf("Index(n3) = %d %v", i, ok)
	}
	if _, ok := r.Index("nope"); ok {
		t.Fatal("Index of an unknown id reported a member")
	}
}

func TestFingerprint(t *testing.T) {
	ms := testMembers(6, 3)
	rev := slices.Clone(ms)
	slices.Reverse(rev)
	a, b := mustRing(t, ms, 0), mustRing(t, rev, 0)
	if a.Fingerprint() != b.Fingerprint() {
		t.Fatal("member order changed the fingerprint")
	}
	moved := slices.Clone(ms)
	moved[2].Rack = "r9"
	for name, other := range map[string]*Ring{
		"rack change":  mustRing(t, moved, 0),
		"member gone":  mustRing(t, ms[1:], 0),
		"token walk":   mustRing(t, ms, 64),
		"other tokens": mustRing(t, ms, 65),
	} {
		if other.Fingerprint() == a.Fingerprint() {
			t.Errorf("%s: same fingerprint", name)
		}
	}
	if mustRing(t, ms, 64).Fingerprint() == mustRing(t, ms, 65).Fingerprint() {
		t.Error("token count not in the fingerprint")
	}
}

// With ReplicaSlack, Placement keeps the rack rule and determinism, and no
// node holds more than (1+slack) × its fair share when the walk alone would
// put more on it.
func TestBoundedReplicaLoads(t *testing.T) {
	const shards, slack = 2048, 0.02
	for _, c := range []struct {
		nodes, racks int
		walk         Walk
	}{{10, 3, WalkRendezvous}, {9, 3, WalkRendezvous}, {10, 1, WalkRendezvous}, {12, 4, WalkTokens}} {
		ms := testMembers(c.nodes, c.racks)
		cfg := RingConfig{Walk: c.walk, VNodes: 64, ReplicaSlack: slack}
		r, err := NewRing(ms, cfg)
		if err != nil {
			t.Fatal(err)
		}
		p := r.Placement(shards, 3)
		shuffled := slices.Clone(ms)
		slices.Reverse(shuffled)
		rs, err := NewRing(shuffled, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ps := rs.Placement(shards, 3)
		plain, err := NewRing(ms, RingConfig{Walk: c.walk, VNodes: 64})
		if err != nil {
			t.Fatal(err)
		}
		if plain.Fingerprint() == r.Fingerprint() {
			t.Fatalf("%+v: slack does not change the fingerprint", c)
		}
		held := map[string]int{}
		for s := range uint32(shards) {
			reps := p.Replicas(s, nil)
			if !slices.Equal(reps, ps.Replicas(s, nil)) {
				t.Fatalf("%+v shard %d: %v, %v with members reversed", c, s, reps, ps.Replicas(s, nil))
			}
			if got, want := racksOf(ms, reps), min(3, c.racks); got != want || len(reps) != 3 {
				t.Fatalf("%+v shard %d: %v spans %d racks, want %d", c, s, reps, got, want)
			}
			for _, id := range reps {
				held[id]++
			}
		}
		share := r.FairShares(shards, 3)
		for i, m := range r.Members() {
			if limit := math.Ceil((1 + slack) * share[i]); float64(held[m.ID]) > limit {
				t.Errorf("%+v: %s holds %d replicas, limit %.0f", c, m.ID, held[m.ID], limit)
			}
		}
	}
	for _, bad := range []float64{-0.1, MaxReplicaSlack + 1, math.NaN()} {
		if _, err := NewRing(testMembers(3, 1), RingConfig{ReplicaSlack: bad}); !errors.Is(err, ErrConfig) {
			t.Errorf("slack %v: err = %v, want ErrConfig", bad, err)
		}
	}
}

// The fair shares are even when racks are equal and favour the nodes of
// small racks otherwise, summing to shards × rf.
func TestFairShares(t *testing.T) {
	for _, c := range []struct {
		sizes []int
		rf    int
		want  []float64 // per rack, for 1200 shards
	}{
		{[]int{3, 3, 3}, 3, []float64{400, 400, 400}},
		{[]int{4, 3, 3}, 3, []float64{300, 400, 400}},
		{[]int{1, 5}, 2, []float64{1200, 240}},
		{[]int{10}, 3, []float64{360}},
		{[]int{2, 2, 2, 2, 2}, 3, []float64{360, 360, 360, 360, 360}},
	} {
		var ms []Member
		for rk, n := range c.sizes {
			for i := range n {
				ms = append(ms, Member{ID: fmt.Sprintf("r%d-n%d", rk, i), Rack: fmt.Sprintf("r%d", rk)})
			}
		}
		r := mustRing(t, ms, 0)
		got := r.FairShares(1200, c.rf)
		sum := 0.0
		for i, m := range r.Members() {
			var rk int
			fmt.Sscanf(m.Rack, "r%d", &rk)
			if math.Abs(got[i]-c.want[rk]) > 1e-6 {
				t.Errorf("sizes %v: %s share %.3f, want %.3f", c.sizes, m.ID, got[i], c.want[rk])
			}
			sum += got[i]
		}
		if math.Abs(sum-1200*float64(c.rf)) > 1e-6 {
			t.Errorf("sizes %v: shares sum to %.3f", c.sizes, sum)
		}
	}
}

func TestPlacementExceptKeepsLeadersOffDrainedNodes(t *testing.T) {
	const shards = 1024
	r := mustRing(t, testMembers(5, 5), 0)
	plain := r.Placement(shards, 3)
	drained := plain.Leader(0)
	p := r.PlacementExcept(shards, 3, []string{drained, "not-a-member"})
	led := map[string]int{}
	for s := range uint32(shards) {
		reps := p.Replicas(s, nil)
		if !sameSet(reps, plain.Replicas(s, nil)) {
			t.Fatalf("shard %d: replicas %v, without a drained node %v", s, reps, plain.Replicas(s, nil))
		}
		led[p.Leader(s)]++
	}
	// Nor does it lead a split's child, though it holds some.
	space := ShardSpace(shards)
	held := 0
	for s := range uint32(shards) {
		low, high, _ := space.Children(s)
		for _, child := range []uint32{low, high} {
			reps := p.Replicas(child, nil)
			if !sameSet(reps, plain.Replicas(child, nil)) {
				t.Fatalf("child %d: replicas %v, without a drained node %v", child, reps, plain.Replicas(child, nil))
			}
			if slices.Contains(reps, drained) {
				held++
			}
			if p.Leader(child) == drained {
				t.Fatalf("drained %s leads child %d", drained, child)
			}
		}
	}
	if led[drained] != 0 || held == 0 {
		t.Fatalf("drained %s still leads %d shards (holding %d children)", drained, led[drained], held)
	}
	bound := float64(shards) / 4 * (1 + LeaderSlack)
	for id, n := range led {
		if float64(n) > bound+1 {
			t.Errorf("%s leads %d shards, bound %.1f", id, n, bound)
		}
	}
	// Every member barred: leaders as if none were.
	all := r.PlacementExcept(shards, 3, []string{"n1", "n2", "n3", "n4", "n5"})
	for s := range uint32(shards) {
		if all.Leader(s) == "" {
			t.Fatalf("shard %d has no leader with every member barred", s)
		}
	}
}

// PlacementOf places a map's live shards by their own ids and balances
// their leaderships over all of them: a map that never split places as
// Placement does, and one grown from 8 shards to many leads each node
// within the bound.
func TestPlacementOfBalancesTheLiveShards(t *testing.T) {
	for _, nodes := range []int{3, 5, 9} {
		r := mustRing(t, testMembers(nodes, 3), 0)
		m, err := NewShardMap(8)
		if err != nil {
			t.Fatal(err)
		}
		plain, of := r.Placement(8, 3), r.PlacementOf(m, 3, nil)
		for s := range uint32(8) {
			if !slices.Equal(plain.Replicas(s, nil), of.Replicas(s, nil)) {
				t.Fatalf("%d nodes, shard %d: %v from the map, %v from the count", nodes, s, of.Replicas(s, nil), plain.Replicas(s, nil))
			}
		}
		// Split the lowest live shard until there are 200.
		for m.Len() < 200 {
			var low uint32
			for id := range m.Shards() {
				low = id
				break
			}
			if m, err = m.Split(low); err != nil {
				t.Fatal(err)
			}
		}
		p := r.PlacementOf(m, 3, []string{"n1"})
		led := map[string]int{}
		for id := range m.Shards() {
			reps := p.Replicas(id, nil)
			if !sameSet(reps, r.Replicas(id, 3, nil)) || reps[0] != p.Leader(id) {
				t.Fatalf("%d nodes, shard %d: %v, its walk %v", nodes, id, reps, r.Replicas(id, 3, nil))
			}
			led[reps[0]]++
		}
		mean := 200 / float64(nodes-1)
		for _, mb := range testMembers(nodes, 3) {
			n := float64(led[mb.ID])
			switch {
			case mb.ID == "n1" && n != 0:
				t.Errorf("%d nodes: drained n1 leads %.0f", nodes, n)
			case mb.ID != "n1" && (n > mean*(1+LeaderSlack)+1 || n < mean*(1-LeaderSlack)-1):
				t.Errorf("%d nodes: %s leads %.0f of 200 shards, mean %.1f", nodes, mb.ID, n, mean)
			}
		}
		// A shard the map does not hold is placed by its walk.
		if reps := p.Replicas(0, nil); !sameSet(reps, r.Replicas(0, 3, nil)) {
			t.Fatalf("split shard 0: %v, its walk %v", reps, r.Replicas(0, 3, nil))
		}
	}
}
