package dispatch

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/wire"
)

// deliverEnv is a node whose raft inbound and admission take nothing, on
// a clock that moves a millisecond at every read.
type deliverEnv struct {
	Env
	now    time.Time
	offers int
}

func (e *deliverEnv) Now() time.Time {
	e.now = e.now.Add(time.Millisecond)
	return e.now
}
func (e *deliverEnv) Ready() bool                                { return false }
func (e *deliverEnv) Admit(wire.Header, []byte) (func(), bool)   { return nil, false }
func (e *deliverEnv) OfferRaft(string, wire.Header, []byte) bool { e.offers++; return false }

// conn is a connection of role; what is written on it is dropped.
type conn struct{ role wire.Role }

func (c conn) Write([]byte) error { return nil }
func (c conn) Role() wire.Role    { return c.role }
func (c conn) Node() string       { return "n2" }

// frameOf is a whole frame of kind: its header, with no payload.
func frameOf(kind wire.Kind) (wire.Header, []byte) {
	h := wire.Header{Version: wire.ProtocolVersion, Kind: kind, RequestID: 1}
	return h, wire.AppendHeader(nil, &h)
}

// refused counts the requests timed with the outcome code.
func refused(lat *serve.Latency, code string) (n uint64, took time.Duration) {
	lat.Each(func(_, c string, h histogram.Snapshot) {
		if c == code {
			n += h.Count
			took += time.Duration(h.SumSeconds * float64(time.Second))
		}
	})
	return n, took
}

func newDelivering() (*Dispatcher, *deliverEnv) {
	env := &deliverEnv{now: time.Unix(100, 0)}
	return &Dispatcher{env: env, lat: &serve.Latency{}, sec: &security.Clients{}}, env
}

// Nothing but keepalives is taken before Open; then a peer's frame goes
// to its room, and a client's request not taken is timed as refused
// Unavailable, from when it was read.
func TestDeliverTakesFramesOnceOpen(t *testing.T) {
	d, env := newDelivering()
	peer, client := conn{wire.RolePeer}, conn{wire.RoleClient}
	h, f := frameOf(wire.KindKeepalive)
	if !d.Deliver(peer, h, f) {
		t.Fatal("a keepalive refused")
	}
	h, f = frameOf(wire.KindRaftBatch)
	if d.Deliver(peer, h, f) || env.offers != 0 {
		t.Fatalf("a raft frame taken before Open (%d offers)", env.offers)
	}
	d.Open()
	if d.Deliver(peer, h, f) || env.offers != 1 {
		t.Fatalf("a raft frame the inbound refused: %d offers", env.offers)
	}
	if n, _ := refused(d.lat, "Unavailable"); n != 0 {
		t.Fatalf("a peer's frame timed as %d refused requests", n)
	}
	h, f = frameOf(wire.KindAssign)
	if d.Deliver(client, h, f) {
		t.Fatal("a request not admitted was taken")
	}
	if n, took := refused(d.lat, "Unavailable"); n != 1 || took != time.Millisecond {
		t.Fatalf("%d refused requests timed, %v: want one of 1ms", n, took)
	}
}

// With a test's faults set, a peer's frame goes to them and not to its
// room; a client's does not.
func TestDeliverHandsPeerFramesToTheFaults(t *testing.T) {
	d, env := newDelivering()
	faulted := 0
	d.peerIn = func(c Conn, h wire.Header, frame []byte) bool { faulted++; return true }
	d.Open()
	h, f := frameOf(wire.KindRaftBatch)
	if !d.Deliver(conn{wire.RolePeer}, h, f) || faulted != 1 || env.offers != 0 {
		t.Fatalf("faults saw %d, the inbound %d", faulted, env.offers)
	}
	h, f = frameOf(wire.KindAssign)
	d.Deliver(conn{wire.RoleClient}, h, f)
	if faulted != 1 {
		t.Fatal("a client's request went to the peers' faults")
	}
}

// A driven node's frame is handed on whole, once its header says its
// length; one cut short is dropped.
func TestDeliverFrameDropsAFrameItsHeaderDoesNotSay(t *testing.T) {
	d, env := newDelivering()
	_, f := frameOf(wire.KindRaftBatch)
	d.DeliverFrame(conn{wire.RolePeer}, f[:wire.HeaderSize-1])
	d.DeliverFrame(conn{wire.RolePeer}, append(f[:len(f):len(f)], 0))
	if env.offers != 0 {
		t.Fatalf("%d frames of the wrong length offered", env.offers)
	}
	d.DeliverFrame(conn{wire.RolePeer}, f)
	if env.offers != 1 {
		t.Fatalf("%d whole frames offered, want 1", env.offers)
	}
}
