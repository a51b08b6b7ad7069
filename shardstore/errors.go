package shardstore

import "errors"

var (
	// ErrNotStore: the directory holds files but is not a Shoal store.
	ErrNotStore = errors.New("shardstore: not a shoal store")
	// ErrNewerFormat: the store was written by a newer format version.
	ErrNewerFormat = errors.New("shardstore: store format is newer than this build")
	// ErrCorrupt: a stored value or a snapshot stream does not decode.
	ErrCorrupt = errors.New("shardstore: corrupt data")
	// ErrClosed: the store is closed.
	ErrClosed = errors.New("shardstore: store closed")
	// ErrShardDeleted: the shard was deleted while a handle to it was held.
	ErrShardDeleted = errors.New("shardstore: shard deleted")
	// ErrLogGap: appended entries do not continue the log or are not
	// consecutive.
	ErrLogGap = errors.New("shardstore: entries do not continue the log")
	// ErrConcurrentWrite: a shard's log changed between building a batch and
	// committing it, so the batch was built on a stale view. The shard's
	// owner must serialise its writes.
	ErrConcurrentWrite = errors.New("shardstore: shard log changed under a batch")
	// ErrInvalid: an argument is out of range (compaction beyond the applied
	// index, a commit index beyond the log, an oversized topic name, ...).
	ErrInvalid = errors.New("shardstore: invalid argument")
	// ErrOffsetOutOfRange: a topic read starts outside the retained records.
	ErrOffsetOutOfRange = errors.New("shardstore: offset out of range")
	// ErrProducerExpired: a retried produce of a producer session whose
	// first answer is no longer kept (producers.go): it may have been
	// appended, and is not appended again.
	ErrProducerExpired = errors.New("shardstore: producer session expired")
)
