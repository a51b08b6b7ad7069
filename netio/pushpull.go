package netio

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// PushPull carries SWIM's full-state exchange over TCP: the Hello
// handshake, then one KindPushPull frame each way per connection. It is
// rare traffic (a join, one exchange per node every half minute or so), so
// it uses plain net.Conn, not the event loops.
//
// What an unauthenticated connection can cost is bounded: at most MaxConns
// exchanges are served at once (more are closed at accept), the handshake
// reads only frames of a few hundred bytes within HandshakeTimeout, and
// with a secret nothing else is read until the other side has proved it
// holds it. The state frame is then read as its bytes arrive, never by
// trusting its declared length, up to MaxFrame.
type PushPull struct {
	cfg    PushPullConfig
	ln     net.Listener
	slots  chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool

	refused  atomic.Uint64
	hsFailed atomic.Uint64
}

// PushPullConfig configures a PushPull. Zero fields take the documented
// defaults.
type PushPullConfig struct {
	// ClusterID, NodeID, Generation and Secret are this node's, as in
	// Config: both ends of an exchange run the Hello handshake, and with a
	// Secret each proves it holds it before any state is read.
	ClusterID  uint64
	NodeID     string
	Generation uint64
	Secret     []byte
	// TLS, when set, makes accepted exchanges TLS 1.3 with it (a node's
	// peer TLS: it requires the dialler's certificate); DialTLS makes
	// started ones TLS with it. Both ends of a cluster set both or
	// neither.
	TLS, DialTLS *tls.Config
	// Timeout bounds a whole exchange. Default 5s.
	Timeout time.Duration
	// HandshakeTimeout bounds the handshake of an accepted connection, so
	// that a silent one gives its slot back soon. Default 2s.
	HandshakeTimeout time.Duration
	// MaxConns bounds the exchanges served at once; a connection accepted
	// past it is closed at once and counted. Default 4: exchanges are one
	// per node every half minute, a few more at a join.
	MaxConns int
	// MaxFrame bounds a state frame's payload, either way. Default
	// wire.MaxFrame.
	MaxFrame int
	// Logger receives nothing per connection (failures are counted).
	Logger *slog.Logger
}

// Defaults of PushPullConfig.
const (
	DefaultPushPullTimeout          = 5 * time.Second
	DefaultPushPullHandshakeTimeout = 2 * time.Second
	DefaultPushPullConns            = 4
)

// ErrPushPull wraps push-pull transport errors.
var ErrPushPull = errors.New("netio: push-pull")

// ListenPushPull listens on addr (TCP).
func ListenPushPull(addr string, cfg PushPullConfig) (*PushPull, error) {
	switch {
	case cfg.NodeID == "" || len(cfg.NodeID) > wire.MaxNodeIDLen:
		return nil, fmt.Errorf("%w: NodeID must be 1..%d bytes", ErrPushPull, wire.MaxNodeIDLen)
	case cfg.Timeout < 0 || cfg.HandshakeTimeout < 0 || cfg.MaxConns < 0 || cfg.MaxFrame < 0 || cfg.MaxFrame > wire.MaxFrame:
		return nil, fmt.Errorf("%w: negative limit, or MaxFrame past %d", ErrPushPull, wire.MaxFrame)
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultPushPullTimeout
	}
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = DefaultPushPullHandshakeTimeout
	}
	if cfg.MaxConns == 0 {
		cfg.MaxConns = DefaultPushPullConns
	}
	if cfg.MaxFrame == 0 {
		cfg.MaxFrame = wire.MaxFrame
	}
	cfg.TLS, cfg.DialTLS = tls13(cfg.TLS), tls13(cfg.DialTLS)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: listen %s: %w", ErrPushPull, addr, err)
	}
	return &PushPull{cfg: cfg, ln: ln, slots: make(chan struct{}, cfg.MaxConns), conns: make(map[net.Conn]struct{})}, nil
}

// Addr is the listening address.
func (p *PushPull) Addr() net.Addr { return p.ln.Addr() }

// Refused counts connections closed at accept because MaxConns exchanges
// were being served.
func (p *PushPull) Refused() uint64 { return p.refused.Load() }

// HandshakeFailures counts exchanges, served or started, whose handshake
// or state frame was refused or timed out.
func (p *PushPull) HandshakeFailures() uint64 { return p.hsFailed.Load() }

// Serve answers exchanges with h until Close; it returns nil after Close.
func (p *PushPull) Serve(h func(req []byte) ([]byte, error)) error {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			p.mu.Lock()
			closed := p.closed
			p.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("%w: accept: %w", ErrPushPull, err)
		}
		select {
		case p.slots <- struct{}{}:
		default:
			p.refused.Add(1)
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			<-p.slots
			return nil
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			defer func() {
				p.mu.Lock()
				delete(p.conns, c)
				p.mu.Unlock()
				c.Close()
				<-p.slots
			}()
			if err := p.serve(c, h); err != nil {
				p.hsFailed.Add(1)
			}
		}()
	}
}

func (p *PushPull) serve(c net.Conn, h func(req []byte) ([]byte, error)) error {
	start := time.Now()
	_ = c.SetDeadline(start.Add(min(p.cfg.HandshakeTimeout, p.cfg.Timeout)))
	if p.cfg.TLS != nil {
		tc := tls.Server(c, p.cfg.TLS)
		if err := tc.Handshake(); err != nil {
			return err
		}
		c = tc
	}
	if err := p.handshake(c, false); err != nil {
		return err
	}
	_ = c.SetDeadline(start.Add(p.cfg.Timeout))
	req, id, err := readPushPull(c, p.cfg.MaxFrame)
	if err != nil {
		return err
	}
	reply, err := h(req)
	if err != nil {
		return nil // the state was refused by its consumer, which counts it
	}
	return writePushPull(c, id, reply)
}

// Close stops Serve and waits for the exchanges in progress.
func (p *PushPull) Close() error {
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// Exchange dials addr, runs the handshake, sends req and returns the
// answer's payload.
func (p *PushPull) Exchange(ctx context.Context, addr string, req []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w: dial %s: %w", ErrPushPull, addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if p.cfg.DialTLS != nil {
		tc := tls.Client(c, p.cfg.DialTLS)
		if err := tc.HandshakeContext(ctx); err != nil {
			p.hsFailed.Add(1)
			var ve *tls.CertificateVerificationError
			var ae tls.AlertError
			if errors.As(err, &ve) || errors.As(err, &ae) {
				err = fmt.Errorf("%w: %w", ErrAuthFailed, err)
			}
			return nil, fmt.Errorf("%w: %s: tls: %w", ErrPushPull, addr, err)
		}
		c = tc
	}
	if err := p.handshake(c, true); err != nil {
		p.hsFailed.Add(1)
		return nil, fmt.Errorf("%w: %s: %w", ErrPushPull, addr, err)
	}
	if err := writePushPull(c, 1, req); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrPushPull, addr, err)
	}
	reply, _, err := readPushPull(c, p.cfg.MaxFrame)
	if err != nil {
		if len(p.cfg.Secret) == 0 && errors.Is(err, wire.ErrUnknownKind) {
			// A seed with a secret answers this node's state with its
			// HelloAuth, which this node, having none, did not expect.
			err = fmt.Errorf("%w: the seed asks for the cluster secret, which this node was not given", ErrAuthFailed)
		}
		return nil, fmt.Errorf("%w: %s: %w", ErrPushPull, addr, err)
	}
	return reply, nil
}

// handshake runs the Hello handshake of docs/wire.md on a push-pull
// connection, both sides as peers: the dialler sends its Hello first, the
// listener answers with its own; with a secret each then sends HelloAuth
// and checks the other's. Every frame read is at most maxHelloFrame.
func (p *PushPull) handshake(c net.Conn, dialler bool) error {
	m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: p.cfg.ClusterID,
		Generation: p.cfg.Generation, NodeID: []byte(p.cfg.NodeID)}
	_, _ = rand.Read(m.Nonce[:])
	ours := wire.AppendHello(nil, &m)
	if dialler {
		if _, err := c.Write(frameOf(wire.KindHello, ours)); err != nil {
			return err
		}
	}
	h, theirs, err := readFrame(c)
	if err != nil {
		return err
	}
	var hello wire.Hello
	if h.Kind != wire.KindHello {
		return fmt.Errorf("%v instead of Hello: %w", h.Kind, ErrHandshake)
	}
	if err := wire.DecodeHello(theirs, &hello); err != nil {
		return fmt.Errorf("push-pull handshake: %w", err)
	}
	if hello.ClusterID != p.cfg.ClusterID {
		if !dialler {
			// Our Hello first, so that the dialler can tell why it was
			// refused: a cluster id is no secret.
			_, _ = c.Write(frameOf(wire.KindHello, ours))
		}
		return fmt.Errorf("push-pull handshake: the other side is in cluster %d, this node in %d: %w", hello.ClusterID, p.cfg.ClusterID, ErrWrongCluster)
	}
	if hello.Role != wire.RolePeer {
		return fmt.Errorf("push-pull handshake: role %d: %w", hello.Role, ErrHandshake)
	}
	if !dialler {
		if _, err := c.Write(frameOf(wire.KindHello, ours)); err != nil {
			return err
		}
	}
	if len(p.cfg.Secret) == 0 {
		return nil
	}
	tag := authTag(p.cfg.Secret, hello.Nonce[:], ours)
	if _, err := c.Write(frameOf(wire.KindHelloAuth, tag[:])); err != nil {
		return err
	}
	h, payload, err := readFrame(c)
	if err != nil {
		if dialler && errors.Is(err, io.EOF) {
			// The seed sends its proof before it reads ours: one that
			// closes instead has no secret.
			return fmt.Errorf("the other side closed the connection instead of proving the cluster secret (is it given one?): %w", ErrAuthFailed)
		}
		return err
	}
	var auth wire.HelloAuth
	if h.Kind != wire.KindHelloAuth || wire.DecodeHelloAuth(payload, &auth) != nil {
		return fmt.Errorf("expected HelloAuth: %w", ErrAuthFailed)
	}
	want := authTag(p.cfg.Secret, m.Nonce[:], theirs)
	if !hmac.Equal(want[:], auth.Tag[:]) {
		return fmt.Errorf("HelloAuth did not verify (another cluster secret): %w", ErrAuthFailed)
	}
	return nil
}

func writePushPull(w io.Writer, id uint64, payload []byte) error {
	b, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+len(payload)), wire.KindPushPull, id)
	b = append(b, payload...)
	b, err := wire.EndFrame(b, start)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

func readPushPull(r io.Reader, maxFrame int) ([]byte, uint64, error) {
	var hb [wire.HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return nil, 0, err
	}
	var h wire.Header
	if err := wire.DecodeHeader(hb[:], &h); err != nil {
		return nil, 0, err
	}
	if h.Kind != wire.KindPushPull || h.Flags != 0 {
		return nil, 0, wire.ErrUnknownKind
	}
	if int(h.Length) > maxFrame {
		return nil, 0, wire.ErrTooLarge
	}
	b, err := readGrowing(r, int(h.Length))
	if err != nil {
		return nil, 0, err
	}
	return b, h.RequestID, nil
}

// growStep is the first buffer of readGrowing; it doubles from there.
const growStep = 64 << 10

// readGrowing reads n bytes into a buffer that grows as they arrive, so
// that a declared length costs nothing until its bytes are sent.
func readGrowing(r io.Reader, n int) ([]byte, error) {
	b := make([]byte, 0, min(n, growStep))
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
