package node

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// The operators' marks: a drained node, and nodes removed for good.
//
// Where they live: a node keeps its own drain mark, its store's origin and
// every removal it knows in its store's node slot (so that they survive
// its restarts), and says them in its SWIM record's metadata
// (wire.NodeMeta). SWIM spreads a record to every member, and a member
// that restarts, or joins, hears it with the membership; so every node
// knows the marks, whichever restarted. A node with no mark sends no
// metadata at all.
//
//   - Drained: a member whose record says so gets no new topic (an
//     assignment names it only if asked to, and is then refused), no
//     preferred leadership (router.PlacementExcept), and every shard
//     leader moves the topics it owns to other live members, through the
//     ordinary ownership path (meta PlanReassign: a new epoch, fences,
//     leases). Its replicas stay where they are.
//   - Removed: a removal of node X at time T (unix ns on the node that
//     recorded it) spreads in every node's metadata: each node adds the
//     removals it hears of to its own (of a node removed twice, the
//     later). A member X whose store was created
//     before T (its Origin, said in its metadata; no metadata counts as
//     0) is out: not live for the view, the ring, owners or raft, and the
//     shard managers replace its replicas. If X comes back with its old
//     data it stays out, and refuses requests itself; a node X started on
//     an empty data directory has a later origin and joins as new. (This
//     compares one node's clock with another's: it assumes they agree
//     within the time it takes to stop a node and start it afresh.)

// marks is the node's side of the operators' marks.
type marks struct {
	mu      sync.Mutex
	drained bool
	origin  uint64            // the generation of the life that created the store
	removed map[string]uint64 // node → removal time (unix ns)
	// out: this node found itself removed (reported once).
	out bool
}

// loadMarks reads the marks from the store; a store without an origin
// gets this life's generation when it is new (never born), else 1: a store
// older than this code is as old as can be.
func (n *Node) loadMarks() error {
	m := &n.marks
	m.removed = make(map[string]uint64)
	var err error
	if m.drained, err = n.store.Drained(); err != nil {
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
	m.origin = origin
	return n.store.Removed(func(id string, at uint64) { m.removed[id] = at })
}

// ownMeta is this node's SWIM metadata: nil without marks; else its drain
// mark, origin and as many removals as fit, the latest first.
func (n *Node) ownMeta() []byte {
	m := &n.marks
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.drained && len(m.removed) == 0 {
		return nil
	}
	nm := wire.NodeMeta{Drained: m.drained, Origin: m.origin}
	all := make([]wire.RemovedNode, 0, len(m.removed))
	for id, at := range m.removed {
		all = append(all, wire.RemovedNode{Node: []byte(id), At: at})
	}
	slices.SortFunc(all, func(a, b wire.RemovedNode) int {
		if c := cmp.Compare(b.At, a.At); c != 0 {
			return c
		}
		return cmp.Compare(string(a.Node), string(b.Node))
	})
	for _, r := range all {
		nm.Removed = append(nm.Removed, r)
		if wire.NodeMetaLen(&nm) > wire.MaxMetaLen {
			nm.Removed = nm.Removed[:len(nm.Removed)-1]
			break
		}
	}
	slices.SortFunc(nm.Removed, func(a, b wire.RemovedNode) int { return cmp.Compare(string(a.Node), string(b.Node)) })
	return wire.AppendNodeMeta(nil, &nm)
}

// publishMarks says this node's marks through SWIM and has the view
// rebuilt with them.
func (n *Node) publishMarks() {
	if err := n.swim.SetMeta(n.ownMeta()); err != nil {
		n.log.Error("node: publish marks", "err", err)
	}
	n.viewDirty.Store(true)
	n.events.wake()
}

// setDrained records and spreads this node's drain mark.
func (n *Node) setDrained(drained bool) error {
	m := &n.marks
	m.mu.Lock()
	changed := m.drained != drained
	if changed {
		b := n.store.NewBatch()
		b.PutDrained(drained)
		if err := b.Commit(true); err != nil {
			m.mu.Unlock()
			return fmt.Errorf("node: write drain mark: %w", err)
		}
		m.drained = drained
	}
	m.mu.Unlock()
	if changed {
		n.log.Info("drain mark", "drained", drained)
		n.publishMarks()
	}
	return nil
}

// isDrained reports this node's own drain mark.
func (n *Node) isDrained() bool {
	n.marks.mu.Lock()
	defer n.marks.mu.Unlock()
	return n.marks.drained
}

// addRemovals records removals this node did not know, or later ones of
// a node it knew removed (a node removed, back as new, then removed again),
// and reports whether any was new.
func (n *Node) addRemovals(rs map[string]uint64) (bool, error) {
	m := &n.marks
	m.mu.Lock()
	defer m.mu.Unlock()
	var b *shardstore.Batch
	var fresh []string
	for _, id := range slices.Sorted(maps.Keys(rs)) {
		if at, ok := m.removed[id]; (ok && at >= rs[id]) || id == "" {
			continue
		}
		if b == nil {
			b = n.store.NewBatch()
		}
		b.PutRemoved(id, rs[id])
		fresh = append(fresh, id)
	}
	if b == nil {
		return false, nil
	}
	if err := b.Commit(true); err != nil {
		return false, fmt.Errorf("node: write removals: %w", err)
	}
	for _, id := range fresh {
		m.removed[id] = rs[id]
	}
	return true, nil
}

// memberMarks is what one member's record says.
type memberMarks struct {
	drained bool
	origin  uint64
}

// readMarks decodes every member's metadata: each member's marks, and the
// removals they name. A record whose metadata does not decode counts as
// one without marks.
func (n *Node) readMarks(ms []swim.Member) (map[string]memberMarks, map[string]uint64) {
	out := make(map[string]memberMarks)
	removals := make(map[string]uint64)
	var nm wire.NodeMeta
	for _, mb := range ms {
		if len(mb.Meta) == 0 {
			continue
		}
		if err := wire.DecodeNodeMeta(mb.Meta, &nm); err != nil {
			n.log.Debug("node: member metadata", "member", mb.ID, "err", err)
			continue
		}
		out[mb.ID] = memberMarks{drained: nm.Drained, origin: nm.Origin}
		for _, r := range nm.Removed {
			if at, ok := removals[string(r.Node)]; !ok || r.At > at {
				removals[string(r.Node)] = r.At
			}
		}
	}
	return out, removals
}

// applyMarks merges the removals the members name into this node's, and
// returns the drained members and the removed ones (this node included if
// it was removed) as the view should see them. Event loop only.
func (n *Node) applyMarks(ms []swim.Member) (drained, removed map[string]bool) {
	mm, rs := n.readMarks(ms)
	if added, err := n.addRemovals(rs); err != nil {
		n.log.Error("node: removals", "err", err)
	} else if added {
		if err := n.swim.SetMeta(n.ownMeta()); err != nil {
			n.log.Error("node: publish marks", "err", err)
		}
	}
	m := &n.marks
	m.mu.Lock()
	defer m.mu.Unlock()
	drained, removed = make(map[string]bool), make(map[string]bool)
	for _, mb := range ms {
		mk := mm[mb.ID]
		if mb.ID == n.cfg.ID {
			mk = memberMarks{drained: m.drained, origin: m.origin}
		}
		if at, ok := m.removed[mb.ID]; ok && mk.origin <= at {
			removed[mb.ID] = true
			continue
		}
		if mk.drained {
			drained[mb.ID] = true
		}
	}
	if removed[n.cfg.ID] && !m.out {
		m.out = true
		n.log.Error("this node was removed from the cluster: it serves nothing; start it on an empty data directory to join as a new node")
	}
	return drained, removed
}

// removedSelf reports whether this node found itself removed.
func (n *Node) removedSelf() bool {
	n.marks.mu.Lock()
	defer n.marks.mu.Unlock()
	return n.marks.out
}

// recordRemoval records that node was removed at (unix ns), unless a
// later removal of it is already known, and spreads it.
func (n *Node) recordRemoval(node string, at uint64) error {
	added, err := n.addRemovals(map[string]uint64{node: at})
	if err != nil {
		return err
	}
	if added {
		n.log.Info("member removed", "member", node)
		n.publishMarks()
	}
	return nil
}

// removedCount reports the removals this node knows.
func (n *Node) removedCount() int {
	n.marks.mu.Lock()
	defer n.marks.mu.Unlock()
	return len(n.marks.removed)
}
