package swim

import (
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

// ping builds a ping from a sender node's point of view.
func pingFrom(t testing.TB, from *Node, target string) []byte {
	t.Helper()
	from.sendMsg(target+":1", &wire.SwimMessage{Kind: wire.SwimPing, Seq: 1, Target: []byte(target)}, nil)
	p := from.Ready().Packets[0]
	b := append([]byte(nil), p.Data...)
	from.Advance()
	return b
}

func TestDropsAreCountedNotAnswered(t *testing.T) {
	recv := securedNode(t, "r", 5, "s3cret")
	cases := []struct {
		name  string
		data  []byte
		count func(Stats) uint64
	}{
		{"another cluster", pingFrom(t, securedNode(t, "a", 6, "s3cret"), "r"), func(s Stats) uint64 { return s.DropClusterID }},
		{"no tag", pingFrom(t, securedNode(t, "b", 5, ""), "r"), func(s Stats) uint64 { return s.DropAuth }},
		{"wrong secret", pingFrom(t, securedNode(t, "c", 5, "other"), "r"), func(s Stats) uint64 { return s.DropAuth }},
		{"garbage", []byte("GET / HTTP/1.1\r\n"), func(s Stats) uint64 { return s.DropMalformed }},
		{"truncated", pingFrom(t, securedNode(t, "d", 5, "s3cret"), "r")[:20], func(s Stats) uint64 { return s.DropMalformed }},
		{"wrong target", pingFrom(t, securedNode(t, "e", 5, "s3cret"), "zz"), func(s Stats) uint64 { return s.DropWrongTarget }},
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
	// A good one is answered with an ack.
	recv.Receive(t0, "f:1", pingFrom(t, securedNode(t, "f", 5, "s3cret"), "r"))
	pk := recv.Ready().Packets
	if len(pk) != 1 || pk[0].To != "f:1" {
		t.Fatalf("good ping: %d packets", len(pk))
	}
	var d wire.SwimDatagram
	d.Events = make([]wire.SwimEvent, 0, wire.MaxEventsPerDatagram)
	if err := wire.DecodeSwimDatagram(pk[0].Data, &d); err != nil || d.Msg.Kind != wire.SwimAck || !wire.NewSwimAuth([]byte("s3cret")).Verify(pk[0].Data, d.TagOffset) {
		t.Fatalf("answer: %v %+v", err, d.Msg)
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
	recv := securedNode(t, "r", 5, "")
	ping := pingFrom(t, securedNode(t, "f", 5, ""), "r")
	allocs := testing.AllocsPerRun(200, func() {
		recv.Receive(t0, "f:1", ping)
		recv.Advance()
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per ping answered", allocs)
	}
}

func BenchmarkReceivePingAnswerAck(b *testing.B) {
	recv := securedNode(b, "r", 5, "")
	ping := pingFrom(b, securedNode(b, "f", 5, ""), "r")
	b.ReportAllocs()
	for b.Loop() {
		recv.Receive(t0, "f:1", ping)
		recv.Advance()
	}
}
