// Package node is Shoal's composition root: it turns membership, placement,
// raft, storage and the wire into a node that serves the cluster's metadata
// with no controller. Every shard leader is the local controller of its
// slice. This package holds the wiring, start and stop (the Config is
// node/config's, with its defaults and checks); every
// concern is a room of its own under node/, which is given the rooms it
// calls, typed by small interfaces of its own, and reaches the rest of
// the node only through the Env (or Host) interface its wiring file here
// implements; newNode builds the rooms in one ordered list, each after
// the ones it needs (a room that calls one built after it is given it
// once that is built).
//
// # The parts
//
//   - SWIM (swim.Driver on Config.SwimAddr) gives the membership; every
//     change rebuilds the view (node/view, wired in view.go): the raft id
//     of every member (RaftID, xxh3 of the node id), the peer addresses
//     netio dials, the operators' marks (marks.go) and the ring's
//     placement (router.Ring.Placement): desired replicas and preferred
//     leader of every shard.
//   - raftmux.Host runs the raft group of every shard the node hosts, over
//     raftio's Storage, Transport and Inbound; a replica is created only
//     for a shard the ring places here, on a known member's word
//     (hostile.go).
//   - The node's own work runs on one schedule (sched.go, runtime.go):
//     timers, spawned work (node/life, with the node's life cycle) and
//     the tasks of node/sched. A started node's are the wall clock's and
//     goroutines; a driven node's (NewDriven, drive.go; node/world) its
//     caller's, a simulation's.
//
// # The rooms, and the file here that wires each
//
//   - node/config (config.go): Config, its defaults by preset and the
//     checks New runs; config.go also holds the seams a test sets.
//   - node/shardsm (shardsm.go): the state machine of every hosted shard.
//   - node/events (events.go): the event loop of SWIM's events and what
//     raft reports of the hosted replicas.
//   - node/reconcile (reconcile.go, marks.go): the shard manager, the
//     owners' moves, strays, the cluster's birth, the operators' marks
//     and how they are said.
//   - node/lease (lease.go), over node/ownership and node/duty: the
//     ownership protocol (docs/leases.md).
//   - node/records (records.go): a topic's records on its owner and their
//     handoff to the next one.
//   - node/serve (serve.go): metadata requests, forwarding, the node's
//     own write session and its stamps, admission and latency.
//   - node/watch (watch.go): Watch and ListTopics.
//   - node/metasync (metasync.go): the cluster metadata sync.
//   - node/admin (admin.go): the operators' requests.
//   - node/dispatch (dispatch.go): every frame the node receives, handed
//     to its room.
//   - node/feed (embed.go): the ownership events and the Guard of a
//     program that embeds the node (examples/broker).
//   - node/security (auth.go): credentials, tokens and roles, put on the
//     transport and SWIM, and the request limits.
//   - node/view (view.go, hostile.go): the view of the membership, its
//     placement, the members' raft ids, and which replicas a leader may
//     create here.
//   - node/life (runtime.go): the life cycle and the spawned work.
//   - node/status (status.go, latency.go): Status and Stats, laid out
//     from what the rooms, raft, the transport and SWIM counted, and the
//     latency histograms.
//   - node/birth (node.go): whether the cluster is born, and the node's
//     readiness.
//   - node/world (node.go, drive.go, runtime.go): what a node needs of
//     the world, a started node's transport and SWIM, a driven node's
//     Runtime and its raft host's drive.
//
// # Birth, readiness and requests
//
// How a cluster is born, when a node is ready and how requests are served
// are in docs/design.md ("Cluster birth", "Requests").
//
// node contains no protocol or storage format of its own beyond the
// adapters above; those live in wire, swim, raftmux, shardstore and meta.
package node
