package swim

import (
	"math"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// fuzzNode is a node that knows a few members, one of them being probed,
// with relays in flight: the state crafted input plays with.
func fuzzNode(tb testing.TB) *Node {
	tb.Helper()
	n := testNode(tb, "self")
	for _, id := range []string{"a", "b", "c"} {
		n.apply(t0, ev(wire.SwimAlive, id, 5, 1))
	}
	n.Tick(t0)
	n.Advance()
	return n
}

// fuzzPushPull encodes a push-pull payload from sender listing members.
func fuzzPushPull(sender string, members ...wire.SwimPushPullMember) []byte {
	p := wire.SwimPushPull{Header: wire.SwimHeader{Sender: []byte(sender), Generation: 1}, Members: members}
	b, _ := wire.AppendSwimPushPull(nil, &p)
	return b
}

// FuzzNodeInput feeds arbitrary datagrams (Receive) and push-pull states
// (HandlePushPull, and PushPullDone for a join or an exchange by digests
// this node started) to
// a node, with time moving on between inputs: it never panics, and its
// state stays within its bounds (members, relays, broadcast queue,
// generations no further ahead than MaxGenerationAhead, a generation of
// its own that it can still raise). Seeds are the inputs that once evicted
// a node for good or kept a dead one alive.
func FuzzNodeInput(f *testing.F) {
	a := testNode(f, "a")
	// A Dead for self and for a member at generation 2^64-1.
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{}, ev(wire.SwimDead, "self", math.MaxUint64, 0), ev(wire.SwimDead, "b", math.MaxUint64, 0)))
	// A Dead for self at a newer generation within the bound.
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{}, ev(wire.SwimDead, "self", 1_000, 0)))
	// An ack from a member that was not probed, a ping-req, a nack.
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{Kind: wire.SwimAck, Seq: 1}))
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{Kind: wire.SwimPingReq, Seq: 9, Target: []byte("b"), Addr: []byte("b:1")}))
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{Kind: wire.SwimNack, Seq: 1}))
	// Push-pulls naming generations far ahead, for self and others.
	far := wire.SwimPushPullMember{Node: []byte("c"), Generation: math.MaxUint64, State: wire.SwimStateDead, SwimAddr: []byte("c:1")}
	selfDead := wire.SwimPushPullMember{Node: []byte("self"), Generation: math.MaxUint64 - 1, State: wire.SwimStateLeft, SwimAddr: []byte("x:1")}
	f.Add(byte(1), fuzzPushPull("a", far, selfDead))
	f.Add(byte(2), fuzzPushPull("a", wire.SwimPushPullMember{Node: []byte("d"), Generation: 3, State: wire.SwimStateSuspect, SwimAddr: []byte("d:1")}))
	// Exchanges by digests: a request, and an answer with entries.
	digests := func(n int, members ...wire.SwimPushPullMember) []byte {
		p := wire.SwimPushPull{Header: wire.SwimHeader{Sender: []byte("a"), Generation: 1}, Partial: true, Members: members, Digests: make([]uint64, n)}
		b, _ := wire.AppendSwimPushPull(nil, &p)
		return b
	}
	f.Add(byte(1), digests(DigestBuckets))
	f.Add(byte(1), digests(wire.MaxPushPullDigests))
	f.Add(byte(3), digests(1, far))
	f.Add(byte(3), digests(DigestBuckets, wire.SwimPushPullMember{Node: []byte("e"), Generation: 1, State: wire.SwimStateAlive, SwimAddr: []byte("e:1")}))

	f.Fuzz(func(t *testing.T, sel byte, data []byte) {
		n := fuzzNode(t)
		now := t0
		for step := range 3 {
			switch sel % 4 {
			case 0:
				n.Receive(now, "a:1", data)
			case 1:
				_, _ = n.HandlePushPull(now, data)
			case 2:
				n.Join([]string{"seed:1"})
				n.Tick(now)
				for _, pp := range n.Ready().PushPulls {
					n.PushPullDone(now, pp.ID, data, nil)
				}
			case 3:
				n.requestPushPull("a:1", false)
				for _, pp := range n.Ready().PushPulls {
					n.PushPullDone(now, pp.ID, data, nil)
				}
			}
			now = now.Add(time.Duration(step+1) * 700 * time.Millisecond)
			n.Tick(now)
			n.Advance()
		}
		limit := n.generationLimit(now)
		for _, m := range n.Members() {
			if m.Generation > limit {
				t.Fatalf("member %q at generation %d, past the bound %d", m.ID, m.Generation, limit)
			}
		}
		if g := n.Self().Generation; g == math.MaxUint64 {
			t.Fatalf("own generation at 2^64-1: it can never rise again")
		}
		if len(n.relays) > n.cfg.MaxRelays || len(n.members) > wire.MaxListEntries {
			t.Fatalf("%d relays, %d members", len(n.relays), len(n.members))
		}
		if n.queue.Len() > n.cfg.QueueMaxEntries {
			t.Fatalf("broadcast queue of %d entries past %d", n.queue.Len(), n.cfg.QueueMaxEntries)
		}
	})
}

// FuzzSealedInput feeds arbitrary datagrams and push-pull states to a node
// with keys: whatever the input, it never panics, and what it took once it
// never takes again (the second delivery is counted as a replay).
func FuzzSealedInput(f *testing.F) {
	key := testKey(7)
	a := keyedNode(f, "a", key)
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{}, ev(wire.SwimAlive, "b", 3, 1)))
	f.Add(byte(0), datagramFrom(f, a, "self:1", &wire.SwimMessage{Kind: wire.SwimPing, Seq: 1, Target: []byte("self")}))
	f.Add(byte(0), datagramFrom(f, a, "other:1", &wire.SwimMessage{Kind: wire.SwimAck, Seq: 1}))
	f.Add(byte(1), a.encodeState(false))
	f.Add(byte(1), a.encodeDigests())
	f.Fuzz(func(t *testing.T, sel byte, data []byte) {
		n := keyedNode(t, "self", key)
		deliver := func() {
			if sel%2 == 0 {
				n.Receive(t0, "a:1", data)
			} else {
				_, _ = n.HandlePushPull(t0, data)
			}
			n.Advance()
		}
		before := n.Stats()
		deliver()
		mid := n.Stats()
		took := mid.DropAuth == before.DropAuth && mid.DropMalformed == before.DropMalformed &&
			mid.DropWrongTarget == before.DropWrongTarget && mid.DropReplay == before.DropReplay &&
			mid.DropClusterID == before.DropClusterID && mid.DropSelf == before.DropSelf
		deliver()
		if after := n.Stats(); took && after.DropReplay != mid.DropReplay+1 {
			t.Fatalf("an input taken once was taken again: %+v", after)
		}
	})
}
