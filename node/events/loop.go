package events

import (
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"go.etcd.io/raft/v3/raftpb"
)

// Env is what a Loop touches of the node. Its methods are called from the
// events task's passes, but Now, Kick and NameOf, which the goroutines
// that report (SWIM's, the raft host's workers) call too.
type Env interface {
	// Now is the node's clock.
	Now() time.Time
	// Kick runs the events task soon.
	Kick()
	// NameOf returns the node id of a raft id.
	NameOf(raftID uint64) (string, bool)
	// Host is the node's raft host.
	Host() Host
	// RemovePeer forgets a member's peer address and connection.
	RemovePeer(member string)
	// Removed reports whether the node's view counts member removed for
	// good.
	Removed(member string) bool
	// AnnounceLeader says through SWIM that this node leads shard at
	// term.
	AnnounceLeader(shard, term uint64)
	// Rebuild rebuilds the node's view from SWIM's members.
	Rebuild()
	// Announced tells the metadata sync that from holds version of the
	// metadata of kind (a SWIM metadata version event).
	Announced(kind uint64, from string, version uint64)
	// SyncTick ticks the metadata sync with the node's view.
	SyncTick()
	// Birth births the cluster, or joins it, when it is time.
	Birth()
	// Ready marks the node ready when it is.
	Ready()
}

// Host is what a Loop tells the node's raft host (*raftmux.Host) of the
// members' liveness.
type Host interface {
	NodeSuspect(raftID uint64)
	NodeDead(raftID uint64)
	NodeAlive(raftID uint64)
}

// Lease is what a Loop tells the node's lease room (*lease.Agent) of the
// replicas' leaders, terms and configurations.
type Lease interface {
	// Follows records the leader and term a replica of shard follows.
	Follows(shard, lead, term uint64)
	// Leadership records that this node won or lost shard's leadership
	// at term.
	Leadership(shard, term uint64, won bool)
	// RecheckSettling looks again at the answers waiting to settle.
	RecheckSettling()
	// TakeUpLater has a leadership won at term taken up by a later pass.
	TakeUpLater(shard, term uint64)
	// ConfState records the voters of a replica's configuration.
	ConfState(shard uint64, voters, outgoing []uint64)
}

// Config configures a Loop.
type Config struct {
	// Self is this node's id; RaftID maps a node id to its raft id.
	Self   string
	RaftID func(node string) uint64
	// Shards is the number of shards the cluster was born with (its shard
	// space, router.ShardSpace): reports of shards outside the space are
	// ignored, those of a split's children taken.
	Shards uint32
	// Interval is the time between two passes without an event (the
	// reconcile interval).
	Interval time.Duration
	// Leaders is the node's shard-leader table, filled from the leader
	// changes of its replicas and SWIM's ShardLeader events.
	Leaders *router.LeaderTable
	// Lease is the node's lease room.
	Lease Lease
	// Routes is the node's routing cache, emptied every RoutesFor so that
	// no cached route is older than that (the metadata sync interval).
	Routes    Routes
	RoutesFor time.Duration
	// Tick is the raft clock's period, the unit of how long a replica
	// may know no leader and still answer plain lookups.
	Tick   time.Duration
	Logger *slog.Logger
	Env    Env
}

// Routes is the node's routing cache (*router.Cache), as a Loop empties
// it.
type Routes interface {
	Clear()
}

// Loop is the node's event loop (see the package doc). Safe for
// concurrent use; Run is called by one task at a time.
type Loop struct {
	cfg  Config
	env  Env
	log  *slog.Logger
	self uint64 // Self's raft id

	q queue
	// led: shards whose local replica leads (nLed of them); leaderless:
	// per shard, since when (unix ns, the node's clock) the local replica
	// has known no leader, 0 while it knows one. Both cover every id of
	// the space (router.ShardSpace.Capacity).
	space      router.ShardSpace
	led        []atomic.Bool
	nLed       atomic.Int64
	leaderless []atomic.Int64
	// outside: per shard, whether the local replica's configuration names
	// this node neither a voter nor a learner (it applied its own
	// removal, or holds no configuration yet).
	outside []atomic.Bool
	// shardEvents counts leadership and configuration changes of the
	// replicas.
	shardEvents atomic.Uint64
	// quietTicks counts passes without an event (the events task's).
	quietTicks int
	// shards is the shard map the view was last rebuilt for: a split
	// places the halves anew.
	shards *router.ShardMap
	// routesAt: when the routing cache was last emptied (the events
	// task's).
	routesAt time.Time
}

// New returns a Loop that has seen nothing yet.
func New(cfg Config) (*Loop, error) {
	if cfg.Self == "" || cfg.RaftID == nil || cfg.Shards == 0 || cfg.Interval <= 0 || cfg.Leaders == nil ||
		cfg.Lease == nil || cfg.Routes == nil || cfg.Env == nil {
		return nil, errors.New("events: Self, RaftID, Shards, Interval, Leaders, Lease, Routes and Env required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &Loop{
		cfg:        cfg,
		env:        cfg.Env,
		log:        log,
		self:       cfg.RaftID(cfg.Self),
		space:      router.ShardSpace(cfg.Shards),
		led:        make([]atomic.Bool, router.ShardSpace(cfg.Shards).Capacity()),
		leaderless: make([]atomic.Int64, router.ShardSpace(cfg.Shards).Capacity()),
		outside:    make([]atomic.Bool, router.ShardSpace(cfg.Shards).Capacity()),
		shards:     cfg.Leaders.Map(),
	}
	l.q.wake = l.env.Kick
	return l, nil
}

// Push takes a SWIM event; it is dropped once too many wait, or after
// Close.
func (l *Loop) Push(e swim.Event) { l.q.push(e) }

// Close drops every event taken from now on.
func (l *Loop) Close() { l.q.close() }

// Len is the number of events waiting.
func (l *Loop) Len() int { return l.q.len() }

// Leads reports whether the node's replica of shard leads its group, as
// raft last reported it.
func (l *Loop) Leads(shard uint64) bool {
	return shard < uint64(len(l.led)) && l.led[shard].Load()
}

// Deposed records that the node's replica of shard no longer leads (a
// proposal found it deposed), until raft reports a leader again.
func (l *Loop) Deposed(shard uint64) {
	if shard < uint64(len(l.led)) {
		l.setLed(shard, false)
	}
}

// setLed records whether the replica of shard leads, keeping the count.
func (l *Loop) setLed(shard uint64, led bool) {
	if l.led[shard].Swap(led) != led {
		if led {
			l.nLed.Add(1)
		} else {
			l.nLed.Add(-1)
		}
	}
}

// Led is the number of shards the node's replicas lead.
func (l *Loop) Led() int { return int(l.nLed.Load()) }

// LeaderlessSince returns since when (unix ns on the node's clock) the
// node's replica of shard has known no leader; 0 while it knows one.
func (l *Loop) LeaderlessSince(shard uint64) int64 {
	if shard >= uint64(len(l.leaderless)) {
		return 0
	}
	return l.leaderless[shard].Load()
}

// leaderlessLookups: how long a replica may know no leader and still
// answer plain lookups from its state, in raft ticks (two election
// timeouts).
const leaderlessLookups = 20

// AnswersLocally reports whether plain lookups of shard may be answered
// from this node's replica: unless it has known no leader for longer than
// leaderlessLookups ticks, or its configuration no longer names this
// node. A replica cut off from its group, or one its group no longer
// sends to, keeps a state that may be far behind: the lookup goes to the
// cache or the leader instead. A replica that applied its own removal
// does not campaign, so raft never clears the leader it names.
func (l *Loop) AnswersLocally(shard uint64) bool {
	if shard < uint64(len(l.outside)) && l.outside[shard].Load() {
		return false
	}
	since := l.LeaderlessSince(shard)
	return since == 0 || l.env.Now().UnixNano()-since <= int64(leaderlessLookups*l.cfg.Tick)
}

// ShardEvents counts the leadership and configuration changes of the
// node's replicas: whoever read the count before looking at leaderships
// sees a change made since in a count that differs.
func (l *Loop) ShardEvents() uint64 { return l.shardEvents.Load() }

// LeaderChange takes a leader change of one of the node's replicas
// (raftmux.Config.OnLeaderChange): it is recorded, then handed to the
// events task. The replica's leader and term are recorded before raft
// sends anything of the round that changed them (a vote above all),
// which is what makes a vouch for a leader at a term safe
// (docs/leases.md).
func (l *Loop) LeaderChange(c raftmux.LeaderChange) {
	if !l.space.Valid(c.Shard) {
		return
	}
	lease := l.cfg.Lease
	lease.Follows(c.Shard, c.Leader, c.Term)
	l.setLed(c.Shard, c.Leader == l.self)
	if c.Leader == 0 {
		l.leaderless[c.Shard].CompareAndSwap(0, l.env.Now().UnixNano())
	} else {
		l.leaderless[c.Shard].Store(0)
	}
	lease.Leadership(c.Shard, c.Term, c.Leader == l.self)
	// Counted after the change: whoever read the count before looking at
	// leaderships sees this change, or a count that differs next time.
	l.shardEvents.Add(1)
	if c.Leader != l.self {
		lease.RecheckSettling()
	}
	if name, ok := l.env.NameOf(c.Leader); ok && c.Leader != 0 {
		_, _ = l.cfg.Leaders.Update(uint32(c.Shard), name, c.Term)
	}
	l.q.pushLeader(c)
}

// ConfState takes the configuration of one of the node's replicas
// (raftmux.Config.OnConfState), whose voters vouch for its leader.
func (l *Loop) ConfState(shard uint64, cs raftpb.ConfState) {
	if !l.space.Valid(shard) {
		return
	}
	l.cfg.Lease.ConfState(shard, cs.Voters, cs.VotersOutgoing)
	in := slices.Contains(cs.Voters, l.self) || slices.Contains(cs.Learners, l.self) ||
		slices.Contains(cs.VotersOutgoing, l.self) || slices.Contains(cs.LearnersNext, l.self)
	l.outside[shard].Store(!in)
	l.shardEvents.Add(1)
}

// viewRefreshTicks: quiet passes between two reads of SWIM's members
// without an event (5 s "lan", 2 s "fast").
const viewRefreshTicks = 10

// Run is the events task's work, one pass: it applies membership events
// to the view and raft, fills the shard-leader table, spreads this node's
// leaderships through SWIM, ticks the metadata sync, and looks at birth
// and readiness. It is next due one interval after now.
func (l *Loop) Run(now time.Time) time.Time {
	l.pass()
	return now.Add(l.cfg.Interval)
}

func (l *Loop) pass() {
	evs, leads := l.q.take()
	membership := false
	var versions []swim.Event
	for _, e := range evs {
		switch e.Kind {
		case swim.EventShardLeader:
			if l.space.Valid(e.Shard) && e.Leader != "" {
				_, _ = l.cfg.Leaders.Update(uint32(e.Shard), e.Leader, e.Term)
			}
		case swim.EventMetadataVersion:
			versions = append(versions, e)
		default:
			membership = true
			l.liveness(e)
		}
	}
	for _, c := range leads {
		if c.Leader == l.self {
			l.env.AnnounceLeader(c.Shard, c.Term)
			l.cfg.Lease.TakeUpLater(c.Shard, c.Term)
		}
	}
	if !membership && len(evs) == 0 {
		// A quiet tick: SWIM's events carry every change, so the view is
		// read again only now and then, in case one was missed (reading
		// it copies and sorts every member).
		l.quietTicks++
		membership = l.quietTicks%viewRefreshTicks == 0
	}
	if sm := l.cfg.Leaders.Map(); sm != l.shards {
		l.shards, membership = sm, true
	}
	if membership {
		l.env.Rebuild()
	}
	// After the view is rebuilt, so that a change this node learned by
	// SWIM in the same round counts before comparing versions.
	for _, e := range versions {
		l.env.Announced(e.MetaKind, e.Leader, e.Version)
	}
	l.env.SyncTick()
	l.rotateRoutes()
	l.env.Birth()
	l.env.Ready()
}

// rotateRoutes empties the routing cache once it is older than RoutesFor:
// a cached route is never served longer than that after it was learned,
// which bounds the staleness of plain lookups on nodes that host no
// replica of the topic's shard. The cache is emptied in place: a new one
// would cost a table of the node's RouteCacheEntries×128 bytes to allocate, fault in
// and scan, every interval.
func (l *Loop) rotateRoutes() {
	if l.routesAt.IsZero() {
		l.routesAt = l.env.Now()
		return
	}
	if l.env.Now().Sub(l.routesAt) < l.cfg.RoutesFor {
		return
	}
	l.cfg.Routes.Clear()
	l.routesAt = l.env.Now()
}

// liveness tells raft what a membership event says of a member.
func (l *Loop) liveness(e swim.Event) {
	if e.Member.ID == l.cfg.Self {
		// Declared dead meanwhile (EventRejoined), this node's topics may
		// have moved: the leases say which it still owns.
		return
	}
	rid := l.cfg.RaftID(e.Member.ID)
	if l.env.Removed(e.Member.ID) {
		return // out for good, whatever SWIM says
	}
	switch e.Kind {
	case swim.EventSuspect:
		l.env.Host().NodeSuspect(rid)
	case swim.EventDead, swim.EventLeft:
		l.env.Host().NodeDead(rid)
		l.env.RemovePeer(e.Member.ID)
		l.log.Info("member gone", "member", e.Member.ID, "state", e.Member.State.String())
	case swim.EventJoined, swim.EventAliveAgain, swim.EventUpdated:
		l.env.Host().NodeAlive(rid)
	}
}
