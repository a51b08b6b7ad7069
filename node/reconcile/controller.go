package reconcile

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/router"
)

// Env is what the Controller reads of the rest of the node. Its methods
// are called without the Controller's lock held.
type Env interface {
	// NameOf returns the node id of a raft replica id, if the node knows
	// it.
	NameOf(raftID uint64) (string, bool)
	// HoldsBack reports whether this node, leading shard, holds back an
	// open it owes there (duty.Leader.HoldsBack).
	HoldsBack(shard uint64) bool
}

// DefaultMaxTransfers is the node's Config.MaxTransfers: the leaderships
// one pass of the shard manager hands to their preferred replicas. After
// a cold start of 10,000 shards on 3 nodes about 6,700 of them move,
// which at 4 a pass took minutes.
const DefaultMaxTransfers = 64

// Config configures a Controller.
type Config struct {
	// Self is this node's id. Required.
	Self string
	// Shards is the number of shards; replicas of higher shards are left
	// alone. Required.
	Shards uint32
	// Replicas is the replication factor: a group loses a voter the ring
	// no longer wants only while it has more. Required; the node's
	// default is 3.
	Replicas int
	// MaxConfChanges bounds the changes one pass starts over all the
	// shards this node leads. Required; the node's default is 4.
	MaxConfChanges int
	// MaxTransfers bounds, beside them, the leaderships one pass hands
	// over: a transfer changes no configuration and costs its group one
	// election, and after a cold start of thousands of shards most of them
	// are led by a node the ring does not prefer. Required; the node's
	// default is DefaultMaxTransfers.
	MaxTransfers int
	// BootstrapExpect is how many live members a fresh cluster waits for
	// before it is born. Required; the node's default is 1.
	BootstrapExpect int
	// Interval is the reconcile interval, the unit of the passes' pacing
	// (settling, idle passes, the owners' cadence, strays' grace).
	// Required; the node's default is 500 ms ("fast": 200 ms).
	Interval time.Duration
	// Lease is the lease length: an owner that has asked this node for no
	// lease on a shard it leads for silentOwnerLeases of them is silent.
	// Required; the node's default is 3 s ("fast": 800 ms).
	Lease time.Duration
	// RaftID maps a node id to its raft replica id. Required.
	RaftID func(id string) uint64
	// Leaders is the node's shard-leader table: a stray is checked with the
	// leader it names. Required.
	Leaders *router.LeaderTable
	// Env is the rest of the node. Required.
	Env Env
}

// Controller is the local controller of the shards this node hosts and
// leads: it decides the changes of their groups, whose topics move off
// their owners, which of its replicas are strays, and the cluster's birth.
// It does none of it: each decision is returned to the node, which makes
// it and reports back. Safe for concurrent use; one lock guards its state.
type Controller struct {
	cfg  Config
	env  Env
	self uint64 // Self's raft id

	mu sync.Mutex
	// The shard manager (manage.go).
	passing    bool // a pass is in flight
	stepsLeft  int  // its steps not yet answered
	idle       idleMemo
	catchingUp map[uint64]time.Time         // node → when it was given a replica
	pins       map[uint64]*router.Placement // shard → placement it was pinned under
	// learners: when each learner of a led shard was first seen waiting
	// for its promotion; shunned: when one that never caught up was
	// removed (learnerGiveUp).
	learners map[shardNode]time.Time
	shunned  map[shardNode]time.Time
	// The owners' look (owners.go).
	owners      ownersState
	reassigning map[uint64]int // shard → proposals of moves in flight
	// Strays (strays.go); strayList is the confirmed ones, for Stats.
	strays     map[uint64]*stray
	strayRound int
	strayList  atomic.Pointer[[]uint64]
	// Birth (birth.go).
	birth birthState
}

// New returns a Controller that has seen nothing yet.
func New(cfg Config) (*Controller, error) {
	switch {
	case cfg.Self == "":
		return nil, errors.New("reconcile: Self required")
	case cfg.Shards == 0, cfg.Replicas < 1, cfg.MaxConfChanges < 1, cfg.MaxTransfers < 1, cfg.BootstrapExpect < 1:
		return nil, fmt.Errorf("reconcile: Shards %d, Replicas %d, MaxConfChanges %d, MaxTransfers %d and BootstrapExpect %d must be positive",
			cfg.Shards, cfg.Replicas, cfg.MaxConfChanges, cfg.MaxTransfers, cfg.BootstrapExpect)
	case cfg.Interval <= 0, cfg.Lease <= 0:
		return nil, fmt.Errorf("reconcile: Interval %v and Lease %v must be positive", cfg.Interval, cfg.Lease)
	case cfg.RaftID == nil, cfg.Leaders == nil, cfg.Env == nil:
		return nil, errors.New("reconcile: RaftID, Leaders and Env required")
	}
	return &Controller{
		cfg:         cfg,
		env:         cfg.Env,
		self:        cfg.RaftID(cfg.Self),
		catchingUp:  make(map[uint64]time.Time),
		pins:        make(map[uint64]*router.Placement),
		learners:    make(map[shardNode]time.Time),
		shunned:     make(map[shardNode]time.Time),
		reassigning: make(map[uint64]int),
		strays:      make(map[uint64]*stray),
	}, nil
}
