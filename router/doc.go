// Package router answers "where does this live?": key → shard, shard →
// replicas and preferred leader, shard → current leader, topic → owner. It
// holds pure data structures and does no I/O; the node feeds it membership,
// leader and routing events and asks it questions on every request.
//
// # Key → shard
//
// ShardOf(key, S) = xxh3(key) mod S, with S the shard count the cluster is
// born with. A shard splits in two by the next bit of xxh3(key) / S; a
// ShardMap holds the live shards and finds a key's by walking its path
// (shardmap.go, docs/shards.md). A map that never split agrees with
// ShardOf.
//
// # The walk
//
// A Ring is built from a member set (node id, rack). A shard's replicas are
// found by a walk over the nodes: take distinct nodes in walk order,
// skipping a node whose rack is already taken while an unused rack remains;
// once every rack is used, take the next nodes not yet taken. Nodes and
// racks are indexed in sorted order and ties go to the lower node id, so the
// same member set gives the same placement on every node whatever order the
// members were learned in. A node the walk does not take does not change it,
// so when a node joins only the shards that gain it change, and when one
// leaves only the shards that held it change.
//
// Two walk orders are implemented (RingConfig.Walk):
//
//   - WalkTokens, the consistent-hash ring of DESIGN.md: V tokens per node,
//     xxh3 of the node id followed by the token number, walked clockwise
//     from xxh3 of the shard id.
//   - WalkRendezvous, the default: nodes in descending order of
//     mix(xxh3(node id) xor xxh3(shard id)), rendezvous hashing. It is the
//     ring with V → ∞: every node's expected share is exactly fair.
//
// The default is rendezvous because the token ring's arcs are uneven: with
// racks of 3–10 nodes each rack is a small ring of its own, and the busiest
// node holds 1.15–1.21× its fair share of replicas at V = 256 and
// 1.09–1.12× at V = 1024 (worst of 16 member sets), against 1.05–1.08× for
// rendezvous, which needs no tokens (bench/README.md, "Placement"). What
// imbalance remains is the sampling noise of hashing S shards onto N nodes,
// which no stateless scheme removes without breaking minimal movement. A
// rendezvous walk scores every member once per shard (once more per replica
// beyond the number of racks, if racks are fewer than RF); rebuilding the
// whole table of 10,000 shards took 1.2 ms of CPU on 10 nodes, 5 ms on 100
// and 30 ms on 1000 (BenchmarkPlacement, on a loaded machine), less than the
// token ring, whose sort of N × V tokens dominates at 1000 nodes.
//
// One limit is structural: with racks of unequal size and every shard spread
// over min(RF, racks) racks, the nodes of the smaller racks must hold more
// (10 nodes in racks of 4, 3 and 3 at RF 3 put at least 1.11× the mean on
// each node of a 3-node rack). Against each node's fair share given its
// rack, the walk's busiest node holds 1.03–1.05× at 10 nodes and 4096
// shards, and 1.11× at 30 nodes (about 400 replicas per node, where that is
// two standard deviations of the sampling noise).
//
// RingConfig.ReplicaSlack bounds replica loads instead: the walk skips a
// node already over (1+slack)× its fair share while the rack rule allows
// another. That brings the busiest node within the slack (1.01–1.03×), but
// the loads, and so the choices, of every later shard depend on the whole
// member set: a leave then moves shards that did not hold the leaver and a
// join shards that do not gain the newcomer (0.3–5% of shards at slack
// 0.01–0.03). It is off by default.
//
// # Leaders
//
// A shard's preferred leader is the first node of Placement.Replicas, which
// Placement.Leader returns; it is not always the walk's first node
// (Ring.WalkLeader). With a few hundred shards per node sampling noise puts
// the busiest walk leader 10–20% above the mean, so Placement applies
// bounded loads (Mirrokni, Thorup, Zadimoghaddam) to the choice of leader
// among a shard's replicas: shards in id order, each led by the first of
// its replicas in walk order that leads fewer than ceil((1+LeaderSlack)·S/N)
// shards (the least loaded if none does). A second pass evens out what the
// cap leaves: leaderships move, in shard order, from nodes above the mean
// to replicas that lead fewer than floor((1-LeaderSlack)·S/N), so the
// idlest node too leads within about 5% of the mean (at 15 nodes and 1,024
// shards it led 27% below it before). Replica sets are untouched;
// leadership is cheap to move (a raft leadership transfer), data is not.
//
// # The shard-leader table
//
// LeaderTable records (leader, term) per shard; an update applies only with
// a term at least the current one, reads are lock-free atomic pointer loads,
// and a version counter changes with every applied update.
//
// # The routing cache
//
// Cache maps topic → (owner, owner address, epoch) with epochs that only go
// forward, bounded capacity with CLOCK eviction, lock-free reads and no
// allocation on a hit or on a Put of a present topic. See Cache.
package router
