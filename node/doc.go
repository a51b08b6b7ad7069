// Package node is Shoal's composition root: it turns membership, placement,
// raft, storage and the wire into a node that serves the cluster's metadata
// with no controller. Every shard leader is the local controller of its
// slice.
//
// # Parts and who owns what
//
//   - SWIM (swim.Driver on Config.SwimAddr) gives the membership; every
//     change rebuilds the view: the raft id of every member (RaftID, xxh3
//     of the node id), the peer addresses netio dials, and the ring's
//     placement (router.Ring.Placement): desired replicas and preferred
//     leader of every shard.
//   - raftmux.Host runs the raft group of every shard the node hosts, over
//     raftio's Storage (shardstore: one group commit per round), Transport
//     (one wire.RaftBatch frame per destination node per round; snapshot
//     chunks ride wire.SnapshotChunk frames) and Inbound (peer raft frames
//     decoded and delivered to the host). Leadership changes update the
//     router.LeaderTable and are announced through SWIM; SWIM's ShardLeader
//     events (term-checked) fill the table on every node.
//   - The events room (node/events; events.go wires it) takes SWIM's
//     events and the raft host's reports of the hosted replicas on the
//     node's events task: the members' liveness told to raft, the view
//     rebuilt, the leader table filled, this node's leaderships announced,
//     which shards the replicas lead and since when each has known none.
//   - The shardsm room (node/shardsm; shardsm.go wires it) applies
//     committed meta commands to one meta.State per hosted shard. Each
//     topic's record is stored under its own data key of the shard (and
//     the epoch floor under another); an applied run of commands writes
//     only the records it changed, in the same batch as the applied index,
//     so a restart, and a raft snapshot (which streams every data key of
//     the shard), find exactly the applied state, and an apply costs the
//     same in a shard of ten topics or of ten thousand. It keeps each
//     shard's change log and computes lease grants against the state.
//
// # Birth
//
// A node whose store holds no shard waits until SWIM shows
// Config.BootstrapExpect live members; the first BootstrapExpect of them
// in id order create the groups of one placement, and any other node joins
// the cluster already born. When to do which is the reconcile room's
// (node/reconcile, birth.go), whose Driver bootstraps the groups it names
// from the event loop.
//
// # Requests
//
// Assign, Revoke, UpdatePartition and linearizable Lookup are served by the
// shard leader: the leader prepares the meta command (the owner, when not
// named, chosen among SWIM's live members), proposes it and answers once it
// applied. Any other node forwards the request over the peer connection to
// the leader its table names (at most wire.MaxForwardHops hops), or answers
// NotLeader/Unavailable with the hint it has; requests forwarded by a peer
// are served even before this node is Ready. Any node answers ShardLeaders
// with its shard-leader table and each leader's client address (leaders.go),
// so that a client sends these requests to the leader itself and the hop
// is the exception. A plain Lookup is answered
// from the node's own replica of the shard when it hosts one (unless that
// replica has known no leader for two election timeouts: cut off, or no
// longer sent to, its state may be far behind), else from the
// routing cache while the cached owner is alive, else by the leader. The
// cache is emptied in place every Config.MetadataSyncInterval, so a cached
// route is never served longer than that after it was learned, and a stale
// answer is fenced by its epoch anyway. A cached answer carries the
// topic's partition count as the route was learned. Such an answer (own
// replica or cache) is given where the request was read (the
// connection's reader goroutine, or its event loop with NetLoops) without
// allocating. Other lookups (linearizable, or unknown here) are served
// there too, as nothing on their path waits (a read index, the
// leader's state or a forward answers through a callback); every other
// request runs on a goroutine of its own. All are bounded by
// Config.MaxRequests, and hold their bytes against
// Config.MaxRequestBytes until it is answered. With client tokens, a
// client's requests are first checked against its token's role (auth.go,
// node/security). The decoding of metadata requests, their typed answers,
// the leader's path, the forwards and their waits, the copies of a forward
// dropped, the admission of requests and their latency histograms are the
// serve room's (node/serve); serve.go gives it the node's parts, and
// handler.go reads the frames and hands it what is its own.
// Produce and Fetch are served by the owner of the topic at the epoch the
// request names (records appended to the owner's shardstore topic log and
// acknowledged after fsync); anything else gets NotLeaderForTopic with the
// newest epoch the node knows.
//
// # Records across ownership moves
//
// A topic's records on its owner and their handoff to the next one are
// package records' (records.go wires it): every record carries the epoch
// it was written at, and the owner at epoch e writes offsets from
// (e-1)<<40 on, so no offset names two records across owners, whatever
// crashes. After a move the new owner pulls the previous owner's records
// before it serves, but asks only once, briefly, an owner the leader moved
// the topic off for its silence (OpenTopic.PrevSilent); a leaving node
// waits for that; a produce refused after its append removes its records;
// a revoked topic's records are deleted.
//
// # Embedding
//
// A broker that runs a node in its process learns what the node holds
// from OwnershipEvents and checks a Guard before acknowledging a write of
// its own (embed.go, examples/broker).
//
// # Ownership
//
// An owner serves a topic only under a lease from the topic's shard
// leader (docs/leases.md). The two halves are cores with no I/O:
// ownership.Holder (the topics this node holds, their epoch floors, its
// leases) and duty.Leader (what this node owes as a shard leader: whether
// it may grant, vouch rounds, the OpenTopic/CloseTopic it owes, and the
// fences that hold a topic's next owner back until every earlier one has
// stopped). The lease room (node/lease; lease.go wires it) holds both,
// runs the rounds — one LeaseRound per peer per
// Config.LeaseRenewInterval carrying lease and vouch requests — sends the
// ownership messages and takes them and their acks. After a
// command commits, the shard's leader sends OpenTopic to the new owner
// (once its fences allow) and CloseTopic to the previous one, resending
// until a TopicAck. A new leader, once a read index made its state current,
// queues OpenTopic for every topic of the shard and CloseTopic to previous
// owners. An owner persists the topics it holds and the epochs it closed
// (the store's node slot), so a restart keeps them; it serves them again
// once a lease covers them. When SWIM declares a member dead or left, or
// a member has not asked a leader for a lease on a shard, nor sent it any
// lease round, for three lease lengths, every shard leader moves the
// topics that member owned there to live members (meta PlanReassign,
// epoch + 1).
//
// # The shard manager
//
// Every reconcile interval each shard leader compares its raft
// configuration with the ring's desired replicas and starts at most one
// change (Config.MaxConfChanges per node per round): add a desired live
// member as learner, promote it on a later round, remove a voter the ring
// no longer wants once the group has more voters than the replication
// factor (handing leadership away first if it is the leader itself), then
// transfer leadership to the preferred replica — but not while the leader
// is moving topics there. Only committed raft configuration changes
// count, so differing views cost time, not safety. A replica removed while
// its node was cut off never applies its removal and lingers: such strays
// are confirmed with their shards' leaders and dropped. The decisions, and
// the moves of dead, drained or silent owners' topics, are the reconcile
// room's (node/reconcile, whose scenarios in testdata are its
// specification); its Driver runs the passes against the raft host and the
// state machine, and reconcile.go gives it the node's parts.
//
// # Operators' marks
//
// A drained node (shoalctl drain) keeps the mark in its store and says it
// in its SWIM record's metadata; every node reads the marks into its view:
// a drained member is no owner candidate, leads no shard in the placement
// (router.PlacementExcept), and every shard leader moves the topics it
// owns (meta PlanReassign, as for a dead owner). A removal of a node gone
// for good (shoalctl remove) is recorded by every node, kept in its store
// and said in its metadata too; the removed node is out of the view, the
// ring and raft, its replicas are replaced, and it stays out if it comes
// back with its old store (reconcile.Marks; marks.go binds them to the
// store and SWIM). admin.go serves the operators' requests.
//
// # Cluster metadata sync
//
// The versions of the membership, the ring and the shard-leader table,
// their announcements through SWIM, and the pulls and pushes that keep
// them current are package metasync's; metasync.go binds it to the
// node's peers, SWIM, clock and random source, and the event loop ticks
// it (node/events).
//
// A starting node answers client requests Unavailable (with a retry hint)
// until it is Ready: its cluster is born, it merged every kind from a peer
// once (or it is alone: no live peer, either because it was given no seeds
// or because none answered within a grace period, so a single node never
// waits for a sync that cannot happen), and it knows every shard's leader
// or a grace period after birth ran out.
//
// node contains no protocol or storage format of its own beyond the
// adapters above; those live in wire, swim, raftmux, shardstore and meta.
package node
