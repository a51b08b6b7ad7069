package node

import "github.com/shoalmq/shoal/node/feed"

// Embedding: a broker that runs a Node in its own process learns which
// topics the node holds from OwnershipEvents, and checks a Guard before it
// acknowledges a write of its own. The events say what changed; the guard
// is the authority (a held topic is served only under a lease, which an
// event cannot announce: leases run out without any message). Both are
// the feed room's (node/feed); here the node tells the feed what it holds.

// OwnershipEvents returns the channel of this node's ownership events:
// Acquired when it comes to hold a topic (and, after a restart, for every
// topic it still holds), Released when it stops holding one. The events of
// one topic arrive in the order they happened and always alternate: an
// Acquired at a higher epoch is preceded by the Released of the one before.
// Events of different topics are not ordered against each other.
//
// The node never waits for the reader: a topic's unread events stay in a
// per-topic backlog, and a backlog longer than two events folds into the
// net change from what the reader was last told (at most a Released of
// that epoch, then an Acquired of the epoch held now), so holdings that
// began and ended unread are skipped and memory stays at two events per
// topic changed since the last read. A node that is not started delivers
// nothing. The channel closes when the node stops; a stopped node serves
// nothing, whatever the last events said.
//
// Events are kept from the first call on, which begins with an Acquired
// for every topic held then: a node nobody asks keeps none. A program
// that embeds the node calls it before Start, as the node's own records
// then give it every topic it holds after a restart.
//
// Being told Acquired does not make a write safe to acknowledge: check the
// topic's Guard for that.
func (n *Node) OwnershipEvents() <-chan feed.Event {
	return n.ownFeed.Open(n.lease.Holdings)
}

// pumpOwnershipEvents hands the feed's events to their reader until the
// node stops, then closes the channel.
func (n *Node) pumpOwnershipEvents() {
	n.ownFeed.Pump(n.life.Done())
}

// Guard returns the guard of topic at epoch.
func (n *Node) Guard(topic string, epoch uint64) feed.Guard {
	return feed.NewGuard(n.lease, topic, epoch)
}
