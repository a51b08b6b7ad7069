// Package raftmuxtest holds in-process stand-ins for the parts raftmux runs
// on, for tests and benchmarks: MemStore (raftmux.Storage over
// raft.MemoryStorage per shard, with a group commit that counts fsyncs and
// can really fsync an append-only file), Network (a raftmux.Transport
// between hosts of one process, with a filter for partitions and drops) and
// KV (a small StateMachine that records what it applied).
package raftmuxtest
