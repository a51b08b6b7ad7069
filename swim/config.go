package swim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// Config configures a Node. Zero fields take the defaults documented on
// each (see DefaultConfig, LANConfig and LocalConfig); Validate reports
// what is out of range.
type Config struct {
	// NodeID names this node in the cluster (required, at most
	// wire.MaxNodeIDLen bytes).
	NodeID string
	// Generation is this life of the node; it must rise at every start
	// (the driver defaults it to the start time in nanoseconds).
	Generation uint64
	// ClusterID: datagrams and push-pulls of another cluster are dropped
	// and counted.
	ClusterID uint64
	// SwimAddr is where other nodes send this node's datagrams (required).
	SwimAddr string
	// ClientAddr, PeerAddr, Rack and Meta are carried to every member.
	ClientAddr, PeerAddr, Rack string
	Meta                       []byte
	// Keys is the SWIM keyring, the primary first (see wire.SwimKeyring):
	// every datagram and push-pull is sealed (AES-GCM) with the primary,
	// and input is taken only if it opens under one of the keys, names
	// this node as its recipient and was not taken before (replay
	// windows); anything else is dropped and counted. Each key is 16, 24
	// or 32 bytes, at most wire.MaxSwimKeys of them. SetKeys rotates them.
	Keys [][]byte
	// Secret is the cluster's shared secret. Without Keys, the keyring is
	// one key derived from it (wire.DeriveSwimKey). The driver also proves
	// it in the push-pull handshake. Neither: datagrams travel unsealed
	// and unauthenticated.
	Secret []byte
	// Seed seeds the node's random source (probe order, random members).
	// Rand, when set, is used instead.
	Seed uint64
	Rand *rand.Rand

	// ProbeInterval is the time between two probes of this node (1 s):
	// every member is probed by every other once per n-1 intervals, and
	// the cluster as a whole sends about two datagrams per member per
	// interval. Lifeguard stretches it by (health+1) when this node is
	// itself slow.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct ping waits for its ack before the
	// ping-reqs go out (500 ms); stretched like ProbeInterval.
	ProbeTimeout time.Duration
	// ProbeOrder chooses how probe targets are walked (ProbeAligned).
	ProbeOrder ProbeOrder
	// IndirectChecks is k, the members asked to ping a silent target (3).
	IndirectChecks int
	// MaxHealth bounds Lifeguard's local health multiplier (8): intervals
	// and timeouts stretch to at most (MaxHealth) times.
	MaxHealth int

	// SuspicionMult and SuspicionMinFloor set the shortest suspicion
	// timeout, reached with SuspicionConfirmations independent
	// confirmations: max(SuspicionMinFloor, SuspicionMult · log10(n+1) ·
	// GossipInterval). Gossip-driven, because the refutation must reach
	// the suspecter by gossip in that time (3 and 2 s: 2 s up to about
	// n=2000).
	SuspicionMult     float64
	SuspicionMinFloor time.Duration
	// SuspicionMaxMult: the timeout starts at SuspicionMaxMult times the
	// shortest and falls toward it as confirmations arrive (2).
	SuspicionMaxMult float64
	// SuspicionConfirmations is the number of independent suspicions that
	// bring the timeout down to its shortest (3).
	SuspicionConfirmations int

	// RetransmitMult: each event is sent at most RetransmitMult ·
	// ceil(log10(n+1)) times (4).
	RetransmitMult int
	// GossipInterval and GossipNodes: while the broadcast queue holds
	// anything, every GossipInterval (200 ms) events go to GossipNodes (3)
	// random members in datagrams of their own.
	GossipInterval time.Duration
	GossipNodes    int
	// GossipToTheDead: dead members still receive gossip for this long
	// (30 s), so one cut off by a partition learns it was declared dead.
	GossipToTheDead time.Duration

	// PushPullInterval is the base period of the anti-entropy exchange
	// with a random member (30 s), scaled as n grows by ceil(log2(n)-5)+1.
	// Between members that agree it costs two frames of about 530 bytes
	// (digest.go), whatever n.
	PushPullInterval time.Duration
	// JoinRetryMin and JoinRetryMax bound the backoff between join
	// attempts, and between seed retries of a node left alone (500 ms, 30 s).
	JoinRetryMin, JoinRetryMax time.Duration
	// JoinSyncDelay: a second push-pull with a random member this long
	// after a join (1 s) picks up the members who joined at the same time.
	JoinSyncDelay time.Duration
	// DeadReapTimeout: dead and left members are forgotten after this
	// long (60 s), so state stays bounded.
	DeadReapTimeout time.Duration

	// DatagramBudget is the largest datagram sent (wire.DatagramBudget).
	DatagramBudget int
	// QueueMaxEntries and QueueMaxBytes bound the broadcast queue (4096
	// events, 1 MiB); past them the most-sent events are dropped first.
	QueueMaxEntries int
	QueueMaxBytes   int

	// MaxGenerationAhead bounds how far a member's generation may be past
	// this node's clock (24 h). A generation is its node's start time in
	// nanoseconds (or one more than a previous life's), so a legitimate one
	// is ahead of another node's clock only by their clocks' skew. Without
	// a bound, one event naming a generation near 2^64 would keep the real
	// node, whose later generations all come from its clock, out for good.
	// Events past it are dropped and counted (Stats.DropGeneration).
	MaxGenerationAhead time.Duration
	// MaxRelays bounds the ping-reqs this node relays at once (64): each
	// is a ping sent and a record kept until its ack or timeout. A
	// ping-req past it is dropped (Stats.DropRelay); its requester counts
	// the missing nack against itself, not against the target.
	MaxRelays int
}

// ProbeOrder is how a node walks its probe targets.
type ProbeOrder uint8

const (
	// ProbeAligned (the default): every node walks the same ring of live
	// members, ordered by a hash of their ids, starting after itself and
	// advancing one step per probe slot of the shared clock; each node
	// probes at its own phase within the slot. While views agree, every
	// member is probed by exactly one node per interval, so a crash is
	// noticed within about one interval, instead of the exponential wait
	// of independent orders (1 s mean, 4.6 s at p99 with probe 1 s).
	// New members take the ring place their hash gives them.
	ProbeAligned ProbeOrder = iota
	// ProbeShuffled: each node walks its own shuffled round-robin,
	// reshuffled at each pass, new members inserted at random positions
	// (SWIM's original order).
	ProbeShuffled
)

// DefaultConfig returns the defaults (LANConfig).
func DefaultConfig() Config { return LANConfig() }

// LANConfig is for nodes in one data center: probe 1 s, timeout 500 ms,
// gossip 200 ms to 3, push-pull 30 s.
func LANConfig() Config {
	return Config{
		ProbeInterval:          time.Second,
		ProbeTimeout:           500 * time.Millisecond,
		IndirectChecks:         3,
		MaxHealth:              8,
		SuspicionMult:          2,
		SuspicionMinFloor:      1500 * time.Millisecond,
		SuspicionMaxMult:       2,
		SuspicionConfirmations: 3,
		RetransmitMult:         4,
		GossipInterval:         200 * time.Millisecond,
		GossipNodes:            3,
		GossipToTheDead:        30 * time.Second,
		PushPullInterval:       30 * time.Second,
		JoinRetryMin:           500 * time.Millisecond,
		JoinRetryMax:           30 * time.Second,
		JoinSyncDelay:          time.Second,
		DeadReapTimeout:        60 * time.Second,
		DatagramBudget:         wire.DatagramBudget,
		QueueMaxEntries:        4096,
		QueueMaxBytes:          1 << 20,
		MaxGenerationAhead:     24 * time.Hour,
		MaxRelays:              64,
	}
}

// LocalConfig is for tests and a cluster on one machine: everything five
// times faster than LANConfig (probe 200 ms, gossip 40 ms).
func LocalConfig() Config {
	c := LANConfig()
	c.ProbeInterval = 200 * time.Millisecond
	c.ProbeTimeout = 100 * time.Millisecond
	c.SuspicionMinFloor = 600 * time.Millisecond
	c.GossipInterval = 50 * time.Millisecond
	c.GossipToTheDead = 10 * time.Second
	c.PushPullInterval = 10 * time.Second
	c.JoinRetryMin = 100 * time.Millisecond
	c.JoinRetryMax = 2 * time.Second
	c.JoinSyncDelay = 300 * time.Millisecond
	c.DeadReapTimeout = 20 * time.Second
	return c
}

// ErrConfig is wrapped by every Validate error.
var ErrConfig = errors.New("swim: invalid config")

// ErrMetaTooLarge: SetMeta was given more than wire.MaxMetaLen bytes.
var ErrMetaTooLarge = errors.New("swim: metadata too large")

// withDefaults fills zero fields from LANConfig.
func (c Config) withDefaults() Config {
	d := LANConfig()
	setD := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	setI := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	setF := func(v *float64, def float64) {
		if *v == 0 {
			*v = def
		}
	}
	setD(&c.ProbeInterval, d.ProbeInterval)
	setD(&c.ProbeTimeout, d.ProbeTimeout)
	setI(&c.IndirectChecks, d.IndirectChecks)
	setI(&c.MaxHealth, d.MaxHealth)
	setF(&c.SuspicionMult, d.SuspicionMult)
	setD(&c.SuspicionMinFloor, d.SuspicionMinFloor)
	setF(&c.SuspicionMaxMult, d.SuspicionMaxMult)
	setI(&c.SuspicionConfirmations, d.SuspicionConfirmations)
	setI(&c.RetransmitMult, d.RetransmitMult)
	setD(&c.GossipInterval, d.GossipInterval)
	setI(&c.GossipNodes, d.GossipNodes)
	setD(&c.GossipToTheDead, d.GossipToTheDead)
	setD(&c.PushPullInterval, d.PushPullInterval)
	setD(&c.JoinRetryMin, d.JoinRetryMin)
	setD(&c.JoinRetryMax, d.JoinRetryMax)
	setD(&c.JoinSyncDelay, d.JoinSyncDelay)
	setD(&c.DeadReapTimeout, d.DeadReapTimeout)
	setI(&c.DatagramBudget, d.DatagramBudget)
	setI(&c.QueueMaxEntries, d.QueueMaxEntries)
	setI(&c.QueueMaxBytes, d.QueueMaxBytes)
	setD(&c.MaxGenerationAhead, d.MaxGenerationAhead)
	setI(&c.MaxRelays, d.MaxRelays)
	return c
}

// Validate reports the first field out of range (after defaults).
func (c Config) Validate() error {
	c = c.withDefaults()
	bad := func(f string, args ...any) error {
		return fmt.Errorf("%w: "+f, append([]any{ErrConfig}, args...)...)
	}
	switch {
	case c.NodeID == "" || len(c.NodeID) > wire.MaxNodeIDLen:
		return bad("NodeID must be 1..%d bytes", wire.MaxNodeIDLen)
	case c.SwimAddr == "" || len(c.SwimAddr) > wire.MaxAddrLen:
		return bad("SwimAddr must be 1..%d bytes", wire.MaxAddrLen)
	case len(c.ClientAddr) > wire.MaxAddrLen || len(c.PeerAddr) > wire.MaxAddrLen:
		return bad("addresses must be at most %d bytes", wire.MaxAddrLen)
	case len(c.Rack) > wire.MaxRackLen:
		return bad("Rack must be at most %d bytes", wire.MaxRackLen)
	case len(c.Meta) > wire.MaxMetaLen:
		return bad("Meta must be at most %d bytes", wire.MaxMetaLen)
	case c.ProbeInterval < time.Millisecond || c.ProbeTimeout < time.Millisecond:
		return bad("ProbeInterval and ProbeTimeout must be at least 1ms")
	case c.ProbeTimeout >= c.ProbeInterval:
		return bad("ProbeTimeout %v must be shorter than ProbeInterval %v", c.ProbeTimeout, c.ProbeInterval)
	case c.ProbeOrder > ProbeShuffled:
		return bad("unknown ProbeOrder %d", c.ProbeOrder)
	case c.IndirectChecks < 0 || c.IndirectChecks > 16:
		return bad("IndirectChecks must be 0..16")
	case c.MaxHealth < 1 || c.MaxHealth > 64:
		return bad("MaxHealth must be 1..64")
	case c.SuspicionMult <= 0 || c.SuspicionMaxMult < 1 || math.IsNaN(c.SuspicionMult) || math.IsNaN(c.SuspicionMaxMult):
		return bad("SuspicionMult must be > 0 and SuspicionMaxMult >= 1")
	case c.SuspicionConfirmations < 0:
		return bad("SuspicionConfirmations must be >= 0")
	case c.RetransmitMult < 1 || c.GossipNodes < 1 || c.GossipInterval < time.Millisecond:
		return bad("RetransmitMult, GossipNodes must be >= 1 and GossipInterval >= 1ms")
	case c.JoinRetryMin <= 0 || c.JoinRetryMax < c.JoinRetryMin:
		return bad("JoinRetryMin must be > 0 and <= JoinRetryMax")
	case c.DatagramBudget < 256 || c.DatagramBudget > wire.MaxDatagram:
		return bad("DatagramBudget must be 256..%d", wire.MaxDatagram)
	case c.QueueMaxEntries < 1 || c.QueueMaxBytes < c.DatagramBudget:
		return bad("QueueMaxEntries must be >= 1 and QueueMaxBytes >= DatagramBudget")
	case c.MaxGenerationAhead < 0 || c.MaxRelays < 0:
		return bad("MaxGenerationAhead and MaxRelays must not be negative")
	}
	if keys := c.keys(); len(keys) > 0 {
		if _, err := wire.NewSwimKeyring(keys); err != nil {
			return bad("Keys: %v", err)
		}
	}
	return nil
}
