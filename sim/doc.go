// Package sim runs a whole Shoal cluster — 3 to 9 nodes with their real
// request handling, raft groups, leases, SWIM cores, metadata sync and
// Pebble stores on in-memory disks — in one process, on one goroutine, in
// virtual time, and checks what happened.
//
// One seed decides everything: the network's delays, losses, duplicates
// and reorderings; the cuts (both ways and one way) and partitions; the
// pauses; the crashes (power losses keep only what was synced, kills keep
// every write), power cuts of every node at once, and restarts from disk
// with a new generation; how long each fsync of a node's raft log takes
// (host.syncLag: a node's round waits for it, and a crash before it ends
// loses the round's writes; a power cut lands inside one now and then);
// each node's
// clock rate (within 80% of the drift bound the leases allow for); and
// the workload: assign, revoke, update of partition counts, plain and
// linearizable lookups, produce and fetch, sent as Shoal's client frames
// to any node with the client library's sessions on writes, through
// faults of their own (a request or answer lost or held back, a request
// duplicated, a timed-out write sent again with its number), some of the
// changes with a conflicting one racing them
// (both pass the leader's check; the state machine must refuse the one
// applied second). Faults aim too: a topic's owner is cut off (or only deaf)
// while a producer on its side keeps writing to it at its epoch and the
// others move the topic away and write to it; a slow node's links are
// late by varying amounts, so what it says about itself races what the
// others conclude about it; a node cut off from all the others is asked
// the linearizable lookups of the shards it led. The same seed gives the same run, byte for
// byte; a failing seed prints the command that replays it (make sim
// SEED=N) and the end of a readable trace.
//
// The checkers (each violation names the one that found it, Checker):
//   - linearizability of each topic's assigns, revokes, updates and
//     linearizable lookups (porcupine, against a model that allows the
//     moves the cluster makes on its own); a search that runs out of its
//     budget fails the seed too, as unchecked;
//   - one owner at a time, where it happens: the writes each node
//     acknowledged for a topic at one epoch span an interval of virtual
//     time, from the instant the node took the topic at that epoch if
//     that is earlier (world.Runtime.Owned), and no two such intervals
//     overlap or run against epoch order; and no node takes a topic at
//     an epoch it closed (a late OpenTopic after its CloseTopic);
//   - as the clients saw it (history.Check): no write acknowledged at an
//     epoch after one at a higher epoch had completed, no answer going
//     back in epoch, no acknowledged assignment lost (only a revoke
//     acknowledged after it, or one whose outcome is unknown, begun
//     before the topic was seen gone, explains a gone topic);
//   - the records (history.CheckRecords): no offset of a topic names two
//     records, and an acknowledged record is returned by every later
//     fetch from its node at its epoch, and at a later epoch unless a
//     revoke came between. A record missing at a later epoch after a
//     revoke, or from another node that did not get it by handoff (its
//     owner crashed or was silent, the pull was cut short), is a loss
//     docs/ownership.md documents: counted in Result.Records, not failed;
//   - SWIM's promises as each node's membership reports them: dead is
//     final within a generation, incarnations never fall;
//   - liveness: once the faults stop, within Config.Calm, every node is
//     ready, every shard has one leader every node knows, every topic is
//     owned by a live node and every node answers a plain lookup as the
//     leader does; and no node spins (more than 300,000 events in one
//     virtual second ends the run).
//
// Nodes are node.NewDriven nodes: the world hands them frames and SWIM
// events and calls Drive; their raft hosts are manual. What a started
// node runs on goroutines (requests, the lease and raft frame queues, its
// duties, record pulls) runs here as events after delays the seed draws
// (host.goFunc), so each seed tries another interleaving. The rest of a
// produce after its append runs the same way (host.yieldFunc), and one
// time in midFaultOdds the node is paused or crashed right there while
// its topic is moved away. A raft round that syncs its log finishes when
// the fsync the seed drew for it has passed (raftmux Config.SyncLag), as
// Pebble's sync gap and the disk make it on a started node. Raft draws its
// election timeouts from crypto/rand, so Run replaces crypto/rand.Reader
// with a seeded source while it runs: runs must not overlap in a process
// (cmd/shoalsim starts one process per core). Crashes keep all or none of
// the unsynced writes: Pebble's MemFS draws partial losses in map order,
// which would not repeat (shardstore's crash tests cover partial losses).
//
// With the mutants build tag, internal/mutant switches on deliberate bugs
// one at a time; TestMutants shows that each is caught by the checker it
// names (targets in mutants_test.go), not merely by some checker.
//
// Scale (scale.go) runs the same hosts as one cluster of hundreds or
// thousands of nodes, on a quiet network with the production timing, and
// measures per node against N what the nodes send, the simulator's time,
// the shard leaders, and how fast a join and a kill converge (shoalsim
// -scale, make sim-scale; the figures are in bench/README.md); then it
// checks SWIM's promises, liveness once the kill has settled, and one
// owner at a time (scaleChecks).
package sim
