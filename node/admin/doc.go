// Package admin serves the operators' requests (shoalctl drain, undrain,
// transfer-leader, remove). Each is answered by an AdminResult; with
// client tokens only the admin role may make them (node/security).
//
// # What it owns
//
//   - Drain and Undrain are served by the node they name (any other node
//     forwards them there): it records and spreads its drain mark
//     (Marks.Drain) and answers with what it still owns and leads. The
//     work is the cluster's: shard leaders move its topics, shard
//     managers its leaderships. Both are idempotent; a client repeats
//     Drain to watch the node empty.
//   - TransferLeader is served by the shard's leader: it checks that the
//     node named is a voter of the shard, tells that node to keep the
//     leadership (Prepare: a pin the shard manager respects while the
//     placement stays), hands leadership over through raft and answers
//     once its replica sees the new leader, with its term.
//   - RemoveNode is served by every node for itself: it records and
//     spreads the removal (Marks.Remove), and answers how many of
//     the shards it leads still count the removed node. A client asks
//     every live member until none does.
//   - A leaving node's leaderships (HandOff, Leave): each shard it leads
//     is handed to the first other voter that is a live member, one try
//     per shard; the node then waits, on its clock and for a few seconds
//     at most, until it leads nothing.
//
// # What it may touch
//
// It reaches the node only through its Env (the clock and timers, the
// view of the membership, the raft host's operations, the count of the
// leaderships handed over), the rooms it reads and tells through
// interfaces of its own (the events room's leaderships, the lease room's
// holdings and leaderships, the node's marks, the shard manager's pin)
// and the parts its Config gives it: the serve room, which forwards
// (Forwarder), and the shard-leader table; HandOff and Leave are handed
// the raft host's blocking calls (Replicas). It holds no state and no
// lock of its own, starts no goroutine and reads no clock of its own.
// The marks themselves, and what a drained or removed node means to the
// cluster, are the reconcile room's.
package admin
