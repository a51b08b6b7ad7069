package records

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// Env is what a Keeper touches of the rest of the node. Its methods are
// called without the Keeper's locks held, from any goroutine.
type Env interface {
	// PeerAlive reports whether SWIM here counts peer alive (not suspect,
	// dead, left or unknown).
	PeerAlive(peer string) bool
	// PeerDead reports whether SWIM declared peer dead, or an operator
	// removed it; a peer that left is not dead.
	PeerDead(peer string) bool
	// Send queues a frame for a peer; an error means it was not sent.
	Send(peer string, frame []byte) error
	// Now is the node's clock.
	Now() time.Time
	// After runs f after d on the node's clock; stop cancels it and
	// reports whether it did.
	After(d time.Duration, f func()) (stop func() bool)
	// Spawn runs f soon, off the caller's goroutine, unless the node is
	// closing; it reports whether f will run.
	Spawn(f func()) bool
	// Resume runs f, the rest of a piece of work: at once on a started
	// node, as the caller of a driven one chooses (a pause or a crash may
	// come between).
	Resume(f func())
	// Stopped reports whether the node is closing.
	Stopped() bool
}

// Lease is what a Keeper asks of the node's lease room (*lease.Agent):
// the topics this node holds. Its methods are called without the
// Keeper's locks held.
type Lease interface {
	// Serve is the lease check: whether this node may serve topic at
	// epoch now (ownership.Holder.Serve), and what it holds topic at
	// (epoch 0: not held). It reads the node's clock.
	Serve(topic []byte, epoch uint64) (ownership.Topic, ownership.Refusal)
	// Holding returns what this node holds topic at.
	Holding(topic []byte) (ownership.Topic, bool)
	// HoldingLocked runs fn with what this node holds topic at while no
	// ownership change can be made on this node (its ownership write
	// lock): fn's writes are ordered with the opens and closes.
	HoldingLocked(topic []byte, fn func(t ownership.Topic, held bool))
}

// Store is what a Keeper reads and writes of the node's store
// (*shardstore.Store): each topic's log and its producer sessions.
type Store interface {
	AppendRecords(topic []byte, epoch, atLeast uint64, records [][]byte, sync bool) (firstOffset uint64, err error)
	AppendRecordsOnce(topic []byte, epoch, atLeast uint64, records [][]byte, sess wire.Session, sync bool) (wire.ProducerAnswer, bool, error)
	RemoveRecords(topic []byte, first uint64, n int) error
	ReadRecords(topic []byte, from uint64, maxBytes int, fn func(offset, epoch uint64, value []byte) bool) (next uint64, err error)
	HighWatermark(topic []byte) (uint64, error)
	PutRecords(topic []byte, records []shardstore.Record, producers []wire.Producer) error
	Producers(topic []byte) ([]wire.Producer, error)
	DeleteTopic(topic []byte) error
	DeleteRecordsBelow(topic []byte, end uint64) error
}

// Conn is the connection a RecordsPull came on: its answer goes back on
// it.
type Conn interface {
	Write(frame []byte) error
}

// Config configures a Keeper.
type Config struct {
	// Store holds the topics' logs. Required.
	Store Store
	// Env is the rest of the node. Required.
	Env Env
	// HandoffTimeout bounds a new owner's pull of a topic's records, and a
	// leaving node's wait for its topics to be pulled
	// (node.Config.HandoffTimeout). Required.
	HandoffTimeout time.Duration
	// PullWait is how long one RecordsPull waits for its answer: the
	// node's lease renewal interval, a round trip and then some. Required.
	PullWait time.Duration
	// MaxFetchBytes caps the record bytes one Fetch returns, whatever it
	// asks for (node.Config.MaxFetchBytes). Required.
	MaxFetchBytes int
	// PullChunkBytes is the record bytes a pull asks for per chunk; 0, or
	// above MaxChunkBytes, means MaxChunkBytes. Tests lower it to cut a
	// pull into many chunks.
	PullChunkBytes uint32
	// OnHandoff, if set, is told when a pull ends: the topic, the epoch
	// this node holds it at, the previous owner pulled from, and whether
	// every record of that owner's log came over (node.Config.OnHandoff).
	// It runs on the node's own work and must not block.
	OnHandoff func(topic string, epoch uint64, prev string, complete bool)
	// AfterAppend, if set, runs in a produce between its append and the
	// lease check before its answer; AnswerPull, if set, decides whether a
	// RecordsPull is answered. Test seams: nil in production.
	AfterAppend func(topic string)
	AnswerPull  func(topic string) bool
	// Logger takes the failures nobody is answered with (a store error in
	// a pull or a deletion) and the pulls cut short. Required.
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Store == nil, c.Env == nil, c.Logger == nil:
		return errors.New("records: Store, Env and Logger required")
	case c.HandoffTimeout <= 0, c.PullWait <= 0:
		return fmt.Errorf("records: HandoffTimeout %v and PullWait %v must be positive", c.HandoffTimeout, c.PullWait)
	case c.MaxFetchBytes <= 0:
		return fmt.Errorf("records: MaxFetchBytes %d must be positive", c.MaxFetchBytes)
	}
	if c.PullChunkBytes == 0 || c.PullChunkBytes > MaxChunkBytes {
		c.PullChunkBytes = MaxChunkBytes
	}
	return nil
}

// Keeper keeps the records of the topics a node owns and hands them over
// between owners. It is safe for concurrent use: its pulls' bookkeeping is
// under one lock, each topic's gate and each producer session's turns
// under their own.
type Keeper struct {
	cfg   Config
	env   Env
	store Store
	// lease is the lease room, which is built after the Keeper it tells
	// of the topics' moves (SetLease).
	lease Lease

	ho    handoffs
	turns onceLocks

	stats struct {
		produced, fetched, producesRemoved              atomic.Uint64
		pullsStarted, pullsCut, pullsSilent, pulledRecs atomic.Uint64
		topicsDeleted                                   atomic.Uint64
	}
}

// New returns a Keeper of cfg. It pulls nothing until Enable.
func New(cfg Config) (*Keeper, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	k := &Keeper{cfg: cfg, env: cfg.Env, store: cfg.Store}
	k.ho.init()
	return k, nil
}

// SetLease gives the Keeper the lease room it asks of the topics held,
// once, before any record is served or handed over.
func (k *Keeper) SetLease(l Lease) { k.lease = l }

// Enable lets records be handed over: a node does once it is started
// (or driven), and before, MarkPull marks nothing.
func (k *Keeper) Enable() {
	k.ho.mu.Lock()
	k.ho.enabled = true
	k.ho.mu.Unlock()
}

// Stats counts what a Keeper did.
type Stats struct {
	Produced        uint64 // records acknowledged
	Fetched         uint64 // records fetched
	ProducesRemoved uint64 // produces refused after their append, whose records were removed
	PullsStarted    uint64 // pulls started as a new owner
	PullsCut        uint64 // pulls that ended without every record
	PullsSilent     uint64 // pulls from an owner the leader took for silent: one short attempt
	PulledRecords   uint64 // records pulled from previous owners
	TopicsDeleted   uint64 // revoked topics whose records were deleted
}

// Stats returns the counts so far.
func (k *Keeper) Stats() Stats {
	s := &k.stats
	return Stats{Produced: s.produced.Load(), Fetched: s.fetched.Load(), ProducesRemoved: s.producesRemoved.Load(),
		PullsStarted: s.pullsStarted.Load(), PullsCut: s.pullsCut.Load(), PullsSilent: s.pullsSilent.Load(),
		PulledRecords: s.pulledRecs.Load(), TopicsDeleted: s.topicsDeleted.Load()}
}

// Errors a produce or a fetch is refused with, besides a *NotServedError.
// A refusal wraps one of them, and its Error is the message to answer
// with.
var (
	// ErrHandingOver: the topic's records are still being pulled from its
	// previous owner; ask again soon.
	ErrHandingOver = errors.New("records: handing over")
	// ErrSessionExpired: a produce's producer session no longer keeps the
	// answer to it: it may have been appended, and is not appended again.
	ErrSessionExpired = errors.New("records: producer session expired")
	// ErrBadRequest: the request cannot be served as asked (an invalid
	// producer session, a fetch from an offset out of range).
	ErrBadRequest = errors.New("records: bad request")
	// ErrInternal: the store failed, or the epoch has no offsets
	// (ErrOffsetSpace).
	ErrInternal = errors.New("records: internal error")
)

// refusal is a refused request: its message, and what it wraps.
type refusal struct {
	msg  string
	errs []error
}

func (r *refusal) Error() string   { return r.msg }
func (r *refusal) Unwrap() []error { return r.errs }

// refuse is a refusal of kind, with cause's message.
func refuse(kind error, cause error) error {
	return &refusal{msg: cause.Error(), errs: []error{kind, cause}}
}

// NotServedError refuses a produce or a fetch this node may not serve at
// its epoch: the lease check failed.
type NotServedError struct {
	Topic []byte
	Held  uint64            // the epoch this node holds the topic at (0: not held)
	Why   ownership.Refusal // never ownership.Servable
}

func (e *NotServedError) Error() string {
	return fmt.Sprintf("records: not serving %q at that epoch: %s", e.Topic, e.Why)
}

// serve is the lease check of topic at epoch, as an error.
func (k *Keeper) serve(topic []byte, epoch uint64) error {
	held, r := k.lease.Serve(topic, epoch)
	if r == ownership.Servable {
		return nil
	}
	return &NotServedError{Topic: topic, Held: held.Epoch, Why: r}
}
