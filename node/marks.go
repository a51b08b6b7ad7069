package node

import (
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/swim"
)

// The operators' marks (a drained node, nodes removed for good) are the
// reconcile room's (reconcile.Marks, which says where they live and what
// each does). Here they are read from the store's node slot and written
// back to it (reconcile.LoadMarks), said in this node's SWIM record, and
// read from the members' records into the view.

// loadMarks reads the marks from the store (reconcile.LoadMarks).
func (n *Node) loadMarks() (err error) {
	n.marks, err = reconcile.LoadMarks(n.cfg.ID, n.store, n.gen, func() bool {
		ids, _ := n.rs.Shards()
		return len(ids) > 0
	})
	return err
}

// publishMarks says this node's marks through SWIM and has the view
// rebuilt with them.
func (n *Node) publishMarks() {
	if err := n.swim.SetMeta(n.marks.Meta()); err != nil {
		n.log.Error("node: publish marks", "err", err)
	}
	n.viewDirty.Store(true)
	n.eventsTask.Kick()
}

// setDrained records and spreads this node's drain mark.
func (n *Node) setDrained(drained bool) error {
	changed, err := n.marks.SetDrained(drained)
	if err != nil {
		return err
	}
	if changed {
		n.log.Info("drain mark", "drained", drained)
		n.publishMarks()
	}
	return nil
}

// applyMarks merges the removals the members name into this node's, and
// returns the drained members and the removed ones (this node included if
// it was removed) as the view should see them. Event loop only.
func (n *Node) applyMarks(ms []swim.Member) (drained, removed map[string]bool) {
	heard := reconcile.ReadMarks(ms)
	for _, u := range heard.Unreadable {
		n.log.Debug("node: member metadata", "member", u.Member, "err", u.Err)
	}
	if added, err := n.marks.AddRemovals(heard.Removals); err != nil {
		n.log.Error("node: removals", "err", err)
	} else if added {
		if err := n.swim.SetMeta(n.marks.Meta()); err != nil {
			n.log.Error("node: publish marks", "err", err)
		}
	}
	drained, removed, out := n.marks.Judge(ms, heard)
	if out {
		n.log.Error("this node was removed from the cluster: it serves nothing; start it on an empty data directory to join as a new node")
	}
	return drained, removed
}

// removedSelf reports whether this node found itself removed.
func (n *Node) removedSelf() bool { return n.marks.Out() }

// recordRemoval records that node was removed at (unix ns), unless a
// later removal of it is already known, and spreads it.
func (n *Node) recordRemoval(node string, at uint64) error {
	added, err := n.marks.AddRemovals(map[string]uint64{node: at})
	if err != nil {
		return err
	}
	if added {
		n.log.Info("member removed", "member", node)
		n.publishMarks()
	}
	return nil
}
