// Package raftio is raftmux's real I/O: the shardstore storage and the netio
// transport.
//
//   - Storage adapts a shardstore.Store to raftmux.Storage. A raftmux round
//     builds one Batch over all the shards it touched and commits it with one
//     fsync; Storage counts those group commits.
//   - Transport adapts the peer connections (netio.Transport, or anything
//     with its Send) to raftmux.Transport: every RaftBatch raftmux hands it
//     (one per destination node per round) becomes one wire.KindRaftBatch
//     frame; snapshot chunks ride wire.KindSnapshotChunk frames.
//   - Inbound is the receiving side: it copies raft frames off a netio event
//     loop onto a queue bounded in frames and in bytes, and one goroutine,
//     which its owner runs and stops, decodes them and hands them to the
//     raftmux.Host (which checks what they say before raft sees it).
//
// Raft ids are uint64 and peers are named by strings; the caller supplies
// the mapping both ways. raftio owns no format of its own beyond the way a
// raftmux.SnapshotChunk is laid into a wire.SnapshotChunk (see
// Transport.SendSnapshotChunk); every byte format is wire's.
package raftio
