package node

import (
	"fmt"

	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/swim"
)

// The operators' marks (a drained node, nodes removed for good) are the
// reconcile room's (reconcile.Marks, which says where they live and what
// each does). Here they are read from the store's node slot and written
// back to it, said in this node's SWIM record, and read from the members'
// records into the view.

// loadMarks reads the marks from the store; a store without an origin
// gets this life's generation when it is new (never born), else 1: a store
// older than this code is as old as can be.
func (n *Node) loadMarks() error {
	drained, err := n.store.Drained()
	if err != nil {
		return fmt.Errorf("node: read drain mark: %w", err)
	}
	origin, ok, err := n.store.Origin()
	if err != nil {
		return fmt.Errorf("node: read origin: %w", err)
	}
	if !ok {
		origin = 1
		if born, _ := n.store.Born(); !born {
			if ids, _ := n.rs.Shards(); len(ids) == 0 {
				origin = n.gen
			}
		}
		b := n.store.NewBatch()
		b.PutOrigin(origin)
		if err := b.Commit(true); err != nil {
			return fmt.Errorf("node: write origin: %w", err)
		}
	}
	removed := make(map[string]uint64)
	if err := n.store.Removed(func(id string, at uint64) { removed[id] = at }); err != nil {
		return err
	}
	n.marks = reconcile.NewMarks(n.cfg.ID, markStore{n.store}, drained, origin, removed)
	return nil
}

// markStore writes the marks to the store's node slot.
type markStore struct{ s *shardstore.Store }

func (m markStore) SaveDrained(drained bool) error {
	b := m.s.NewBatch()
	b.PutDrained(drained)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("node: write drain mark: %w", err)
	}
	return nil
}

func (m markStore) SaveRemovals(rs []reconcile.Removal) error {
	b := m.s.NewBatch()
	for _, r := range rs {
		b.PutRemoved(r.Node, r.At)
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("node: write removals: %w", err)
	}
	return nil
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
