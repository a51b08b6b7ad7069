package lease

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// Task names one of the node's tasks that run an Agent's work: the node
// runs each whenever it is kicked (Env.Kick) or its time comes, never
// twice at once.
type Task uint8

const (
	// Due runs RunDue: the ownership messages due.
	Due Task = iota
	// Rounds runs RunRounds: this node's lease rounds and the rounds peers
	// sent.
	Rounds
	// Replies runs RunReplies: the replies to this node's rounds.
	Replies
)

// Reason says why the topics an announcement drops were dropped.
type Reason uint8

const (
	// Closed: a CloseTopic from the topic's shard leader.
	Closed Reason = iota + 1
	// Superseded: the epoch ended without a close, by a lease answer or
	// an OpenTopic at a later epoch.
	Superseded
)

// Env is what an Agent touches of the node.
type Env interface {
	// Now is the node's clock.
	Now() time.Time
	// After runs f after d on the node's clock; stop cancels it and
	// reports whether it did.
	After(d time.Duration, f func()) (stop func() bool)
	// Spawn runs f soon, off the caller's goroutine, unless the node is
	// closing; it reports whether f will run.
	Spawn(f func()) bool
	// Kick runs task t soon.
	Kick(t Task)
	// Send queues a frame for a peer; an error means it was not sent.
	Send(peer string, frame []byte) error
	// Born reports whether the node's cluster is born.
	Born() bool
	// NameOf returns the node id of a raft id.
	NameOf(id uint64) (string, bool)
	// Gone returns, from one read of the node's view, whether a node is
	// gone: a leader's messages to it are dropped.
	Gone() func(node string) bool
	// PrevSilent reports whether the previous owner an OpenTopic of shard
	// names is asked only briefly for its records
	// (wire.OpenTopic.PrevSilent).
	PrevSilent(shard uint64, prev string) bool
	// ReadIndex asks raft for a read index of shard and calls done once
	// it completed or failed.
	ReadIndex(shard uint64, done func(error))
	// Submit hands op to the raft host; done gets its result.
	Submit(op raftmux.Op, done func(raftmux.Result))
	// ShardEvents counts the leadership and configuration changes of the
	// node's replicas.
	ShardEvents() uint64
	// Announce tells the node's embedder of durable ownership changes;
	// why is the reason of the drops among them. It is called in the
	// order the changes were made.
	Announce(changes []ownership.Change, why Reason)
}

// Store is what an Agent reads and writes of the node's store
// (*shardstore.Store): the node slot's owned topics and epoch floors.
type Store interface {
	NewBatch() *shardstore.Batch
	TopicFloor(topic string) (uint64, error)
	OwnedTopics(fn func(topic string, t shardstore.OwnedTopic) bool) error
}

// Machine is what an Agent reads of the shards' state machine
// (*shardsm.Machine): the shards' states, their lease bookkeeping and the
// grants computed against them.
type Machine interface {
	With(shard uint64, fn func(st *meta.State)) error
	WithShard(shard uint64, fn func(sh *shardsm.Shard)) error
	WithLoadedShard(shard uint64, fn func(sh *shardsm.Shard)) bool
	Grant(shard uint64, owner string, digest uint64, clock func() time.Time, may func(now time.Time) (uint64, bool)) (g wire.LeaseGrant, exact, ok bool)
	GrantIfUnchanged(owner string, version uint64, now time.Time) bool
	StateVersion() uint64
	// Ended reports whether the replica here of shard applied its split:
	// it then vouches for no leader of the shard.
	Ended(shard uint64) bool
}

// Records is what an Agent tells the records room (*records.Keeper) as
// ownership messages apply: a topic newly held after a move pulls the
// previous owner's records, and a revoked topic's records are deleted.
type Records interface {
	MarkPull(topic string, epoch uint64) bool
	UnmarkPull(topic string, epoch uint64)
	StartPull(topic string, epoch uint64, prev string, silent bool)
	DeleteRevoked(topic []byte, epoch uint64, done func(deleted bool))
}

// Config configures an Agent.
type Config struct {
	// Self is this node's id; RaftID maps a node id to its raft id.
	Self   string
	RaftID func(node string) uint64
	// Shards is the number of shards the cluster was born with: ids of its
	// shard space (router.ShardSpace), a split's children among them, are
	// taken, others ignored.
	Shards uint32
	// Generation is this life's generation: the rounds are numbered apart
	// from every recent life's.
	Generation uint64
	// Lease is a lease's length, RenewInterval the time between two full
	// rounds; ConfirmFresh is how old a leader's proof of its leadership
	// may be when it grants, MaxDrift the clock drift allowed for.
	Lease, RenewInterval, ConfirmFresh time.Duration
	MaxDrift                           float64
	// Window bounds the ownership messages sent to one node and not yet
	// acknowledged (duty.Config.Window).
	Window int
	// Leaders is the node's shard-leader table, read for the leaders to
	// ask and the hints to give, and filled from refusals.
	Leaders *router.LeaderTable
	// Store holds the topics this node owns and their floors.
	Store Store
	// Machine is the state of the shards this node hosts.
	Machine Machine
	// Records is told when a topic's records move or go.
	Records Records
	// RoundTimes times the round trips of this node's rounds;
	// CommitTimes its proposals, from proposal to apply.
	RoundTimes, CommitTimes *histogram.Histogram
	Logger                  *slog.Logger
	Env                     Env
}

// Agent is a node's part in the ownership protocol, as a topic owner and
// as a shard leader.
type Agent struct {
	cfg   Config
	env   Env
	log   *slog.Logger
	space router.ShardSpace // of cfg.Shards

	// own: the topics this node holds and its leases (under ownMu);
	// ownWrite orders ownership changes with their durable writes and
	// their announcements.
	own      *ownership.Holder
	ownMu    sync.RWMutex
	ownWrite sync.Mutex
	// inbox: OpenTopic and CloseTopic messages waiting for the next
	// synced batch (messages.go).
	inbox inbox

	// duty: what this node owes as a shard leader (under dutyMu), and
	// leaderDue the leaderships won and not yet taken up.
	duty      *duty.Leader
	dutyMu    sync.Mutex
	leaderDue map[uint64]bool
	takingUp  map[uint64]bool // leaderships being taken up (under dutyMu)
	settling  []*settleWait   // answers waiting for old owners' fences (under dutyMu)

	// replicaLead: every hosted replica's leader and term as raft last
	// reported them, for vouching.
	leadMu      sync.Mutex
	replicaLead map[uint64]raftLead

	roundsIn  frameQueue    // rounds from peers (Rounds task)
	repliesIn frameQueue    // replies to this node's rounds (Replies task)
	want      atomic.Bool   // a fresh lease round is wanted
	full      atomic.Bool   // the next lease round is a full one
	sched     roundSchedule // the Rounds task's own
	// roundsFrom: when a LeaseRound last arrived from each peer, taken as
	// it arrives (before it waits for the Rounds task): an owner whose
	// rounds reach this node is not silent, however busy this node is.
	roundsMu   sync.Mutex
	roundsFrom map[string]time.Time
	// heldCache: per owner, the last summary of its shards here that
	// matched its own (answerHeld), under heldMu.
	heldMu    sync.Mutex
	heldCache map[string]heldSummary

	counters counters
}

type counters struct {
	messagesSent, bytesSent, grants, refusals atomic.Uint64
	framesDropped, framesBad                  atomic.Uint64
	dups, opensSent, closesSent               atomic.Uint64
	resent                                    atomic.Uint64
}

// raftLead is a hosted replica's leader and term as raft last reported
// them.
type raftLead struct {
	lead, term uint64
}

// New builds an Agent holding nothing (Load fills it from the store).
func New(cfg Config) (*Agent, error) {
	a := &Agent{
		cfg:         cfg,
		env:         cfg.Env,
		log:         cfg.Logger,
		space:       router.ShardSpace(cfg.Shards),
		leaderDue:   make(map[uint64]bool),
		takingUp:    make(map[uint64]bool),
		replicaLead: make(map[uint64]raftLead),
		roundsIn:    frameQueue{max: maxFrames},
		repliesIn:   frameQueue{max: maxFrames},
		roundsFrom:  make(map[string]time.Time),
		heldCache:   make(map[string]heldSummary),
	}
	var err error
	// Rounds numbered apart from every recent life's: a late reply to one
	// of those answers none of this life's (ownership.Config.FirstRound).
	// A generation differs from the last one (it is the clock in
	// nanoseconds, or one more), and a life never makes 2^32 rounds.
	if a.own, err = ownership.New(ownership.Config{Lease: cfg.Lease, FirstRound: (cfg.Generation & (1<<31 - 1)) << 32}); err != nil {
		return nil, err
	}
	if a.duty, err = duty.New(duty.Config{Self: cfg.RaftID(cfg.Self), Lease: cfg.Lease, ConfirmFresh: cfg.ConfirmFresh,
		MaxDrift: cfg.MaxDrift, Resend: cfg.RenewInterval, Window: cfg.Window}); err != nil {
		return nil, err
	}
	return a, nil
}

// Stats are an Agent's counters.
type Stats struct {
	// MessagesSent and BytesSent count the LeaseRound and LeaseReply
	// frames sent.
	MessagesSent, BytesSent uint64
	// Grants and Refusals count the leases granted and refused.
	Grants, Refusals uint64
	// FramesDropped counts the lease frames dropped for a full queue,
	// FramesBad those that did not decode.
	FramesDropped, FramesBad uint64
	// Dups counts the copies of an ownership message still waiting to be
	// written, dropped.
	Dups uint64
	// OpensSent and ClosesSent count the OpenTopic and CloseTopic
	// messages sent.
	OpensSent, ClosesSent uint64
	// Resent counts the topics whose Open or Close a new shard leader owed
	// again, its owners not having shown that they hold what its state
	// gives them (duty.Leader.TakeUp).
	Resent uint64
}

// Stats returns a snapshot of the counters.
func (a *Agent) Stats() Stats {
	c := &a.counters
	return Stats{
		MessagesSent: c.messagesSent.Load(), BytesSent: c.bytesSent.Load(),
		Grants: c.grants.Load(), Refusals: c.refusals.Load(),
		FramesDropped: c.framesDropped.Load(), FramesBad: c.framesBad.Load(),
		Dups: c.dups.Load(), OpensSent: c.opensSent.Load(), ClosesSent: c.closesSent.Load(),
		Resent: c.resent.Load(),
	}
}

// Serve reports whether this node may answer a data request for topic at
// epoch now: see ownership.Holder.Serve.
func (a *Agent) Serve(topic []byte, epoch uint64) (ownership.Topic, ownership.Refusal) {
	now := a.env.Now()
	a.ownMu.RLock()
	t, r := a.own.Serve(now, topic, epoch)
	a.ownMu.RUnlock()
	return t, r
}

// Holding returns how this node holds topic.
func (a *Agent) Holding(topic []byte) (ownership.Topic, bool) {
	a.ownMu.RLock()
	defer a.ownMu.RUnlock()
	return a.own.Get(topic)
}

// HoldingLocked runs fn with how this node holds topic while no ownership
// change can be made: fn's writes are ordered with the opens and closes.
func (a *Agent) HoldingLocked(topic []byte, fn func(t ownership.Topic, held bool)) {
	a.ownWrite.Lock()
	defer a.ownWrite.Unlock()
	a.ownMu.RLock()
	t, held := a.own.Get(topic)
	a.ownMu.RUnlock()
	fn(t, held)
}

// Holdings runs fn with every topic this node holds while no ownership
// change can be made, nor announced: each change reaches Env.Announce
// after fn, or is in what fn was given.
func (a *Agent) Holdings(fn func(held map[string]ownership.Topic)) {
	a.ownWrite.Lock()
	defer a.ownWrite.Unlock()
	held := make(map[string]ownership.Topic)
	a.ownMu.RLock()
	a.own.Each(func(topic string, t ownership.Topic) { held[topic] = t })
	a.ownMu.RUnlock()
	fn(held)
}

// Release makes this node serve nothing more, for good: fn is given the
// epoch of every topic it held, while no ownership change can be made,
// and a full round then tells the leaders that granted the leases.
func (a *Agent) Release(fn func(epochs map[string]uint64)) {
	a.ownWrite.Lock()
	a.ownMu.Lock()
	a.own.Release()
	epochs := make(map[string]uint64)
	a.own.Each(func(topic string, t ownership.Topic) { epochs[topic] = t.Epoch })
	a.ownMu.Unlock()
	fn(epochs)
	a.ownWrite.Unlock()
	a.round(true)
}

// Owned is the number of topics this node holds.
func (a *Agent) Owned() int {
	a.ownMu.RLock()
	defer a.ownMu.RUnlock()
	return a.own.Count()
}

// Pending is the number of ownership messages this node owes as a shard
// leader.
func (a *Agent) Pending() int {
	a.dutyMu.Lock()
	defer a.dutyMu.Unlock()
	return a.duty.Pending()
}

// Fences is the number of fences holding a topic's next owner back.
func (a *Agent) Fences() int {
	a.dutyMu.Lock()
	defer a.dutyMu.Unlock()
	return a.duty.Fences()
}

// HoldsBack reports whether this node, as shard's leader, holds a topic's
// next owner back (duty.Leader.HoldsBack).
func (a *Agent) HoldsBack(shard uint64) bool {
	a.dutyMu.Lock()
	defer a.dutyMu.Unlock()
	return a.duty.HoldsBack(shard)
}

// LeadsAt returns the term at which this node leads shard, as its duties
// know it.
func (a *Agent) LeadsAt(shard uint64) (uint64, bool) {
	a.dutyMu.Lock()
	defer a.dutyMu.Unlock()
	return a.duty.Leads(shard)
}

// Since returns when this node became shard's leader.
func (a *Agent) Since(shard uint64) (time.Time, bool) {
	a.dutyMu.Lock()
	defer a.dutyMu.Unlock()
	return a.duty.Since(shard)
}

// Proof records that a quorum showed, at a moment at or after at, that
// this node led shard at term and that its state held every entry
// committed before (a read index or a commit at that term completed).
func (a *Agent) Proof(shard, term uint64, at time.Time) {
	a.dutyMu.Lock()
	a.duty.Current(shard, term)
	a.duty.Confirm(shard, term, at)
	a.dutyMu.Unlock()
}

// Propose proposes data on shard and hands the state machine's result to
// done (nil when the command produced none). A commit proves this node's
// leadership at the term it led at when it proposed, from that moment
// on, and that its state is current (Proof).
func (a *Agent) Propose(shard uint64, data []byte, done func(res *shardsm.Result, err error)) {
	term, led := a.LeadsAt(shard)
	start := a.env.Now()
	a.env.Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: shard, Data: data}, func(r raftmux.Result) {
		if r.Err == nil {
			a.cfg.CommitTimes.Observe(a.env.Now().Sub(start))
			if led {
				a.Proof(shard, term, start)
			}
		}
		res, _ := r.Value.(*shardsm.Result)
		done(res, r.Err)
	})
}

// ResendsPending reports whether a shard this node took up the leadership
// of still has its predecessors' messages to owe again (duty.Leader.TakeUp).
func (a *Agent) ResendsPending() bool {
	a.dutyMu.Lock()
	defer a.dutyMu.Unlock()
	return a.duty.ResendsPending()
}

// LastRound returns when a LeaseRound last arrived from peer.
func (a *Agent) LastRound(peer string) time.Time {
	a.roundsMu.Lock()
	defer a.roundsMu.Unlock()
	return a.roundsFrom[peer]
}

// WithRoundsFrom runs fn with when a LeaseRound last arrived from each
// peer; fn keeps no reference to the map.
func (a *Agent) WithRoundsFrom(fn func(from map[string]time.Time)) {
	a.roundsMu.Lock()
	defer a.roundsMu.Unlock()
	fn(a.roundsFrom)
}
