// Package lease is a node's part in the ownership protocol
// (docs/leases.md): it binds the two stepped cores, ownership.Holder (the
// topics this node holds, their floors and leases) and duty.Leader (what
// it owes as a shard leader), to the node's store, peers and raft.
//
// # What it owns
//
//   - The cores and their locks: the Holder under one lock, the Leader
//     under another, and the order of ownership changes with their
//     durable writes (a third, held from a change to its write and its
//     announcement).
//   - Lease rounds: every renewal interval, or soon after topics were
//     newly opened here, one LeaseRound per peer this node has business
//     with, carrying its lease requests as an owner and its vouch requests
//     as a leader (RunRounds); the rounds peers send, answered with
//     grants, refusals and vouches on the same task, and the replies to
//     this node's rounds taken on another (RunReplies). The frames wait
//     in queues that drop past maxFrames (Offer); when each peer last
//     sent a round is kept as it arrives (LastRound, WithRoundsFrom).
//   - The ownership messages an owner is sent: OpenTopic and CloseTopic
//     taken in arrival order and made durable in one synced batch, copies
//     of a message still waiting dropped, each acknowledged once its batch
//     is written (Take); the topics held loaded from the store (Load).
//   - The ownership messages a leader owes: what an apply owes (Effects),
//     the OpenTopic and CloseTopic sent when due and their TopicAcks
//     (RunDue, TakeAck), the leaderships won and taken up once a read
//     index proved them (TakeUpLeaderships), the proofs of leadership
//     (Proof), the vouches of this node's replicas (Follows), and the
//     answers waiting for a command to settle (WhenSettled).
//
// # What it may touch
//
// It reaches the node only through its Env (the clock, timers, spawned
// work, the node's tasks, sending a frame, the view, a read index, the
// announcement of durable changes) and the parts its Config gives it: the
// store's node slot (owned topics and floors), the shard-leader table,
// the state machine's shards and grants, and the records room's pulls and
// deletions. It starts no goroutine, arms no timer and reads no clock of
// its own; its tasks are the node's, which run them when kicked or due.
// Under the Holder's or the Leader's lock it calls no Env method but Now
// and the check Gone returned.
// The byte layouts are wire's (frames) and shardstore's (the node slot).
package lease
