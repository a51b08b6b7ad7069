package raftmux

import (
	"errors"
	"fmt"
	"io"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// Storage is the durable state of every shard replica on a node: raft log,
// HardState, ConfState, applied index, the state machine's data and
// snapshots. It is the subset of the shard store the engine consumes; one
// Batch with one fsync covers many shards.
type Storage interface {
	// Storage returns the raft.Storage view of one shard. It reflects every
	// committed Batch.
	Storage(shard uint64) (raft.Storage, error)
	// NewBatch starts a write batch spanning any number of shards.
	NewBatch() Batch
	// Applied returns the shard's durable applied index.
	Applied(shard uint64) (uint64, error)
	// Compact discards the shard's log up to and including idx (idx must be
	// applied).
	Compact(shard, idx uint64) error
	// SnapshotData returns a consistent snapshot of the shard: metadata
	// (index, term and ConfState at the shard's applied index) and the state
	// machine data at exactly that index. The caller closes data.
	SnapshotData(shard uint64) (meta *raftpb.SnapshotMetadata, data io.ReadCloser, err error)
	// ApplySnapshot atomically replaces the shard's log, state and data with
	// the snapshot.
	ApplySnapshot(shard uint64, snap *raftpb.Snapshot, data io.Reader) error
	// DeleteShard removes everything stored for the shard and records its
	// tombstone, durably.
	DeleteShard(shard uint64, tomb Tombstone) error
	// Tombstone returns the tombstone DeleteShard last recorded for the
	// shard (ok false: none).
	Tombstone(shard uint64) (tomb Tombstone, ok bool, err error)
	// Shards lists the shards with stored state, in ascending order.
	Shards() ([]uint64, error)
}

// Tombstone is what a host keeps of a replica it destroyed. Raft replica
// IDs are node IDs, so a replica this node holds later (added back, or
// created by a stale member's message) is the same raft peer with its
// memory wiped: it starts at the tombstone's term and vote, so it never
// votes twice in one term, and takes no snapshot at or below the index it
// had applied, which only a stale member of its old group could send.
type Tombstone struct {
	Term, Vote, Applied uint64
}

// Batch collects writes for many shards; Commit makes them durable together.
type Batch interface {
	// Append stores hs (when non-nil) and ents (truncating any conflicting
	// suffix of the shard's log).
	Append(shard uint64, hs *raftpb.HardState, ents []raftpb.Entry)
	// SetConfState records the shard's configuration after a conf change.
	SetConfState(shard uint64, cs *raftpb.ConfState)
	// SetApplied records the shard's applied index.
	SetApplied(shard, idx uint64)
	// Seed starts a shard that holds nothing at index: an empty log whose
	// truncation point is (index, term), applied and commit indexes at
	// index, configuration cs. A group born from an entry of another (a
	// split) starts so, from the data the same batch writes.
	Seed(shard, index, term uint64, cs *raftpb.ConfState)
	// Put and Delete write the state machine's data of the shard.
	Put(shard uint64, key, value []byte)
	Delete(shard uint64, key []byte)
	// Commit applies the batch; with sync it is durable (one fsync) on return.
	Commit(sync bool) error
}

// StateMachine is the replicated state machine of every shard on the host.
// All calls for one shard come from one goroutine, in log order.
type StateMachine interface {
	// Apply applies committed commands of one shard in log order, writing
	// durable effects into b (committed together with the applied index),
	// and sets cmds[i].Result, which is handed to the proposer.
	Apply(shard uint64, cmds []Command, b Batch) error
	// Restore reloads the shard from Storage after a snapshot replaced its
	// data; index is the snapshot's index.
	Restore(shard, index uint64) error
	// Remove drops the shard: its replica was removed from the group and its
	// data deleted.
	Remove(shard uint64)
}

// HaltObserver is a StateMachine told when one of its replicas halts (an
// apply that failed, a snapshot without its data): from then on the
// shard's state here is no longer kept current, and must not be served as
// if it were.
type HaltObserver interface {
	Halted(shard uint64)
}

// EndObserver is a StateMachine that says whether a shard's replica here
// ended: it applied the split that handed the shard's keys to its
// children (Splitter). An ended replica acknowledges no read confirmation
// of any leader of the shard, so that no leader of it is confirmed once
// its children may have elected theirs: every quorum of the children
// meets every quorum of the parent in a replica that applied the split.
// It is asked when a replica opens; a split applied here marks the
// replica ended at once, and so does a snapshot restored past it.
type EndObserver interface {
	Ended(shard uint64) bool
}

// Command is one committed normal entry handed to StateMachine.Apply.
type Command struct {
	Index  uint64
	Term   uint64
	Data   []byte
	Result any
}

// Transport carries batches between hosts. Implementations must copy or
// encode what they need before Send returns: the Batch is reused.
type Transport interface {
	// Send delivers one batch to node to. An error means the batch was not
	// sent (the node is unreachable); raft retransmits.
	Send(to uint64, b *RaftBatch) error
	// SendSnapshotChunk streams one chunk of a shard snapshot to node to.
	SendSnapshotChunk(to uint64, c *SnapshotChunk) error
}

// RaftBatch is everything one host sends another in one round: shard-tagged raft
// messages and coalesced heartbeat tuples. It mirrors wire.RaftBatch.
type RaftBatch struct {
	Messages           []ShardMessage
	Heartbeats         []Heartbeat
	HeartbeatResponses []Heartbeat
}

// Reset empties b, keeping its capacity.
func (b *RaftBatch) Reset() {
	clear(b.Messages)
	b.Messages = b.Messages[:0]
	b.Heartbeats = b.Heartbeats[:0]
	b.HeartbeatResponses = b.HeartbeatResponses[:0]
}

// Empty reports whether b carries nothing.
func (b *RaftBatch) Empty() bool {
	return len(b.Messages) == 0 && len(b.Heartbeats) == 0 && len(b.HeartbeatResponses) == 0
}

// ShardMessage is a raft message of one shard.
type ShardMessage struct {
	Shard uint64
	Msg   *raftpb.Message
}

// Heartbeat is a coalesced heartbeat (or response) of one shard: the leader's
// term and the commit index it vouches for on the receiver.
type Heartbeat struct {
	Shard  uint64
	Term   uint64
	Commit uint64
	Flags  uint8
}

// Heartbeat flags.
const (
	// FlagQuiesce on a heartbeat tells the follower to stop ticking.
	FlagQuiesce uint8 = 1 << 0
	// FlagWake on a heartbeat response asks a quiesced leader to wake.
	FlagWake uint8 = 1 << 1
	// FlagRead marks a read heartbeat, whose Commit is not a commit index
	// but the id of a leader's read confirmation, and a follower's
	// acknowledgement of one, which carries the same id (reads.go).
	FlagRead uint8 = 1 << 2
)

// SnapshotChunk is one piece of a shard snapshot in flight. The first chunk
// (Seq 0) carries the raft MsgSnap (with metadata, without data); Last marks
// the final chunk, after which the receiver applies it.
type SnapshotChunk struct {
	Shard uint64
	// ID identifies the stream (sender-chosen, unique per sender).
	ID   uint64
	Seq  uint32
	Last bool
	// Msg is the MsgSnap; set on Seq 0 only.
	Msg *raftpb.Message
	// Codec of Data: CodecNone or CodecZstd (each chunk compressed on its
	// own).
	Codec uint8
	Data  []byte
}

// Snapshot chunk codecs.
const (
	CodecNone uint8 = 0
	CodecZstd uint8 = 1
)

// Errors returned to callers.
var (
	// ErrNotLeader: the replica is not the shard's leader; errors.As a
	// *NotLeaderError for the leader hint.
	ErrNotLeader = errors.New("raftmux: not leader")
	// ErrUnknownShard: the shard is not hosted here.
	ErrUnknownShard = errors.New("raftmux: shard not hosted")
	// ErrDropped: raft refused the proposal (e.g. leader transfer in
	// progress, uncommitted log too large); it was not appended.
	ErrDropped = errors.New("raftmux: proposal dropped")
	// ErrOutcomeUnknown: leadership was lost after the proposal was
	// appended; it may or may not be applied.
	ErrOutcomeUnknown = errors.New("raftmux: leadership lost, proposal outcome unknown")
	// ErrBusy: the shard's worker inbox is full.
	ErrBusy = errors.New("raftmux: inbox full")
	// ErrStopped: the host is stopped.
	ErrStopped = errors.New("raftmux: host stopped")
	// ErrRemoved: the replica was removed from its group.
	ErrRemoved = errors.New("raftmux: replica removed")
	// ErrShardExists: Bootstrap of a shard already hosted.
	ErrShardExists = errors.New("raftmux: shard already hosted")
	// ErrBadChunk: an undecodable snapshot chunk.
	ErrBadChunk = errors.New("raftmux: bad snapshot chunk")
	// ErrLearnerBehind: Promote refused a learner that does not yet hold
	// the leader's committed log; errors.As a *LearnerBehindError for its
	// progress. Retry once it has caught up.
	ErrLearnerBehind = errors.New("raftmux: learner not caught up")
	// ErrInvalid: bad argument.
	ErrInvalid = errors.New("raftmux: invalid argument")
	// ErrLeads: DropReplica of a replica that leads its group.
	ErrLeads = errors.New("raftmux: replica leads its group")
	// ErrCorrupt: a shard's stored state contradicts itself (an applied
	// index beyond its log).
	ErrCorrupt = errors.New("raftmux: stored shard state is inconsistent")
)

// NotLeaderError is returned when a request reaches a replica that does not
// lead its shard. Leader is the last known leader (0 if unknown).
type NotLeaderError struct {
	Shard  uint64
	Leader uint64
	Term   uint64
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("raftmux: shard %d: not leader (leader hint %d, term %d)", e.Shard, e.Leader, e.Term)
}

// Is makes errors.Is(err, ErrNotLeader) true.
func (e *NotLeaderError) Is(target error) bool { return target == ErrNotLeader }

// LearnerBehindError is returned by Promote when the learner's replicated
// log (Match, as the leader tracks it) is more than Config.PromoteMaxLag
// entries behind the leader's commit index, or the leader is not streaming
// entries to it (it is being probed or sent a snapshot). The change was not
// proposed. It matches both ErrLearnerBehind and ErrDropped.
type LearnerBehindError struct {
	Shard, Node   uint64
	Match, Commit uint64
}

func (e *LearnerBehindError) Error() string {
	return fmt.Sprintf("raftmux: shard %d: learner %d not caught up (match %d, commit %d)", e.Shard, e.Node, e.Match, e.Commit)
}

// Is makes errors.Is(err, ErrLearnerBehind) and errors.Is(err, ErrDropped)
// true.
func (e *LearnerBehindError) Is(target error) bool {
	return target == ErrLearnerBehind || target == ErrDropped
}

// LeaderChange is reported on every change of a shard's known leader,
// and of the term a known leader leads at (a leader elected again).
type LeaderChange struct {
	Shard  uint64
	Leader uint64 // 0: no known leader
	Term   uint64
}
