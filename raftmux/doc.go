// Package raftmux runs thousands of go.etcd.io/raft/v3 groups (one per shard)
// on one node at roughly the cost of a few.
//
// A Host owns the RawNode of every shard replica on the node. Its W workers
// (default GOMAXPROCS) each own the shards id mod W and run rounds: drain the
// inbox (messages, proposals, reads, ticks, wake-ups), step, collect the Ready
// of every touched group, send the leaders' messages before persisting (Raft
// thesis §10.2.1), apply committed entries that earlier rounds made durable,
// persist all Readies in one storage batch with one fsync, send the messages
// that had to wait for it, apply the rest through the StateMachine, and
// Advance. A round sends at most two RaftBatches to a node: what may leave
// before the fsync, and what must follow it.
//
// There is one Ready path, raft's synchronous one: raft's asynchronous
// storage writes and committing batches off the worker goroutine were
// measured against it and did not pay off on two cores
// (docs/decisions/raft-async-storage-writes.md, raft-pipelined-writes.md).
//
// A Host runs its workers and clock on goroutines, or, with Config.Manual,
// not at all: the caller advances the raft clock with Tick and runs the
// rounds with Step, and makes its requests with Submit, whose callbacks
// run during Step. A simulation steps many hosts in virtual time on one
// goroutine this way.
//
// A busy group costs four messages per commit: an append carrying only a
// newer commit index is not sent to a follower that has or is being sent
// the whole log (it learns the index from its next append or heartbeat),
// and no coalesced heartbeat goes to a follower that was sent an append
// within the last tick.
//
// Heartbeats are coalesced: raft's MsgHeartbeat and MsgHeartbeatResp without a
// read-index context never go on the wire as messages; they travel as compact
// (shard, term, commit) tuples in the per-node Batch and are turned back into
// raft messages on the receiver. A leader confirms its reads itself, in
// such tuples, without stepping raft on either side (reads.go): raft's
// ReadIndex protocol, at one read heartbeat per group and round instead of
// a raft message per read and follower. Idle groups quiesce: a leader whose live
// followers have everything stops ticking and tells them to stop too. The
// membership layer reports node failures through NodeSuspect, NodeDead and
// NodeAlive, which is how quiesced followers learn that their leader is gone.
//
// Peer input is not trusted: raft panics or diverges on messages no raft
// node would send. Deliver and DeliverSnapshotChunk check every message
// before raft's Step sees it (validate.go: the types a peer may send, the
// addressing, terms, indexes and entries; the sender's membership, and
// for a vote request the receiver's: a replica out of its group's voters
// does not vote, since raft elects by the configuration a replica applied,
// which after a restart may be several changes old; commit
// indexes and acks against the replica's log; snapshot metadata, data and
// a host-wide snapshot budget), create a replica only where
// Config.AcceptReplica allows, and count what they refuse (Host.Stats),
// logging it at debug level only. A replica that cannot apply a committed
// entry, or is handed a snapshot without its data, halts alone (halt.go,
// Host.Halted) rather than apply past it.
//
// raftmux opens no sockets (the Transport does) and owns no disk format (the
// Storage does). Replica ids are node ids: a shard's replica on node N has raft
// id N.
package raftmux
