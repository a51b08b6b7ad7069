package node

import "github.com/shoalmq/shoal/raftmux"

// acceptReplica is the node's raftmux.Config.AcceptReplica: a replica
// only of a shard the ring places here, on a known member's word, as the
// view it holds now says (view.Builder.Accepts), and not of a split's
// child while this node hosts an ancestor of it that has not split here
// yet: that ancestor's apply of the split seeds the child
// (raftmux.Splitter), which a replica made from a message would race.
func (n *Node) acceptReplica(shard, from uint64) bool {
	if !n.views.Accepts(n.view.Load(), shard, from) {
		return false
	}
	sp := n.leaders.Space()
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

// Halted lists the shard replicas of this node that stopped at an entry
// they could not apply (see raftmux.HaltedError); nil before Start.
func (n *Node) Halted() []raftmux.HaltedError {
	if n.host == nil {
		return nil
	}
	return n.host.Halted()
}
