package node

import "github.com/shoalmq/shoal/raftmux"

// acceptReplica is the node's raftmux.Config.AcceptReplica: a replica
// only of a shard the ring places here, on a known member's word, as the
// view it holds now says (view.Builder.Accepts), and not of a split's
// child while this node hosts an ancestor of it that has not split here
// yet: that ancestor's apply of the split seeds the child
// (raftmux.Splitter), which a replica made from a message would race.
//
// It also takes a half of a shard whose replica here has ended, wherever
// the ring places the half: the half was born on its parent's voters,
// this node among them, and counts it until the half's leader moves it
// (its manager removes the replicas its own placement does not want). A
// replica that got its parent's state past the split by snapshot seeded
// nothing; without it the half's group keeps a voter that never answers,
// and one more fault stops it for good. The leader's snapshot fills the
// replica made here. Bounded: two halves per hosted shard that split.
func (n *Node) acceptReplica(shard, from uint64) bool {
	sp := n.leaders.Space()
	if !sp.Valid(shard) {
		return false
	}
	if p, ok := sp.Parent(uint32(shard)); ok && n.endedHere(uint64(p)) {
		_, known := n.views.NameOf(from)
		return known
	}
	if !n.views.Accepts(n.view.Load(), shard, from) {
		return false
	}
	for s := uint32(shard); ; {
		p, ok := sp.Parent(s)
		if !ok {
			return true
		}
		if applied, err := n.rs.Applied(uint64(p)); err != nil || (applied > 0 && !n.sm.Ended(uint64(p))) {
			return false
		}
		s = p
	}
}

// endedHere reports whether this node hosts a replica of shard that
// applied its split (by entry or by snapshot).
func (n *Node) endedHere(shard uint64) bool {
	applied, err := n.rs.Applied(shard)
	return err == nil && applied > 0 && n.sm.Ended(shard)
}

// Halted lists the shard replicas of this node that stopped at an entry
// they could not apply (see raftmux.HaltedError); nil before Start.
func (n *Node) Halted() []raftmux.HaltedError {
	if n.host == nil {
		return nil
	}
	return n.host.Halted()
}
