package node

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

func TestLeaderTableRoundTripIsTermChecked(t *testing.T) {
	src := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
	_, _ = src.leaders.Update(1, "n1", 5)
	_, _ = src.leaders.Update(6, "n3", 2)
	rows, _ := src.leaders.Snapshot(nil)
	enc := wire.AppendLeaderTable(nil, leaderRows(rows))

	dst := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
	_, _ = dst.leaders.Update(6, "n2", 9) // newer than the pushed row
	if err := dst.mergeLeaderTable(enc); err != nil {
		t.Fatal(err)
	}
	if l, term, _ := dst.leaders.Get(1); l != "n1" || term != 5 {
		t.Fatalf("shard 1: %s@%d", l, term)
	}
	if l, term, _ := dst.leaders.Get(6); l != "n2" || term != 9 {
		t.Fatalf("shard 6 taken from an older term: %s@%d", l, term)
	}
	if got, want := dst.leaderVersion(), uint64(5+9); got != want {
		t.Fatalf("version %d, want %d", got, want)
	}
}

func TestLeaderTableRejectsMalformedInput(t *testing.T) {
	n := &Node{cfg: Config{Shards: 8}, leaders: router.NewLeaderTable(8)}
	table := func(rows ...router.ShardLeader) []byte { return wire.AppendLeaderTable(nil, leaderRows(rows)) }
	good := table(router.ShardLeader{Shard: 3, Leader: "n1", Term: 1})
	for name, b := range map[string][]byte{
		"empty":        nil,
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"shard range":  table(router.ShardLeader{Shard: 8, Leader: "n1", Term: 1}),
		"empty leader": table(router.ShardLeader{Shard: 1, Leader: "", Term: 1}),
		"huge count":   {0xff, 0xff, 0xff, 0xff, 0x0f},
		"huge id":      {1, 1, 1, 0xff, 0x01},
	} {
		if err := n.mergeLeaderTable(b); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSyncTrackerPullsNewerAtOnceAndOnlyOnce(t *testing.T) {
	now := time.Unix(100, 0)
	tr := newSyncTracker(time.Second, time.Hour)
	tr.lastFull = now
	if tr.announce(kMembers, "n2", 3, 5, now) {
		t.Fatal("pulled an older version")
	}
	if !tr.announce(kMembers, "n2", 7, 5, now) {
		t.Fatal("did not pull a newer version")
	}
	if tr.announce(kMembers, "n3", 8, 5, now.Add(time.Millisecond)) {
		t.Fatal("second pull while one is in flight")
	}
	tr.merged(kMembers, 8)
	if p := tr.pulls[kMembers]; p.peer != "" {
		t.Fatalf("pull still pending after merge: %+v", p)
	}
}

func TestSyncTrackerFallsBackToAnotherPeerAfterTimeout(t *testing.T) {
	now := time.Unix(100, 0)
	tr := newSyncTracker(time.Second, time.Hour)
	for k := range numMetaKinds {
		tr.synced[k] = true
	}
	tr.lastFull = now
	peers := []string{"n2", "n3", "n4"}
	first := func(int) int { return 0 }
	tr.announce(kRing, "n3", 9, 1, now)
	tr.announce(kRing, "n4", 9, 1, now)
	if r := tr.due(now.Add(500*time.Millisecond), MetadataVersions{Ring: 1}, peers, first); len(r) != 0 {
		t.Fatalf("pulls before the timeout: %+v", r)
	}
	// n3 did not answer: ask n4, which announced the version too, rather
	// than n2, which did not.
	r := tr.due(now.Add(1100*time.Millisecond), MetadataVersions{Ring: 1}, peers, first)
	if len(r) != 1 || r[0] != (pullReq{kind: kRing, peer: "n4"}) {
		t.Fatalf("fallback %+v, want n4", r)
	}
	// n4 is silent as well: any peer not yet asked.
	r = tr.due(now.Add(2200*time.Millisecond), MetadataVersions{Ring: 1}, peers, first)
	if len(r) != 1 || r[0].peer != "n2" {
		t.Fatalf("second fallback %+v, want n2", r)
	}
	// Reaching the version ends the pull.
	tr.merged(kRing, 9)
	if r := tr.due(now.Add(5*time.Second), MetadataVersions{Ring: 9}, peers, first); len(r) != 0 {
		t.Fatalf("pulls after the sync: %+v", r)
	}
}

func TestSyncTrackerBoundsStalenessWithoutAnnouncements(t *testing.T) {
	now := time.Unix(100, 0)
	tr := newSyncTracker(time.Second, 10*time.Second)
	peers := []string{"n2"}
	any := func(int) int { return 0 }
	// Before the first full sync every kind is pulled.
	if r := tr.due(now, MetadataVersions{}, peers, any); len(r) != numMetaKinds {
		t.Fatalf("initial pulls %+v", r)
	}
	for k := range numMetaKinds {
		tr.merged(k, 0)
	}
	if !tr.fullySynced() {
		t.Fatal("not synced after merging every kind")
	}
	if r := tr.due(now.Add(5*time.Second), MetadataVersions{}, peers, any); len(r) != 0 {
		t.Fatalf("pulls inside the interval: %+v", r)
	}
	if r := tr.due(now.Add(10*time.Second), MetadataVersions{}, peers, any); len(r) != numMetaKinds {
		t.Fatalf("periodic pulls %+v, want every kind", r)
	}
	if r := tr.due(now, MetadataVersions{}, nil, any); len(r) != 0 {
		t.Fatalf("pulls with no peer: %+v", r)
	}
}

// A node that was born but has not synced its cluster metadata answers
// client requests Unavailable with a retry hint; it still answers status.
func TestUnsyncedNodeAnswersUnavailable(t *testing.T) {
	cfg := nodeConfig("n1", t.TempDir(), nil, 1)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.born.Store(true)
	for _, req := range []struct {
		kind    wire.Kind
		payload []byte
	}{
		{wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}})},
		{wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("t")})},
	} {
		kind, out := handleNow(n, req.kind, req.payload)
		var e wire.Error
		if kind != wire.KindError || wire.DecodeError(out, &e) != nil || e.Code != wire.CodeUnavailable || e.RetryAfter <= 0 {
			t.Fatalf("%v before sync: %v %+v", req.kind, kind, e)
		}
	}
	n.markReady()
	kind, _ := handleNow(n, wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}}))
	var e wire.Error
	if kind != wire.KindError {
		t.Fatalf("produce after sync: %v", kind)
	}
	_, out := handleNow(n, wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}}))
	if wire.DecodeError(out, &e) != nil || e.Code != wire.CodeNotLeaderForTopic {
		t.Fatalf("produce after sync: %+v, want NotLeaderForTopic", e)
	}
}

// Nodes born together converge on the same membership, ring and
// shard-leader versions, and converge again after a node joins.
func TestMetadataVersionsConverge(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	agree := func(size int) MetadataVersions {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			vs := make([]MetadataVersions, len(c.nodes))
			same := true
			for i, n := range c.nodes {
				vs[i] = n.MetadataVersions()
				same = same && vs[i] == vs[0] && len(n.view.Load().live) == size
			}
			if same && vs[0].Membership > 0 && vs[0].Ring > 0 && vs[0].ShardLeaders > 0 {
				return vs[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("versions never agreed: %+v", vs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := agree(3)
	for _, n := range c.nodes {
		if n.Stats().MetadataSyncs == 0 {
			t.Fatalf("%s never merged a push", n.ID())
		}
	}
	c.add("n4")
	after := agree(4)
	if after.Membership <= before.Membership || after.Ring <= before.Ring {
		t.Fatalf("versions did not rise with a join: %+v then %+v", before, after)
	}
}
