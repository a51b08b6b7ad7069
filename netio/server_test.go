package netio

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

func echoServer(t *testing.T, mod func(*Config)) *Transport {
	t.Helper()
	rec := newRecorder(16)
	rec.echo = true
	cfg := testConfig("n1", rec)
	if mod != nil {
		mod(&cfg)
	}
	return startTransport(t, cfg)
}

func expectEcho(t *testing.T, nc net.Conn, want []byte) {
	t.Helper()
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(nc, got); err != nil {
		t.Fatalf("read echo: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("echo differs: got %x want %x", got[:min(len(got), 32)], want[:min(len(want), 32)])
	}
}

func TestPartialFramesAcrossManyReads(t *testing.T) {
	tr := echoServer(t, nil)
	nc := dialClient(t, tr, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	for i := range 50 {
		payload := make([]byte, rng.IntN(3000))
		for j := range payload {
			payload[j] = byte(rng.Uint32())
		}
		stream = append(stream, testFrame(wire.KindLookup, uint64(i), payload)...)
	}
	go func() {
		rest := stream
		for len(rest) > 0 {
			n := min(1+rng.IntN(700), len(rest))
			if _, err := nc.Write(rest[:n]); err != nil {
				return
			}
			rest = rest[n:]
			time.Sleep(50 * time.Microsecond)
		}
	}()
	expectEcho(t, nc, stream)
	if got := tr.Counters().FramesIn.Load(); got != 50 {
		t.Fatalf("FramesIn = %d, want 50", got)
	}
}

func TestOneByteAtATime(t *testing.T) {
	tr := echoServer(t, nil)
	nc := dialClient(t, tr, nil)
	frame := testFrame(wire.KindStatus, 42, []byte("one byte at a time"))
	for i := range frame {
		if _, err := nc.Write(frame[i : i+1]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	expectEcho(t, nc, frame)
}

func TestBadInputClosesOnlyThatConnection(t *testing.T) {
	cases := []struct {
		name    string
		input   []byte
		counter func(*Counters) uint64
	}{
		{"1GiB length", rawHeader(wire.ProtocolVersion, wire.KindProduce, 1<<30), func(c *Counters) uint64 { return c.BadFrames.Load() }},
		{"over client limit", rawHeader(wire.ProtocolVersion, wire.KindProduce, 64<<10), func(c *Counters) uint64 { return c.BadFrames.Load() }},
		{"unknown kind", rawHeader(wire.ProtocolVersion, 200, 0), func(c *Counters) uint64 { return c.BadFrames.Load() }},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), func(c *Counters) uint64 { return c.BadFrames.Load() }},
		{"hello again", testFrame(wire.KindHello, 0, nil), func(c *Counters) uint64 { return c.HandshakeProtocol.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := echoServer(t, func(c *Config) { c.MaxClientFrame = 32 << 10 })
			bystander := dialClient(t, tr, nil)
			bad := dialClient(t, tr, nil)
			if _, err := bad.Write(tc.input); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, bad)
			if got := tc.counter(tr.Counters()); got != 1 {
				t.Fatalf("counter = %d, want 1", got)
			}
			frame := testFrame(wire.KindLookup, 9, []byte("still here"))
			if _, err := bystander.Write(frame); err != nil {
				t.Fatal(err)
			}
			expectEcho(t, bystander, frame)
		})
	}
}

func TestGarbageBeforeHandshake(t *testing.T) {
	tr := echoServer(t, nil)
	nc, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(bytes.Repeat([]byte{0xff}, 64)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc)
	c := tr.Counters()
	if c.HandshakeFailures()+c.BadFrames.Load() != 1 {
		t.Fatalf("failures %d bad frames %d, want one in all", c.HandshakeFailures(), c.BadFrames.Load())
	}
}

func TestLargeFrameBeforeHandshakeRefused(t *testing.T) {
	tr := echoServer(t, nil)
	nc, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Write(rawHeader(wire.ProtocolVersion, wire.KindHello, 1<<20)); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, nc)
	if got := tr.Counters().BadFrames.Load(); got != 1 {
		t.Fatalf("BadFrames = %d, want 1", got)
	}
}

func TestHandshakeRefusals(t *testing.T) {
	hello := func(version uint8, role wire.Role, cluster uint64, node string) []byte {
		m := wire.Hello{Version: version, Role: role, ClusterID: cluster, NodeID: []byte(node)}
		return testFrame(wire.KindHello, 0, wire.AppendHello(nil, &m))
	}
	wrongHeaderVersion := hello(wire.ProtocolVersion, wire.RoleClient, testCluster, "")
	wrongHeaderVersion[0] = wire.ProtocolVersion + 1
	cases := []struct {
		name    string
		peer    bool
		input   []byte
		counter func(*Counters) uint64
	}{
		{"wrong cluster", false, hello(wire.ProtocolVersion, wire.RoleClient, testCluster+1, ""), func(c *Counters) uint64 { return c.HandshakeWrongCluster.Load() }},
		{"wrong hello version", false, hello(wire.ProtocolVersion+1, wire.RoleClient, testCluster, ""), func(c *Counters) uint64 { return c.HandshakeWrongVersion.Load() }},
		{"wrong header version", false, wrongHeaderVersion, func(c *Counters) uint64 { return c.HandshakeWrongVersion.Load() }},
		{"peer on client port", false, hello(wire.ProtocolVersion, wire.RolePeer, testCluster, "n9"), func(c *Counters) uint64 { return c.HandshakeWrongRole.Load() }},
		{"client on peer port", true, hello(wire.ProtocolVersion, wire.RoleClient, testCluster, ""), func(c *Counters) uint64 { return c.HandshakeWrongRole.Load() }},
		{"our own node id", true, hello(wire.ProtocolVersion, wire.RolePeer, testCluster, "n1"), func(c *Counters) uint64 { return c.HandshakeWrongNode.Load() }},
		{"request before hello", false, testFrame(wire.KindLookup, 1, nil), func(c *Counters) uint64 { return c.HandshakeProtocol.Load() }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := echoServer(t, nil)
			addr := tr.ClientAddr()
			if tc.peer {
				addr = tr.PeerAddr()
			}
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			if _, err := nc.Write(tc.input); err != nil {
				t.Fatal(err)
			}
			expectClosed(t, nc)
			if got := tc.counter(tr.Counters()); got != 1 {
				t.Fatalf("counter = %d, want 1", got)
			}
			if got := tr.Counters().HandshakeFailures(); got != 1 {
				t.Fatalf("HandshakeFailures = %d, want 1", got)
			}
		})
	}
}

func TestSecret(t *testing.T) {
	tr := echoServer(t, func(c *Config) { c.Secret = []byte("s3cret") })
	nc := dialClient(t, tr, []byte("s3cret"))
	frame := testFrame(wire.KindLookup, 1, []byte("authenticated"))
	if _, err := nc.Write(frame); err != nil {
		t.Fatal(err)
	}
	expectEcho(t, nc, frame)

	for _, secret := range [][]byte{[]byte("wrong"), nil} {
		bad, err := net.Dial("tcp", tr.ClientAddr())
		if err != nil {
			t.Fatal(err)
		}
		_, err = ClientHandshake(bad, testCluster, secret)
		if secret == nil && err == nil {
			// Without a secret the client does not wait for HelloAuth:
			// the node's HelloAuth is read as a request answer and any
			// request is refused.
			_, _ = bad.Write(frame)
		}
		expectClosed(t, bad)
		_ = bad.Close()
	}
	if got := tr.Counters().HandshakeBadAuth.Load(); got != 2 {
		t.Fatalf("HandshakeBadAuth = %d, want 2", got)
	}
}

func TestHandshakeTimeout(t *testing.T) {
	tr := echoServer(t, func(c *Config) { c.HandshakeTimeout = 50 * time.Millisecond })
	nc, err := net.Dial("tcp", tr.ClientAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	expectClosed(t, nc)
	if got := tr.Counters().HandshakeTimeouts.Load(); got != 1 {
		t.Fatalf("HandshakeTimeouts = %d, want 1", got)
	}
}

func TestOverloadedReply(t *testing.T) {
	rec := newRecorder(1)
	rec.refuse = true
	tr := startTransport(t, testConfig("n1", rec))
	nc := dialClient(t, tr, nil)
	if _, err := nc.Write(testFrame(wire.KindAssign, 77, []byte("topic"))); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	h, p, err := readTestFrame(nc)
	if err != nil {
		t.Fatal(err)
	}
	if h.Kind != wire.KindError || h.RequestID != 77 || len(p) != 0 {
		t.Fatalf("got %v id %d len %d, want empty Error for 77", h.Kind, h.RequestID, len(p))
	}
	if got := tr.Counters().Overloaded.Load(); got != 1 {
		t.Fatalf("Overloaded = %d", got)
	}
}

func TestOverloadedHook(t *testing.T) {
	rec := newRecorder(1)
	rec.refuse = true
	cfg := testConfig("n1", rec)
	cfg.Overloaded = func(_ *Conn, h wire.Header) []byte { return testFrame(wire.KindError, h.RequestID, []byte("busy")) }
	tr := startTransport(t, cfg)
	nc := dialClient(t, tr, nil)
	if _, err := nc.Write(testFrame(wire.KindAssign, 5, nil)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, p, err := readTestFrame(nc)
	if err != nil || string(p) != "busy" {
		t.Fatalf("got %q, %v", p, err)
	}
}

// A client that sends requests and never reads is cut off once its
// answers pass the cap; another client keeps being served.
func TestClientThatNeverReadsIsCutOff(t *testing.T) {
	big := make([]byte, 32<<10)
	h := HandlerFunc(func(c *Conn, h wire.Header, frame []byte) bool {
		if h.Kind == wire.KindFetch {
			_ = c.Write(testFrame(wire.KindFetchResult, h.RequestID, big))
			return true
		}
		return c.Write(frame) == nil
	})
	cfg := testConfig("n1", h)
	cfg.ClientSendBytes = 256 << 10
	tr := startTransport(t, cfg)
	good := dialClient(t, tr, nil)
	slow := dialClient(t, tr, nil)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req := testFrame(wire.KindFetch, 1, nil)
		for range 20000 {
			if _, err := slow.Write(req); err != nil {
				return
			}
		}
	}()
	waitFor(t, "slow client cut off", func() bool { return tr.Counters().SlowClientsCut.Load() == 1 })
	expectClosed(t, slow)
	<-done
	frame := testFrame(wire.KindLookup, 3, []byte("unaffected"))
	if _, err := good.Write(frame); err != nil {
		t.Fatal(err)
	}
	expectEcho(t, good, frame)
}

// Many clients pipelining requests at once each get every answer, in order.
func TestManyClientsPipelining(t *testing.T) {
	clients, depth, rounds := 1000, 8, 3
	if testing.Short() {
		clients = 100
	}
	tr := echoServer(t, func(c *Config) { c.HandshakeTimeout = 30 * time.Second })
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- pipeline(tr.ClientAddr(), uint64(i), depth, rounds)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := tr.Counters().FramesIn.Load(), uint64(clients*depth*rounds); got != want {
		t.Fatalf("FramesIn = %d, want %d", got, want)
	}
}

func pipeline(addr string, id uint64, depth, rounds int) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := ClientHandshake(nc, testCluster, nil); err != nil {
		return err
	}
	var batch []byte
	payload := []byte(strings.Repeat("x", 48))
	for r := range rounds {
		batch = batch[:0]
		for d := range depth {
			batch = append(batch, testFrame(wire.KindLookup, id<<32|uint64(r*depth+d), payload)...)
		}
		if _, err := nc.Write(batch); err != nil {
			return err
		}
		for d := range depth {
			h, _, err := readTestFrame(nc)
			if err != nil {
				return err
			}
			if want := id<<32 | uint64(r*depth+d); h.RequestID != want {
				return errors.New("answer out of order")
			}
		}
	}
	return nil
}

func TestConfigValidation(t *testing.T) {
	bad := []Config{
		{NodeID: "n1"},
		{Handler: newRecorder(1)},
		{Handler: newRecorder(1), NodeID: "n1", MaxClientFrame: wire.MaxFrame + 1},
		{Handler: newRecorder(1), NodeID: "n1", BackoffMin: time.Second, BackoffMax: time.Millisecond},
		{Handler: newRecorder(1), NodeID: strings.Repeat("n", wire.MaxNodeIDLen+1)},
	}
	for i, cfg := range bad {
		if _, err := New(cfg); err == nil {
			t.Errorf("config %d accepted", i)
		}
	}
	if _, err := New(Config{Handler: newRecorder(1), NodeID: "n1", ClientAddr: "127.0.0.1:notaport", Logger: quietLogger()}); err == nil {
		t.Error("bad listen address accepted")
	}
}

func TestWriteRejectsMalformedFrames(t *testing.T) {
	tr := startTransport(t, testConfig("n1", newRecorder(1)))
	tr.SetPeerAddr("n2", "127.0.0.1:1")
	for _, f := range [][]byte{nil, []byte("short"), append(testFrame(wire.KindRaftBatch, 0, []byte("x")), 0)} {
		if err := tr.Send("n2", f); !errors.Is(err, ErrBadFrame) {
			t.Errorf("Send(%x) = %v, want ErrBadFrame", f, err)
		}
	}
	if err := tr.Send("n3", testFrame(wire.KindRaftBatch, 0, nil)); !errors.Is(err, ErrUnknownPeer) {
		t.Errorf("unknown peer: %v", err)
	}
}

// TestLoopAndWorkerWritesKeepOrder answers every request twice: once from
// the event loop inside Deliver and once from a worker goroutine. Both
// streams must arrive whole and each in the order written, and a worker's
// answer after the loop's answer to the same request, across chunk
// boundaries of the send queue.
func TestLoopAndWorkerWritesKeepOrder(t *testing.T) {
	type job struct {
		c     *Conn
		reqID uint64
		size  int
	}
	jobs := make(chan job, 1<<14)
	var workers sync.WaitGroup
	workers.Add(1)
	go func() {
		defer workers.Done()
		for j := range jobs {
			if err := j.c.Write(testFrame(wire.KindAssignment, 2*j.reqID+1, make([]byte, j.size))); err != nil {
				t.Errorf("worker write: %v", err)
				return
			}
		}
	}()
	cfg := testConfig("n1", HandlerFunc(func(c *Conn, h wire.Header, frame []byte) bool {
		// Sizes vary so that frames straddle the queue's chunks. All
		// answers to one read pass stay well under ClientSendBytes.
		size := int(h.RequestID%7) * 150
		if err := c.Write(testFrame(wire.KindAssignment, 2*h.RequestID, make([]byte, size))); err != nil {
			return false
		}
		jobs <- job{c, h.RequestID, size}
		return true
	}))
	tr := startTransport(t, cfg)
	defer func() {
		// Stop the loops before closing what their handler sends on.
		_ = tr.Close()
		close(jobs)
		workers.Wait()
	}()
	nc := dialClient(t, tr, nil)

	const n = 3000
	go func() {
		w := bufio.NewWriter(nc)
		for i := range uint64(n) {
			if _, err := w.Write(testFrame(wire.KindLookup, i, nil)); err != nil {
				return
			}
			if i%50 == 49 {
				_ = w.Flush()
			}
		}
		_ = w.Flush()
	}()
	_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	r := bufio.NewReader(nc)
	var nextLoop, nextWorker uint64
	for range 2 * n {
		h, p, err := readTestFrame(r)
		if err != nil {
			t.Fatalf("after %d loop and %d worker answers: %v", nextLoop, nextWorker, err)
		}
		id := h.RequestID / 2
		if want := int(id%7) * 150; len(p) != want {
			t.Fatalf("answer %d: %d payload bytes, want %d", h.RequestID, len(p), want)
		}
		if h.RequestID%2 == 0 {
			if id != nextLoop {
				t.Fatalf("loop answer for %d, want %d", id, nextLoop)
			}
			nextLoop++
			continue
		}
		if id != nextWorker {
			t.Fatalf("worker answer for %d, want %d", id, nextWorker)
		}
		if id >= nextLoop {
			t.Fatalf("worker answer for %d before the loop's", id)
		}
		nextWorker++
	}
}
