package swim

import (
	"fmt"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

// exchange runs every push-pull a has asked for against b, follow-ups
// included, and returns how many exchanges ran and the bytes both sent.
func exchange(t *testing.T, a, b *Node) (exchanges, bytes int) {
	t.Helper()
	for range 10 {
		reqs := append([]PushPullRequest(nil), a.Ready().PushPulls...)
		a.Advance()
		if len(reqs) == 0 {
			return exchanges, bytes
		}
		for _, r := range reqs {
			reply, err := b.HandlePushPull(t0, r.Payload)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.PushPullDone(t0, r.ID, reply, nil); err != nil {
				t.Fatal(err)
			}
			exchanges++
			bytes += len(r.Payload) + len(reply)
		}
	}
	t.Fatal("push-pulls never stop")
	return
}

// shared gives both nodes the same members, shard leaders and versions.
func shared(nodes []*Node, members, shards int) {
	for _, n := range nodes {
		for i := range members {
			n.apply(t0, ev(wire.SwimAlive, fmt.Sprintf("m%04d", i), 1, 1))
		}
		for s := range shards {
			n.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: uint64(s), Node: []byte("m0001"), Term: 2})
			n.apply(t0, &wire.SwimEvent{Kind: wire.SwimMetadataVersion, Node: []byte(fmt.Sprintf("m%04d", s)), MetaKind: 1, Version: 3})
		}
	}
	for _, n := range nodes {
		for _, o := range nodes {
			if o != n {
				n.apply(t0, ev(wire.SwimAlive, o.self.ID, o.self.Generation, o.self.Incarnation))
			}
		}
		n.Advance()
	}
}

func TestDigestExchangeOfEqualStatesSendsNoEntries(t *testing.T) {
	a, b := testNode(t, "a"), testNode(t, "b")
	shared([]*Node{a, b}, 1000, 1000)
	a.requestPushPull("b:1", false)
	n, sent := exchange(t, a, b)
	if n != 1 || a.Stats().PushPullsInSync != 1 {
		t.Fatalf("%d exchanges, %d in sync; want 1 and 1", n, a.Stats().PushPullsInSync)
	}
	full := len(a.encodeState(false))
	if sent > 2*(DigestBuckets*8+64) {
		t.Fatalf("equal states exchanged %d bytes (a whole state is %d)", sent, full)
	}
	t.Logf("%d bytes both ways; a whole state is %d", sent, full)
}

func TestDigestExchangeCarriesWhatEachSideLacks(t *testing.T) {
	a, b := testNode(t, "a"), testNode(t, "b")
	shared([]*Node{a, b}, 500, 500)
	// a knows a new member, a newer leader of shard 7 and a newer version;
	// b knows another new member and a newer leader of shard 9.
	a.apply(t0, ev(wire.SwimAlive, "x", 1, 1))
	a.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: 7, Node: []byte("m0002"), Term: 3})
	a.apply(t0, &wire.SwimEvent{Kind: wire.SwimMetadataVersion, Node: []byte("m0003"), MetaKind: 1, Version: 4})
	b.apply(t0, ev(wire.SwimAlive, "y", 1, 1))
	b.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: 9, Node: []byte("m0004"), Term: 5})
	// and b holds m0005 dead.
	b.apply(t0, ev(wire.SwimDead, "m0005", 1, 1))
	a.Advance()
	b.Advance()

	a.requestPushPull("b:1", false)
	n, sent := exchange(t, a, b)
	if n != 2 {
		t.Fatalf("%d exchanges, want the digests and one push", n)
	}
	for _, x := range []*Node{a, b} {
		if _, ok := x.Member("x"); !ok {
			t.Fatalf("%s does not know x", x.self.ID)
		}
		if _, ok := x.Member("y"); !ok {
			t.Fatalf("%s does not know y", x.self.ID)
		}
		if m, _ := x.Member("m0005"); m.State != StateDead {
			t.Fatalf("%s holds m0005 %v", x.self.ID, m.State)
		}
		if l, term, _ := x.ShardLeader(7); l != "m0002" || term != 3 {
			t.Fatalf("%s: shard 7 led by %s at %d", x.self.ID, l, term)
		}
		if l, term, _ := x.ShardLeader(9); l != "m0004" || term != 5 {
			t.Fatalf("%s: shard 9 led by %s at %d", x.self.ID, l, term)
		}
		if v := x.versions[verKey{"m0003", 1}]; v != 4 {
			t.Fatalf("%s: version %d", x.self.ID, v)
		}
	}
	// Now they agree.
	a.requestPushPull("b:1", false)
	if n, _ := exchange(t, a, b); n != 1 || a.Stats().PushPullsInSync != 1 {
		t.Fatalf("after the merge: %d exchanges, %d in sync", n, a.Stats().PushPullsInSync)
	}
	if full := len(a.encodeState(false)); sent > full/2 {
		t.Fatalf("a few differences took %d bytes; a whole state is %d", sent, full)
	}
}

// A node that does not know the asker at all learns it from the push that
// ends the exchange.
func TestDigestExchangeWithAStranger(t *testing.T) {
	a, b := testNode(t, "a"), testNode(t, "b")
	a.apply(t0, ev(wire.SwimAlive, "b", 1, 1))
	a.Advance()
	a.requestPushPull("b:1", false)
	if n, _ := exchange(t, a, b); n != 2 {
		t.Fatalf("%d exchanges", n)
	}
	if _, ok := b.Member("a"); !ok {
		t.Fatal("b did not learn a")
	}
}

func TestDigestsIgnoreOrder(t *testing.T) {
	var h entryHasher
	p := &wire.SwimPushPull{
		Members: []wire.SwimPushPullMember{
			{Node: []byte("a"), Generation: 1, State: wire.SwimStateAlive, SwimAddr: []byte("a:1")},
			{Node: []byte("b"), Generation: 1, State: wire.SwimStateAlive, SwimAddr: []byte("b:1")},
		},
		Leaders: []wire.SwimShardLeaderEntry{{Shard: 1, Leader: []byte("a"), Term: 1}, {Shard: 2, Leader: []byte("b"), Term: 1}},
	}
	one, two := make([]uint64, 4), make([]uint64, 4)
	h.digests(p, one)
	p.Members[0], p.Members[1] = p.Members[1], p.Members[0]
	p.Leaders[0], p.Leaders[1] = p.Leaders[1], p.Leaders[0]
	h.digests(p, two)
	if fmt.Sprint(one) != fmt.Sprint(two) {
		t.Fatalf("%v != %v", one, two)
	}
	// A change of any field changes a digest.
	p.Members[1].Meta = []byte{1}
	h.digests(p, two)
	if fmt.Sprint(one) == fmt.Sprint(two) {
		t.Fatal("meta not in the digest")
	}
}
