package netio

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// TLS beside the event loops. gnet reads and writes raw bytes on its own
// loops and has no TLS, so a TLS connection is served by two goroutines of
// its own: one reads (crypto/tls decrypts) and frames what it reads with
// the same code as a loop pass (Conn.consume: handshake, limits, Deliver),
// the other flushes the connection's send queue (Conn.flush) when woken,
// as a loop pass would. Everything above the socket (the Hello handshake,
// frame limits, the send queues and their caps, peer adoption and
// tie-breaks, keepalives) is the same code for both. Writing only from the
// writer goroutine keeps the reader from blocking on a peer that is itself
// blocked writing to us. docs/decisions/tls-with-gnet.md has the figures
// that chose this over terminating TLS in front of gnet.

// Limits of a TLS connection.
const (
	// tlsReadBuffer is what one Read takes: the plaintext of one TLS
	// record at most.
	tlsReadBuffer = 16 << 10
	// tlsWriteTimeout bounds one write of a flush: a peer or client that
	// takes nothing for this long is cut off (a peer is usually cut off
	// sooner, by PeerDeadAfter).
	tlsWriteTimeout = 10 * time.Second
	// maxTLSGather is the largest buffer a flush gathers its chunks into
	// for one Write (a flush takes at most maxFlushBytes and a chunk).
	maxTLSGather = maxFlushBytes + maxChunk
)

// tlsLink is the link of a TLS connection.
type tlsLink struct {
	tc   *tls.Conn
	wake chan struct{} // a token when the writer should flush
	done chan struct{} // closed by Close
	once sync.Once
	buf  []byte // the writer's gather buffer
}

func newTLSLink(tc *tls.Conn) *tlsLink {
	return &tlsLink{tc: tc, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (l *tlsLink) Write(b []byte) (int, error) {
	_ = l.tc.SetWriteDeadline(time.Now().Add(tlsWriteTimeout))
	return l.tc.Write(b)
}

// Writev gathers bs into one Write, so that a flush makes as few TLS
// records (and system calls) as it can. Only the writer goroutine calls it.
func (l *tlsLink) Writev(bs [][]byte) (int, error) {
	l.buf = l.buf[:0]
	for _, b := range bs {
		l.buf = append(l.buf, b...)
	}
	n, err := l.Write(l.buf)
	if cap(l.buf) > maxTLSGather {
		l.buf = nil
	}
	return n, err
}

// OutboundBuffered is 0: a Write returns once the socket took everything.
func (l *tlsLink) OutboundBuffered() int { return 0 }

// Wake asks the writer for a flush; it never blocks.
func (l *tlsLink) Wake(gnet.AsyncCallback) error {
	select {
	case l.wake <- struct{}{}:
	default: // a flush is already due
	}
	return nil
}

// Close closes the socket at once, from any goroutine: no close_notify,
// which would be a write that may block (frames carry their own length,
// so a truncation cannot pass for a whole frame).
func (l *tlsLink) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.tc.NetConn().Close()
}

// listenTLS listens on addr for kind's TLS connections and accepts them
// until the transport closes. It returns the bound address.
func (t *Transport) listenTLS(kind listenerKind, addr string, cfg *tls.Config) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("netio: listen %s: %w", addr, err)
	}
	t.mu.Lock()
	t.tlsListeners = append(t.tlsListeners, ln)
	t.mu.Unlock()
	t.wg.Add(1)
	go t.acceptTLS(kind, ln, cfg)
	return ln.Addr().String(), nil
}

func (t *Transport) acceptTLS(kind listenerKind, ln net.Listener, cfg *tls.Config) {
	defer t.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if t.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			t.log.Warn("netio: accept", "err", err)
			// Out of file descriptors, say: give the node a moment.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.counters.ConnsAccepted.Add(1)
		key := addrKey{kind: kind, ip: remoteIP(nc.RemoteAddr())}
		if !t.admitConn(key) {
			t.counters.ConnsRefused.Add(1)
			_ = nc.Close()
			continue
		}
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		c := t.newConn(kind)
		l := newTLSLink(tls.Server(nc, cfg))
		c.gc = l
		c.addr, c.counted = key, true
		c.remote = nc.RemoteAddr().String()
		c.lastRead.Store(c.openedAt)
		if kind == kindClient {
			c.q = &sendQueue{capBytes: t.cfg.ClientSendBytes, retain: clientRetain, conn: c}
		}
		if !t.startTLS(c, l, true) {
			_ = l.Close()
			c.onClose(nil)
		}
	}
}

// startTLS registers c and starts its goroutines; it reports false when
// the transport is closing, so that no connection outlives Close.
func (t *Transport) startTLS(c *Conn, l *tlsLink, handshake bool) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.conns[c.id] = c
	t.tlsConns.Add(1)
	t.mu.Unlock()
	go t.runTLS(c, l, handshake)
	return true
}

// runTLS serves one TLS connection: the TLS handshake when it is still to
// be done (an accepted connection), then the reader here and the writer
// on a goroutine of its own, until either ends; then the connection is
// closed and forgotten like a gnet one.
func (t *Transport) runTLS(c *Conn, l *tlsLink, handshake bool) {
	defer t.tlsConns.Done()
	if handshake {
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
		err := l.tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			t.counters.HandshakeTLS.Add(1)
			c.failed.Store(true) // nobody in particular: counted, not logged
			t.log.Debug("netio: TLS handshake failed", "remote", c.remote, "err", err)
			_ = l.Close()
			c.onClose(nil)
			return
		}
	}
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		t.writeTLS(c, l)
	}()
	err := t.readTLS(c, l)
	_ = l.Close()
	<-wdone
	if errors.Is(err, net.ErrClosed) {
		err = nil // closed on purpose, here or by the other goroutine
	}
	c.onClose(err)
}

// readTLS reads and frames until the connection fails or is closed.
func (t *Transport) readTLS(c *Conn, l *tlsLink) error {
	buf := make([]byte, tlsReadBuffer)
	for {
		n, err := l.tc.Read(buf)
		if n > 0 {
			c.lastRead.Store(nowNanos())
			wasUp := c.state == stateEstablished
			act := c.consume(buf[:n])
			if c.framesIn > 0 {
				t.counters.FramesIn.Add(c.framesIn)
				c.framesIn = 0
			}
			if act != gnet.None {
				return nil
			}
			if !wasUp && c.state == stateEstablished {
				// A peer's queue was adopted marked as due: flush it.
				_ = l.Wake(nil)
			}
		}
		if err != nil {
			return err
		}
	}
}

// writeTLS flushes the send queue whenever woken, until the link closes.
func (t *Transport) writeTLS(c *Conn, l *tlsLink) {
	for {
		select {
		case <-l.wake:
		case <-l.done:
			return
		}
		c.retryArmed = false
		if c.q != nil {
			c.q.markFlushing(c)
		}
		// As after a read: the pause Conn.flush puts between wakes in
		// quick succession keeps writers from starving a gnet loop's
		// reads, and this goroutine reads nothing.
		if c.flush(true) != gnet.None {
			_ = l.Close()
			return
		}
	}
}

// dialTLS completes the TLS handshake of a dialled peer connection and
// starts serving it; it returns the Conn whose Hello handshake runs next.
func (t *Transport) dialTLS(nc net.Conn, node string) (*Conn, error) {
	tc := tls.Client(nc, t.cfg.DialTLS)
	ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
	err := tc.HandshakeContext(ctx)
	cancel()
	if err != nil {
		t.counters.HandshakeTLS.Add(1)
		_ = nc.Close()
		return nil, err
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	c := t.newConn(kindPeerOut)
	c.node = node
	l := newTLSLink(tc)
	c.gc = l
	c.remote = nc.RemoteAddr().String()
	if _, err := l.Write(c.ourHello()); err != nil {
		_ = l.Close()
		return nil, err
	}
	if !t.startTLS(c, l, false) {
		_ = l.Close()
		return nil, ErrClosed
	}
	return c, nil
}
