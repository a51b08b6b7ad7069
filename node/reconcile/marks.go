package reconcile

import (
	"cmp"
	"log/slog"
	"maps"
	"slices"
	"sync"

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
//     later). A member X whose store was created before T (its Origin,
//     said in its metadata; no metadata counts as 0) is out: not live for
//     the view, the ring, owners or raft, and the shard managers replace
//     its replicas. If X comes back with its old data it stays out, and
//     refuses requests itself; a node X started on an empty data directory
//     has a later origin and joins as new. (This compares one node's clock
//     with another's: it assumes they agree within the time it takes to
//     stop a node and start it afresh.)

// MarkStore keeps this node's marks across its restarts (the store's node
// slot). Marks calls it under its lock, so that writes land in the order
// of the changes they make.
type MarkStore interface {
	// SaveDrained durably records this node's drain mark.
	SaveDrained(drained bool) error
	// SaveRemovals durably records removals, in one synced write.
	SaveRemovals(rs []Removal) error
}

// Removal is a node removed for good, at At (unix ns on the node that
// recorded it).
type Removal struct {
	Node string
	At   uint64
}

// Marks is this node's side of the operators' marks: its own drain mark
// and store origin, and the removals it knows. Safe for concurrent use.
type Marks struct {
	self  string
	store MarkStore
	env   MarksEnv     // Say's
	log   *slog.Logger // Say's

	mu      sync.Mutex
	drained bool
	origin  uint64            // the generation of the life that created the store
	removed map[string]uint64 // node → removal time
	out     bool              // this node found itself removed (said once)
}

// NewMarks returns self's marks as its store holds them: its drain mark,
// its store's origin and the removals it knows (nil: none; the map is the
// Marks' from then on). Later changes are written through store.
func NewMarks(self string, store MarkStore, drained bool, origin uint64, removed map[string]uint64) *Marks {
	m := &Marks{self: self, store: store, drained: drained, origin: origin, removed: removed}
	if m.removed == nil {
		m.removed = make(map[string]uint64)
	}
	return m
}

// Meta is this node's SWIM metadata: nil without marks; else its drain
// mark, origin and as many removals as fit in wire.MaxMetaLen, the latest
// first, listed in node order.
func (m *Marks) Meta() []byte {
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

// SetDrained records this node's drain mark, and reports whether it
// changed (the node then says its metadata again).
func (m *Marks) SetDrained(drained bool) (changed bool, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.drained == drained {
		return false, nil
	}
	if err := m.store.SaveDrained(drained); err != nil {
		return false, err
	}
	m.drained = drained
	return true, nil
}

// Drained reports this node's own drain mark.
func (m *Marks) Drained() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.drained
}

// Origin is the generation of the life that created this node's store.
func (m *Marks) Origin() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.origin
}

// Removals counts the removals this node knows.
func (m *Marks) Removals() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.removed)
}

// Out reports whether this node found itself removed (Judge).
func (m *Marks) Out() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.out
}

// AddRemovals records the removals this node did not know, or later ones
// of a node it knew removed (a node removed, back as new, then removed
// again), and reports whether any was new (the node then says its
// metadata again).
func (m *Marks) AddRemovals(rs map[string]uint64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var fresh []Removal
	for _, id := range slices.Sorted(maps.Keys(rs)) {
		if at, ok := m.removed[id]; (ok && at >= rs[id]) || id == "" {
			continue
		}
		fresh = append(fresh, Removal{Node: id, At: rs[id]})
	}
	if len(fresh) == 0 {
		return false, nil
	}
	if err := m.store.SaveRemovals(fresh); err != nil {
		return false, err
	}
	for _, r := range fresh {
		m.removed[r.Node] = r.At
	}
	return true, nil
}

// Heard is what the members' records say (ReadMarks).
type Heard struct {
	// Marks are each member's marks, by id (a member without metadata
	// has none).
	Marks map[string]MemberMarks
	// Removals are the removals the records name, the latest of each
	// node.
	Removals map[string]uint64
	// Unreadable are the records whose metadata does not decode; each
	// counts as one without marks.
	Unreadable []Unreadable
}

// MemberMarks are what one member's record says of itself.
type MemberMarks struct {
	Drained bool
	Origin  uint64
}

// Unreadable is a member whose metadata does not decode, and why.
type Unreadable struct {
	Member string
	Err    error
}

// ReadMarks decodes every member's metadata.
func ReadMarks(ms []swim.Member) Heard {
	h := Heard{Marks: make(map[string]MemberMarks), Removals: make(map[string]uint64)}
	var nm wire.NodeMeta
	for _, mb := range ms {
		if len(mb.Meta) == 0 {
			continue
		}
		if err := wire.DecodeNodeMeta(mb.Meta, &nm); err != nil {
			h.Unreadable = append(h.Unreadable, Unreadable{Member: mb.ID, Err: err})
			continue
		}
		h.Marks[mb.ID] = MemberMarks{Drained: nm.Drained, Origin: nm.Origin}
		for _, r := range nm.Removed {
			if at, ok := h.Removals[string(r.Node)]; !ok || r.At > at {
				h.Removals[string(r.Node)] = r.At
			}
		}
	}
	return h
}

// Judge returns the drained members of ms and the removed ones (this node
// included if it was removed), as the view should see them, from what
// their records say (h) and the removals this node knows, once it added
// those it heard of (AddRemovals). This node's own marks are its own, not
// what its record says. outNow is true the first time this node finds
// itself removed: it serves nothing from then on.
func (m *Marks) Judge(ms []swim.Member, h Heard) (drained, removed map[string]bool, outNow bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	drained, removed = make(map[string]bool), make(map[string]bool)
	for _, mb := range ms {
		mk := h.Marks[mb.ID]
		if mb.ID == m.self {
			mk = MemberMarks{Drained: m.drained, Origin: m.origin}
		}
		if at, ok := m.removed[mb.ID]; ok && mk.Origin <= at {
			removed[mb.ID] = true
			continue
		}
		if mk.Drained {
			drained[mb.ID] = true
		}
	}
	if removed[m.self] && !m.out {
		m.out = true
		outNow = true
	}
	return drained, removed, outNow
}
