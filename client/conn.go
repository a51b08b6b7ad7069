package client

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/internal/rawsock"
	"github.com/shoalmq/shoal/wire"
)

// conn is one TCP connection to a node, with requests pipelined over it:
// callers append frames, each with a fresh request id, to a queue and wait;
// one writer goroutine sends everything queued since its last write in one
// write, so concurrent callers share system calls; one reader goroutine
// hands every answer to the caller waiting for its request id, whatever
// order answers arrive in. A failed read or write breaks the connection for
// every caller on it, at once.
type conn struct {
	addr string
	nc   net.Conn
	log  *slog.Logger

	slots chan struct{} // one token per request in flight

	writeTimeout time.Duration // bounds one write of the queue
	wake         chan struct{} // a token when the queue has frames
	wmu          sync.Mutex
	wq           []byte // frames queued for the writer, under wmu
	wspare       []byte // the writer's buffer, swapped with wq

	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan response
	err     error         // why the connection broke; set once
	broken  chan struct{} // closed when err is set
}

// response is a frame answered to a request, or the error that broke the
// connection before it was answered.
type response struct {
	kind    wire.Kind
	payload []byte
	err     error
}

// dialConn connects to addr and completes the handshake within ctx. It does
// not start the reader and writer: the caller does, so that it owns them.
func dialConn(ctx context.Context, addr string, cfg *Config) (*conn, error) {
	dial := cfg.Dial
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if cfg.TLS != nil {
		tc := tls.Client(nc, tlsFor(cfg.TLS, addr))
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = nc.Close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%w: TLS handshake with %s: %w", ErrUnreachable, addr, ctxErr(ctx))
			}
			return nil, fmt.Errorf("%w: TLS with %s: %w", ErrHandshake, addr, err)
		}
		nc = tc
	} else {
		// Plain TCP: reads and writes as raw system calls, which keep
		// the runtime's sysmon from handing Ps around (internal/rawsock).
		nc = rawsock.Wrap(nc)
	}
	// The handshake runs with blocking reads; a deadline from ctx, and an
	// immediate one if ctx is cancelled first, keep it bounded.
	if dl, ok := ctx.Deadline(); ok {
		_ = nc.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { _ = nc.SetDeadline(time.Unix(1, 0)) })
	err = handshake(nc, cfg)
	if !stop() || err != nil {
		_ = nc.Close()
		if err == nil || ctx.Err() != nil {
			err = fmt.Errorf("%w: handshake with %s: %w", ErrUnreachable, addr, ctxErr(ctx))
		} else {
			err = fmt.Errorf("%w (handshake with %s)", err, addr)
		}
		return nil, err
	}
	_ = nc.SetDeadline(time.Time{})
	return &conn{
		addr:         addr,
		nc:           nc,
		log:          cfg.Logger,
		writeTimeout: cfg.RequestTimeout,
		wake:         make(chan struct{}, 1),
		slots:        make(chan struct{}, cfg.MaxInFlight),
		pending:      make(map[uint64]chan response),
		broken:       make(chan struct{}),
	}, nil
}

// tlsFor is cfg for a connection to addr: the address's host is the name
// verified unless cfg names one.
func tlsFor(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" {
		return cfg
	}
	c := cfg.Clone()
	if host, _, err := net.SplitHostPort(addr); err == nil {
		c.ServerName = host
	}
	return c
}

// handshake runs the client side of the handshake (docs/wire.md): Hello
// both ways (the client's carrying its token, if any), then HelloAuth both
// ways when a secret is set.
func handshake(nc net.Conn, cfg *Config) error {
	hello := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RoleClient, ClusterID: cfg.ClusterID, Token: []byte(cfg.Token)}
	if _, err := rand.Read(hello.Nonce[:]); err != nil {
		return err
	}
	buf, start := wire.BeginFrame(nil, wire.KindHello, 0)
	buf = wire.AppendHello(buf, &hello)
	ownHello := buf[start+wire.HeaderSize:]
	buf, err := wire.EndFrame(buf, start)
	if err != nil {
		return err
	}
	if _, err := nc.Write(buf); err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	kind, payload, err := readFrame(nc)
	if err != nil {
		return helloReadError(err, cfg)
	}
	if kind == wire.KindError {
		return refused(payload)
	}
	if kind != wire.KindHello {
		return fmt.Errorf("%w: %v instead of Hello", ErrHandshake, kind)
	}
	var theirs wire.Hello
	if err := wire.DecodeHello(payload, &theirs); err != nil {
		// DecodeHello refuses another protocol version (wire.ErrVersion).
		return fmt.Errorf("%w: node's Hello: %w", ErrHandshake, err)
	}
	if theirs.Role != wire.RolePeer {
		// A node answers as a peer (with its node id); a listener that
		// answers as a client is not a node.
		return fmt.Errorf("%w: the server answered with role %d, not as a node", ErrHandshake, theirs.Role)
	}
	if theirs.ClusterID != cfg.ClusterID {
		return fmt.Errorf("%w: node is in cluster %d, not %d", ErrHandshake, theirs.ClusterID, cfg.ClusterID)
	}
	if len(cfg.Secret) == 0 {
		return nil
	}
	var auth wire.HelloAuth
	copy(auth.Tag[:], authTag(cfg.Secret, theirs.Nonce[:], ownHello))
	buf, start = wire.BeginFrame(buf[:0], wire.KindHelloAuth, 0)
	buf = wire.AppendHelloAuth(buf, &auth)
	if buf, err = wire.EndFrame(buf, start); err != nil {
		return err
	}
	if _, err := nc.Write(buf); err != nil {
		return fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	kind, authPayload, err := readFrame(nc)
	if err != nil {
		return err
	}
	if kind == wire.KindError {
		return refused(authPayload)
	}
	if kind != wire.KindHelloAuth {
		return fmt.Errorf("%w: %v instead of HelloAuth", ErrHandshake, kind)
	}
	var theirAuth wire.HelloAuth
	if err := wire.DecodeHelloAuth(authPayload, &theirAuth); err != nil {
		return fmt.Errorf("%w: node's HelloAuth: %w", ErrHandshake, err)
	}
	if !hmac.Equal(theirAuth.Tag[:], authTag(cfg.Secret, hello.Nonce[:], payload)) {
		return fmt.Errorf("%w: node's proof of the shared secret is wrong", ErrHandshake)
	}
	return nil
}

// helloReadError explains a failure to read the node's Hello where it can:
// a TLS alert is the node refusing this client's TLS (with TLS 1.3 a
// client learns of a refused certificate only when it reads), which no
// other node would take either; a connection closed without a word, when
// this client does not speak TLS, is what a node that does would do.
func helloReadError(err error, cfg *Config) error {
	var oe *net.OpError
	switch {
	case cfg.TLS != nil && errors.As(err, &oe) && oe.Op == "remote error":
		return fmt.Errorf("%w: the node refused this client's TLS: %w", ErrHandshake, oe.Err)
	case cfg.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		return fmt.Errorf("%w (a node closes a plain connection so when it speaks TLS: set TLS; or when it speaks another protocol version than this client's %d)", err, wire.ProtocolVersion)
	}
	return err
}

// authTag is HMAC-SHA256(secret, peerNonce ‖ ownHello).
func authTag(secret, peerNonce, ownHello []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(peerNonce)
	m.Write(ownHello)
	return m.Sum(nil)
}

// refused turns an Error frame received during the handshake into an error
// matching both ErrHandshake and the code's wire sentinel.
func refused(payload []byte) error {
	var e wire.Error
	if err := wire.DecodeError(payload, &e); err != nil {
		return fmt.Errorf("%w: undecodable Error: %w", ErrHandshake, err)
	}
	return fmt.Errorf("%w: %w", ErrHandshake, e.Err())
}

// maxHandshakeFrame bounds a frame read before the server is known to be
// a node of the cluster: a Hello, a HelloAuth or an Error is a few hundred
// bytes.
const maxHandshakeFrame = 1024

// readFrame reads one frame from r, for the handshake.
func readFrame(r io.Reader) (wire.Kind, []byte, error) {
	var h wire.Header
	return readFrameLimit(r, &h, maxHandshakeFrame)
}

// readFrameHeader reads one frame from r into h (see readFrameLimit), up to
// the largest frame the wire allows.
func readFrameHeader(r io.Reader, h *wire.Header) (wire.Kind, []byte, error) {
	return readFrameLimit(r, h, wire.MaxFrame)
}

// readFrameLimit reads one frame of at most limit payload bytes from r
// into h and a fresh buffer, decompressing the payload if needed. The
// buffer grows as the bytes arrive: a declared length costs nothing until
// it is sent. I/O errors wrap ErrUnreachable; a bad header or payload, or
// one past limit, wraps ErrProtocol.
func readFrameLimit(r io.Reader, h *wire.Header, limit int) (wire.Kind, []byte, error) {
	var hdr [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if err := wire.DecodeHeader(hdr[:], h); err != nil {
		return 0, nil, fmt.Errorf("%w: frame header: %w", ErrProtocol, err)
	}
	if int(h.Length) > limit {
		return 0, nil, fmt.Errorf("%w: %v frame of %d bytes, over %d: %w", ErrProtocol, h.Kind, h.Length, limit, wire.ErrTooLarge)
	}
	payload, err := readGrowing(r, int(h.Length))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	if h.Flags&wire.FlagCompressed != 0 {
		plain, _, err := wire.FramePayload(h, payload, nil)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %v payload: %w", ErrProtocol, h.Kind, err)
		}
		payload = plain
	}
	return h.Kind, payload, nil
}

// readGrowStep is readGrowing's first buffer; it doubles from there.
const readGrowStep = 64 << 10

// readGrowing reads n bytes into a buffer that grows as they arrive.
func readGrowing(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, readGrowStep))
	for len(b) < n {
		if len(b) == cap(b) {
			nb := make([]byte, len(b), min(n, 2*cap(b)))
			copy(nb, b)
			b = nb
		}
		k, err := io.ReadFull(r, b[len(b):cap(b)])
		b = b[:len(b)+k]
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// readLoop delivers answers to their callers until the connection breaks.
// It is the connection's only reader and exits when the socket is closed.
func (c *conn) readLoop() {
	br := bufio.NewReaderSize(c.nc, 64<<10)
	var h wire.Header
	for {
		kind, payload, err := readFrameHeader(br, &h)
		if err == nil && kind == wire.KindKeepalive {
			// A node may keep an idle connection alive; nothing answers it.
			continue
		}
		if err == nil && kind == wire.KindHelloAuth {
			// The node proved the cluster secret, unasked: it has no
			// client tokens and takes the secret from clients.
			err = fmt.Errorf("%w: the node authenticates clients with the cluster secret (it has no client tokens): set Secret", ErrHandshake)
		}
		if err == nil && !kind.IsClientResponse() {
			err = fmt.Errorf("%w: unexpected %v frame from a node", ErrProtocol, kind)
		}
		if err == nil && kind == wire.KindError && h.RequestID == 0 {
			// An Error for no request is about the connection (a node
			// refusing an unauthenticated client, or shutting down): it
			// is what every caller on it should see.
			var e wire.Error
			if err = wire.DecodeError(payload, &e); err != nil {
				err = fmt.Errorf("%w: Error payload: %w", ErrProtocol, err)
			} else {
				err = e.Err()
			}
		}
		if err != nil {
			c.fail(fmt.Errorf("%w (%s)", err, c.addr))
			return
		}
		c.mu.Lock()
		ch := c.pending[h.RequestID]
		delete(c.pending, h.RequestID)
		c.mu.Unlock()
		// An unknown id is the answer to a request whose caller gave up.
		if ch != nil {
			ch <- response{kind: kind, payload: payload}
		}
	}
}

// fail breaks the connection: every waiting caller gets err, later calls
// fail at once, and the socket is closed (which ends readLoop).
func (c *conn) fail(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.broken)
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, ch := range pending {
		ch <- response{err: err}
	}
	_ = c.nc.Close()
	if !errors.Is(err, net.ErrClosed) {
		c.log.Debug("client: connection broken", "addr", c.addr, "err", err)
	}
}

// alive reports whether the connection has not broken.
func (c *conn) alive() bool {
	select {
	case <-c.broken:
		return false
	default:
		return true
	}
}

// roundTrip sends one request and waits for its answer within ctx. encode
// appends the request payload. An Error answer is returned as the
// *wire.ErrorResponse it carries.
func (c *conn) roundTrip(ctx context.Context, kind wire.Kind, encode func([]byte) []byte) (wire.Kind, []byte, error) {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return 0, nil, ctxErr(ctx)
	case <-c.broken:
		return 0, nil, c.err
	}
	defer func() { <-c.slots }()

	id := c.nextID.Add(1)
	ch := make(chan response, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return 0, nil, c.err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	if err := c.enqueue(kind, id, encode); err != nil {
		c.forget(id)
		return 0, nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return 0, nil, r.err
		}
		if r.kind == wire.KindError {
			var e wire.Error
			if err := wire.DecodeError(r.payload, &e); err != nil {
				return 0, nil, fmt.Errorf("%w: Error payload: %w", ErrProtocol, err)
			}
			return r.kind, nil, e.Err()
		}
		return r.kind, r.payload, nil
	case <-ctx.Done():
		c.forget(id)
		return 0, nil, ctxErr(ctx)
	}
}

func (c *conn) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// enqueue frames one request and queues it for the writer. A frame too
// large for the protocol is ErrInvalidArgument and queues nothing. A
// connection that breaks before the frame is written fails the request
// through its pending entry, like one that breaks while it waits.
func (c *conn) enqueue(kind wire.Kind, id uint64, encode func([]byte) []byte) error {
	c.wmu.Lock()
	before := len(c.wq)
	buf, start := wire.BeginFrame(c.wq, kind, id)
	if encode != nil {
		buf = encode(buf)
	}
	buf, err := wire.EndFrame(buf, start)
	if err != nil {
		c.wq = buf[:before]
		c.wmu.Unlock()
		return fmt.Errorf("%w: %v request larger than %d bytes", ErrInvalidArgument, kind, wire.MaxFrame)
	}
	c.wq = buf
	c.wmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // the writer is already due to run
	}
	return nil
}

// writeLoop sends the queued frames until the connection breaks. A failed
// or timed-out write breaks the connection, since part of a frame may be
// on the wire.
func (c *conn) writeLoop() {
	for {
		select {
		case <-c.wake:
		case <-c.broken:
			return
		}
		// The queue and the spare never share an array: callers append
		// to one while the other is on its way to the socket.
		c.wmu.Lock()
		if len(c.wq) == 0 {
			c.wmu.Unlock()
			continue
		}
		buf := c.wq
		c.wq, c.wspare = c.wspare[:0], nil
		c.wmu.Unlock()
		_ = c.nc.SetWriteDeadline(time.Now().Add(c.writeTimeout))
		if _, err := c.nc.Write(buf); err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrUnreachable, err))
			return
		}
		// Keep the buffer for the next swap unless one huge Produce grew
		// it: that should not pin megabytes for the connection's life.
		if cap(buf) > 1<<20 {
			buf = nil
		}
		c.wmu.Lock()
		c.wspare = buf[:0]
		c.wmu.Unlock()
	}
}

// close breaks the connection on purpose.
func (c *conn) close() { c.fail(fmt.Errorf("%w: connection closed", ErrClosed)) }
