// Package serve serves a node's metadata requests and forwards requests
// between nodes: what a request is once decoded, what its answer is, the
// shard leader's path through raft, the forwards and their waits, and the
// bounds and timings of the requests being served.
//
// # What it owns
//
//   - Requests and answers: a metadata request (Assign, Revoke,
//     UpdatePartition, Lookup) is decoded once, where it arrives
//     (DecodeRequest); a write that names no session is given the
//     node's own (Config.Session) where it enters the cluster and its
//     payload re-encoded, so a forward carries it and the node's own
//     re-sends of it apply once. A leader stamps the session writes it
//     proposes: the newest stamp its state held when it took office,
//     plus the time since on the node's clock (sessions.go). An Answer carries its error typed: built with the
//     answer, or decoded once where another node's answer comes back
//     (Relayed). Whether to forward again, and the outcome a request is
//     counted under, are read from that error, never from a payload.
//   - Metadata serving (Server.Meta): a plain lookup from this node's
//     replica of the shard or from the routing cache while the cached
//     owner is alive (only the leader says "not assigned"); anything else
//     by the shard's leader, which prepares the meta command, proposes it
//     and answers once it applied and settled; a refusal only from a state
//     that holds every committed command (a read index first); a write of
//     a session proposed even when refused, so the refusal is the answer
//     to every retry.
//   - Forwarding (Server.ToLeader, ForwardTo, Forward): a node that does
//     not lead the shard forwards the request to the leader its table
//     names, over the peer connection, one hop more. A request makes at
//     most wire.MaxForwardHops hops. With no leader known, itself named, or
//     no hop left, the node answers itself: NotLeader with the leader's id
//     and client address as the hint, or Unavailable with a retry hint
//     when it knows no other leader. A leader that learns from raft that
//     it was deposed answers the same way, with the leader raft named
//     (which the table learns), and its request is forwarded there as if
//     it had never led. An assignment a forward brings back fills the
//     routing cache.
//   - The waits of forwards: each forward has an id, numbered from
//     Config.FirstForward (apart in each life of the node), and waits
//     three quarters of the request timeout for its ForwardReply
//     (TakeReply), so that the client hears back before it gives up. A
//     peer that goes down fails at once every forward waiting on it, in
//     the order they were sent (PeerDown). A reply is handed on once; a
//     late or repeated one finds no wait.
//   - Copies of a forward (TakeForward): a Forward is taken once per
//     sender and id within the request timeout, after which its origin
//     has stopped waiting; a copy inside the window (a duplicated frame)
//     is dropped and counted, since served again it could make a change
//     refused the first time, after its origin answered that it was
//     refused. The memory of forwards taken is a bounded ring.
//   - Bounds and timings: Admission holds the requests being served to a
//     slot each while their handler runs and to their bytes until they
//     are answered; Bounded answers Unavailable a request not answered
//     within the request timeout; Latency times client requests by op and
//     outcome, and the Server times the forwards answered.
//
// # What it may touch
//
// It reaches the node through its Env: sending a frame to a peer, the
// clock and timers, the members' client addresses and the view of the
// membership, a read index. It asks the rooms it calls through interfaces
// of its own: the events room whether this node leads a shard (and its
// loss), the lease room the term, the proof of it, a proposal and what it
// applied and the wait for a command to settle, the state machine its
// reads. It is given the node's shard-leader table and routing cache,
// which it reads and fills, and the node's own write session. It starts
// no goroutine and reads no clock of its own. One lock guards its own
// state (the forwards waiting, the forwards taken), another the stamps'
// bases; no method of its Env or of those rooms is called under either
// but After, whose function never runs before After returns.
//
// It does not read frames off a connection, authorize a client, or serve
// what is not a metadata request (produces, fetches, watches, membership,
// the operators' requests): the node does, and hands it the rest. The byte
// layouts are wire's.
package serve
