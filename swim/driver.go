package swim

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/wire"
)

// PacketConn is the datagram socket a Driver runs on (netio.UDPConn).
type PacketConn interface {
	ReadFrom(b []byte) (int, netip.AddrPort, error)
	WriteTo(b []byte, addr netip.AddrPort) error
	SetReadDeadline(t time.Time) error
	LocalAddr() netip.AddrPort
	Close() error
}

// PushPullTransport carries state exchanges (netio.PushPull).
type PushPullTransport interface {
	Exchange(ctx context.Context, addr string, req []byte) ([]byte, error)
	Serve(h func(req []byte) ([]byte, error)) error
	Close() error
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// Node configures the core. SwimAddr defaults to the socket's address;
	// Generation to the start time in nanoseconds; Seed to the same.
	Node Config
	// Seeds are SWIM addresses to join through (this node's own skipped).
	Seeds []string
	// OnEvent receives every event, on the driver's goroutine with the
	// driver locked: it must return quickly and must not call the Driver
	// (hand the event over to another goroutine).
	OnEvent func(Event)
	// Logger (slog.Default when nil).
	Logger *slog.Logger
	// Wrap, when set, wraps the socket and push-pull transport Listen
	// made before the driver starts on them (a test's fault injection).
	Wrap func(PacketConn, PushPullTransport) (PacketConn, PushPullTransport)
	// PushPullTLS and PushPullDialTLS, when set, make Listen's push-pull
	// exchanges TLS: the listener's side and the dialler's (see
	// netio.PushPullConfig).
	PushPullTLS, PushPullDialTLS *tls.Config
}

// DriverStats are the driver's socket counters and the core's.
type DriverStats struct {
	Core            Stats
	PacketsIn       uint64
	PacketsOut      uint64
	BytesIn         uint64
	BytesOut        uint64
	ReadErrors      uint64
	WriteErrors     uint64
	BadAddress      uint64 // a datagram for an address that does not parse
	PushPullsServed uint64
	PushPullsSent   uint64
	// PushPullsRefused: connections closed at accept because the transport
	// served its most exchanges at once; PushPullHandshakeFailures:
	// exchanges whose handshake or state frame was refused or timed out
	// (zero unless the transport counts them, as netio.PushPull does).
	PushPullsRefused          uint64
	PushPullHandshakeFailures uint64
}

// Driver binds a Node to a datagram socket, the real clock and a
// push-pull transport. One goroutine reads the socket with a deadline at
// the core's next timer and feeds it; push-pull exchanges run on their
// own short-lived goroutines and reach the core under the same lock.
type Driver struct {
	mu      sync.Mutex
	node    *Node
	conn    PacketConn
	pp      PushPullTransport
	cfg     DriverConfig
	log     *slog.Logger
	stats   DriverStats
	addrs   map[string]netip.AddrPort
	names   map[netip.AddrPort]string
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closing bool
}

// ErrDriver wraps driver errors.
var ErrDriver = errors.New("swim: driver")

// NewDriver starts a driver on conn and pp. It owns both from now on and
// closes them in Close.
func NewDriver(cfg DriverConfig, conn PacketConn, pp PushPullTransport) (*Driver, error) {
	now := time.Now()
	nc := cfg.Node
	if nc.SwimAddr == "" {
		nc.SwimAddr = conn.LocalAddr().String()
	}
	if nc.Generation == 0 {
		nc.Generation = uint64(now.UnixNano())
	}
	if nc.Seed == 0 && nc.Rand == nil {
		nc.Seed = uint64(now.UnixNano())
	}
	node, err := New(nc)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		node: node, conn: conn, pp: pp, cfg: cfg, log: cfg.Logger,
		addrs: make(map[string]netip.AddrPort), names: make(map[netip.AddrPort]string),
	}
	if d.log == nil {
		d.log = slog.Default()
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if len(cfg.Seeds) > 0 {
		node.Join(cfg.Seeds)
		node.Tick(now)
	}
	d.wg.Add(2)
	go d.loop()
	go func() {
		defer d.wg.Done()
		if err := pp.Serve(d.servePushPull); err != nil {
			d.log.Warn("swim: push-pull server stopped", "err", err)
		}
	}()
	return d, nil
}

// Self reports this node's record.
func (d *Driver) Self() Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.Self()
}

// Members lists the known members, sorted by id.
func (d *Driver) Members() []Member {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.Members()
}

// Member reports what this node knows of id.
func (d *Driver) Member(id string) (Member, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.Member(id)
}

// NumLive reports the members alive or suspect, this node excluded.
func (d *Driver) NumLive() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.NumLive()
}

// Stats reports the counters.
func (d *Driver) Stats() DriverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Core = d.node.Stats()
	if c, ok := d.pp.(pushPullCounters); ok {
		s.PushPullsRefused, s.PushPullHandshakeFailures = c.Refused(), c.HandshakeFailures()
	}
	return s
}

// pushPullCounters is what a PushPullTransport may count (netio.PushPull
// does).
type pushPullCounters interface {
	Refused() uint64
	HandshakeFailures() uint64
}

// AnnounceShardLeader spreads a shard's leader at term.
func (d *Driver) AnnounceShardLeader(shard uint64, leader string, term uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.node.AnnounceShardLeader(shard, leader, term)
	d.flush()
}

// SetMeta replaces this node's metadata and spreads it (Node.SetMeta).
func (d *Driver) SetMeta(meta []byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	err := d.node.SetMeta(meta)
	d.flush()
	return err
}

// SetMetadataVersion spreads this node's version of a metadata kind.
func (d *Driver) SetMetadataVersion(kind, version uint64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.node.SetMetadataVersion(kind, version)
	d.flush()
}

// SetKeys replaces the SWIM keyring, the primary first (Node.SetKeys).
func (d *Driver) SetKeys(keys [][]byte) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.SetKeys(keys)
}

// KeyCount reports the keys of the keyring (0: datagrams unsealed).
func (d *Driver) KeyCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.node.KeyCount()
}

// Leave announces a graceful leave and keeps gossiping for linger (a
// few gossip intervals is enough), then closes the driver.
func (d *Driver) Leave(linger time.Duration) error {
	d.mu.Lock()
	d.node.Leave()
	d.flush()
	d.mu.Unlock()
	t := time.NewTimer(linger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-d.ctx.Done():
	}
	return d.Close()
}

// Close stops the driver without a word to the cluster (as a crash would
// look) and waits for its goroutines.
func (d *Driver) Close() error {
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return nil
	}
	d.closing = true
	d.mu.Unlock()
	d.cancel()
	err := errors.Join(d.conn.Close(), d.pp.Close())
	d.wg.Wait()
	return err
}

func (d *Driver) loop() {
	defer d.wg.Done()
	buf := make([]byte, wire.MaxDatagram)
	for {
		d.mu.Lock()
		d.flush()
		now := time.Now()
		next := d.node.NextDeadline()
		if !next.After(now) {
			d.node.Tick(now)
			d.flush()
			next = d.node.NextDeadline()
			if !next.After(now) {
				next = now.Add(time.Millisecond)
			}
		}
		d.mu.Unlock()
		if err := d.conn.SetReadDeadline(next); err != nil {
			if d.ctx.Err() != nil {
				return
			}
		}
		n, from, err := d.conn.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				continue
			}
			if d.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			d.mu.Lock()
			d.stats.ReadErrors++
			d.mu.Unlock()
			continue
		}
		d.mu.Lock()
		d.stats.PacketsIn++
		d.stats.BytesIn += uint64(n)
		d.node.Receive(time.Now(), d.name(from), buf[:n])
		d.flush()
		d.mu.Unlock()
	}
}

// name returns the string form of a source address, cached.
func (d *Driver) name(a netip.AddrPort) string {
	if s, ok := d.names[a]; ok {
		return s
	}
	s := a.String()
	if len(d.names) < 1<<16 {
		d.names[a] = s
	}
	return s
}

func (d *Driver) resolve(s string) (netip.AddrPort, bool) {
	if a, ok := d.addrs[s]; ok {
		return a, true
	}
	a, err := netip.ParseAddrPort(s)
	if err != nil {
		return netip.AddrPort{}, false
	}
	if len(d.addrs) < 1<<16 {
		d.addrs[s] = a
	}
	return a, true
}

// flush does what the core asked for; d.mu is held.
func (d *Driver) flush() {
	if !d.node.HasReady() {
		return
	}
	rd := d.node.Ready()
	for _, p := range rd.Packets {
		a, ok := d.resolve(p.To)
		if !ok {
			d.stats.BadAddress++
			continue
		}
		if err := d.conn.WriteTo(p.Data, a); err != nil {
			d.stats.WriteErrors++
			continue
		}
		d.stats.PacketsOut++
		d.stats.BytesOut += uint64(len(p.Data))
	}
	if d.cfg.OnEvent != nil {
		for _, ev := range rd.Events {
			d.cfg.OnEvent(ev)
		}
	}
	for _, pp := range rd.PushPulls {
		if d.closing {
			break
		}
		d.stats.PushPullsSent++
		d.wg.Add(1)
		go d.exchange(pp)
	}
	d.node.Advance()
}

func (d *Driver) exchange(pp PushPullRequest) {
	defer d.wg.Done()
	reply, err := d.pp.Exchange(d.ctx, pp.Addr, pp.Payload)
	if err != nil && d.ctx.Err() == nil && !pp.Join {
		d.log.Debug("swim: push-pull failed", "addr", pp.Addr, "err", err)
	}
	d.mu.Lock()
	if d.closing {
		d.mu.Unlock()
		return
	}
	join, err := d.node.PushPullDone(time.Now(), pp.ID, reply, err)
	d.flush()
	d.mu.Unlock()
	if join && err != nil && d.ctx.Err() == nil {
		// At info: a node that cannot join says so, and why, at the
		// default level; it retries with backoff.
		d.log.Info("join attempt failed", "seed", pp.Addr, "cause", JoinFailureCause(err), "err", err)
	}
}

// Causes of a failed join attempt, as JoinFailureCause names them.
const (
	JoinUnreachable  = "unreachable"      // no answer: nothing listens there, a firewall, a timeout
	JoinWrongCluster = "wrong cluster id" // the seed is in another cluster
	JoinAuth         = "authentication"   // another cluster secret, SWIM key or CA, or none where one is needed
	JoinRefused      = "refused"          // anything else the seed or its state did wrong
)

// JoinFailureCause names why a join attempt failed, from its error.
func JoinFailureCause(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, netio.ErrWrongCluster), errors.Is(err, ErrStateWrongCluster):
		return JoinWrongCluster
	case errors.Is(err, netio.ErrAuthFailed), errors.Is(err, ErrStateUnauthenticated):
		return JoinAuth
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return JoinUnreachable
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return JoinUnreachable
	}
	return JoinRefused
}

func (d *Driver) servePushPull(req []byte) ([]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closing {
		return nil, fmt.Errorf("%w: closing", ErrDriver)
	}
	d.stats.PushPullsServed++
	reply, err := d.node.HandlePushPull(time.Now(), req)
	d.flush()
	return reply, err
}

// Listen binds the UDP socket and the push-pull listener of a node on the
// same address (port 0: a free port for both, retried if TCP finds it
// taken) and starts a Driver on them.
func Listen(addr string, cfg DriverConfig, udp netio.UDPConfig) (*Driver, error) {
	var lastErr error
	for range 20 {
		conn, err := netio.ListenUDP(addr, udp)
		if err != nil {
			return nil, err
		}
		nc := cfg.Node
		pp, err := netio.ListenPushPull(conn.LocalAddr().String(), netio.PushPullConfig{
			ClusterID: nc.ClusterID, NodeID: nc.NodeID, Generation: nc.Generation, Secret: nc.Secret, Logger: cfg.Logger,
			TLS: cfg.PushPullTLS, DialTLS: cfg.PushPullDialTLS,
		})
		if err != nil {
			conn.Close()
			lastErr = err
			continue
		}
		var pc PacketConn = conn
		var ppt PushPullTransport = pp
		if cfg.Wrap != nil {
			pc, ppt = cfg.Wrap(pc, ppt)
		}
		d, err := NewDriver(cfg, pc, ppt)
		if err != nil {
			conn.Close()
			pp.Close()
			return nil, err
		}
		return d, nil
	}
	return nil, fmt.Errorf("%w: listen %s: %w", ErrDriver, addr, lastErr)
}

// Join joins the cluster through seeds (SWIM addresses), starting now;
// DriverConfig.Seeds does the same at start.
func (d *Driver) Join(seeds []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.node.Join(seeds)
	d.node.Tick(time.Now())
	d.flush()
}
