// Package router answers "where does this live?": key → shard, shard →
// replicas and preferred leader, shard → current leader, topic → owner. It
// holds pure data structures and does no I/O; the node feeds it membership,
// leader and routing events and asks it questions on every request.
//
// # Key → shard
//
// ShardOf(key, S) = xxh3(key) mod S, with S fixed when the cluster is born.
//
// # The ring
//
// A Ring is built from a member set (node id, rack). Each node has V tokens,
// xxh3 of its id followed by the token number. A shard's replicas are found
// by walking clockwise from xxh3 of the shard id, taking distinct nodes and
// skipping a node whose rack is already taken while an unused rack remains;
// once every rack is used, the next distinct nodes are taken as they come.
// Nodes and racks are indexed in sorted order and equal tokens are ordered
// by node, so the same member set gives the same placement on every node
// whatever order the members were learned in. A node not taken by a walk
// does not change it, so when a node joins only the shards that gain it
// change, and when one leaves only the shards that held it change.
//
// V (DefaultVNodes = 256) was chosen with bench/placement; bench/README.md
// has the figures. Beyond a few hundred tokens the per-node share of the
// ring is within a few percent of fair and what imbalance remains is the
// sampling noise of a finite number of shards, which more tokens do not
// remove.
//
// # Balance
//
// Replica sets are the walk's, untouched, which keeps movement minimal; the
// ring therefore carries the sampling noise of hashing S shards onto N nodes
// (with 4096 shards on 10 nodes, the busiest node holds 5–15% more than a
// fair share). Two limits are structural: with racks of unequal size and
// every shard spread over min(RF, racks) racks, the nodes of the smaller
// racks must hold more (10 nodes in racks of 4, 3 and 3 at RF 3 put at least
// 1.11× the mean on each node of a 3-node rack).
//
// Preferred leaders are balanced separately: Placement applies bounded loads
// (Mirrokni, Thorup, Zadimoghaddam) to the choice of leader among a shard's
// replicas, so no node leads more than ceil((1+LeaderSlack)·S/N) shards
// where the replica sets allow. Leadership is cheap to move (a raft
// leadership transfer); data is not.
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
