package node

import (
	"context"
	"maps"
	"slices"

	"github.com/shoalmq/shoal/node/feed"
)

// Leave leaves gracefully: SWIM announces the leave, leaderships still held
// are handed to other replicas, then the node closes. The topics this node
// owned are moved by their shard leaders, as for a dead node, and the node
// closes once their new owners pulled its records of them (bounded by ctx
// and Config.HandoffTimeout).
func (n *Node) Leave(ctx context.Context) error {
	if !n.life.Running() {
		return n.Close()
	}
	// Stop serving first, and say so to the leaders that granted the
	// leases, before anyone can learn of the leave and move the topics:
	// their next owners then need not wait the leases out.
	n.lease.Release(func(epochs map[string]uint64) {
		n.records.ExpectHandoffs(epochs)
		for _, t := range slices.Sorted(maps.Keys(epochs)) {
			n.ownFeed.Dropped(t, feed.ReasonLeaving)
		}
	})
	// Then leave SWIM: the others drop this node from their rings, so no
	// shard manager hands a leadership back, and their followers elect new
	// leaders at once for the groups it led (raftmux NodeDead); whatever it
	// still leads after that is transferred explicitly.
	if n.started == nil || n.started.Swim == nil {
		return n.Close()
	}
	if err := n.started.Leave(); err != nil {
		n.log.Warn("node: swim leave", "err", err)
	}
	n.admin.Leave(ctx, n.host)
	// The topics' next owners pull their records from here first.
	n.records.AwaitHandoffs(ctx)
	return n.Close()
}
