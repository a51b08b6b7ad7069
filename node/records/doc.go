// Package records keeps a topic's records on its owner and hands them
// over to the next one: the produces and fetches an owner serves, the
// offsets it gives, and the record pulls between owners, on both sides
// (docs/ownership.md, "Records across ownership moves").
//
// # What it owns
//
//   - Serving: a produce appended under the lease check made before it and
//     again after it, its records removed again when the second check
//     fails; a produce that names a producer session appended once (the
//     owner keeps the session's answers beside the records,
//     shardstore/producers.go); a fetch checked the same two ways.
//   - Offsets: the owner at epoch e writes from (e-1)<<40 on (OffsetBase),
//     so that no offset names two records across owners and crashes.
//   - The produce gate of each topic and the turns of a producer session's
//     copies: held across the two pieces a produce is cut into
//     (Env.Resume), and waited at without blocking: a wait is a function
//     run when the produces ahead leave.
//   - The pull, asking side: a topic newly held after a move is marked
//     before the holder has it (MarkPull), and its records are pulled from
//     the previous owner before it is served (StartPull): each pull a small
//     state machine stepped by its answers (TakeChunk) and timers, at most
//     maxHandoffs at once, cut short when that owner dies, stays silent or
//     the handoff timeout passes.
//   - The pull, answering side: a RecordsPull answered (AnswerPull) once
//     this node no longer serves the topic below the asker's epoch and its
//     produces in flight left the gate; a leaving node's wait for its
//     topics to be pulled (ExpectHandoffs, AwaitHandoffs).
//   - The deletion of a revoked topic's records (DeleteRevoked), once its
//     produces in flight left the gate.
//
// # What it must not do
//
// It asks the lease room (Lease) for the lease check and the epoch a
// topic is held at, and reaches the rest of the node only through its
// Env: SWIM's word on a peer, a frame sent to a peer, the clock, timers,
// spawned work and the rest of a piece of work (Resume). It
// decides nothing of ownership or leases, reads no clock, arms no timer and
// starts no goroutine of its own, and holds none of its locks while it calls
// out, but for the gate's and a turn's own bookkeeping. Its answers are
// typed (wire structs and errors, NotServedError among them): the node
// encodes them and answers with them. The byte layouts are wire's (frames)
// and shardstore's (the log, the producer sessions).
package records
