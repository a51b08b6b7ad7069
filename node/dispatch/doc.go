// Package dispatch reads the frames a node receives and hands each to
// the room it belongs to: it is the node's front desk.
//
// # What it owns
//
//   - A frame's way in: taken where the transport read it (Deliver:
//     keepalives; nothing else before the node opens, Open; a client's
//     request not taken counted refused) or whole from a driven node's
//     caller (DeliverFrame, its header checked), then handed on
//     (Dispatcher.Frame): a client's request is first
//     authorized by its token's role (node/security), then a peer's raft
//     frames go to the raft inbound, its TopicAcks and lease frames to
//     the lease room, its ForwardReplies to the serve room, its
//     RecordsChunks to the records room. A client's plain Lookup that
//     needs no wait is answered where it was read, without allocating
//     (AppendLookup: from this node's replica of the shard, or the routing
//     cache while the cached owner is alive). Every other request takes a
//     slot and its bytes (serve.Admission) and is served: a lookup where
//     it was read (nothing on its path waits), anything else as spawned
//     work.
//   - A request served (Handle): the peers' OpenTopic and CloseTopic
//     handed to the lease room and acked once durable, their RecordsPulls
//     to the records room, metadata pulls and pushes to the sync, their
//     Forwards served as requests one hop further; a client's Members,
//     Shards, ShardLeaders and Status answered from the node's view and
//     tables, Produce and Fetch by the records room, Watch and ListTopics
//     by the watch room, the operators' requests by the admin room, and
//     metadata requests by the serve room. A node not ready answers a
//     client Unavailable; a node not born, or removed from the cluster,
//     answers Unavailable but for data requests.
//   - The typed refusals of the records and watch rooms put on the wire
//     (NotLeaderForTopic with the newest epoch and owner known, counted),
//     and the count of requests handled.
//
// # What it may touch
//
// It reaches the node only through its Env (the clock, spawned work, the
// admission of a request while the node is not closing, the raft
// inbound, readiness, birth and removal, the view, SWIM's members, the
// raft host's operations and the node's status) and the rooms its Config
// names, which it hands frames and requests to; a test's faults, when
// set, take the peers' frames (Config.PeerIn) and deliver them later
// themselves. It keeps no state but its counters and whether it opened,
// holds no lock, and starts no goroutine of its own. It decides
// nothing a room decides: it decodes, routes and encodes.
package dispatch
