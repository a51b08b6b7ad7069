package world

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// StartConfig is what a started node's world is built from: what the node
// says of itself, where it listens, its credentials and what takes the
// frames it reads.
type StartConfig struct {
	// ClusterID, NodeID, Generation and Rack are what the node says of
	// itself; Secret, when set, authenticates its connections and gives
	// the SWIM key when Security has none.
	ClusterID  uint64
	NodeID     string
	Generation uint64
	Rack       string
	Secret     []byte
	// ClientAddr, PeerAddr and SwimAddr are where it listens; Join lists
	// the SWIM addresses it joins through.
	ClientAddr, PeerAddr, SwimAddr string
	Join                           []string
	// Swim is SWIM's timing; what the node says of itself and its
	// addresses are set from the fields above.
	Swim swim.Config
	// Loops serves plain TCP connections on event loops instead of two
	// goroutines each (netio.Config.Goroutines).
	Loops bool
	// Security holds the node's credentials, put on the transport and
	// SWIM; Clients its client tokens, checked at the handshake.
	Security *security.Security
	Clients  *security.Clients
	// Handler takes every frame read; Overloaded answers a client request
	// it did not take.
	Handler    netio.Handler
	Overloaded func(c *netio.Conn, h wire.Header) []byte
	// WrapConn and WrapPushPull, when set, wrap SWIM's socket and its
	// push-pull transport (a test's faults).
	WrapConn     func(swim.PacketConn) swim.PacketConn
	WrapPushPull func(swim.PushPullTransport) swim.PushPullTransport
	Logger       *slog.Logger
}

// Started is a started node's world: its transport (the client and peer
// listeners and the dials to peers) and its SWIM driver, closed together.
type Started struct {
	cfg StartConfig
	// Net is the transport (Listen); Swim the SWIM driver (JoinSwim), nil
	// until then.
	Net  *netio.Transport
	Swim *swim.Driver
}

// Listen binds the transport's listeners.
func Listen(cfg StartConfig) (*Started, error) {
	nc := netio.Config{
		ClusterID:  cfg.ClusterID,
		NodeID:     cfg.NodeID,
		Generation: cfg.Generation,
		Secret:     cfg.Secret,
		ClientAddr: cfg.ClientAddr,
		PeerAddr:   cfg.PeerAddr,
		Handler:    cfg.Handler,
		Overloaded: cfg.Overloaded,
		Logger:     cfg.Logger,
		Goroutines: !cfg.Loops,
	}
	security.Transport(cfg.Security, cfg.Clients, &nc)
	nt, err := netio.New(nc)
	if err != nil {
		return nil, err
	}
	return &Started{cfg: cfg, Net: nt}, nil
}

// JoinSwim starts SWIM on SwimAddr, saying meta of the node beside the
// transport's addresses, and joins through Join; onEvent takes its
// events.
func (s *Started) JoinSwim(meta []byte, onEvent func(swim.Event)) error {
	sc := s.cfg.Swim
	sc.NodeID = s.cfg.NodeID
	sc.Generation = s.cfg.Generation
	sc.ClusterID = s.cfg.ClusterID
	sc.ClientAddr = s.Net.ClientAddr()
	sc.PeerAddr = s.Net.PeerAddr()
	sc.Rack = s.cfg.Rack
	sc.Meta = meta
	sc.Secret = s.cfg.Secret
	sc.SwimAddr = ""
	dc := swim.DriverConfig{
		Node:    sc,
		Seeds:   s.cfg.Join,
		OnEvent: onEvent,
		Logger:  s.cfg.Logger,
	}
	security.Swim(s.cfg.Security, &dc)
	if s.cfg.WrapConn != nil || s.cfg.WrapPushPull != nil {
		dc.Wrap = func(pc swim.PacketConn, pp swim.PushPullTransport) (swim.PacketConn, swim.PushPullTransport) {
			if s.cfg.WrapConn != nil {
				pc = s.cfg.WrapConn(pc)
			}
			if s.cfg.WrapPushPull != nil {
				pp = s.cfg.WrapPushPull(pp)
			}
			return pc, pp
		}
	}
	drv, err := swim.Listen(s.cfg.SwimAddr, dc, netio.UDPConfig{ReuseAddr: true})
	if err != nil {
		return err
	}
	s.Swim = drv
	return nil
}

// LogSecurity says at start what the node asks of whom
// (security.LogStart).
func (s *Started) LogSecurity() {
	swimKeys := 0
	if s.Swim != nil {
		swimKeys = s.Swim.KeyCount()
	}
	security.LogStart(s.cfg.Logger, s.cfg.Security, len(s.cfg.Secret) > 0, swimKeys)
}

// SetSwimKeys replaces the SWIM keyring, the primary first. A node with
// no SWIM of its own (a nil Started: not started, or driven) has none to
// replace.
func (s *Started) SetSwimKeys(keys [][]byte) error {
	if s == nil || s.Swim == nil {
		return fmt.Errorf("%w: the node is not started (or is driven, without SWIM of its own)", security.ErrCredentials)
	}
	if err := s.Swim.SetKeys(keys); err != nil {
		return fmt.Errorf("%w: %w", security.ErrCredentials, err)
	}
	s.cfg.Logger.Info("SWIM keys replaced", "keys", len(keys))
	return nil
}

// Leave has SWIM announce the node's leave, lingering four gossip
// intervals for it to spread.
func (s *Started) Leave() error {
	return s.Swim.Leave(4 * s.gossipInterval())
}

func (s *Started) gossipInterval() time.Duration {
	if s.cfg.Swim.GossipInterval > 0 {
		return s.cfg.Swim.GossipInterval
	}
	return 200 * time.Millisecond
}

// Close stops SWIM without a word, then closes the transport's listeners
// and connections.
func (s *Started) Close() error {
	var errs []error
	if s.Swim != nil {
		if err := s.Swim.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
			errs = append(errs, err)
		}
	}
	if err := s.Net.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
