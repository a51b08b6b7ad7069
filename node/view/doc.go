// Package view is a node's view of the membership: every member SWIM
// knows, the live ones, the dead and the removed, the drained, the
// suspects, when the live set last changed, and the ring's placement for
// them (desired replicas and preferred leader of every shard), with the
// raft id of every member read.
//
// # What it owns
//
//   - The View, built anew by Builder.Rebuild on every change of SWIM's
//     members or of the operators' marks, and never changed after: the
//     reconcile room reads it as a reconcile.View (embedded, Rec), the
//     other rooms through its questions (Alive, Drained, Removed, Member,
//     Placement, Candidates). A rebuild of the same members with the same
//     marks returns the old view; one of the same live and drained members
//     keeps the old ring and placement (placing every shard costs a
//     rendezvous walk each).
//   - The members' raft ids (NameOf): learned as the members are read,
//     never forgotten; a member whose raft id (xxh3 of its id) is
//     another's is left out of the view and logged (ErrIDCollision).
//   - What a rebuild tells the node: a member removed for good is dead to
//     raft (once), one removed before and back is alive again, and every
//     peer's address is recorded for the peer network.
//
// # What it may touch
//
// It reaches the node only through its Env: the marks' judgement of the
// members, raft's NodeDead and NodeAlive, the peers' addresses and the
// clock. One lock guards the raft ids; no Env method is called under it.
// Rebuild runs on one goroutine at a time (the event loop's task, or the
// node's start); the node publishes the view it returns. It decides
// neither membership (SWIM does) nor placement (router does), and reads
// the marks only as the node judges them (node/reconcile).
package view
