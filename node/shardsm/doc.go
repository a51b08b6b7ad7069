// Package shardsm is the state machine of every metadata shard a node
// hosts: the raftmux.StateMachine its raft host applies committed commands
// to, one meta.State per hosted shard.
//
// # What it owns
//
//   - A shard's applied state: a Machine loads a shard's meta.State from
//     the store on first use (its topic records, epoch floor and write
//     sessions, or the whole state under the earlier single key) and
//     applies each run of committed commands to it (Apply), giving every
//     command its Result.
//   - Its persistence per applied run: the records, floor and sessions the
//     run changed, and nothing else, are written into the raft round's
//     batch, which also holds the applied index; a state loaded from the
//     earlier single key is written whole as records at its next apply, and
//     the key deleted. A restart and a raft snapshot (which streams every
//     data key of the shard) both find exactly the state of the applied
//     index, and an apply costs the same in a shard of ten topics or of ten
//     thousand.
//   - Splits (split.go): a split's children are seeded on this host at
//     the split's index (raftmux.Splitter) and given, in the split's
//     batch, the parent's records of the topics their ranges hold
//     (Config.Space), its floor and its sessions; the parent is marked
//     split and refuses every later command.
//   - Snapshot restores (Restore): a shard's state and change log are
//     loaded again from the records a raft snapshot wrote.
//   - The change log of each shard (a watch.Log, node/watch): filled from
//     the changes of each applied command, written in the same batch, and
//     told to Config.Logged after a run that grew it or a restore.
//   - Lease grants computed against a shard's state (Grant), under the
//     shard's lock so that they are ordered against every apply: a grant
//     covers all an owner holds if its digest is the state's, or the
//     state's with some of the owner's newest opens still on their way
//     (the last 16 per owner are kept); else it lists what the state gives
//     the owner. Beside each state the lease bookkeeping the node reads:
//     when each owner last asked and was last granted (Shard.LastAsk,
//     Shard.LastGrant), and a count of state changes (StateVersion) against
//     which a grant from an owner's summary is recorded (GrantIfUnchanged),
//     so that an apply closing a topic of that owner sees it.
//   - Halted shards: a shard whose replica here stopped applying (Halted)
//     is dropped and neither served nor loaded again, until its replica is
//     removed (Remove).
//
// # What it may touch
//
// The node's shardstore.Store, read to load a shard and written only
// through the batch raftmux hands to Apply; the two functions of its
// Config, called after a run applied and outside every lock of its own:
// Effects (the RPCs the run owes topic owners, with each closed owner's
// last grant) and Logged (the change log grew). It starts no goroutine,
// reads no clock (Grant is given one) and sends nothing. The byte layouts
// are shardstore's (keys) and meta's (records, sessions, changes).
//
// # Locks
//
// One lock per shard state (Shard), held by an apply for its whole run
// and by every read: With, WithShard, Hosted and TryHosted run their
// function under it, and TryHosted never waits for it. One lock over the
// map of shards and the halted set, never held while a shard's lock is
// taken. A third orders the count of state changes and the summary grants
// against applies; an apply takes it under the shard's lock.
package shardsm
