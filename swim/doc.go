// Package swim keeps every node's view of the cluster: who is alive,
// suspect or dead, with their addresses and racks, and carries small
// cluster-wide facts (shard leaders, metadata versions) piggybacked on its
// datagrams. It is the failure detector for the whole system.
//
// The protocol is SWIM with the Lifeguard extensions, written as a
// sans-I/O state machine (Node): the caller feeds it time (Tick), received
// datagrams (Receive) and the answers to its push-pull requests, and drains
// what it wants sent and what it wants known (Ready, Advance). The core
// reads no clock, opens no socket, starts no goroutine, and draws all its
// randomness from a source seeded by its Config: the same inputs give the
// same outputs, which is what lets bench/swimsim run a thousand nodes in
// virtual time and replay any run from its seed.
//
// Identity is (node id, generation); the generation rises at every start of
// a node. Merge rules, for two facts about the same node:
//
//   - a higher generation supersedes everything known about older ones;
//   - within a generation, Dead (or Left) is final: nothing undoes it,
//     whatever its incarnation;
//   - otherwise the higher incarnation wins, and at equal incarnation
//     Suspect beats Alive.
//
// A node that hears itself suspected refutes by raising its incarnation. A
// node that hears itself declared dead (a partition outlived the suspicion
// timeout), or hears of a newer generation of itself than its own, rejoins
// under a generation above it, so partitions heal without an operator and
// no claim about a generation keeps a node out for good. Events naming a
// generation more than Config.MaxGenerationAhead past the clock are dropped.
//
// What a datagram may make the node do is bounded: an ack counts only from
// the member probed or one asked to relay, relays in flight are bounded
// (MaxRelays), as are members, the broadcast queue and push-pull sizes.
//
// With keys (Config.Keys, or one derived from Config.Secret) every
// datagram and push-pull is sealed with AES-GCM under the keyring's primary
// key (wire.SwimKeyring) and names its recipient and a sequence number;
// input is taken only if it opens under a key of the ring, is for this
// node, and carries a number its sender's replay window has not taken
// (replay.go). SetKeys rotates the keys while the node runs.
//
// Every node exchanges state over TCP with a random member now and then
// (push-pull, anti-entropy). The exchange starts with the state summed up
// in DigestBuckets digests, and only the entries of buckets whose digests
// differ travel (digest.go): two nodes that agree send two small frames,
// whatever the size of the cluster. A joiner exchanges whole states.
//
// The driver (Driver, in driver.go) binds a Node to a UDP socket, the real
// clock and push-pull over TCP, with one goroutine.
package swim
