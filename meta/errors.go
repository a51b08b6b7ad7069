package meta

import "errors"

// Sentinel errors. Apply, the decoders and the planners wrap them with
// context; test with errors.Is.
var (
	// ErrBadCommand: a command that cannot be decoded or whose fields are
	// out of their domain (unknown op, bad version, trailing bytes, a move
	// list out of order).
	ErrBadCommand = errors.New("meta: bad command")
	// ErrEmptyTopic: a command names no topic.
	ErrEmptyTopic = errors.New("meta: empty topic name")
	// ErrTopicTooLong: a topic name exceeds MaxTopicLen.
	ErrTopicTooLong = errors.New("meta: topic name too long")
	// ErrBadNodeID: a node id is empty where one is required or exceeds
	// MaxNodeIDLen.
	ErrBadNodeID = errors.New("meta: bad node id")
	// ErrNoOwner: a topic must be given an owner and none was named, or no
	// live node is available to choose one.
	ErrNoOwner = errors.New("meta: no owner")
	// ErrUnknownTopic: the topic is not active in this shard.
	ErrUnknownTopic = errors.New("meta: unknown topic")
	// ErrBadPartitions: a partition count is 0 where one is required, above
	// MaxPartitions, or smaller than the topic's current count.
	ErrBadPartitions = errors.New("meta: bad partition count")
	// ErrPartitionsConflict: AssignTopic names a partition count different
	// from the active topic's.
	ErrPartitionsConflict = errors.New("meta: partition count differs from the topic's")
	// ErrTooManyMoves: a ReassignNode carries more than MaxMoves moves.
	ErrTooManyMoves = errors.New("meta: too many moves in one command")
	// ErrEpochExhausted: the topic's epoch cannot be incremented.
	ErrEpochExhausted = errors.New("meta: epoch exhausted")
	// ErrBadSnapshot: a snapshot that cannot be decoded or breaks an
	// invariant (unsorted or duplicate topics, a field out of its domain).
	ErrBadSnapshot = errors.New("meta: bad snapshot")
	// ErrShardSplit: the shard split; the topics it held are in the shards
	// it split into, and it applies no command after the split.
	ErrShardSplit = errors.New("meta: shard split: its topics are in the shards it split into")
	// ErrSnapshotVersion: a snapshot in a format version this build does
	// not read.
	ErrSnapshotVersion = errors.New("meta: unsupported snapshot version")
)
