// Package shardstore is a node's disk: one Pebble database holding, for
// every shard the node hosts, its raft log, HardState, applied index,
// configuration and truncation point, the metadata state machine's data, and
// the data plane's per-topic record logs. It commits the writes of many
// shards with one fsync (group commit) and serves each shard's raft log
// through a [RaftStorage] whose hot path (recent Entries, Term, LastIndex)
// reads no disk.
//
// It knows nothing about the network or about what a shard's data means.
//
// # Key layout
//
// Every integer in a key is big-endian, so Pebble's byte order is numeric
// order and each of the ranges below is contiguous:
//
//	0x01 shard(8) 0x01 kind(1)         shard state (one key per kind):
//	                                      0x01 HardState
//	                                      0x02 applied index
//	                                      0x03 truncated state (index, term)
//	                                      0x04 ConfState
//	0x01 shard(8) 0x02 index(8)        raft log entry
//	0x01 shard(8) 0x03 key...          state-machine data of the shard
//	0x02 len(1) topic                  topic metadata (first retained offset)
//	0x02 len(1) topic offset(8)        topic record
//	0x03 shard(8)                      tombstone of a deleted shard (term,
//	                                   vote, applied index)
//	0x04 len(1) topic id(8)            a producer session of the topic
//	                                   (its answers to retried produces)
//
// The whole of a shard is the range [0x01 shard, 0x01 shard+1), so removing a
// replica is one range deletion, written with its tombstone. The format version is not in the database:
// it is the file FORMAT beside it, read before Pebble opens anything.
//
// # Values
//
// Every value starts with a one-byte encoding version. A value that does not
// decode yields an error wrapping [ErrCorrupt] that names the shard and the
// key; nothing panics on bad bytes.
//
// # Durability
//
// Batch.Commit(true) returns once the batch and every batch committed before
// it are on disk, even when the batch itself is empty. Batches are atomic
// and recovered in commit order, so after a crash the store is exactly the
// state after some batch no older than the last synced one, and HardState
// and log agree. Compact and unsynced commits ride on the next sync;
// ApplySnapshot, DeleteShard and TrimTopic sync themselves.
//
// A HardState is written when its term or vote changes, not when only its
// commit index moves (most rounds of a busy shard), and InitialState reports
// the commit index as written or the applied index, whichever is higher.
// That is safe: the commit index is volatile state in Raft, which a replica
// relearns from its leader, and every index up to the applied one is
// committed and in the log, since an applied index is written in the batch
// of its entries or a later one, and batches are recovered in order.
//
// # Memory
//
// A loaded shard costs about 260 bytes of bookkeeping (its log bounds,
// HardState and applied index). Recent entries are cached on top of that
// under one budget for all shards (Config.CacheBudgetBytes); when the
// budget is exceeded, whole caches of shards not read or appended since the
// last sweep are dropped (CLOCK), and one shard may hold at most an eighth of
// the budget. The budget is a soft bound: a cache busy at the moment of a
// sweep is skipped rather than waited for.
//
// # Concurrency
//
// The raft layer owns each shard from one goroutine at a time: the log of a
// shard (Batch.Append, Compact, ApplySnapshot, DeleteShard) is changed by its
// owner only, while reads, other shards' commits and cache eviction run
// concurrently. Entries handed to Batch.Append are copied into the cache with
// their Data shared, and Entries returns them: like raft itself, nobody may
// mutate that data later.
package shardstore
