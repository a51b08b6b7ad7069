package netio

import (
	"context"
	"maps"
	"math/rand/v2"
	"net"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// peer is one remote node: its address, its send queue (which outlives its
// connections) and the state of dialling it. q.mu guards every field.
type peer struct {
	node    string
	q       sendQueue
	addr    string
	dialing bool // a dial attempt (connect and handshake) is in flight
	dialer  bool // a dial goroutine runs (attempting or backing off)
	removed bool
}

// SetPeerAddr records (or changes) the address node is dialled at.
func (t *Transport) SetPeerAddr(node, addr string) {
	p := t.peerOrCreate(node)
	p.q.mu.Lock()
	p.addr = addr
	p.q.mu.Unlock()
}

// RemovePeer forgets node: its connection is closed and its queued frames
// are reported dropped.
func (t *Transport) RemovePeer(node string) {
	t.peersMu.Lock()
	old := *t.peers.Load()
	p := old[node]
	if p != nil {
		m := maps.Clone(old)
		delete(m, node)
		t.peers.Store(&m)
	}
	t.peersMu.Unlock()
	if p == nil {
		return
	}
	p.q.mu.Lock()
	c, n := p.q.conn, p.q.drop()
	p.removed, p.q.closed, p.q.conn = true, true, nil
	p.q.mu.Unlock()
	t.dropped(node, n)
	if c != nil {
		_ = c.gc.Close()
	}
}

func (t *Transport) lookupPeer(node string) *peer {
	return (*t.peers.Load())[node]
}

func (t *Transport) peerOrCreate(node string) *peer {
	if p := t.lookupPeer(node); p != nil {
		return p
	}
	t.peersMu.Lock()
	defer t.peersMu.Unlock()
	old := *t.peers.Load()
	p := old[node]
	if p == nil {
		p = &peer{node: node}
		p.q.capBytes, p.q.retain = t.cfg.PeerSendBytes, peerRetain
		p.q.lastFlush.Store(nowNanos())
		m := maps.Clone(old)
		if m == nil {
			m = map[string]*peer{}
		}
		m[node] = p
		t.peers.Store(&m)
	}
	return p
}

// Send queues one whole wire frame for node from any goroutine. The frame
// is copied: the caller may reuse it when Send returns. Frames to one node
// keep their order and are coalesced into one write per event-loop pass.
// Without a connection Send dials, and the frame waits for it.
//
// Errors: ErrQueueFull (the frame was dropped: the peer's queue holds
// Config.PeerSendBytes), ErrUnknownPeer (no address and no connection),
// ErrBadFrame, ErrClosed.
func (t *Transport) Send(node string, frame []byte) error {
	if err := checkFrame(frame); err != nil {
		return err
	}
	p := t.lookupPeer(node)
	if p == nil {
		return ErrUnknownPeer
	}
	return t.enqueue(p, frame, true)
}

func (t *Transport) enqueue(p *peer, frame []byte, dial bool) error {
	q := &p.q
	q.mu.Lock()
	switch {
	case q.closed:
		q.mu.Unlock()
		return ErrClosed
	case q.conn == nil && p.addr == "":
		q.mu.Unlock()
		return ErrUnknownPeer
	case q.bytes+len(frame) > q.capBytes:
		q.mu.Unlock()
		t.counters.PeerSendDropped.Add(1)
		return ErrQueueFull
	}
	q.push(frame)
	var wake *Conn
	if q.conn != nil && !q.woken {
		q.woken, wake = true, q.conn
	}
	startDial := dial && q.conn == nil && !p.dialer
	if startDial {
		p.dialer = true
	}
	q.mu.Unlock()
	if wake != nil {
		_ = wake.gc.Wake(nil)
	}
	if startDial {
		t.startDialer(p)
	}
	return nil
}

func (t *Transport) startDialer(p *peer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		p.q.mu.Lock()
		p.dialer = false
		p.q.mu.Unlock()
		return
	}
	t.wg.Add(1)
	go t.dialLoop(p)
}

// dialLoop dials p until a connection is up, the queue is empty or the
// transport closes, waiting BackoffMin·2ⁿ (capped at BackoffMax, with
// jitter) between attempts.
func (t *Transport) dialLoop(p *peer) {
	defer t.wg.Done()
	q := &p.q
	for attempt := 0; ; {
		q.mu.Lock()
		if q.conn != nil || q.frames == 0 || p.removed || q.closed || t.ctx.Err() != nil {
			p.dialer = false
			q.mu.Unlock()
			return
		}
		addr := p.addr
		p.dialing = true
		q.mu.Unlock()

		ok := t.dialOnce(p, addr)

		q.mu.Lock()
		p.dialing = false
		q.mu.Unlock()
		if ok {
			attempt = 0
			continue
		}
		t.peerDown(p.node)
		attempt++
		timer := time.NewTimer(t.backoff(attempt))
		select {
		case <-t.ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
	}
}

// backoff is BackoffMin·2^(attempt-1) capped at BackoffMax, then a random
// point in its upper half so that nodes retrying together spread out.
func (t *Transport) backoff(attempt int) time.Duration {
	d := t.cfg.BackoffMin
	for i := 1; i < attempt && d < t.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, t.cfg.BackoffMax)
	return d/2 + rand.N(d/2+1)
}

// dialOnce connects, hands the socket to the gnet client and waits for the
// handshake's outcome. It reports whether the connection was adopted.
func (t *Transport) dialOnce(p *peer, addr string) bool {
	t.counters.PeerDials.Add(1)
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.DialTimeout)
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", addr)
	cancel()
	if err != nil {
		t.counters.PeerDialFailed.Add(1)
		t.log.Debug("netio: dial failed", "node", p.node, "addr", addr, "err", err)
		return false
	}
	var c *Conn
	if !t.dialsOnLoops() {
		if c, err = t.dialStream(nc, p.node); err != nil {
			t.counters.PeerDialFailed.Add(1)
			t.log.Debug("netio: dial failed", "node", p.node, "addr", addr, "err", err)
			return false
		}
	} else {
		c = t.newConn(kindPeerOut)
		c.node = p.node
		if _, err := t.dialClient.EnrollContext(nc, c); err != nil {
			t.counters.PeerDialFailed.Add(1)
			t.log.Debug("netio: enroll failed", "node", p.node, "err", err)
			return false
		}
	}
	select {
	case <-c.hsDone:
	case <-t.ctx.Done():
		return false
	}
	if !c.up.Load() {
		t.counters.PeerDialFailed.Add(1)
		return false
	}
	return true
}

// keepNew decides between an open connection to a node and a new one: a
// newer generation of the node wins; a second connection dialled by the
// same side replaces the first (that side gave it up); otherwise the one
// dialled by the lower node id is kept, so both ends keep the same one.
func keepNew(self string, old, nw *Conn) bool {
	if nw.gen != old.gen {
		return nw.gen > old.gen
	}
	oldOut, newOut := old.kind == kindPeerOut, nw.kind == kindPeerOut
	if oldOut == newOut {
		return true
	}
	dialler := func(out bool, remote string) string {
		if out {
			return self
		}
		return remote
	}
	return dialler(newOut, nw.node) < dialler(oldOut, old.node)
}

// mayAccept decides, at an inbound peer Hello, whether the connection can
// win against what this node already has: an adopted connection, or a dial
// of its own in flight that wins by node id.
func (t *Transport) mayAccept(c *Conn) bool {
	p := t.lookupPeer(c.node)
	if p == nil {
		return true
	}
	p.q.mu.Lock()
	defer p.q.mu.Unlock()
	if p.dialing && t.cfg.NodeID < c.node {
		return false
	}
	return p.q.conn == nil || keepNew(t.cfg.NodeID, p.q.conn, c)
}

// adopt makes c the connection of its node once the handshake is done,
// closing the one it replaces; it reports false when c loses instead.
// Runs on c's event loop, which flushes the queue before it returns.
func (t *Transport) adopt(c *Conn) bool {
	p := t.peerOrCreate(c.node)
	q := &p.q
	q.mu.Lock()
	old := q.conn
	if q.closed || (old != nil && !keepNew(t.cfg.NodeID, old, c)) {
		q.mu.Unlock()
		return false
	}
	// c.q is set before the queue names c: a TLS connection's writer,
	// which a Send through the queue may wake at once, reads it.
	c.q = q
	q.conn, q.woken = c, true
	q.mu.Unlock()
	q.lastFlush.Store(nowNanos())
	t.counters.PeerConnsUp.Add(1)
	if old != nil {
		t.counters.TieBreakClosed.Add(1)
		old.failed.Store(true)
		_ = old.gc.Close()
	}
	return true
}

// peerConnClosed detaches a closed connection from its peer, tells the
// caller the peer is down and redials while frames wait.
func (t *Transport) peerConnClosed(c *Conn) {
	p := t.lookupPeer(c.node)
	if p == nil || &p.q != c.q {
		return
	}
	q := &p.q
	q.mu.Lock()
	if q.conn != c {
		q.mu.Unlock()
		return
	}
	q.conn, q.woken = nil, false
	startDial := q.frames > 0 && !p.dialer && !p.removed && !q.closed && p.addr != ""
	if startDial {
		p.dialer = true
	}
	q.mu.Unlock()
	t.peerDown(c.node)
	if startDial {
		t.startDialer(p)
	}
}

// keepalive closes p's connection when nothing was read for PeerDeadAfter
// and queues a Keepalive when nothing was written for KeepaliveInterval.
func (t *Transport) keepalive(p *peer, now int64) {
	q := &p.q
	q.mu.Lock()
	c := q.conn
	q.mu.Unlock()
	if c == nil {
		return
	}
	if now-c.lastRead.Load() > int64(t.cfg.PeerDeadAfter) {
		c.closeAsync(&t.counters.PeerDead, "peer silent for too long")
		return
	}
	if now-q.lastFlush.Load() > int64(t.cfg.KeepaliveInterval) {
		if t.enqueue(p, keepaliveFrame, false) == nil {
			t.counters.KeepalivesSent.Add(1)
			q.lastFlush.Store(now)
		}
	}
}

var keepaliveFrame = frameOf(wire.KindKeepalive, nil)
