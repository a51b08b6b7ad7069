package dispatch

import (
	"time"

	"github.com/shoalmq/shoal/wire"
)

// Open has Deliver take frames: the node wired every part. Until then
// every frame but a keepalive is refused (a request is answered
// overloaded, Unavailable).
func (d *Dispatcher) Open() { d.serving.Store(true) }

// Deliver takes a frame where the transport read it (a connection's
// reader goroutine, or an event loop): a keepalive is taken, nothing else
// before Open; a peer's frame goes to Frame, or to a test's faults
// (Config.PeerIn) when set; a client's request is timed from now, and one
// not taken is counted refused (the transport answers it Unavailable).
// It copies what it keeps and returns.
func (d *Dispatcher) Deliver(c Conn, h wire.Header, frame []byte) bool {
	if h.Kind == wire.KindKeepalive {
		return true
	}
	if !d.serving.Load() {
		return false
	}
	if c.Role() == wire.RolePeer && d.peerIn != nil {
		return d.peerIn(c, h, frame)
	}
	if c.Role() == wire.RolePeer {
		return d.Frame(c, h, frame, time.Time{})
	}
	start := d.env.Now()
	if !d.Frame(c, h, frame, start) {
		d.lat.Refused(h.Kind, wire.CodeUnavailable, d.env.Now().Sub(start))
		return false
	}
	return true
}

// DeliverFrame hands the Dispatcher one whole frame (header and payload)
// that arrived on c, as a driven node's caller delivers it: a frame whose
// header does not decode, or whose length is not the one its header says,
// is dropped.
func (d *Dispatcher) DeliverFrame(c Conn, frame []byte) {
	var h wire.Header
	if wire.DecodeHeader(frame, &h) != nil || len(frame) != wire.HeaderSize+int(h.Length) {
		return
	}
	d.Frame(c, h, frame, d.env.Now())
}
