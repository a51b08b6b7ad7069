package swim

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// datagramFrom builds a datagram (sealed if sender has keys) from sender carrying msg and
// events, as sender's core encodes it.
func datagramFrom(t testing.TB, sender *Node, to string, msg *wire.SwimMessage, events ...*wire.SwimEvent) []byte {
	t.Helper()
	// Test nodes live at "ID:1".
	start, bodyOff, countOff := sender.begin([]byte(strings.TrimSuffix(to, ":1")), msg)
	for _, e := range events {
		sender.arena, _ = wire.AppendSwimEventWithin(sender.arena, countOff, wire.AppendSwimEvent(nil, e), start+wire.MaxDatagram-wire.SwimTagSize)
	}
	sender.finish(to, start, bodyOff)
	pk := sender.Ready().Packets
	b := append([]byte(nil), pk[len(pk)-1].Data...)
	sender.Advance()
	return b
}

// TestGenerationsFarAheadAreRefused: an event naming a generation further
// past the receiver's clock than MaxGenerationAhead is dropped and counted,
// whatever its kind, so one forged Dead cannot keep a node out for good;
// one within the bound still supersedes the older life.
func TestGenerationsFarAheadAreRefused(t *testing.T) {
	limit := uint64(t0.UnixNano()) + uint64(24*time.Hour)
	for _, tc := range []struct {
		name    string
		kind    wire.SwimEventKind
		gen     uint64
		refused bool
	}{
		{"Dead at generation 2^64-1", wire.SwimDead, math.MaxUint64, true},
		{"Leave at generation 2^64-1", wire.SwimLeave, math.MaxUint64, true},
		{"Suspect just past the bound", wire.SwimSuspect, limit + 1, true},
		{"Alive far ahead (an address hijack)", wire.SwimAlive, limit + 1<<40, true},
		{"Dead at the bound", wire.SwimDead, limit, false},
		{"Alive of a newer life", wire.SwimAlive, 7, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := testNode(t, "judge-node")
			n.apply(t0, ev(wire.SwimAlive, "x", 5, 5))
			before := n.Stats().DropGeneration
			n.apply(t0, ev(tc.kind, "x", tc.gen, 0))
			m, _ := n.Member("x")
			if tc.refused {
				if n.Stats().DropGeneration != before+1 || m.Generation != 5 || m.State != StateAlive {
					t.Fatalf("not refused: member %+v, DropGeneration %d", m, n.Stats().DropGeneration)
				}
				return
			}
			if m.Generation != tc.gen {
				t.Fatalf("not taken: member %+v", m)
			}
		})
	}
}

// TestNodeRejoinsAboveAGenerationClaimedForIt: a node that hears of a
// newer life of itself (a forged Dead or Alive, or a previous life whose
// clock ran ahead) takes a generation above it and gossips it, so that
// those who believed the claim take it back in.
func TestNodeRejoinsAboveAGenerationClaimedForIt(t *testing.T) {
	for _, kind := range []wire.SwimEventKind{wire.SwimDead, wire.SwimSuspect, wire.SwimLeave, wire.SwimAlive} {
		n := testNode(t, "self")
		claimed := uint64(1_000)
		n.apply(t0, ev(kind, "self", claimed, 9))
		if g := n.Self().Generation; g != claimed+1 {
			t.Fatalf("%v about generation %d: self generation %d, want %d", kind, claimed, g, claimed+1)
		}
		// A third node that believed the claim takes the new life back.
		other := testNode(t, "other")
		other.apply(t0, ev(wire.SwimDead, "self", claimed, 9))
		self := n.Self()
		other.apply(t0, &wire.SwimEvent{Kind: wire.SwimAlive, Node: []byte("self"), Generation: self.Generation, SwimAddr: []byte("self:1")})
		if m, _ := other.Member("self"); m.State != StateAlive || m.Generation != self.Generation {
			t.Fatalf("%v: the other node holds %+v after the new life's Alive", kind, m)
		}
	}
}

// TestAckCountsOnlyFromTheProbedMember: an ack with the probe's sequence
// number from another member is dropped and counted; the target's own,
// or one forwarded by a member asked to relay, ends the probe.
func TestAckCountsOnlyFromTheProbedMember(t *testing.T) {
	newProbe := func(t *testing.T) (*Node, uint64) {
		n := testNode(t, "prober")
		n.apply(t0, ev(wire.SwimAlive, "target", 1, 0))
		n.apply(t0, ev(wire.SwimAlive, "relay", 1, 0))
		n.probe = probe{}
		n.nextProbe = t0
		for now := t0; !n.probe.active || n.probe.targetID != "target"; now = now.Add(time.Second) {
			n.probe.active = false
			n.nextProbe = now
			n.Tick(now)
			n.Advance()
		}
		return n, n.probe.seq
	}
	for _, tc := range []struct {
		name   string
		sender string
		asked  bool
		ends   bool
	}{
		{"the target", "target", false, true},
		{"a member asked to relay", "relay", true, true},
		{"a member not asked", "relay", false, false},
		{"a stranger", "mallory", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, seq := newProbe(t)
			if tc.asked {
				n.probe.asked = append(n.probe.asked, "relay")
			}
			before := n.Stats().DropAck
			n.Receive(t0, tc.sender+":1", datagramFrom(t, testNode(t, tc.sender), "prober:1", &wire.SwimMessage{Kind: wire.SwimAck, Seq: seq}))
			if n.probe.active == tc.ends {
				t.Fatalf("probe active %v after the ack, want %v", n.probe.active, !tc.ends)
			}
			if !tc.ends && n.Stats().DropAck != before+1 {
				t.Fatalf("refused ack not counted")
			}
		})
	}
}

// TestRelaysAreBoundedAndAckedByTheirTarget: a relayed ping is acked only
// by its target, and the relay table stays
// within MaxRelays whatever the number of ping-reqs.
func TestRelaysAreBoundedAndAckedByTheirTarget(t *testing.T) {
	n := testNode(t, "relay")
	asker := testNode(t, "asker")
	for i := 0; i < 3*n.cfg.MaxRelays; i++ {
		n.Receive(t0, "asker:1", datagramFrom(t, asker, "relay:1", &wire.SwimMessage{Kind: wire.SwimPingReq, Seq: uint64(i), Target: []byte("target"), Addr: []byte("target:1")}))
		n.Advance()
	}
	if len(n.relays) != n.cfg.MaxRelays || n.Stats().DropRelay != uint64(2*n.cfg.MaxRelays) {
		t.Fatalf("%d relays kept, %d dropped; want %d kept", len(n.relays), n.Stats().DropRelay, n.cfg.MaxRelays)
	}
	seq := n.relays[0].seq
	n.Receive(t0, "mallory:1", datagramFrom(t, testNode(t, "mallory"), "relay:1", &wire.SwimMessage{Kind: wire.SwimAck, Seq: seq}))
	if len(n.relays) != n.cfg.MaxRelays || len(n.Ready().Packets) != 0 {
		t.Fatal("a stranger's ack was forwarded")
	}
	n.Receive(t0, "target:1", datagramFrom(t, testNode(t, "target"), "relay:1", &wire.SwimMessage{Kind: wire.SwimAck, Seq: seq}))
	if pk := n.Ready().Packets; len(n.relays) != n.cfg.MaxRelays-1 || len(pk) != 1 || pk[0].To != "asker:1" {
		t.Fatalf("the target's ack was not forwarded to the asker: %d relays, %d packets", len(n.relays), len(pk))
	}
}
