// Package meta is the metadata state machine that every shard's raft group
// applies: topic → {owner, epoch, partitions, state}.
//
// It owns three things: the commands that change a shard's topics and their
// compact binary encoding (the payload of a raft log entry), the
// deterministic Apply of a committed command, and the snapshot format of a
// whole shard. It does no I/O, reads no clock and draws no randomness: two
// replicas that apply the same commands hold byte-identical snapshots. No
// output depends on map iteration order.
//
// # Epochs
//
// Every change of a topic's owner increments its epoch, and so does a
// revoke: the epoch fences the previous owner. A revoked topic stays as a
// tombstone that remembers its epoch, so a later re-assign continues above
// it. [OpCompact] drops the tombstones and raises the shard's epoch floor to
// the highest epoch they held; a topic never seen starts at floor+1. An
// epoch therefore never goes backwards for any topic name in a shard.
//
// # Command semantics
//
//   - AssignTopic(topic, owner, partitions). A topic that is not active
//     (never seen or revoked) becomes active with the given owner at the next
//     epoch; the owner is required (ErrNoOwner). For an active topic: no
//     owner or the same owner leaves it unchanged (a repeated assign is
//     idempotent); a different owner moves it to that owner at epoch+1.
//     Partitions 0 means "not given": a new topic gets DefaultPartitions and
//     an existing one keeps its count; a count that differs from an active
//     topic's is ErrPartitionsConflict (UpdatePartition changes it).
//   - RevokeTopic(topic). An active topic becomes a tombstone at epoch+1 and
//     its owner must close it. Revoking a tombstone changes nothing; an
//     unknown topic is ErrUnknownTopic.
//   - UpdatePartition(topic, partitions). Grows an active topic's partition
//     count (shrinking is ErrBadPartitions); the epoch stays, since the owner
//     does not change, and the owner gets an EffectOpen at that same epoch
//     carrying the new count. The same count changes nothing.
//   - ReassignNode(node, moves). Moves each listed topic to its listed
//     owner at epoch+1, but only while the topic is still active and owned by
//     the dead node; a move whose topic changed since the leader planned it is
//     skipped, so replaying the command is harmless. The leader plans moves
//     with [State.PlanReassign].
//   - Marker(seq) changes nothing; a leader proposes one to learn when its
//     view of the shard is current.
//   - Compact() drops tombstones (see Epochs).
//   - Split(shard) ends the shard: its topics go on in the two shards it
//     splits into (the replica's host writes them there), and every later
//     command is refused with ErrShardSplit and changes nothing.
//
// A rejected command changes nothing. Apply validates the whole command
// before it touches the state.
//
// # Owner choice
//
// An owner that a request does not name is chosen by the shard leader before
// it proposes ([ChooseOwner], [State.PrepareAssign]) and written into the
// command, so replicas never have to agree on membership or load.
//
// # Use
//
// The shard leader turns a request into a command with
// [State.PrepareAssign] or [State.PlanReassign] (or builds it directly),
// may refuse it early with [State.Check], encodes it with [AppendCommand]
// and proposes the bytes. Every replica applies committed entries with
// [State.ApplyEntry] (or [DecodeCommand] then [State.Apply]); the leader
// then sends the RPCs listed in [Result.Effects]. A new leader re-sends
// OpenTopic for every active topic ([State.Topics]) and CloseTopic to each
// topic's [Assignment.Previous] owner, since its predecessor may have failed
// before they were acknowledged. A whole shard encodes with
// [State.AppendSnapshot] and installs with [State.Restore]. A replica that
// stores the state one record per topic calls [State.TrackChanges] once,
// then after each run of applied commands [State.DrainChanges] and
// [State.AppendRecord] for the topics that changed, and rebuilds the state
// from its records with a [Loader]: applying a command costs the topics it
// changes, not the shard's size.
//
// A State is not safe for concurrent use: its owner is the shard's apply
// loop.
package meta
