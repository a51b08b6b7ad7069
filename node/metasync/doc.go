// Package metasync keeps a node's copies of the versioned cluster metadata
// current: which version of each kind this node holds, which peers
// announced newer ones, which pulls are due, the answer to a peer's pull,
// and the merge of what a peer pushed.
//
// # Versions
//
// Three kinds of cluster metadata carry versions, announced through SWIM
// (MetadataVersion events, one per node and kind) whenever they change:
//
//   - Membership: a Lamport version over the membership digest, which is
//     xxh3 of (id, generation, incarnation, state) of every live member in
//     id order (wire.MembershipDigests). It rises by one whenever the
//     digest changes on this node; after merging a peer's member list this
//     node takes the peer's version if its digest then equals the peer's,
//     or one above it if it knows more (so that the peer pulls in turn). A
//     higher version thus means "has incorporated a newer change"; equal
//     versions usually mean equal views.
//   - Ring: the same, over the ring digest, xxh3 of (id, rack) of every
//     live member: exactly the input of the ring's placement. Its only
//     input is the membership, so pulling it pulls the member list.
//   - Shard-leader table: the sum of its terms, which only grows under the
//     term-checked merge (router.LeaderTable); merging a peer's table makes
//     it at least the peer's.
//
// # Pulls
//
// A node that hears of a higher version than its own pulls that kind from
// the announcing peer (MetadataPull over the peer connection, answered by
// MetadataPush), one pull per kind at a time. A member list that holds
// anything newer than SWIM here knows makes SWIM run its full-state
// exchange with that peer (SWIM's merge rules decide; the sync never edits
// membership itself), and the pull is repeated. A pull unanswered within
// Config.PullTimeout goes to another peer, preferably one that announced
// the wanted version. Every Config.Interval the node pulls every kind from
// a random live peer even without announcements, which bounds staleness
// when gossip is lost.
//
// A pull sends only what the asker lacks (delta.go): it names the asker's
// copy by digest, and a peer with the same copy answers with nothing, so
// the pulls of a quiet cluster cost the same bytes at any size. A pull for
// an announced version also names the digests of the copy's buckets (one
// per Config.BucketRecords records), and the answer holds the records of
// the buckets that differ; any other pull whose copy differs gets the
// whole copy, which recovers whatever gossip lost. Until it merged every kind once (its first full
// sync) it pulls each kind it lacks from a random live peer; Synced says
// when that is done, or when the node is alone and cannot sync. Pulls are
// answered whether or not the answering node is ready.
//
// # Shape
//
// The decisions are a core with no I/O: the tracker says which pulls to
// send given the time, this node's versions and the live peers; the
// versions of the membership and the ring follow the digests they are
// given. Sync is the thin driver around them, with one lock: it touches
// the rest of the node only through its Env (send a frame to a peer,
// SWIM's member list, its full-state exchange and its announcements, a
// clock and a random choice) and the shard-leader table it is given. The
// byte layouts of the frames, the member lists and the leader table are
// wire's.
//
// It must not: decide membership (SWIM does; a newer member it hears of
// goes to SWIM's merge), write a leader row other than through the table's
// term check, read a clock or draw a random number other than through its
// Env, or hold its lock while it calls out.
package metasync
