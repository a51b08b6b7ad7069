package netio

import (
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

func peerFrame(seq uint64, size int) []byte {
	p := make([]byte, size)
	binary.LittleEndian.PutUint64(p, seq)
	return testFrame(wire.KindRaftBatch, 0, p)
}

func seqOf(r recorded) uint64 { return binary.LittleEndian.Uint64(r.frame[wire.HeaderSize:]) }

func recv(t *testing.T, rec *recorder) recorded {
	t.Helper()
	select {
	case r := <-rec.frames:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no frame delivered")
		return recorded{}
	}
}

func pair(t *testing.T, mod func(a, b *Config)) (*Transport, *recorder, *Transport, *recorder) {
	t.Helper()
	ra, rb := newRecorder(4096), newRecorder(4096)
	ca, cb := testConfig("n1", ra), testConfig("n2", rb)
	if mod != nil {
		mod(&ca, &cb)
	}
	a, b := startTransport(t, ca), startTransport(t, cb)
	a.SetPeerAddr("n2", b.PeerAddr())
	b.SetPeerAddr("n1", a.PeerAddr())
	return a, ra, b, rb
}

func TestPeerFramesInOrderAndKeepalive(t *testing.T) {
	a, _, b, rb := pair(t, func(a, b *Config) {
		a.KeepaliveInterval, b.KeepaliveInterval = 20*time.Millisecond, 20*time.Millisecond
	})
	for i := range 500 {
		if err := a.Send("n2", peerFrame(uint64(i), 100)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 500 {
		r := recv(t, rb)
		if r.node != "n1" || seqOf(r) != uint64(i) {
			t.Fatalf("frame %d: from %q seq %d", i, r.node, seqOf(r))
		}
	}
	// Idle: keepalives flow both ways and keep the connection open.
	waitFor(t, "keepalives", func() bool {
		return a.Counters().KeepalivesSent.Load() >= 3 && b.Counters().KeepalivesSent.Load() >= 3
	})
	time.Sleep(150 * time.Millisecond) // > PeerDeadAfter (5 × 20ms)
	if a.Counters().PeerDead.Load()+b.Counters().PeerDead.Load() != 0 || upPeerConns(a) != 1 || upPeerConns(b) != 1 {
		t.Fatalf("idle connection dropped: dead %d/%d up %d/%d", a.Counters().PeerDead.Load(),
			b.Counters().PeerDead.Load(), upPeerConns(a), upPeerConns(b))
	}
	if got := a.Counters().PeerDials.Load(); got != 1 {
		t.Fatalf("PeerDials = %d, want 1", got)
	}
	// Answers travel back over the same connection: b does not dial.
	if err := b.Send("n1", peerFrame(1, 8)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "one connection", func() bool { return upPeerConns(b) == 1 })
	if got := b.Counters().PeerDials.Load(); got != 0 {
		t.Fatalf("b dialled %d times over an open connection", got)
	}
}

func TestSimultaneousDialKeepsOneConnection(t *testing.T) {
	for round := range 5 {
		a, ra, b, rb := pair(t, nil)
		var start sync.WaitGroup
		start.Add(1)
		var wg sync.WaitGroup
		for _, s := range []struct {
			tr *Transport
			to string
		}{{a, "n2"}, {b, "n1"}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				start.Wait()
				for i := range 10 {
					if err := s.tr.Send(s.to, peerFrame(uint64(i), 16)); err != nil {
						t.Errorf("send: %v", err)
					}
				}
			}()
		}
		start.Done()
		wg.Wait()
		waitFor(t, "one connection each side", func() bool { return upPeerConns(a) == 1 && upPeerConns(b) == 1 })
		// Frames written on a connection the tie-break closed may be lost
		// (raft retransmits); the survivor carries new frames both ways.
		for _, s := range []struct {
			tr  *Transport
			to  string
			rec *recorder
		}{{a, "n2", rb}, {b, "n1", ra}} {
			if err := s.tr.Send(s.to, peerFrame(999, 16)); err != nil {
				t.Fatal(err)
			}
			for {
				if r := recv(t, s.rec); seqOf(r) == 999 {
					break
				}
			}
		}
		if upPeerConns(a) != 1 || upPeerConns(b) != 1 {
			t.Fatalf("round %d: %d and %d connections", round, upPeerConns(a), upPeerConns(b))
		}
		_ = a.Close()
		_ = b.Close()
	}
}

func TestPeerKilledAndRestarted(t *testing.T) {
	ra := newRecorder(16)
	ca := testConfig("n1", ra)
	ca.PeerSendBytes = 10 << 10
	a := startTransport(t, ca)
	down := make(chan string, 100)
	a.OnPeerDown(func(node string) { down <- node })

	rb := newRecorder(4096)
	cb := testConfig("n2", rb)
	b, err := New(cb)
	if err != nil {
		t.Fatal(err)
	}
	addr := b.PeerAddr()
	a.SetPeerAddr("n2", addr)
	if err := a.Send("n2", peerFrame(0, 100)); err != nil {
		t.Fatal(err)
	}
	recv(t, rb)

	_ = b.Close()
	select {
	case node := <-down:
		if node != "n2" {
			t.Fatalf("down %q", node)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("peer loss not reported")
	}

	// While n2 is away frames queue up to the cap; the rest are refused
	// and counted.
	var accepted, refused int
	for i := 1; i <= 200; i++ {
		switch err := a.Send("n2", peerFrame(uint64(i), 100)); {
		case err == nil:
			accepted++
		case errors.Is(err, ErrQueueFull):
			refused++
		default:
			t.Fatal(err)
		}
	}
	if refused == 0 || accepted == 0 {
		t.Fatalf("accepted %d refused %d", accepted, refused)
	}
	if got := a.Counters().PeerSendDropped.Load(); got != uint64(refused) {
		t.Fatalf("PeerSendDropped = %d, want %d", got, refused)
	}
	waitFor(t, "redial attempts", func() bool { return a.Counters().PeerDialFailed.Load() >= 2 })

	cb.PeerAddr = addr
	cb.Generation = 2
	b2 := startTransport(t, cb)
	for i := 1; i <= accepted; i++ {
		if r := recv(t, rb); seqOf(r) != uint64(i) {
			t.Fatalf("after restart got seq %d, want %d", seqOf(r), i)
		}
	}
	select {
	case r := <-rb.frames:
		t.Fatalf("unexpected extra frame %d", seqOf(r))
	case <-time.After(50 * time.Millisecond):
	}
	if upPeerConns(b2) != 1 {
		t.Fatalf("restarted node has %d peer connections", upPeerConns(b2))
	}
}

func TestQueuedFramesReportedDroppedOnRemove(t *testing.T) {
	a := startTransport(t, testConfig("n1", newRecorder(1)))
	var dropped atomic.Int64
	a.OnDropped(func(node string, n int) {
		if node == "n9" {
			dropped.Add(int64(n))
		}
	})
	// A port nobody listens on: every dial fails.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	_ = ln.Close()
	a.SetPeerAddr("n9", dead)
	for i := range 7 {
		if err := a.Send("n9", peerFrame(uint64(i), 10)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "failed dial", func() bool { return a.Counters().PeerDialFailed.Load() >= 1 })
	a.RemovePeer("n9")
	if dropped.Load() != 7 {
		t.Fatalf("dropped %d, want 7", dropped.Load())
	}
	if err := a.Send("n9", peerFrame(8, 10)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("send after remove: %v", err)
	}
}

func TestPeerHandshakeRefused(t *testing.T) {
	cases := []struct {
		name    string
		mod     func(a, b *Config)
		counter func(a, b *Counters) uint64
	}{
		{"wrong secret", func(a, b *Config) { a.Secret, b.Secret = []byte("x"), []byte("y") },
			func(a, b *Counters) uint64 { return b.HandshakeBadAuth.Load() }},
		{"secret on one side", func(a, b *Config) { b.Secret = []byte("y") },
			func(a, b *Counters) uint64 { return a.HandshakeProtocol.Load() + b.HandshakeBadAuth.Load() }},
		{"wrong cluster", func(a, b *Config) { b.ClusterID = testCluster + 1 },
			func(a, b *Counters) uint64 { return b.HandshakeWrongCluster.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, _, b, rb := pair(t, tc.mod)
			down := make(chan string, 100)
			a.OnPeerDown(func(node string) { down <- node })
			if err := a.Send("n2", peerFrame(1, 10)); err != nil {
				t.Fatal(err)
			}
			select {
			case <-down:
			case <-time.After(10 * time.Second):
				t.Fatal("refused peer not reported down")
			}
			waitFor(t, "refusal counted", func() bool { return tc.counter(a.Counters(), b.Counters()) >= 1 })
			select {
			case <-rb.frames:
				t.Fatal("frame delivered over a refused connection")
			default:
			}
		})
	}
	t.Run("secret matches", func(t *testing.T) {
		a, _, _, rb := pair(t, func(a, b *Config) { a.Secret, b.Secret = []byte("k"), []byte("k") })
		if err := a.Send("n2", peerFrame(5, 10)); err != nil {
			t.Fatal(err)
		}
		if r := recv(t, rb); seqOf(r) != 5 || r.node != "n1" {
			t.Fatalf("got %d from %q", seqOf(r), r.node)
		}
	})
}

func TestDialledAddressAnswersAsAnotherNode(t *testing.T) {
	a, _, b, _ := pair(t, nil)
	a.SetPeerAddr("n3", b.PeerAddr())
	if err := a.Send("n3", peerFrame(1, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "wrong node refused", func() bool { return a.Counters().HandshakeWrongNode.Load() >= 1 })
}

func TestPeerFramesDroppedWhenConsumerFull(t *testing.T) {
	a, _, b, rb := pair(t, nil)
	rb.refuse = false
	_ = b
	full := newRecorder(0)
	full.refuse = true
	b.cfg.Handler = full
	if err := a.Send("n2", peerFrame(1, 10)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "drop counted", func() bool { return b.Counters().PeerInDropped.Load() == 1 })
}

// A peer that completes the handshake and then goes silent is found dead.
func TestSilentPeerFoundDead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	served := make(chan struct{})
	go func() {
		defer close(served)
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		defer nc.Close()
		if _, _, err := readTestFrame(nc); err != nil {
			return
		}
		m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: testCluster, Generation: 1, NodeID: []byte("n2")}
		if _, err := nc.Write(testFrame(wire.KindHello, 0, wire.AppendHello(nil, &m))); err != nil {
			return
		}
		buf := make([]byte, 4096)
		for {
			if _, err := nc.Read(buf); err != nil {
				return
			}
		}
	}()
	cfg := testConfig("n1", newRecorder(1))
	cfg.KeepaliveInterval, cfg.PeerDeadAfter = 20*time.Millisecond, 100*time.Millisecond
	a := startTransport(t, cfg)
	down := make(chan string, 10)
	a.OnPeerDown(func(node string) { down <- node })
	a.SetPeerAddr("n2", ln.Addr().String())
	if err := a.Send("n2", peerFrame(1, 10)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-down:
	case <-time.After(10 * time.Second):
		t.Fatal("silent peer not reported down")
	}
	if got := a.Counters().PeerDead.Load(); got != 1 {
		t.Fatalf("PeerDead = %d, want 1", got)
	}
	<-served
}
