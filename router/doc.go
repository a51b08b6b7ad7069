// Package router answers "where does this live?": key → shard, shard →
// replicas and preferred leader, shard → current leader, topic → owner. It
// holds pure data structures and does no I/O; the node feeds it membership,
// leader and routing events and asks it questions on every request.
//
// # Key → shard
//
// ShardOf(key, S) = xxh3(key) mod S, with S fixed when the cluster is born.
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
// rendezvous walk costs O(N × RF) per shard (Placement of 10,000 shards on
// 100 nodes is a few tens of milliseconds); the ring's is a binary search
// plus a short walk, for O(N × V) memory.
//
// One limit is structural: with racks of unequal size and every shard spread
// over min(RF, racks) racks, the nodes of the smaller racks must hold more
// (10 nodes in racks of 4, 3 and 3 at RF 3 put at least 1.11× the mean on
// each node of a 3-node rack).
//
// # Leaders
//
// The walk's first node would be the natural preferred leader, but with a
// few hundred shards per node sampling noise puts the busiest node 10–20%
// above the mean. Placement therefore applies bounded loads (Mirrokni,
// Thorup, Zadimoghaddam) to the choice of leader among a shard's replicas:
// no node leads more than ceil((1+LeaderSlack)·S/N) shards where the replica
// sets allow. Replica sets are untouched; leadership is cheap to move (a raft
// leadership transfer), data is not.
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
