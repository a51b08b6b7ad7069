package swim

import (
	"bytes"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

func securedNode(t testing.TB, id string, cluster uint64, secret string) *Node {
	t.Helper()
	c := LANConfig()
	c.NodeID, c.SwimAddr, c.Generation, c.ClusterID = id, id+":1", 1, cluster
	if secret != "" {
		c.Secret = []byte(secret)
	}
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func keyedNode(t testing.TB, id string, keys ...[]byte) *Node {
	t.Helper()
	c := LANConfig()
	c.NodeID, c.SwimAddr, c.Generation, c.ClusterID, c.Keys = id, id+":1", 1, 5, keys
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// pingFrom builds a ping from a sender node's point of view.
func pingFrom(t testing.TB, from *Node, target string) []byte {
	t.Helper()
	from.sendMsg(target+":1", []byte(target), &wire.SwimMessage{Kind: wire.SwimPing, Seq: 1, Target: []byte(target)}, nil)
	p := from.Ready().Packets[0]
	b := append([]byte(nil), p.Data...)
	from.Advance()
	return b
}

// openAnswer opens and decodes a datagram sent to a node with keys.
func openAnswer(t testing.TB, keys [][]byte, b []byte) wire.SwimDatagram {
	t.Helper()
	ring, err := wire.NewSwimKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	d := wire.SwimDatagram{Events: make([]wire.SwimEvent, 0, wire.MaxEventsPerDatagram)}
	off, err := wire.DecodeSwimHeader(b, &d.Header)
	if err != nil {
		t.Fatal(err)
	}
	body, err := ring.Open(nil, b, off, &d.Header)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := wire.DecodeSwimBody(body, &d); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDropsAreCountedNotAnswered(t *testing.T) {
	recv := securedNode(t, "r", 5, "s3cret")
	cases := []struct {
		name  string
		data  []byte
		count func(Stats) uint64
	}{
		{"another cluster", pingFrom(t, securedNode(t, "a", 6, "s3cret"), "r"), func(s Stats) uint64 { return s.DropClusterID }},
		{"unsealed", pingFrom(t, securedNode(t, "b", 5, ""), "r"), func(s Stats) uint64 { return s.DropAuth }},
		{"wrong secret", pingFrom(t, securedNode(t, "c", 5, "other"), "r"), func(s Stats) uint64 { return s.DropAuth }},
		{"garbage", []byte("GET / HTTP/1.1\r\n"), func(s Stats) uint64 { return s.DropMalformed }},
		{"truncated", pingFrom(t, securedNode(t, "d", 5, "s3cret"), "r")[:20], func(s Stats) uint64 { return s.DropMalformed }},
		{"sealed for another node", pingFrom(t, securedNode(t, "e", 5, "s3cret"), "zz"), func(s Stats) uint64 { return s.DropWrongTarget }},
	}
	for _, c := range cases {
		before := c.count(recv.Stats())
		recv.Receive(t0, "x:1", c.data)
		if c.count(recv.Stats()) != before+1 {
			t.Errorf("%s: not counted", c.name)
		}
		if len(recv.Ready().Packets) != 0 {
			t.Errorf("%s: answered", c.name)
		}
		recv.Advance()
	}
	// A node without keys drops a sealed datagram it cannot read.
	plain := securedNode(t, "p", 5, "")
	plain.Receive(t0, "f:1", pingFrom(t, securedNode(t, "f", 5, "s3cret"), "p"))
	if plain.Stats().DropAuth != 1 || len(plain.Ready().Packets) != 0 {
		t.Fatalf("sealed datagram to a node without keys: %+v", plain.Stats())
	}
	// A good one is answered with an ack, sealed for its sender.
	recv.Receive(t0, "f:1", pingFrom(t, securedNode(t, "f", 5, "s3cret"), "r"))
	pk := recv.Ready().Packets
	if len(pk) != 1 || pk[0].To != "f:1" {
		t.Fatalf("good ping: %d packets", len(pk))
	}
	d := openAnswer(t, [][]byte{wire.DeriveSwimKey([]byte("s3cret"))}, pk[0].Data)
	if d.Msg.Kind != wire.SwimAck || string(d.Header.Recipient) != "f" || string(d.Header.Sender) != "r" {
		t.Fatalf("answer: %+v", d)
	}
}

// TestCapturedDatagramReplayedIsDropped: a sealed datagram taken off the
// wire and sent again, at once or after later ones, is dropped and
// counted; datagrams reordered within the window are taken.
func TestCapturedDatagramReplayedIsDropped(t *testing.T) {
	key := testKey(1)
	recv, sender := keyedNode(t, "r", key), keyedNode(t, "s", key)
	first := pingFrom(t, sender, "r")
	second := pingFrom(t, sender, "r")
	recv.Receive(t0, "s:1", second) // reordered: the later one first
	recv.Receive(t0, "s:1", first)
	if n := len(recv.Ready().Packets); n != 2 {
		t.Fatalf("%d acks for two reordered pings", n)
	}
	recv.Advance()
	for _, replay := range [][]byte{first, second, first} {
		recv.Receive(t0, "mallory:1", replay)
	}
	if st := recv.Stats(); st.DropReplay != 3 || len(recv.Ready().Packets) != 0 {
		t.Fatalf("replays: %d counted, %d answered", st.DropReplay, len(recv.Ready().Packets))
	}
	// Far behind the window, an old datagram is refused too.
	for range ReplayWindow {
		recv.Receive(t0, "s:1", pingFrom(t, sender, "r"))
		recv.Advance()
	}
	third := pingFrom(t, sender, "r")
	recv.Receive(t0, "s:1", third)
	recv.Advance()
	before := recv.Stats().DropReplay
	recv.Receive(t0, "s:1", second)
	if recv.Stats().DropReplay != before+1 {
		t.Fatal("a datagram below the window was taken")
	}
	// A replayed push-pull is refused as well.
	pp := sender.encodeState(false)
	if _, err := recv.HandlePushPull(t0, pp); err != nil {
		t.Fatalf("push-pull: %v", err)
	}
	if _, err := recv.HandlePushPull(t0, pp); err == nil {
		t.Fatal("a replayed push-pull was merged")
	}
}

// TestSealedTrafficDoesNotLeak: member addresses travel encrypted.
func TestSealedTrafficDoesNotLeak(t *testing.T) {
	n := keyedNode(t, "r", testKey(1))
	n.self.ClientAddr = "10.9.8.7:7101"
	n.enqueueSelfAlive()
	b := pingFrom(t, n, "x")
	if bytes.Contains(b, []byte("10.9.8.7")) {
		t.Fatal("an address travels in the clear")
	}
	if len(b) > n.cfg.DatagramBudget {
		t.Fatalf("sealed datagram of %d bytes over the budget", len(b))
	}
}

// TestKeyRotationSteps: through add, switch and remove, every node can
// read every other at every step.
func TestKeyRotationSteps(t *testing.T) {
	old, nw := testKey(1), testKey(2)
	a, b := keyedNode(t, "a", old), keyedNode(t, "b", old)
	exchange := func(step string) {
		t.Helper()
		for _, p := range [][2]*Node{{a, b}, {b, a}} {
			before := p[1].Stats()
			p[1].Receive(t0, p[0].self.SwimAddr, pingFrom(t, p[0], p[1].self.ID))
			after := p[1].Stats()
			if after.DropAuth != before.DropAuth || len(p[1].Ready().Packets) != 1 {
				t.Fatalf("%s: %s could not read %s", step, p[1].self.ID, p[0].self.ID)
			}
			p[1].Advance()
		}
	}
	exchange("before")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(a.SetKeys([][]byte{old, nw}))
	exchange("a has the new key as secondary")
	must(b.SetKeys([][]byte{old, nw}))
	must(a.SetKeys([][]byte{nw, old}))
	exchange("a seals with the new key")
	must(b.SetKeys([][]byte{nw, old}))
	exchange("both seal with the new key")
	must(a.SetKeys([][]byte{nw}))
	exchange("a dropped the old key")
	must(b.SetKeys([][]byte{nw}))
	exchange("after")
	// A node that never had the new key cannot read them now.
	c := keyedNode(t, "c", old)
	c.Receive(t0, "a:1", pingFrom(t, a, "c"))
	if c.Stats().DropAuth != 1 {
		t.Fatal("a node with the old key only read a datagram sealed with the new one")
	}
	if err := securedNode(t, "plain", 5, "").SetKeys([][]byte{nw}); err == nil {
		t.Fatal("a node started unsealed took keys")
	}
	if err := a.SetKeys(nil); err == nil {
		t.Fatal("an empty keyring was taken")
	}
}

func TestPushPullChecksClusterAndSecret(t *testing.T) {
	a := securedNode(t, "a", 5, "k")
	good := securedNode(t, "b", 5, "k")
	if _, err := a.HandlePushPull(t0, good.encodeState(true)); err != nil {
		t.Fatalf("good push-pull: %v", err)
	}
	if m, ok := a.Member("b"); !ok || m.State != StateAlive {
		t.Fatal("push-pull did not teach b")
	}
	for _, bad := range []*Node{securedNode(t, "c", 6, "k"), securedNode(t, "d", 5, ""), securedNode(t, "e", 5, "x")} {
		if _, err := a.HandlePushPull(t0, bad.encodeState(true)); err == nil {
			t.Fatalf("push-pull from %s accepted", bad.self.ID)
		}
		if _, ok := a.Member(bad.self.ID); ok {
			t.Fatalf("%s learned from a refused push-pull", bad.self.ID)
		}
	}
	st := a.Stats()
	if st.DropClusterID != 1 || st.DropAuth != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func TestReceivePingAllocatesNothing(t *testing.T) {
	for _, keyed := range []bool{false, true} {
		recv, from := securedNode(t, "r", 5, ""), securedNode(t, "f", 5, "")
		if keyed {
			recv, from = keyedNode(t, "r", testKey(4)), keyedNode(t, "f", testKey(4))
		}
		pings := make([][]byte, 300)
		for i := range pings {
			pings[i] = pingFrom(t, from, "r")
		}
		i := 0
		allocs := testing.AllocsPerRun(200, func() {
			recv.Receive(t0, "f:1", pings[i])
			i++
			recv.Advance()
		})
		if allocs > 0 {
			t.Fatalf("keys %v: %v allocations per ping answered", keyed, allocs)
		}
	}
}

func BenchmarkReceivePingAnswerAck(b *testing.B) {
	for _, keyed := range []bool{false, true} {
		name := "plain"
		if keyed {
			name = "sealed"
		}
		b.Run(name, func(b *testing.B) {
			recv, from := securedNode(b, "r", 5, ""), securedNode(b, "f", 5, "")
			if keyed {
				recv, from = keyedNode(b, "r", testKey(4)), keyedNode(b, "f", testKey(4))
			}
			ping := pingFrom(b, from, "r")
			recv.Receive(t0, "f:1", ping)
			recv.Advance()
			b.ReportAllocs()
			for b.Loop() {
				if keyed {
					// Forget the ping was taken, so that it is taken again.
					*recv.replay["f"] = replayWindow{}
				}
				recv.Receive(t0, "f:1", ping)
				recv.Advance()
			}
		})
	}
}

func TestParseKeys(t *testing.T) {
	k1 := "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=" // 32 bytes of 1
	k2 := "AgICAgICAgICAgICAgICAg=="                     // 16 bytes of 2
	keys, err := ParseKeys([]byte("# primary first\n" + k1 + "\n\n  " + k2 + "  # the old one\n"))
	if err != nil || len(keys) != 2 || keys[0][0] != 1 || len(keys[1]) != 16 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	for name, text := range map[string]string{
		"empty":       "# nothing\n",
		"not base64":  k1 + "\n!!!\n",
		"wrong size":  "AQID\n",
		"repeated":    k1 + "\n" + k1 + "\n",
		"two on line": k1 + " " + k2 + "\n",
	} {
		_, err := ParseKeys([]byte(text))
		if err == nil {
			t.Errorf("%s: accepted", name)
			continue
		}
		if strings.Contains(err.Error(), k1[:8]) {
			t.Errorf("%s: the error shows a key: %v", name, err)
		}
	}
}
