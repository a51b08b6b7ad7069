// Package config holds a node's configuration: its fields, their
// defaults and the checks New runs (node.Config is this Config).
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Defaults of Config.
const (
	// DefaultShards is the shards a cluster is born with when Shards is
	// not set; its leaders split them as the nodes and the load grow
	// (DefaultSplits).
	DefaultShards = 8
	// LegacyDefaultShards is what a store born before the shard count was
	// recorded was born with, unless --shards said otherwise: the default
	// of the time.
	LegacyDefaultShards    = 1024
	DefaultReplicas        = 3
	DefaultBootstrapExpect = 1
	// MaxShards bounds Config.Shards: a shard id must fit the router's uint32.
	MaxShards = 1 << 20
	// DefaultHandoffTimeout is Config.HandoffTimeout's default.
	DefaultHandoffTimeout = 30 * time.Second
	// DefaultStoreLogSyncGap is Config.StoreLogSyncGap's default.
	DefaultStoreLogSyncGap = 4 * time.Millisecond
)

// ErrConfig is wrapped by every Config validation error.
var ErrConfig = errors.New("node: invalid config")

// Config configures a Node. Zero fields take the documented defaults.
type Config struct {
	// ID is the node id every listing shows (required, 1..64 bytes).
	ID string
	// Rack is the node's failure domain; replicas of a shard spread over
	// racks first. Empty: every such node shares one unnamed rack.
	Rack string
	// DataDir holds the store (DataDir/store) and the generation file
	// (required).
	DataDir string
	// StoreMemTableBytes is the store's Pebble memtable size; 0 means
	// shardstore.DefaultMemTableBytes. Smaller makes each write cheaper,
	// larger flushes less often (bench/README.md has the figures).
	StoreMemTableBytes uint64
	// StoreLogSyncRuntime syncs the store's log through the Go runtime's
	// system call path instead of a raw fdatasync
	// (shardstore.Config.LogSyncRuntime says what each costs).
	StoreLogSyncRuntime bool
	// StoreLogSyncGap is the least time from the end of one sync of the
	// store's log to the start of the next (shardstore.Config.LogSyncGap):
	// the raft rounds and owner batches that ask for a sync within it
	// share the next one. It holds only while the CPU is busy, where the
	// syncs it saves are worth more than the wait. 0 means
	// DefaultStoreLogSyncGap; negative syncs as soon as asked. At most
	// shardstore.MaxLogSyncGap. A node run by NewDriven has none (the gap
	// is timed on the wall clock).
	StoreLogSyncGap time.Duration
	// NetLoops serves the node's plain TCP connections on gnet event
	// loops instead of two goroutines each. Goroutines cost less per
	// metadata write, above all under a CPU limit; loops answer many
	// small plain lookups on few connections with less CPU
	// (docs/decisions/goroutines-beside-loops.md). TLS connections are
	// served by goroutines either way.
	NetLoops bool

	// ClientAddr, PeerAddr and SwimAddr are host:port; port 0 picks a free
	// port (read it back with Addrs).
	ClientAddr, PeerAddr, SwimAddr string
	// Join lists SWIM addresses of nodes to join through; the node's own is
	// skipped, so every node may be given the same list.
	Join []string
	// BootstrapExpect is the number of members SWIM must show before a
	// cluster with no shards anywhere creates its shard groups. Default 1.
	BootstrapExpect int

	// Shards is the number of metadata shards a new cluster is born with;
	// every node of a cluster must use the same value, and a node's store
	// records it at the first start and refuses another later. Set, it is
	// a fixed layout: no shard splits on its own unless Splits is set (an
	// operator's split still splits one). 0: DefaultShards with automatic
	// splits, or on a node that has started before, the count its store
	// recorded.
	Shards uint32
	// Splits sets when a shard's leader splits its shard on its own (on
	// topics, request rate, or too few shards for the members). nil:
	// DefaultSplits when Shards is 0, none when Shards is set.
	Splits *reconcile.SplitConfig
	// Replicas is the replication factor of every shard (default 3).
	Replicas int

	// ClusterID must match on every node; Secret, when set, authenticates
	// the peers' TCP connections (and clients', without client tokens) and
	// gives the SWIM key when Security has none.
	ClusterID uint64
	Secret    []byte
	// Security: TLS, client tokens and SWIM keys (node/security).
	Security security.Security

	// SwimPreset selects the SWIM timing: "lan" (default: probe 1 s) or
	// "fast" (five times faster, for a cluster on one machine and tests).
	// Swim, when non-nil, is used instead and its addresses, id and
	// generation are overwritten.
	SwimPreset string
	Swim       *swim.Config

	// RaftTickInterval is the raft clock period. Default 100 ms ("fast":
	// 50 ms).
	RaftTickInterval time.Duration
	// ReconcileInterval is how often the node compares each shard it leads
	// with the ring (replicas, leadership, topics of dead owners) and
	// retries unacknowledged OpenTopic/CloseTopic. Default 500 ms ("fast":
	// 200 ms).
	ReconcileInterval time.Duration
	// MetadataSyncInterval bounds the staleness of the cluster metadata
	// (membership, ring, shard-leader table) and of the routing cache: at
	// least this often the node pulls every kind from a random live peer,
	// even when no newer version was announced (announcements are gossip
	// and may be lost), and it replaces its routing cache. Default 10 s
	// ("fast": 2 s).
	MetadataSyncInterval time.Duration
	// MetadataPullTimeout is how long a pull may stay unanswered (or
	// answered with less than the announced version) before the node asks
	// another peer. Default 1 s ("fast": 500 ms).
	MetadataPullTimeout time.Duration
	// LeaseDuration is how long a lease lets an owner serve its topics,
	// counted on the owner's clock from when it asked. A topic whose owner
	// is cut off or paused is served by nobody for up to about this long
	// (plus NewLeaderWait when its shard's leader died too, see
	// docs/leases.md); a kill -9 of an owner costs the failure detection or
	// this, whichever is longer. Default 3 s ("fast": 800 ms).
	LeaseDuration time.Duration
	// LeaseRenewInterval is how often an owner renews its leases (one
	// message per leader node, whatever the number of shards and topics)
	// and a leader asks its shards' voters to vouch for it, and how often
	// an unacknowledged OpenTopic or CloseTopic is sent again. At most a
	// third of LeaseDuration. Default 500 ms ("fast": 200 ms), or a third
	// of LeaseDuration if that is less.
	LeaseRenewInterval time.Duration
	// MaxClockDrift bounds how far the rate of any node's monotonic clock
	// may be from true time, as a fraction; the lease waits are stretched
	// by it (docs/leases.md). Default 0.01 (1%, far above the drift of a
	// real oscillator); at most 0.1.
	MaxClockDrift float64
	// MaxConfChanges bounds the raft configuration changes this node runs
	// at once over all the shards it leads (default 4).
	MaxConfChanges int
	// OwnershipWindow bounds the OpenTopic and CloseTopic messages this
	// node, as a shard leader, has sent to one node and not yet seen
	// acknowledged; more wait their turn (default 1024).
	OwnershipWindow int
	// MaxRequests bounds the client and forwarded requests served at once;
	// beyond it requests are answered Unavailable (default 16384).
	MaxRequests int
	// MaxRequestBytes bounds the bytes held by the requests not yet
	// answered (those waiting on raft or on another node included),
	// decompressed payloads included; beyond it requests are answered
	// Unavailable (default 256 MiB, at least security.MinRequestBytes).
	MaxRequestBytes int64
	// MaxFetchBytes caps the record bytes one Fetch returns, whatever it
	// asks for (default 1 MiB, at most MaxFetchBytesLimit).
	MaxFetchBytes int
	// HandoffTimeout bounds how long a topic's new owner, after a move
	// with the previous owner alive, pulls that owner's records before it
	// serves the topic anyway without the rest; a previous owner SWIM
	// declares dead ends the pull at once (node/records). Default 30 s.
	HandoffTimeout time.Duration
	// OnHandoff, if set, is told when a record pull of a topic this node
	// newly holds ends: the topic, the epoch it holds, the previous owner
	// pulled from, and whether every record of that owner's log came over
	// (false: it was silent, died, stopped answering, the timeout ran out,
	// or the topic moved on; what was copied is served). It runs on the
	// node's own work and must not block.
	OnHandoff func(topic string, epoch uint64, prev string, complete bool)
	// OnWriteApplied, if set, is told of each client write (a write with
	// a session) a replica of this node answers for the first time: the
	// shard, the raft index, the session and the answer. Every replica of
	// a shard tells of the same index. For tests that check what applied;
	// it runs on the raft worker and must not block.
	OnWriteApplied func(shard, index uint64, w shardsm.AnsweredWrite)
	// RequestTimeout bounds one request's proposal or read (default 5 s).
	RequestTimeout time.Duration
	// ChangeLogLen is how many changes of topic assignments each shard's
	// replica keeps for watchers, on disk and in memory, at least (when
	// there were that many) and, between trims, up to an eighth more (default
	// security.DefaultChangeLogLen, at most security.MaxChangeLogLen). A watcher
	// that falls further behind is told to list again.
	ChangeLogLen int
	// MaxWatchers bounds the watches held open on this node while nothing
	// changed; beyond it a watch is answered at once (default
	// security.DefaultMaxWatchers).
	MaxWatchers int
	// RouteCacheEntries bounds the routing cache (topic → owner) that
	// answers plain lookups for shards this node hosts no replica of;
	// 0 means router.DefaultCacheCapacity. The cache is allocated whole,
	// 128 bytes per entry.
	RouteCacheEntries int

	// Logger; default slog.Default().
	Logger *slog.Logger

	// shardsDefaulted: Fill gave Shards its default (ShardsDefaulted).
	shardsDefaulted bool
}

// Fill checks c and sets the defaults of its zero fields; the error wraps
// ErrConfig.
func (c *Config) Fill() error {
	if c.ID == "" || len(c.ID) > wire.MaxNodeIDLen {
		return fmt.Errorf("%w: id must be 1..%d bytes", ErrConfig, wire.MaxNodeIDLen)
	}
	if len(c.Rack) > wire.MaxRackLen {
		return fmt.Errorf("%w: rack longer than %d bytes", ErrConfig, wire.MaxRackLen)
	}
	if c.DataDir == "" {
		return fmt.Errorf("%w: data dir required", ErrConfig)
	}
	for name, a := range map[string]string{"client": c.ClientAddr, "peer": c.PeerAddr, "swim": c.SwimAddr} {
		if a == "" || len(a) > wire.MaxAddrLen {
			return fmt.Errorf("%w: %s address required (host:port, at most %d bytes)", ErrConfig, name, wire.MaxAddrLen)
		}
	}
	if c.StoreLogSyncGap == 0 {
		c.StoreLogSyncGap = DefaultStoreLogSyncGap
	}
	if c.StoreLogSyncGap > shardstore.MaxLogSyncGap {
		return fmt.Errorf("%w: store log sync gap %v above %v", ErrConfig, c.StoreLogSyncGap, shardstore.MaxLogSyncGap)
	}
	if c.BootstrapExpect == 0 {
		c.BootstrapExpect = DefaultBootstrapExpect
	}
	if c.BootstrapExpect < 0 {
		return fmt.Errorf("%w: bootstrap-expect %d", ErrConfig, c.BootstrapExpect)
	}
	if c.Shards == 0 {
		c.Shards, c.shardsDefaulted = DefaultShards, true
	}
	if c.Shards > MaxShards {
		return fmt.Errorf("%w: shards %d above %d", ErrConfig, c.Shards, MaxShards)
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Replicas < 1 || c.Replicas > wire.MaxReplicas {
		return fmt.Errorf("%w: replicas %d not in 1..%d", ErrConfig, c.Replicas, wire.MaxReplicas)
	}
	fast := false
	switch c.SwimPreset {
	case "", "lan":
	case "fast":
		fast = true
	default:
		return fmt.Errorf("%w: swim preset %q (want lan or fast)", ErrConfig, c.SwimPreset)
	}
	// byPreset is lan's default or fast's.
	byPreset := func(lan, fst time.Duration) time.Duration {
		if fast {
			return fst
		}
		return lan
	}
	for _, d := range []struct {
		field    *time.Duration
		lan, fst time.Duration
	}{
		{&c.RaftTickInterval, 100 * time.Millisecond, 50 * time.Millisecond},
		{&c.ReconcileInterval, 500 * time.Millisecond, 200 * time.Millisecond},
		{&c.MetadataSyncInterval, 10 * time.Second, 2 * time.Second},
		{&c.MetadataPullTimeout, time.Second, 500 * time.Millisecond},
		{&c.LeaseDuration, 3 * time.Second, 800 * time.Millisecond},
	} {
		if *d.field == 0 {
			*d.field = byPreset(d.lan, d.fst)
		}
	}
	if c.Splits == nil && c.shardsDefaulted {
		sc := DefaultSplits(fast)
		c.Splits = &sc
	}
	if c.Splits != nil {
		if err := c.Splits.Validate(); err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	if c.LeaseRenewInterval == 0 {
		c.LeaseRenewInterval = min(byPreset(500*time.Millisecond, 200*time.Millisecond), c.LeaseDuration/3)
	}
	if c.MaxClockDrift == 0 {
		c.MaxClockDrift = 0.01
	}
	if c.LeaseDuration < 0 || c.LeaseRenewInterval <= 0 || c.LeaseRenewInterval*3 > c.LeaseDuration {
		return fmt.Errorf("%w: lease renew interval %v must be positive and at most a third of the lease duration %v", ErrConfig, c.LeaseRenewInterval, c.LeaseDuration)
	}
	if c.MaxClockDrift < 0 || c.MaxClockDrift > 0.1 {
		return fmt.Errorf("%w: max clock drift %v not in [0, 0.1]", ErrConfig, c.MaxClockDrift)
	}
	if c.MaxConfChanges == 0 {
		c.MaxConfChanges = 4
	}
	if c.OwnershipWindow == 0 {
		c.OwnershipWindow = duty.DefaultWindow
	}
	if c.OwnershipWindow < 0 {
		return fmt.Errorf("%w: ownership window %d is negative", ErrConfig, c.OwnershipWindow)
	}
	if c.MaxRequests == 0 {
		c.MaxRequests = 16384
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = 5 * time.Second
	}
	if c.HandoffTimeout == 0 {
		c.HandoffTimeout = DefaultHandoffTimeout
	}
	if c.RaftTickInterval < 0 || c.ReconcileInterval < 0 || c.MetadataSyncInterval < 0 || c.MetadataPullTimeout < 0 || c.MaxConfChanges < 0 || c.MaxRequests < 0 || c.RequestTimeout < 0 || c.HandoffTimeout < 0 {
		return fmt.Errorf("%w: negative interval or limit", ErrConfig)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c.fillSecurity()
}

// DefaultSplits is Config.Splits's default for a cluster born with the
// default shard count: a shard splits above 10,000 topics, 4 MiB (about
// 50,000 records of names of 30 bytes) or 2,000 commands a second held
// for 10 s (2 s with the "fast" preset), and
// halves every shard until there are at least two per member; a leader starts
// at most one split a second (250 ms), and none past 4,096 shards.
func DefaultSplits(fast bool) reconcile.SplitConfig {
	sc := reconcile.SplitConfig{Topics: 10_000, Bytes: 4 << 20, Rate: 2_000, Window: 10 * time.Second, PerMember: 2, Every: time.Second, MaxShards: 4096}
	if fast {
		sc.Window, sc.Every = 2*time.Second, 250*time.Millisecond
	}
	return sc
}

// ShardsDefaulted reports whether Fill gave Shards its default: the node
// then takes the count its store recorded (AdoptShards).
func (c *Config) ShardsDefaulted() bool { return c.shardsDefaulted }

// AdoptShards settles Shards against the count a node's store recorded
// (recorded false: none yet) and whether the store's cluster was born: a
// recorded count wins over the default and must equal a count set; a
// store born before counts were recorded was born with
// LegacyDefaultShards unless the count is set. It returns the count to
// record when none was.
func (c *Config) AdoptShards(stored uint32, recorded, born bool) (record bool, err error) {
	switch {
	case recorded && c.shardsDefaulted:
		c.Shards = stored
	case recorded && stored != c.Shards:
		return false, fmt.Errorf("%w: the data dir's cluster was born with %d shards, not %d: start the node with --shards %d or none", ErrConfig, stored, c.Shards, stored)
	case !recorded && born && c.shardsDefaulted:
		c.Shards = LegacyDefaultShards
	}
	return !recorded, nil
}

// LeaseConfirmFresh is how old a leader's proof of its leadership may be
// for its grants to rely on it: two renewal intervals, so that one lost
// vouch round does not stop the grants.
func (c *Config) LeaseConfirmFresh() time.Duration { return 2 * c.LeaseRenewInterval }

// SwimConfig is the SWIM timing c selects (Swim, or SwimPreset's).
func (c *Config) SwimConfig() swim.Config {
	var sc swim.Config
	switch {
	case c.Swim != nil:
		sc = *c.Swim
	case c.SwimPreset == "fast":
		sc = swim.LocalConfig()
	default:
		sc = swim.LANConfig()
	}
	return sc
}

// fillSecurity checks Security and the request limits (security.Limits),
// and sets their defaults.
func (c *Config) fillSecurity() error {
	if err := security.Check(&c.Security); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	l := security.Limits{MaxRequestBytes: c.MaxRequestBytes, MaxFetchBytes: c.MaxFetchBytes, ChangeLogLen: c.ChangeLogLen, MaxWatchers: c.MaxWatchers}
	if err := l.Fill(); err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.MaxRequestBytes, c.MaxFetchBytes, c.ChangeLogLen, c.MaxWatchers = l.MaxRequestBytes, l.MaxFetchBytes, l.ChangeLogLen, l.MaxWatchers
	return nil
}
