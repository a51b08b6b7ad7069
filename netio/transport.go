package netio

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"github.com/shoalmq/shoal/wire"
)

// Transport owns the listeners, the dialled peer connections and every
// goroutine behind them; Close stops all of them.
//
// Event loops (the default): one gnet engine for the client listener, one
// for the peer listener and one gnet client for dialled peers, so a flood
// of client connections is spread over its own loops and cannot delay the
// accept or the reads of peer traffic. With Config.Goroutines none of them
// starts: every connection has a reader and a writer goroutine (stream.go).
type Transport struct {
	cfg      Config
	log      *slog.Logger
	counters Counters

	clientEng, peerEng   gnet.Engine
	clientAddr, peerAddr string
	dialClient           *gnet.Client
	engines              sync.WaitGroup // gnet.Run goroutines

	mu     sync.Mutex
	closed bool
	conns  map[uint64]*Conn
	nextID uint64
	// open counts the accepted connections of each listener, and perAddr
	// those of each (listener, remote IP address), for the Max*Conns
	// limits.
	open    [2]int
	perAddr map[addrKey]int
	// peers is replaced, never changed in place, under peersMu, so that
	// Send looks a peer up without a lock.
	peersMu sync.Mutex
	peers   atomic.Pointer[map[string]*peer]

	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // dialers and the maintenance loop
	closing atomic.Bool

	retry chan *Conn // peer connections whose flush waits for the socket to drain

	// Listeners served by goroutines (under mu) and the goroutines of
	// their connections and of dialled ones.
	streamListeners []net.Listener
	streamConns     sync.WaitGroup

	onPeerDown atomic.Pointer[func(node string)]
	onDropped  atomic.Pointer[func(node string, frames int)]
}

// New validates cfg, binds the listeners and starts the event loops.
func New(cfg Config) (*Transport, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{
		cfg:     cfg,
		log:     cfg.Logger,
		conns:   make(map[uint64]*Conn),
		perAddr: make(map[addrKey]int),
		retry:   make(chan *Conn, 1024),
		ctx:     ctx,
		cancel:  cancel,
	}
	t.peers.Store(&map[string]*peer{})
	if err := t.start(); err != nil {
		_ = t.Close()
		return nil, err
	}
	return t, nil
}

func (t *Transport) gnetOptions(loops int) []gnet.Option {
	return []gnet.Option{
		gnet.WithNumEventLoop(loops),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReuseAddr(true), // a restarted node rebinds its port at once
		gnet.WithLogger(gnetLogger{t.log}),
	}
}

func (t *Transport) start() error {
	var err error
	switch {
	case t.cfg.ClientAddr == "":
	case t.cfg.ClientTLS != nil || t.cfg.Goroutines:
		if t.clientAddr, err = t.listenStream(kindClient, t.cfg.ClientAddr, t.cfg.ClientTLS); err != nil {
			return err
		}
	default:
		if t.clientEng, t.clientAddr, err = t.runEngine(kindClient, t.cfg.ClientAddr, t.cfg.ClientLoops); err != nil {
			return err
		}
	}
	switch {
	case t.cfg.PeerAddr == "":
	case t.cfg.PeerTLS != nil || t.cfg.Goroutines:
		if t.peerAddr, err = t.listenStream(kindPeerIn, t.cfg.PeerAddr, t.cfg.PeerTLS); err != nil {
			return err
		}
	default:
		if t.peerEng, t.peerAddr, err = t.runEngine(kindPeerIn, t.cfg.PeerAddr, t.cfg.PeerLoops); err != nil {
			return err
		}
	}
	if t.dialsOnLoops() {
		t.dialClient, err = gnet.NewClient(&loopHandler{t: t, kind: kindPeerOut}, t.gnetOptions(t.cfg.PeerLoops)...)
		if err != nil {
			return fmt.Errorf("netio: peer dialer: %w", err)
		}
		if err := t.dialClient.Start(); err != nil {
			t.dialClient = nil
			return fmt.Errorf("netio: peer dialer: %w", err)
		}
	}
	t.wg.Add(2)
	go t.maintain()
	go t.retryLoop()
	return nil
}

// dialsOnLoops reports whether dialled peer connections are served by
// gnet's client side; otherwise (TLS, or Config.Goroutines) by goroutines.
func (t *Transport) dialsOnLoops() bool { return t.cfg.DialTLS == nil && !t.cfg.Goroutines }

// runEngine starts one gnet engine on addr and waits until it is bound.
func (t *Transport) runEngine(kind listenerKind, addr string, loops int) (gnet.Engine, string, error) {
	h := &loopHandler{t: t, kind: kind, booted: make(chan gnet.Engine, 1)}
	errc := make(chan error, 1)
	t.engines.Add(1)
	go func() {
		defer t.engines.Done()
		errc <- gnet.Run(h, "tcp://"+addr, t.gnetOptions(loops)...)
	}()
	select {
	case eng := <-h.booted:
		bound, err := boundAddr(eng)
		if err != nil {
			_ = eng.Stop(cancelled())
			return gnet.Engine{}, "", fmt.Errorf("netio: listen %s: %w", addr, err)
		}
		return eng, bound, nil
	case err := <-errc:
		return gnet.Engine{}, "", fmt.Errorf("netio: listen %s: %w", addr, err)
	}
}

// boundAddr reads the listener's address, which differs from the
// configured one when the port was 0.
func boundAddr(eng gnet.Engine) (string, error) {
	fd, err := eng.Dup()
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return "", err
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port)), nil
	case *unix.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port)), nil
	}
	return "", fmt.Errorf("unexpected socket address %T", sa)
}

func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// ClientAddr is the bound client listener address ("" without one).
func (t *Transport) ClientAddr() string { return t.clientAddr }

// PeerAddr is the bound peer listener address ("" without one).
func (t *Transport) PeerAddr() string { return t.peerAddr }

// Counters returns the live counters.
func (t *Transport) Counters() *Counters { return &t.counters }

// OnPeerDown sets the function told when a peer becomes unreachable: its
// connection was lost or a dial attempt failed. It runs on an event loop or
// a dialer goroutine and must not block.
func (t *Transport) OnPeerDown(fn func(node string)) { t.onPeerDown.Store(&fn) }

// OnDropped sets the function told about frames accepted by Send and later
// dropped without being written (peer removed, transport closed). Frames
// refused by Send itself are reported by its error. Must not block.
func (t *Transport) OnDropped(fn func(node string, frames int)) { t.onDropped.Store(&fn) }

func (t *Transport) peerDown(node string) {
	if t.closing.Load() {
		return
	}
	t.counters.PeerDown.Add(1)
	if fn := t.onPeerDown.Load(); fn != nil && *fn != nil {
		(*fn)(node)
	}
}

func (t *Transport) dropped(node string, frames int) {
	if frames == 0 {
		return
	}
	t.counters.PeerSendDropped.Add(uint64(frames))
	if fn := t.onDropped.Load(); fn != nil && *fn != nil {
		(*fn)(node, frames)
	}
}

// Close stops dialling, closes every connection and stops the event loops.
// Frames still queued for peers are reported dropped.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	t.mu.Unlock()
	t.closing.Store(true)
	t.cancel()
	t.mu.Lock()
	for _, ln := range t.streamListeners {
		_ = ln.Close()
	}
	t.mu.Unlock()
	t.wg.Wait()
	// No connection served by goroutines starts now (startStream sees
	// closed): close them all.
	t.mu.Lock()
	for _, c := range t.conns {
		if l, ok := c.gc.(*streamLink); ok {
			_ = l.Close()
		}
	}
	t.mu.Unlock()
	t.streamConns.Wait()
	for _, eng := range []gnet.Engine{t.clientEng, t.peerEng} {
		if eng.Validate() == nil {
			_ = eng.Stop(cancelled())
		}
	}
	t.engines.Wait()
	var err error
	if t.dialClient != nil {
		err = t.dialClient.Stop()
	}
	t.peersMu.Lock()
	peers := *t.peers.Swap(&map[string]*peer{})
	t.peersMu.Unlock()
	for node, p := range peers {
		p.q.mu.Lock()
		n := p.q.drop()
		p.q.closed = true
		p.q.mu.Unlock()
		t.dropped(node, n)
	}
	if err != nil {
		return fmt.Errorf("netio: close: %w", err)
	}
	return nil
}

// newConn makes a Conn; register publishes it to the maintenance loop
// once its gnet connection is set.
func (t *Transport) newConn(kind listenerKind) *Conn {
	t.mu.Lock()
	t.nextID++
	c := &Conn{t: t, id: t.nextID, kind: kind, openedAt: nowNanos()}
	t.mu.Unlock()
	if kind == kindPeerOut {
		c.role = wire.RolePeer
		c.hsDone = make(chan struct{})
	}
	return c
}

// loopHandler binds gnet's events to the connection they concern.
type loopHandler struct {
	gnet.BuiltinEventEngine
	t      *Transport
	kind   listenerKind
	booted chan gnet.Engine
}

func (h *loopHandler) OnBoot(eng gnet.Engine) gnet.Action {
	if h.booted != nil {
		h.booted <- eng
	}
	return gnet.None
}

func (h *loopHandler) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	t := h.t
	if h.kind == kindPeerOut {
		c := gc.Context().(*Conn)
		c.gc = gc
		c.remote = gc.RemoteAddr().String()
		t.register(c)
		return c.ourHello(), gnet.None
	}
	t.counters.ConnsAccepted.Add(1)
	key := addrKey{kind: h.kind, ip: remoteIP(gc.RemoteAddr())}
	if !t.admitConn(key) {
		t.counters.ConnsRefused.Add(1)
		return nil, gnet.Close
	}
	c := t.newConn(h.kind)
	c.gc = gc
	c.addr, c.counted = key, true
	c.remote = gc.RemoteAddr().String()
	c.lastRead.Store(c.openedAt)
	if h.kind == kindClient {
		c.q = &sendQueue{capBytes: t.cfg.ClientSendBytes, retain: clientRetain, conn: c}
	}
	gc.SetContext(c)
	t.register(c)
	return nil, gnet.None
}

func (t *Transport) register(c *Conn) {
	t.mu.Lock()
	t.conns[c.id] = c
	t.mu.Unlock()
}

func (h *loopHandler) OnTraffic(gc gnet.Conn) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.Close
	}
	return c.onTraffic(gc)
}

func (h *loopHandler) OnClose(gc gnet.Conn, err error) gnet.Action {
	c, ok := gc.Context().(*Conn)
	if !ok {
		return gnet.None
	}
	c.onClose(err)
	return gnet.None
}

func (c *Conn) onClose(err error) {
	t := c.t
	if c.closed {
		return
	}
	c.closed = true
	t.mu.Lock()
	delete(t.conns, c.id)
	if c.counted {
		t.open[c.addr.kind]--
		if t.perAddr[c.addr]--; t.perAddr[c.addr] <= 0 {
			delete(t.perAddr, c.addr)
		}
	}
	t.mu.Unlock()
	t.counters.ConnsClosed.Add(1)
	switch {
	case c.kind == kindClient && c.q != nil:
		c.q.mu.Lock()
		c.q.drop()
		c.q.closed, c.q.conn = true, nil
		c.q.mu.Unlock()
	case c.role == wire.RolePeer && c.q != nil:
		t.peerConnClosed(c)
	}
	c.endHandshake()
	if err != nil && !c.failed.Load() {
		t.log.Debug("netio: connection closed", "remote", c.remote, "conn", c.id, "node", c.node, "err", err)
	}
}

// maintain closes connections stuck in their handshake, closes dead peer
// connections and sends keepalives on idle ones.
func (t *Transport) maintain() {
	defer t.wg.Done()
	period := min(t.cfg.KeepaliveInterval, t.cfg.HandshakeTimeout, t.cfg.PeerDeadAfter) / 4
	period = max(period, 5*time.Millisecond)
	tick := time.NewTicker(period)
	defer tick.Stop()
	var conns []*Conn
	var peers []*peer
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-tick.C:
		}
		now := nowNanos()
		conns = conns[:0]
		t.mu.Lock()
		for _, c := range t.conns {
			conns = append(conns, c)
		}
		t.mu.Unlock()
		idle := int64(t.cfg.ClientIdleTimeout)
		for _, c := range conns {
			switch {
			case c.gc == nil:
			case !c.up.Load() && now-c.openedAt > int64(t.cfg.HandshakeTimeout):
				c.closeAsync(&t.counters.HandshakeTimeouts, "handshake timeout")
			case c.kind == kindClient && idle > 0 && now-c.lastRead.Load() > idle:
				c.closeAsync(&t.counters.ClientsIdle, "client idle")
			}
		}
		peers = peers[:0]
		for _, p := range *t.peers.Load() {
			peers = append(peers, p)
		}
		for _, p := range peers {
			t.keepalive(p, now)
		}
		clear(conns)
		clear(peers)
	}
}

// addrKey names the accepted connections of one listener from one remote
// IP address.
type addrKey struct {
	kind listenerKind
	ip   netip.Addr
}

// remoteIP is a's IP address (unmapped), or the zero Addr for an address
// that is not TCP.
func remoteIP(a net.Addr) netip.Addr {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

// admitConn counts a connection accepted on key's listener from key's
// address, or reports false when either is at its limit.
func (t *Transport) admitConn(key addrKey) bool {
	limit, perAddr := t.cfg.MaxClientConns, t.cfg.MaxClientConnsPerAddr
	if key.kind == kindPeerIn {
		limit, perAddr = t.cfg.MaxPeerConns, t.cfg.MaxPeerConnsPerAddr
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.open[key.kind] >= limit || t.perAddr[key] >= perAddr {
		return false
	}
	t.open[key.kind]++
	t.perAddr[key]++
	return true
}

// retryFlush asks for c's loop to be woken shortly to flush again. Runs on
// c's loop; a connection already waiting is not queued twice.
func (t *Transport) retryFlush(c *Conn) {
	if c.retryArmed {
		return
	}
	select {
	case t.retry <- c:
		c.retryArmed = true
	default:
		// Every slot taken: wake at once rather than lose the flush.
		_ = c.gc.Wake(nil)
	}
}

// retryLoop wakes the connections retryFlush queued, after a pause that
// lets their sockets drain. It stops before the event loops do, so it never
// wakes a stopped loop.
func (t *Transport) retryLoop() {
	defer t.wg.Done()
	const pause = 100 * time.Microsecond
	var batch []*Conn
	for {
		select {
		case <-t.ctx.Done():
			return
		case c := <-t.retry:
			batch = append(batch[:0], c)
		}
		time.Sleep(pause)
	drain:
		for {
			select {
			case c := <-t.retry:
				batch = append(batch, c)
			default:
				break drain
			}
		}
		for _, c := range batch {
			_ = c.gc.Wake(nil)
		}
		clear(batch)
	}
}
