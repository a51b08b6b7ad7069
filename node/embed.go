package node

import (
	"github.com/shoalmq/shoal/node/feed"
	"github.com/shoalmq/shoal/node/ownership"
)

// Embedding: a broker that runs a Node in its own process learns which
// topics the node holds from OwnershipEvents, and checks a Guard before it
// acknowledges a write of its own. The events say what changed; the guard
// is the authority (a held topic is served only under a lease, which an
// event cannot announce: leases run out without any message). Both are
// the feed room's (node/feed); here the node tells the feed what it holds.

// The names of package feed that node's users know, forwarded.
type (
	// OwnershipEventKind says what an OwnershipEvent announces
	// (feed.Kind).
	OwnershipEventKind = feed.Kind
	// ReleaseReason says why a topic was released (feed.Reason).
	ReleaseReason = feed.Reason
	// OwnershipEvent is one change of what this node holds (feed.Event).
	OwnershipEvent = feed.Event
	// NotServingError is a Guard's refusal (feed.NotServingError).
	NotServingError = feed.NotServingError
	// Guard checks that this node may acknowledge a write of a topic at
	// an epoch (feed.Guard).
	Guard = feed.Guard
)

// The kinds of ownership events and the reasons of a release.
const (
	Acquired         = feed.Acquired
	Released         = feed.Released
	ReasonClosed     = feed.ReasonClosed
	ReasonSuperseded = feed.ReasonSuperseded
	ReasonLeaving    = feed.ReasonLeaving
)

// ErrNotServing is wrapped by the error of a Guard whose lease does not
// cover its topic at its epoch (feed.ErrNotServing).
var ErrNotServing = feed.ErrNotServing

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
func (n *Node) OwnershipEvents() <-chan OwnershipEvent {
	// The feed starts while no change of the holdings can be made or
	// announced (lease.Agent.Holdings; the topics loaded from the store
	// are announced before the node is shared), so each change reaches
	// the feed once: held now, or announced after.
	n.ownFeedOnce.Do(func() { n.lease.Holdings(n.ownFeed.Start) })
	return n.ownFeed.Out()
}

// pumpOwnershipEvents hands the feed's events to their reader until the
// node stops, then closes the channel.
func (n *Node) pumpOwnershipEvents() {
	n.ownFeed.Pump(n.life.Done())
}

// Guard returns the guard of topic at epoch.
func (n *Node) Guard(topic string, epoch uint64) Guard {
	return feed.NewGuard(n.lease, topic, epoch)
}

// announce turns durable ownership changes into events; why is the reason
// of the drops among them.
func (n *Node) announce(changes []ownership.Change, why ReleaseReason) {
	for _, c := range changes {
		switch {
		case c.Put:
			n.ownFeed.Held(c.Topic, c.Held.Epoch, c.Held.Partitions)
		case c.Drop:
			n.ownFeed.Dropped(c.Topic, why)
		}
		if n.ownedFn != nil {
			var held uint64
			if c.Put {
				held = c.Held.Epoch
			}
			n.ownedFn(c.Topic, held, c.Floor)
		}
	}
}
