// Package watch is how a node tells clients what changed in the topic
// assignments, and what they are: each shard's change log, the watches
// held until a change, and the answers to Watch and ListTopics
// (docs/cli.md, "Watching and listing topics").
//
//   - A Log is one shard's change log: the last changes of its topic
//     assignments, each at the raft index of the command that made it, and
//     the index applied last. The state machine keeps one per shard under
//     the shard's lock, fills it as it applies (Log.Apply) and writes it
//     into the batch of the apply (Log.Persist), so that a restart and a
//     raft snapshot find it again (LoadLog). Its keys and the trim mark are
//     shardstore's layouts, each change meta's.
//   - A Server answers Watch and ListTopics from the node's own replicas,
//     whatever their role: a watcher's position in a shard is a raft
//     index, the same on every replica. A watch with nothing to give is
//     held, as a callback and no goroutine, until Server.Changed says one
//     of its shards changed, or its wait ends.
//
// It owns no shard state and no replica: it reads them through Replicas,
// under the lock their owner takes, and never writes them. It opens no
// socket, starts no goroutine and reads no clock of its own: work off the
// caller's goroutine, timers and the time come from Config. It encodes no
// answer: the node does, from the wire structs it is given.
package watch
