package netio

import (
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/testcerts"
	"github.com/shoalmq/shoal/wire"
)

// The tests here force one interleaving of writers and a connection's
// flush: frames queued while a flush is due (writers do not wake the loop
// then) until a little more than one flush step (maxFlushBytes) is queued,
// the step's end inside the last chunk, so that the due flush takes every
// chunk in one step. A frame written after that, from outside the loop,
// must wake it: nothing else would (the other side sends nothing).

// queuePastOneStep queues frames on c's queue q in one go, as writers do
// while c's loop is busy flushing (the queue marked as due), then wakes the
// loop for the due flush. It returns the frames' bytes in order. A take of
// the loop comes before all of the frames or after all of them, so the
// first one to find them takes them all in one step.
func queuePastOneStep(t *testing.T, c *Conn, q *sendQueue) []byte {
	t.Helper()
	var sent []byte
	q.mu.Lock()
	left := q.bytes
	if left == 0 {
		q.woken = true
		for q.bytes <= maxFlushBytes {
			f := testFrame(wire.KindAssignment, uint64(len(sent)), make([]byte, 1000))
			q.push(f)
			sent = append(sent, f...)
		}
	}
	queued, lastStart := q.bytes, q.bytes-len(q.chunks[len(q.chunks)-1])
	q.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d bytes already queued", left)
	}
	if lastStart >= maxFlushBytes {
		t.Fatalf("%d bytes queued, the last chunk from byte %d: the step's end is not in it", queued, lastStart)
	}
	_ = c.gc.Wake(nil) // the due flush
	return sent
}

// plainAndTLS runs fn as two subtests, over plain TCP and over TLS.
func plainAndTLS(t *testing.T, fn func(t *testing.T, withTLS bool)) {
	t.Run("plain", func(t *testing.T) { fn(t, false) })
	t.Run("TLS", func(t *testing.T) { fn(t, true) })
}

func TestWorkerWriteAfterAWholeStepReachesTheClient(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	plainAndTLS(t, func(t *testing.T, withTLS bool) {
		conns := make(chan *Conn, 1)
		cfg := testConfig("n1", HandlerFunc(func(c *Conn, _ wire.Header, frame []byte) bool {
			select {
			case conns <- c:
			default:
			}
			return c.Write(frame) == nil
		}))
		var nc net.Conn
		if withTLS {
			cfg.ClientTLS = &tls.Config{Certificates: []tls.Certificate{ca.Node(t, "n1").TLS}}
			tr := startTransport(t, cfg)
			tc, err := tls.Dial("tcp", tr.ClientAddr(), &tls.Config{RootCAs: ca.Pool, ServerName: "localhost"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = tc.Close() })
			if _, err := ClientHandshake(tc, testCluster, nil); err != nil {
				t.Fatal(err)
			}
			nc = tc
		} else {
			nc = dialClient(t, startTransport(t, cfg), nil)
		}
		// One request hands the test its connection, which then
		// answers from outside the loop, as a worker does.
		first := testFrame(wire.KindLookup, 1, nil)
		if _, err := nc.Write(first); err != nil {
			t.Fatal(err)
		}
		expectEcho(t, nc, first)
		c := <-conns
		sent := queuePastOneStep(t, c, c.q)
		_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		got := make([]byte, len(sent))
		if _, err := io.ReadFull(nc, got); err != nil || !bytes.Equal(got, sent) {
			t.Fatalf("the backlog: %v", err)
		}
		last := testFrame(wire.KindAssignment, 1<<20, []byte("after the backlog"))
		if err := c.Write(last); err != nil {
			t.Fatal(err)
		}
		expectEcho(t, nc, last)
	})
}

func TestSendAfterAWholeStepReachesThePeer(t *testing.T) {
	ca := testcerts.NewCA(t, "cluster")
	plainAndTLS(t, func(t *testing.T, withTLS bool) {
		a, _, _, rb := pair(t, func(a, b *Config) {
			// No keepalive either way while the test runs: a read
			// would flush the queue and hide a lost wake.
			a.KeepaliveInterval, b.KeepaliveInterval = time.Minute, time.Minute
			if withTLS {
				a.PeerTLS, a.DialTLS = peerTLS(ca, ca.Node(t, "n1"))
				b.PeerTLS, b.DialTLS = peerTLS(ca, ca.Node(t, "n2"))
			}
		})
		if err := a.Send("n2", peerFrame(0, 8)); err != nil {
			t.Fatal(err)
		}
		if r := recv(t, rb); seqOf(r) != 0 {
			t.Fatalf("first frame: seq %d", seqOf(r))
		}
		p := a.lookupPeer("n2")
		p.q.mu.Lock()
		c := p.q.conn
		p.q.mu.Unlock()
		if c == nil {
			t.Fatal("no connection to n2")
		}
		sent := queuePastOneStep(t, c, &p.q)
		var got []byte
		for len(got) < len(sent) {
			got = append(got, recv(t, rb).frame...)
		}
		if !bytes.Equal(got, sent) {
			t.Fatal("the backlog arrived out of order")
		}
		if err := a.Send("n2", peerFrame(7, 8)); err != nil {
			t.Fatal(err)
		}
		if r := recv(t, rb); seqOf(r) != 7 {
			t.Fatalf("the frame after the backlog: seq %d", seqOf(r))
		}
	})
}
