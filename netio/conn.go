package netio

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/shoalmq/shoal/wire"
)

// listenerKind says which side of the transport a connection belongs to.
type listenerKind uint8

const (
	kindClient  listenerKind = iota // accepted on the client listener
	kindPeerIn                      // accepted on the peer listener
	kindPeerOut                     // dialled by this node
)

type connState uint8

const (
	stateAwaitHello connState = iota
	stateAwaitAuth
	stateEstablished
)

// link is what a Conn writes to and closes: a gnet connection, or one
// served by its own goroutines (streamLink).
type link interface {
	Write(b []byte) (int, error)
	Writev(bs [][]byte) (int, error)
	// OutboundBuffered is what the link took and the socket did not yet.
	OutboundBuffered() int
	// Wake makes the connection's loop run a pass (a flush).
	Wake(callback gnet.AsyncCallback) error
	Close() error
}

// Conn is one TCP connection. A Handler receives it with every frame; it
// stays valid after the connection closes (Write then returns ErrClosed).
type Conn struct {
	t        *Transport
	gc       link // set before the Conn is visible to anyone else
	id       uint64
	kind     listenerKind
	remote   string
	openedAt int64 // unix nanos
	// addr and counted: an accepted connection counted against its
	// listener's limits under addr (see Transport.admitConn).
	addr    addrKey
	counted bool

	// Set on the event loop before the first Deliver, immutable after.
	role  wire.Role
	node  string
	gen   uint64
	grant any // what Config.CheckToken granted a client

	// Event-loop only.
	state       connState
	nonce       [wire.NonceSize]byte
	helloOut    []byte // our Hello payload
	helloIn     []byte // the other side's Hello payload, kept for HelloAuth
	q           *sendQueue
	spare       [][]byte // chunk list handed back to q at the next take
	iov         [][]byte // writev scratch: gnet reslices the entries it is given
	retryArmed  bool     // queued on Transport.retry
	lastFlushAt int64    // unix nanos of this loop's last write
	wakeStreak  int      // wake-driven flushes in quick succession
	pending     []byte   // a partial frame carried over to the next read
	framesIn    uint64   // frames handed over in this pass, counted once at its end
	closed      bool

	up       atomic.Bool   // handshake complete
	failed   atomic.Bool   // a failure was logged; later ones stay quiet
	closing  atomic.Bool   // closeAsync was called
	lastRead atomic.Int64  // unix nanos of the last read (dead peers, idle clients)
	hsDone   chan struct{} // dialled connections: closed when the handshake ends either way
}

// ID is unique among the transport's connections.
func (c *Conn) ID() uint64 { return c.id }

// Role is wire.RoleClient or wire.RolePeer.
func (c *Conn) Role() wire.Role { return c.role }

// Node is the peer's node id; empty for clients.
func (c *Conn) Node() string { return c.node }

// Grant is what Config.CheckToken returned for a client's token; nil for
// peers and when clients are not authenticated by token.
func (c *Conn) Grant() any { return c.grant }

// RemoteAddr is the other end's address.
func (c *Conn) RemoteAddr() string { return c.remote }

// Write queues one whole frame for this connection from any goroutine; the
// frame is copied. On a client connection, passing Config.ClientSendBytes
// cuts the client off (ErrSlowConsumer). On a peer connection Write is
// Transport.Send to that node.
func (c *Conn) Write(frame []byte) error {
	if c.role == wire.RolePeer {
		return c.t.Send(c.node, frame)
	}
	if err := checkFrame(frame); err != nil {
		return err
	}
	q := c.q
	if q == nil {
		return ErrClosed
	}
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return ErrClosed
	}
	if q.bytes+len(frame) > q.capBytes {
		q.closed = true
		q.drop()
		q.mu.Unlock()
		c.t.counters.SlowClientsCut.Add(1)
		c.logFailure("slow consumer: outbound queue over cap", nil)
		_ = c.gc.Close()
		return ErrSlowConsumer
	}
	q.push(frame)
	wake := !q.woken
	q.woken = true
	q.mu.Unlock()
	if wake {
		_ = c.gc.Wake(nil)
	}
	return nil
}

// Close closes the connection from any goroutine.
func (c *Conn) Close() error { return c.gc.Close() }

// closeAsync asks c's loop to close it; only the first call counts and
// logs, so that a failure found repeatedly is counted once.
func (c *Conn) closeAsync(counter *atomic.Uint64, reason string) {
	if c.closing.Swap(true) {
		return
	}
	counter.Add(1)
	c.logFailure(reason, nil)
	_ = c.gc.Close()
}

// checkFrame verifies that frame is exactly one wire frame.
func checkFrame(frame []byte) error {
	var h wire.Header
	if err := wire.DecodeHeader(frame, &h); err != nil {
		return errors.Join(ErrBadFrame, err)
	}
	if len(frame) != wire.HeaderSize+int(h.Length) {
		return ErrBadFrame
	}
	return nil
}

func (c *Conn) maxPayload() int {
	switch {
	case c.state != stateEstablished:
		return maxHelloFrame
	case c.role == wire.RolePeer:
		return c.t.cfg.MaxPeerFrame
	default:
		return c.t.cfg.MaxClientFrame
	}
}

// onTraffic frames what was read, hands whole frames over, keeps a partial
// frame for the next read, then flushes the outbound queue. Everything gnet
// buffered is taken with one Peek and released with one Discard, so gnet's
// own inbound buffer stays empty and the Peek is a view of its read buffer.
func (c *Conn) onTraffic(gc gnet.Conn) gnet.Action {
	// A Wake also lands here, with nothing read.
	n := gc.InboundBuffered()
	fromRead := n > 0
	if fromRead {
		c.lastRead.Store(nowNanos())
	}
	c.retryArmed = false
	if c.q != nil {
		c.q.markFlushing(c)
	}
	if fromRead {
		buf, err := gc.Peek(n)
		if err != nil {
			return c.fail("reading the inbound buffer", err)
		}
		act := c.consume(buf)
		_, _ = gc.Discard(n)
		if c.framesIn > 0 {
			c.t.counters.FramesIn.Add(c.framesIn)
			c.framesIn = 0
		}
		if act != gnet.None {
			return act
		}
	}
	return c.flush(fromRead)
}

// maxPending is the largest partial-frame buffer kept once its frame is
// handled; a larger one (a big frame) is let go.
const maxPending = 64 << 10

// consume hands over every whole frame of c.pending followed by buf and
// copies a trailing partial frame to c.pending.
func (c *Conn) consume(buf []byte) gnet.Action {
	var h wire.Header
	if len(c.pending) > 0 {
		if len(c.pending) < wire.HeaderSize {
			k := min(wire.HeaderSize-len(c.pending), len(buf))
			c.pending = append(c.pending, buf[:k]...)
			buf = buf[k:]
			if len(c.pending) < wire.HeaderSize {
				return gnet.None
			}
		}
		total, act := c.header(c.pending, &h)
		if act != gnet.None {
			return act
		}
		k := min(total-len(c.pending), len(buf))
		c.pending = append(c.pending, buf[:k]...)
		buf = buf[k:]
		if len(c.pending) < total {
			return gnet.None
		}
		act = c.handle(&h, c.pending)
		if cap(c.pending) > maxPending {
			c.pending = nil
		} else {
			c.pending = c.pending[:0]
		}
		if act != gnet.None {
			return act
		}
	}
	for len(buf) >= wire.HeaderSize {
		total, act := c.header(buf, &h)
		if act != gnet.None {
			return act
		}
		if len(buf) < total {
			break
		}
		if act := c.handle(&h, buf[:total]); act != gnet.None {
			return act
		}
		buf = buf[total:]
	}
	if len(buf) > 0 {
		c.pending = append(c.pending[:0], buf...)
	}
	return gnet.None
}

// header decodes and checks the header at the start of b and returns the
// frame's total length.
func (c *Conn) header(b []byte, h *wire.Header) (int, gnet.Action) {
	if err := wire.DecodeHeader(b, h); err != nil {
		return 0, c.badHeader(err)
	}
	if int(h.Length) > c.maxPayload() {
		c.t.counters.BadFrames.Add(1)
		return 0, c.fail("frame over the limit", wire.ErrTooLarge)
	}
	return wire.HeaderSize + int(h.Length), gnet.None
}

func (c *Conn) badHeader(err error) gnet.Action {
	switch {
	case errors.Is(err, wire.ErrVersion) && c.state != stateEstablished:
		c.t.counters.HandshakeWrongVersion.Add(1)
	default:
		c.t.counters.BadFrames.Add(1)
	}
	return c.fail("bad frame header", err)
}

func (c *Conn) handle(h *wire.Header, frame []byte) gnet.Action {
	t := c.t
	switch c.state {
	case stateAwaitHello:
		return c.onHello(h, frame)
	case stateAwaitAuth:
		return c.onAuth(h, frame)
	}
	switch h.Kind {
	case wire.KindKeepalive:
		return gnet.None
	case wire.KindHelloAuth:
		if c.kind == kindClient && t.cfg.CheckToken != nil {
			// A client proving the cluster secret to a node that takes
			// tokens: say why it is refused.
			t.counters.HandshakeBadAuth.Add(1)
			c.refuse("this node authenticates clients by token, not by the cluster secret")
			return c.fail("client sent HelloAuth to a node that takes tokens", ErrHandshake)
		}
		t.counters.HandshakeProtocol.Add(1)
		return c.fail("handshake frame on an open connection", nil)
	case wire.KindHello:
		t.counters.HandshakeProtocol.Add(1)
		return c.fail("handshake frame on an open connection", nil)
	}
	c.framesIn++
	if t.cfg.Handler.Deliver(c, *h, frame) {
		return gnet.None
	}
	if c.role == wire.RolePeer {
		t.counters.PeerInDropped.Add(1)
		return gnet.None
	}
	t.counters.Overloaded.Add(1)
	if reply := t.cfg.Overloaded(c, *h); reply != nil {
		if err := c.Write(reply); errors.Is(err, ErrSlowConsumer) {
			return gnet.Close
		}
	}
	return gnet.None
}

// flush writes everything queued in one call; a backlog the socket cannot
// take past the cap means the other end stopped reading.
func (c *Conn) flush(fromRead bool) gnet.Action {
	q := c.q
	if q == nil {
		return gnet.None
	}
	now := nowNanos()
	switch {
	case fromRead || now-c.lastFlushAt >= int64(minWakeGap):
		c.wakeStreak = 0
	case c.wakeStreak < maxWakeStreak:
		c.wakeStreak++
	default:
		// Writers keep waking the loop right after each flush. gnet
		// runs queued wakes until none is left, so answering every one
		// at once would let a busy writer keep the loop from reading;
		// gather for a moment instead (the queue stays marked as due).
		c.wakeStreak = 0
		c.t.retryFlush(c)
		return gnet.None
	}
	if c.role == wire.RolePeer && c.gc.OutboundBuffered() > peerHighWater {
		// The socket is not keeping up: leave the frames queued, where
		// the byte cap turns further Sends away, and look again shortly.
		c.t.counters.PeerBackpressure.Add(1)
		c.t.retryFlush(c)
		return gnet.None
	}
	for round := 1; ; round++ {
		chunks, frames, more := q.take(c, c.spare, maxFlushBytes)
		if chunks == nil {
			break
		}
		var err error
		for i := 0; i < len(chunks) && err == nil; i += maxIovecs {
			c.iov = append(c.iov[:0], chunks[i:min(i+maxIovecs, len(chunks))]...)
			if len(c.iov) == 1 {
				_, err = c.gc.Write(c.iov[0])
			} else {
				_, err = c.gc.Writev(c.iov)
			}
		}
		clear(c.iov)
		// gnet copied whatever the socket did not take: the chunks are free.
		q.recycle(chunks)
		c.spare = chunks[:0]
		if err != nil {
			return gnet.Close
		}
		c.t.counters.FramesOut.Add(uint64(frames))
		c.lastFlushAt = now
		q.lastFlush.Store(now)
		if !more {
			break
		}
		if c.gc.OutboundBuffered() > 0 || round == maxFlushRounds {
			// The socket is full, or this pass wrote its share: the rest
			// stays queued (still marked as due) until shortly.
			c.t.retryFlush(c)
			break
		}
	}
	if c.role != wire.RolePeer && c.gc.OutboundBuffered() > q.capBytes {
		c.t.counters.SlowClientsCut.Add(1)
		return c.fail("slow consumer: backlog over cap", nil)
	}
	return gnet.None
}

// maxFlushBytes is the most one writev takes from a queue: a backlog is
// written in steps the socket can take, so that gnet need not copy a large
// remainder into its own buffer.
const maxFlushBytes = 1 << 20

// maxFlushRounds bounds the steps of one pass, so that one connection's
// backlog does not hold up the loop's other connections.
const maxFlushRounds = 8

// minWakeGap is the shortest time between two flushes of a connection
// triggered by writers' wakes alone.
const minWakeGap = 50 * time.Microsecond

// maxWakeStreak wake-driven flushes closer than minWakeGap are answered at
// once; the next one waits for Transport.retryLoop.
const maxWakeStreak = 8

// peerHighWater is the unsent backlog past which a peer connection stops
// taking frames from its queue until the socket drains.
const peerHighWater = 1 << 20

// Bytes of emptied chunks a send queue keeps for reuse: a peer's queue
// (few, busy) keeps many, a client's a few.
const (
	peerRetain   = 4 << 20
	clientRetain = 256 << 10
)

// fail logs the first failure of a connection and closes it.
func (c *Conn) fail(reason string, err error) gnet.Action {
	c.logFailure(reason, err)
	return gnet.Close
}

func (c *Conn) logFailure(reason string, err error) {
	if c.failed.Swap(true) {
		return
	}
	attrs := []any{slog.String("remote", c.remote), slog.Uint64("conn", c.id)}
	// An accepted peer's node id is written by its loop during the
	// handshake; other goroutines read it only once the handshake is done.
	if (c.kind == kindPeerOut || c.up.Load()) && c.node != "" {
		attrs = append(attrs, slog.String("node", c.node))
	}
	if err != nil {
		attrs = append(attrs, slog.Any("err", err))
	}
	if !c.up.Load() {
		// Before the handshake the other side is nobody in particular,
		// and may open connections as fast as they close: counted, and
		// logged at debug level only.
		c.t.log.Debug("netio: closing connection: "+reason, attrs...)
		return
	}
	c.t.log.Warn("netio: closing connection: "+reason, attrs...)
}

// --- handshake ---

func (c *Conn) ourHello() []byte {
	_, _ = rand.Read(c.nonce[:])
	role := wire.RolePeer
	m := wire.Hello{
		Version:    wire.ProtocolVersion,
		Role:       role,
		ClusterID:  c.t.cfg.ClusterID,
		Generation: c.t.cfg.Generation,
		NodeID:     []byte(c.t.cfg.NodeID),
		Nonce:      c.nonce,
	}
	c.helloOut = wire.AppendHello(nil, &m)
	return frameOf(wire.KindHello, c.helloOut)
}

func frameOf(kind wire.Kind, payload []byte) []byte {
	b, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+len(payload)), kind, 0)
	b = append(b, payload...)
	b, _ = wire.EndFrame(b, start)
	return b
}

// authTag is HMAC-SHA256(secret, nonce ‖ hello).
func authTag(secret []byte, nonce []byte, hello []byte) [wire.AuthTagSize]byte {
	m := hmac.New(sha256.New, secret)
	m.Write(nonce)
	m.Write(hello)
	var tag [wire.AuthTagSize]byte
	copy(tag[:], m.Sum(nil))
	return tag
}

func (c *Conn) onHello(h *wire.Header, frame []byte) gnet.Action {
	t := c.t
	if h.Kind != wire.KindHello {
		t.counters.HandshakeProtocol.Add(1)
		return c.fail("expected Hello", nil)
	}
	payload := frame[wire.HeaderSize:]
	var m wire.Hello
	if err := wire.DecodeHello(payload, &m); err != nil {
		if errors.Is(err, wire.ErrVersion) {
			t.counters.HandshakeWrongVersion.Add(1)
		} else {
			t.counters.HandshakeProtocol.Add(1)
		}
		return c.fail("bad Hello", err)
	}
	if m.ClusterID != t.cfg.ClusterID {
		t.counters.HandshakeWrongCluster.Add(1)
		return c.fail("Hello from another cluster", ErrHandshake)
	}
	switch c.kind {
	case kindPeerOut:
		if m.Role != wire.RolePeer || string(m.NodeID) != c.node {
			t.counters.HandshakeWrongNode.Add(1)
			return c.fail("dialled address answered as another node: "+string(m.NodeID), ErrHandshake)
		}
		c.gen = m.Generation
	case kindClient, kindPeerIn:
		want := wire.RoleClient
		if c.kind == kindPeerIn {
			want = wire.RolePeer
		}
		if m.Role != want {
			t.counters.HandshakeWrongRole.Add(1)
			return c.fail("Hello with the wrong role for this listener", ErrHandshake)
		}
		c.role, c.gen = m.Role, m.Generation
		if c.kind == kindClient && t.cfg.CheckToken != nil {
			grant, ok := t.cfg.CheckToken(m.Token)
			if !ok {
				t.counters.HandshakeBadToken.Add(1)
				c.refuse("unknown or missing client token")
				return c.fail("client token refused", ErrHandshake)
			}
			c.grant = grant
		}
		if m.Role == wire.RolePeer {
			c.node = string(m.NodeID)
			if c.node == t.cfg.NodeID {
				t.counters.HandshakeWrongNode.Add(1)
				return c.fail("Hello carrying our own node id", ErrHandshake)
			}
			if !t.mayAccept(c) {
				// The other side's dial loses the tie-break: close
				// quietly, its own rule drops it too.
				t.counters.TieBreakClosed.Add(1)
				c.failed.Store(true)
				return gnet.Close
			}
		}
		if _, err := c.gc.Write(c.ourHello()); err != nil {
			return gnet.Close
		}
	}
	if !c.provesSecret() {
		return c.establish()
	}
	c.helloIn = append(c.helloIn[:0], payload...)
	tag := authTag(t.cfg.Secret, m.Nonce[:], c.helloOut)
	if _, err := c.gc.Write(frameOf(wire.KindHelloAuth, tag[:])); err != nil {
		return gnet.Close
	}
	c.state = stateAwaitAuth
	return gnet.None
}

// provesSecret reports whether the handshake goes on with HelloAuth both
// ways: with a cluster secret, on every connection but a client's on a
// node that authenticates clients by token (a client credential is never
// the peer secret there).
func (c *Conn) provesSecret() bool {
	t := c.t
	return len(t.cfg.Secret) > 0 && (c.kind != kindClient || t.cfg.CheckToken == nil)
}

// refuse sends an Unauthorized Error for no request, before the
// connection is closed for a credential it lacks.
func (c *Conn) refuse(msg string) {
	f, start := wire.BeginFrame(nil, wire.KindError, 0)
	f = wire.AppendErrorResponse(f, &wire.ErrorResponse{Code: wire.CodeUnauthorized, Message: msg})
	if f, err := wire.EndFrame(f, start); err == nil {
		_, _ = c.gc.Write(f)
	}
}

func (c *Conn) onAuth(h *wire.Header, frame []byte) gnet.Action {
	t := c.t
	var m wire.HelloAuth
	if h.Kind != wire.KindHelloAuth || wire.DecodeHelloAuth(frame[wire.HeaderSize:], &m) != nil {
		t.counters.HandshakeBadAuth.Add(1)
		return c.fail("expected HelloAuth", ErrHandshake)
	}
	want := authTag(t.cfg.Secret, c.nonce[:], c.helloIn)
	if !hmac.Equal(want[:], m.Tag[:]) {
		t.counters.HandshakeBadAuth.Add(1)
		return c.fail("HelloAuth did not verify", ErrHandshake)
	}
	return c.establish()
}

func (c *Conn) establish() gnet.Action {
	c.state = stateEstablished
	c.helloIn, c.helloOut = nil, nil
	if c.role == wire.RolePeer {
		c.lastRead.Store(nowNanos())
		if !c.t.adopt(c) {
			c.t.counters.TieBreakClosed.Add(1)
			c.failed.Store(true)
			c.endHandshake()
			return gnet.Close
		}
	}
	c.up.Store(true)
	c.endHandshake()
	return gnet.None
}

func (c *Conn) endHandshake() {
	if c.hsDone != nil {
		select {
		case <-c.hsDone:
		default:
			close(c.hsDone)
		}
	}
}
