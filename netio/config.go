package netio

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// Handler receives every frame read from an established connection. It
// runs on an event loop and must not block: it copies what it keeps onto a
// bounded queue and returns.
type Handler interface {
	// Deliver hands over one frame. h is its decoded header; frame is the
	// whole frame (header then payload), a view of the connection's read
	// buffer valid only until Deliver returns. It reports false when the
	// consumer's queue is full: a client request is then answered with
	// Config.Overloaded, a peer frame is dropped and counted.
	Deliver(c *Conn, h wire.Header, frame []byte) bool
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(c *Conn, h wire.Header, frame []byte) bool

// Deliver calls f.
func (f HandlerFunc) Deliver(c *Conn, h wire.Header, frame []byte) bool { return f(c, h, frame) }

// Config configures a Transport. Zero fields take the documented defaults.
type Config struct {
	// ClusterID must match on both ends of every connection.
	ClusterID uint64
	// NodeID names this node in every handshake. Required.
	NodeID string
	// Generation rises at every start of the node so that peers replace a
	// connection from a previous run at once.
	Generation uint64
	// Secret, when set, makes every peer connection prove knowledge of it
	// (HMAC-SHA256 challenge, see wire.Hello), and every client connection
	// too unless CheckToken is set. Both ends must agree.
	Secret []byte
	// CheckToken, when set, authenticates clients by the token their Hello
	// carries, in place of the secret: it reports whether the token is
	// good and what it grants, which the connection keeps (Conn.Grant). A
	// client without a good one is answered Unauthorized and closed; one
	// that sends HelloAuth is refused the same way. It runs on an event
	// loop or a connection's goroutine and must not block.
	CheckToken func(token []byte) (grant any, ok bool)

	// ClientTLS, when set, makes the client listener TLS 1.3 with it;
	// whether it asks clients for a certificate is its ClientAuth.
	ClientTLS *tls.Config
	// PeerTLS, when set, makes the peer listener TLS 1.3 with it. It must
	// require and verify client certificates: a certificate its ClientCAs
	// vouch for is then a peer's credential, as Secret is (with both,
	// both are required).
	PeerTLS *tls.Config
	// DialTLS, when set, makes the dialled peer connections TLS 1.3 with
	// it. TLS connections are served by two goroutines each beside the
	// event loops (docs/decisions/tls-with-gnet.md).
	DialTLS *tls.Config

	// ClientAddr is the client listener ("127.0.0.1:7100"; port 0 picks
	// one, see Transport.ClientAddr). Empty: no client listener.
	ClientAddr string
	// PeerAddr is the peer listener. Empty: no peer listener (the node can
	// still dial peers).
	PeerAddr string

	// Handler receives inbound frames. Required.
	Handler Handler
	// Overloaded builds the frame answering a client request the Handler
	// refused. Default: a zero-payload wire.KindError frame echoing the
	// request id. Runs on an event loop.
	Overloaded func(c *Conn, h wire.Header) []byte

	// MaxClientFrame bounds a client frame's payload. Default wire.MaxFrame.
	MaxClientFrame int
	// MaxPeerFrame bounds a peer frame's payload. Default wire.MaxFrame.
	MaxPeerFrame int
	// ClientSendBytes caps what one client connection may have queued and
	// unsent; past it the client is cut off. Default 4 MiB.
	ClientSendBytes int
	// PeerSendBytes caps the bytes queued for one peer; a frame that does
	// not fit is dropped. Also the unsent backlog past which a peer that
	// stopped reading is disconnected. Default 32 MiB (two largest frames).
	PeerSendBytes int

	// Goroutines serves plain connections the way TLS ones always are:
	// two goroutines per connection, waiting in the runtime's poller,
	// instead of gnet event loops, which are then not started (stream.go
	// says why a node prefers it). ClientLoops and PeerLoops are unused.
	Goroutines bool

	// ClientLoops is the number of event loops serving clients. Default
	// GOMAXPROCS/2, at least 1: the rest of the node (raft, disk, request
	// goroutines) shares the cores, and one loop gathering the events of
	// many connections per epoll_wait costs less per request than two
	// loops each waking for fewer (measured on 2 cores with netbench).
	ClientLoops int
	// PeerLoops is the number of event loops for accepted peer connections
	// and, separately, for dialled ones. Default 1 each: one connection per
	// peer carries batched frames, so one loop keeps up.
	PeerLoops int

	// MaxClientConns and MaxPeerConns bound the connections open on each
	// listener; MaxClientConnsPerAddr and MaxPeerConnsPerAddr those from
	// one remote IP address. A connection past a bound is closed as it is
	// accepted, before anything is read, and counted (ConnsRefused).
	// Defaults: 16384 clients, 1024 from one address (a load generator or
	// a proxy on one host); 1024 peers, 64 from one address (one per node
	// pair plus the duplicates of simultaneous dials, and the nodes of a
	// development cluster sharing one address).
	MaxClientConns, MaxClientConnsPerAddr int
	MaxPeerConns, MaxPeerConnsPerAddr     int
	// ClientIdleTimeout closes a client connection that sent nothing
	// (Keepalive frames count) for this long, so that abandoned ones do
	// not hold a slot of MaxClientConns. Default 5m; negative: never.
	ClientIdleTimeout time.Duration

	// HandshakeTimeout closes a connection that has not finished its
	// handshake. Default 5s.
	HandshakeTimeout time.Duration
	// KeepaliveInterval: a peer connection with nothing written for this
	// long gets a Keepalive frame. Default 1s.
	KeepaliveInterval time.Duration
	// PeerDeadAfter: a peer connection with nothing read for this long is
	// closed as dead. Default 5×KeepaliveInterval.
	PeerDeadAfter time.Duration
	// DialTimeout bounds one TCP connect. Default 2s.
	DialTimeout time.Duration
	// BackoffMin and BackoffMax bound the delay between dial attempts,
	// doubled at each failure with jitter. Defaults 50ms and 5s.
	BackoffMin, BackoffMax time.Duration

	// Logger receives connection failures, one line per connection: at
	// warn level once the handshake is done, at debug level before it.
	// Default slog.Default().
	Logger *slog.Logger
}

// maxHelloFrame bounds any frame before the handshake completes, so an
// unauthenticated connection cannot make the node buffer a large frame: a
// Hello with the longest node id and token is 357 bytes.
const maxHelloFrame = 512

// Defaults of the connection limits (see Config).
const (
	DefaultMaxClientConns        = 16384
	DefaultMaxClientConnsPerAddr = 1024
	DefaultMaxPeerConns          = 1024
	DefaultMaxPeerConnsPerAddr   = 64
	DefaultClientIdleTimeout     = 5 * time.Minute
)

func (c *Config) withDefaults() Config {
	d := *c
	if d.MaxClientFrame == 0 {
		d.MaxClientFrame = wire.MaxFrame
	}
	if d.MaxPeerFrame == 0 {
		d.MaxPeerFrame = wire.MaxFrame
	}
	if d.ClientSendBytes == 0 {
		d.ClientSendBytes = 4 << 20
	}
	if d.PeerSendBytes == 0 {
		d.PeerSendBytes = 2 * (wire.MaxFrame + wire.HeaderSize)
	}
	if d.ClientLoops == 0 {
		d.ClientLoops = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if d.PeerLoops == 0 {
		d.PeerLoops = 1
	}
	if d.HandshakeTimeout == 0 {
		d.HandshakeTimeout = 5 * time.Second
	}
	if d.MaxClientConns == 0 {
		d.MaxClientConns = DefaultMaxClientConns
	}
	if d.MaxClientConnsPerAddr == 0 {
		d.MaxClientConnsPerAddr = DefaultMaxClientConnsPerAddr
	}
	if d.MaxPeerConns == 0 {
		d.MaxPeerConns = DefaultMaxPeerConns
	}
	if d.MaxPeerConnsPerAddr == 0 {
		d.MaxPeerConnsPerAddr = DefaultMaxPeerConnsPerAddr
	}
	if d.ClientIdleTimeout == 0 {
		d.ClientIdleTimeout = DefaultClientIdleTimeout
	}
	if d.KeepaliveInterval == 0 {
		d.KeepaliveInterval = time.Second
	}
	if d.PeerDeadAfter == 0 {
		d.PeerDeadAfter = 5 * d.KeepaliveInterval
	}
	if d.DialTimeout == 0 {
		d.DialTimeout = 2 * time.Second
	}
	if d.BackoffMin == 0 {
		d.BackoffMin = 50 * time.Millisecond
	}
	if d.BackoffMax == 0 {
		d.BackoffMax = 5 * time.Second
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	if d.Overloaded == nil {
		d.Overloaded = defaultOverloaded
	}
	d.ClientTLS, d.PeerTLS, d.DialTLS = tls13(d.ClientTLS), tls13(d.PeerTLS), tls13(d.DialTLS)
	return d
}

// tls13 is a copy of cfg that speaks TLS 1.3 only (nil for nil).
func tls13(cfg *tls.Config) *tls.Config {
	if cfg == nil {
		return nil
	}
	c := cfg.Clone()
	c.MinVersion = tls.VersionTLS13
	return c
}

func (c *Config) validate() error {
	var errs []error
	if c.Handler == nil {
		errs = append(errs, errors.New("Handler is required"))
	}
	if len(c.NodeID) > wire.MaxNodeIDLen {
		errs = append(errs, fmt.Errorf("NodeID longer than %d bytes", wire.MaxNodeIDLen))
	}
	if c.NodeID == "" {
		errs = append(errs, errors.New("NodeID is required"))
	}
	if c.MaxClientFrame < 0 || c.MaxClientFrame > wire.MaxFrame {
		errs = append(errs, fmt.Errorf("MaxClientFrame %d outside [1, %d]", c.MaxClientFrame, wire.MaxFrame))
	}
	if c.MaxPeerFrame < 0 || c.MaxPeerFrame > wire.MaxFrame {
		errs = append(errs, fmt.Errorf("MaxPeerFrame %d outside [1, %d]", c.MaxPeerFrame, wire.MaxFrame))
	}
	if c.ClientSendBytes < 0 || c.PeerSendBytes < 0 || c.ClientLoops < 0 || c.PeerLoops < 0 ||
		c.MaxClientConns < 0 || c.MaxClientConnsPerAddr < 0 || c.MaxPeerConns < 0 || c.MaxPeerConnsPerAddr < 0 {
		errs = append(errs, errors.New("negative cap or loop count"))
	}
	if c.HandshakeTimeout < 0 || c.KeepaliveInterval < 0 || c.PeerDeadAfter < 0 ||
		c.DialTimeout < 0 || c.BackoffMin < 0 || c.BackoffMax < 0 {
		errs = append(errs, errors.New("negative duration"))
	}
	if c.BackoffMax != 0 && c.BackoffMin > c.BackoffMax {
		errs = append(errs, errors.New("BackoffMin above BackoffMax"))
	}
	if c.PeerTLS != nil && c.PeerTLS.ClientAuth != tls.RequireAndVerifyClientCert {
		errs = append(errs, errors.New("PeerTLS must require and verify client certificates"))
	}
	if c.PeerTLS != nil && c.DialTLS == nil {
		errs = append(errs, errors.New("PeerTLS without DialTLS: this node could not reach its peers"))
	}
	for name, tc := range map[string]*tls.Config{"ClientTLS": c.ClientTLS, "PeerTLS": c.PeerTLS} {
		if tc != nil && len(tc.Certificates) == 0 && tc.GetCertificate == nil {
			errs = append(errs, fmt.Errorf("%s has no certificate", name))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("netio: config: %w", err)
	}
	return nil
}

// defaultOverloaded answers a refused client request with an empty Error
// frame carrying the request id.
func defaultOverloaded(_ *Conn, h wire.Header) []byte {
	b, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize), wire.KindError, h.RequestID)
	b, _ = wire.EndFrame(b, start)
	return b
}
