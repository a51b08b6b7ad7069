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

	"github.com/shoalmq/shoal/internal/rawsock"
)

// Connections served by goroutines. A TLS connection always is (gnet has
// no TLS), and so is a plain one when Config.Goroutines is set: two
// goroutines per connection, one reading and framing what it reads with
// the same code as a loop pass (Conn.consume: handshake, limits, Deliver),
// the other flushing the connection's send queue (Conn.flush) when woken,
// as a loop pass would. Everything above the socket (the Hello handshake,
// frame limits, the send queues and their caps, peer adoption and
// tie-breaks, keepalives) is the same code for both. A peer connection is
// written only from its writer goroutine, which keeps the reader from
// blocking on a peer that is itself blocked writing to us. A client's
// reader writes the answers given while it framed (plain lookups) itself,
// as a loop pass does, saving a wake of the writer per read: a client that
// stops reading only stops its own requests being read, and is cut off by
// the write timeout.
//
// A goroutine blocked on a socket waits in the runtime's poller and holds
// no P, where a gnet loop blocks in epoll_wait inside a system call with
// its P; docs/decisions/goroutines-beside-loops.md has the figures. On
// Linux a plain connection's reads and writes are raw system calls made
// in the poller's callbacks (internal/rawsock).
// docs/decisions/tls-with-gnet.md has those that chose serving TLS this
// way over terminating it in front of gnet.

// Limits of a connection served by goroutines.
const (
	// tlsReadBuffer is what one Read of a TLS connection takes: the
	// plaintext of one TLS record at most.
	tlsReadBuffer = 16 << 10
	// clientReadBuffer and peerReadBuffer are what one Read of a plain
	// connection takes: a client's requests are small, and a node may
	// hold many thousands of clients; a peer's reads carry batched raft
	// traffic for every shard the two nodes share.
	clientReadBuffer = 16 << 10
	peerReadBuffer   = 64 << 10
	// streamWriteTimeout bounds one write of a flush: a peer or client
	// that takes nothing for this long is cut off (a peer is usually cut
	// off sooner, by PeerDeadAfter).
	streamWriteTimeout = 10 * time.Second
	// maxTLSGather is the largest buffer a flush gathers its chunks into
	// for one Write (a flush takes at most maxFlushBytes and a chunk).
	maxTLSGather = maxFlushBytes + maxChunk
)

// streamLink is the link of a connection served by goroutines.
type streamLink struct {
	sock net.Conn
	tc   *tls.Conn     // nil on a plain connection
	raw  *rawsock.Sock // a plain connection's raw socket calls; nil: through sock
	wake chan struct{} // a token when the writer should flush
	done chan struct{} // closed by Close
	once sync.Once
	// flushMu makes one flush at a time: a client's reader flushes too.
	flushMu sync.Mutex
	buf     []byte   // TLS: the flush's gather buffer
	iov     [][]byte // plain: the flush's vector
}

func newTLSLink(tc *tls.Conn) *streamLink {
	return &streamLink{sock: tc.NetConn(), tc: tc, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func newPlainLink(nc net.Conn) *streamLink {
	return &streamLink{sock: nc, raw: rawsock.New(nc), wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (l *streamLink) Read(b []byte) (int, error) {
	switch {
	case l.tc != nil:
		return l.tc.Read(b)
	case l.raw != nil:
		return l.raw.Read(b)
	}
	return l.sock.Read(b)
}

func (l *streamLink) Write(b []byte) (int, error) {
	_ = l.sock.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
	switch {
	case l.tc != nil:
		return l.tc.Write(b)
	case l.raw != nil:
		return l.raw.Write(b)
	}
	return l.sock.Write(b)
}

// Writev writes bs with one writev on a plain connection; on a TLS one it
// gathers them into one Write, so that a flush makes as few TLS records
// (and system calls) as it can. Only a flush, under flushMu, calls it.
func (l *streamLink) Writev(bs [][]byte) (int, error) {
	if l.tc == nil {
		_ = l.sock.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if l.raw != nil {
			return l.raw.Writev(bs)
		}
		l.iov = append(l.iov[:0], bs...)
		v := net.Buffers(l.iov) // WriteTo consumes v, not bs
		n, err := v.WriteTo(l.sock)
		clear(l.iov)
		return int(n), err
	}
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
func (l *streamLink) OutboundBuffered() int { return 0 }

// Wake asks the writer for a flush; it never blocks.
func (l *streamLink) Wake(gnet.AsyncCallback) error {
	select {
	case l.wake <- struct{}{}:
	default: // a flush is already due
	}
	return nil
}

// Close closes the socket at once, from any goroutine: no close_notify,
// which would be a write that may block (frames carry their own length,
// so a truncation cannot pass for a whole frame).
func (l *streamLink) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.sock.Close()
}

// listenStream listens on addr for kind's connections, with TLS when cfg
// is set, and accepts them until the transport closes. It returns the
// bound address.
func (t *Transport) listenStream(kind listenerKind, addr string, cfg *tls.Config) (string, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("netio: listen %s: %w", addr, err)
	}
	t.mu.Lock()
	t.streamListeners = append(t.streamListeners, ln)
	t.mu.Unlock()
	t.wg.Add(1)
	go t.acceptStream(kind, ln, cfg)
	return ln.Addr().String(), nil
}

func (t *Transport) acceptStream(kind listenerKind, ln net.Listener, cfg *tls.Config) {
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
		var l *streamLink
		if cfg != nil {
			l = newTLSLink(tls.Server(nc, cfg))
		} else {
			l = newPlainLink(nc)
		}
		c.gc = l
		c.addr, c.counted = key, true
		c.remote = nc.RemoteAddr().String()
		c.lastRead.Store(c.openedAt)
		if kind == kindClient {
			c.q = &sendQueue{capBytes: t.cfg.ClientSendBytes, retain: clientRetain, conn: c}
		}
		if !t.startStream(c, l) {
			_ = l.Close()
			c.onClose(nil)
		}
	}
}

// startStream registers c and starts its goroutines; it reports false when
// the transport is closing, so that no connection outlives Close.
func (t *Transport) startStream(c *Conn, l *streamLink) bool {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return false
	}
	t.conns[c.id] = c
	t.streamConns.Add(1)
	t.mu.Unlock()
	go t.runStream(c, l)
	return true
}

// runStream serves one connection: the TLS handshake of an accepted TLS
// connection, then the reader here and the writer on a goroutine of its
// own, until either ends; then the connection is closed and forgotten
// like a gnet one.
func (t *Transport) runStream(c *Conn, l *streamLink) {
	defer t.streamConns.Done()
	if l.tc != nil && c.kind != kindPeerOut {
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
		t.writeStream(c, l)
	}()
	err := t.readStream(c, l)
	_ = l.Close()
	<-wdone
	if errors.Is(err, net.ErrClosed) {
		err = nil // closed on purpose, here or by the other goroutine
	}
	c.onClose(err)
}

// readStream reads and frames until the connection fails or is closed.
func (t *Transport) readStream(c *Conn, l *streamLink) error {
	size := peerReadBuffer
	if l.tc != nil {
		size = tlsReadBuffer
	} else if c.kind == kindClient {
		size = clientReadBuffer
	}
	buf := make([]byte, size)
	inline := c.kind == kindClient && c.q != nil
	for {
		n, err := l.Read(buf)
		if n > 0 {
			c.lastRead.Store(nowNanos())
			wasUp := c.state == stateEstablished
			if inline {
				// Answers given while framing wait for the flush below.
				c.q.markFlushing(c)
			}
			act := c.consume(buf[:n])
			if c.framesIn > 0 {
				t.counters.FramesIn.Add(c.framesIn)
				c.framesIn = 0
			}
			if act == gnet.None && inline {
				l.flushMu.Lock()
				act = c.flush(true)
				l.flushMu.Unlock()
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

// writeStream flushes the send queue whenever woken, until the link closes.
func (t *Transport) writeStream(c *Conn, l *streamLink) {
	for {
		select {
		case <-l.wake:
		case <-l.done:
			return
		}
		// Under flushMu: a client's reader flushes too, and a flush may
		// arm a retry (Transport.retryFlush).
		l.flushMu.Lock()
		c.retryArmed = false
		if c.q != nil {
			c.q.markFlushing(c)
		}
		// As after a read: the pause Conn.flush puts between wakes in
		// quick succession keeps writers from starving a gnet loop's
		// reads, and this goroutine reads nothing.
		act := c.flush(true)
		l.flushMu.Unlock()
		if act != gnet.None {
			_ = l.Close()
			return
		}
	}
}

// dialStream starts serving a dialled peer connection on goroutines, with
// TLS when the transport dials with it (the TLS handshake first); it
// returns the Conn whose Hello handshake runs next.
func (t *Transport) dialStream(nc net.Conn, node string) (*Conn, error) {
	var l *streamLink
	if t.cfg.DialTLS != nil {
		tc := tls.Client(nc, t.cfg.DialTLS)
		ctx, cancel := context.WithTimeout(t.ctx, t.cfg.HandshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			t.counters.HandshakeTLS.Add(1)
			_ = nc.Close()
			return nil, err
		}
		l = newTLSLink(tc)
	} else {
		l = newPlainLink(nc)
	}
	if tcp, ok := nc.(*net.TCPConn); ok {
		_ = tcp.SetNoDelay(true)
	}
	c := t.newConn(kindPeerOut)
	c.node = node
	c.gc = l
	c.remote = nc.RemoteAddr().String()
	if _, err := l.Write(c.ourHello()); err != nil {
		_ = l.Close()
		return nil, err
	}
	if !t.startStream(c, l) {
		_ = l.Close()
		return nil, ErrClosed
	}
	return c, nil
}
