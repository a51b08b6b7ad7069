package client

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Config configures New. The zero value of every field but Servers picks the
// documented default.
type Config struct {
	// Servers are the seed nodes' client addresses (host:port). Metadata
	// requests go to any of them, starting with the one that answered last;
	// the owners of topics are found through them. Required, at most
	// MaxServers.
	Servers []string

	// ClusterID must equal the cluster's id: a node refuses a handshake
	// with another one, and the client refuses a node that answers with
	// another one. Default 0.
	ClusterID uint64

	// Token is this client's credential for a cluster whose nodes
	// authenticate clients by token (shoal node --client-token-file): it
	// travels in every connection's Hello, and the token's role (admin,
	// write or read) decides which requests the nodes serve; others are
	// answered with wire.ErrUnauthorized. Without TLS it travels in the
	// clear. At most wire.MaxTokenLen bytes.
	Token string

	// Secret is the cluster's shared secret, for a cluster whose nodes
	// have no client tokens and authenticate clients with the secret (the
	// older mode, in which a client holds the peers' credential). When
	// set, every connection proves it with HelloAuth and checks the node's
	// proof. Token and Secret are exclusive: a node with tokens refuses
	// the secret from clients.
	Secret []byte

	// TLS, when set, makes every connection TLS 1.3 with it (a copy, with
	// MinVersion raised to TLS 1.3 and, when ServerName is empty, the
	// host of the address dialled as the name to verify). RootCAs should
	// hold the cluster's CA; Certificates a client certificate when the
	// nodes ask for one (shoal node --tls-client-auth).
	TLS *tls.Config

	// DialTimeout bounds connecting to a node and the handshake. Default 2s.
	DialTimeout time.Duration

	// Dial, when set, opens the TCP connections to nodes instead of a
	// net.Dialer: a test uses it to confine a client to its side of a
	// network partition, or to a network namespace. It is called with
	// network "tcp".
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// RequestTimeout bounds one attempt of a request (one round trip to one
	// node); an attempt that outlives it counts as the node being
	// unreachable and is retried elsewhere. The caller's context bounds the
	// whole call, retries included. Default 5s.
	RequestTimeout time.Duration

	// MaxRetries is how many times a request is retried after its first
	// attempt when the failure is one a retry can fix (a node unreachable,
	// Unavailable, NotLeader, NotLeaderForTopic). Default 8; a negative
	// value disables retries. Each attempt of a data request whose route
	// must first be looked up may spend the lookup's own retries, so it
	// makes at most (MaxRetries+1)² round trips in all; a lookup that fails
	// after its retries ends the call.
	MaxRetries int

	// BackoffBase is the wait before the first retry; each later retry
	// waits twice as long, up to BackoffMax, with jitter (a wait d is drawn
	// from [d/2, d]) so that clients failing together do not retry together.
	// A node's RetryAfter hint raises a wait, within BackoffMax. A retry on
	// another node after a connection failure does not wait until every
	// server has been tried once. Default 50ms.
	BackoffBase time.Duration

	// BackoffMax caps one wait between retries. Default 2s.
	BackoffMax time.Duration

	// ConnsPerServer is the number of TCP connections kept to each node;
	// requests are pipelined over them round-robin. Default 1, at most 64.
	ConnsPerServer int

	// MaxInFlight bounds the requests outstanding on one connection; a
	// caller beyond it waits (within its context) for a slot. Default 1024,
	// at most 65536.
	MaxInFlight int

	// CacheCapacity bounds the routing cache (topic → owner, epoch).
	// Default router.DefaultCacheCapacity.
	CacheCapacity int

	// LeaderTableRefresh is how often the client pulls a node's
	// shard-leader table again while it sends metadata requests: Assign,
	// Revoke, UpdatePartitions and linearizable Lookups go straight to the
	// shard's leader as that table names it, the seeds being the fallback
	// (any node forwards to the leader). A NotLeader answer corrects the
	// table at once, and a failure at the named leader pulls it again
	// sooner; a leader that could not be reached is skipped for this long.
	// Default 5s; negative sends every metadata request to the seeds.
	LeaderTableRefresh time.Duration

	// FollowRoutes keeps the routing cache up to date from a watch of
	// every assignment change in the cluster (follow.go): when an owner
	// dies, its topics' new owners reach the cache as their moves commit,
	// and data requests go there without a lookup each. It costs one
	// watch (a long poll per node serving shards) and the changes of the
	// whole cluster, which suits a broker's client, not a short-lived
	// one. Default off.
	FollowRoutes bool

	// Logger receives retries and connection events at debug and warn
	// level. Default: discard.
	Logger *slog.Logger
}

// Defaults and limits of Config.
const (
	DefaultDialTimeout    = 2 * time.Second
	DefaultRequestTimeout = 5 * time.Second
	DefaultMaxRetries     = 8
	DefaultBackoffBase    = 50 * time.Millisecond
	DefaultBackoffMax     = 2 * time.Second
	DefaultConnsPerServer = 1
	DefaultMaxInFlight    = 1024

	DefaultLeaderTableRefresh = 5 * time.Second

	MaxServers        = 1024
	MaxConnsPerServer = 64
	MaxInFlightLimit  = 1 << 16
	// MaxRetriesLimit bounds MaxRetries: with the default backoff, 64
	// retries already wait more than two minutes.
	MaxRetriesLimit = 64
)

// withDefaults validates c and returns it with defaults filled in.
func (c Config) withDefaults() (Config, error) {
	if len(c.Servers) == 0 {
		return c, fmt.Errorf("client: no servers given: %w", ErrConfig)
	}
	if len(c.Servers) > MaxServers {
		return c, fmt.Errorf("client: %d servers, at most %d: %w", len(c.Servers), MaxServers, ErrConfig)
	}
	servers := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		if err := ValidateAddr(s); err != nil {
			return c, err
		}
		servers[i] = s
	}
	c.Servers = servers
	c.Secret = append([]byte(nil), c.Secret...)
	if len(c.Token) > wire.MaxTokenLen {
		return c, fmt.Errorf("client: Token of %d bytes, at most %d: %w", len(c.Token), wire.MaxTokenLen, ErrConfig)
	}
	if c.Token != "" && len(c.Secret) > 0 {
		return c, fmt.Errorf("client: Token and Secret are both set; a node that takes tokens refuses the secret from clients: %w", ErrConfig)
	}
	if c.TLS != nil {
		c.TLS = c.TLS.Clone()
		c.TLS.MinVersion = max(c.TLS.MinVersion, tls.VersionTLS13)
	}
	durations := []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"DialTimeout", &c.DialTimeout, DefaultDialTimeout},
		{"RequestTimeout", &c.RequestTimeout, DefaultRequestTimeout},
		{"BackoffBase", &c.BackoffBase, DefaultBackoffBase},
		{"BackoffMax", &c.BackoffMax, DefaultBackoffMax},
	}
	if c.LeaderTableRefresh == 0 {
		c.LeaderTableRefresh = DefaultLeaderTableRefresh
	}
	for _, d := range durations {
		if *d.v < 0 {
			return c, fmt.Errorf("client: %s %v is negative: %w", d.name, *d.v, ErrConfig)
		}
		if *d.v == 0 {
			*d.v = d.def
		}
	}
	if c.BackoffMax < c.BackoffBase {
		return c, fmt.Errorf("client: BackoffMax %v below BackoffBase %v: %w", c.BackoffMax, c.BackoffBase, ErrConfig)
	}
	switch {
	case c.MaxRetries == 0:
		c.MaxRetries = DefaultMaxRetries
	case c.MaxRetries < 0:
		c.MaxRetries = 0
	case c.MaxRetries > MaxRetriesLimit:
		return c, fmt.Errorf("client: MaxRetries %d above %d: %w", c.MaxRetries, MaxRetriesLimit, ErrConfig)
	}
	ints := []struct {
		name     string
		v        *int
		def, max int
	}{
		{"ConnsPerServer", &c.ConnsPerServer, DefaultConnsPerServer, MaxConnsPerServer},
		{"MaxInFlight", &c.MaxInFlight, DefaultMaxInFlight, MaxInFlightLimit},
		{"CacheCapacity", &c.CacheCapacity, router.DefaultCacheCapacity, router.MaxCacheCapacity},
	}
	for _, n := range ints {
		if *n.v == 0 {
			*n.v = n.def
		}
		if *n.v < 1 || *n.v > n.max {
			return c, fmt.Errorf("client: %s %d not in [1, %d]: %w", n.name, *n.v, n.max, ErrConfig)
		}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// ValidateAddr checks that addr is a host:port a node could listen on: at
// most wire.MaxAddrLen bytes, a non-empty host and a port in 1..65535.
// Errors wrap ErrConfig.
func ValidateAddr(addr string) error {
	if len(addr) > wire.MaxAddrLen {
		return fmt.Errorf("client: server address of %d bytes, at most %d: %w", len(addr), wire.MaxAddrLen, ErrConfig)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("client: server address %q: %v: %w", addr, err, ErrConfig)
	}
	if host == "" {
		return fmt.Errorf("client: server address %q has no host: %w", addr, ErrConfig)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("client: server address %q: port must be 1..65535: %w", addr, ErrConfig)
	}
	return nil
}
