package node

import "github.com/shoalmq/shoal/raftmux"

// acceptReplica is the node's raftmux.Config.AcceptReplica: a replica
// only of a shard the ring places here, on a known member's word, as the
// view it holds now says (view.Builder.Accepts).
func (n *Node) acceptReplica(shard, from uint64) bool {
	return n.views.Accepts(n.view.Load(), shard, from)
}

// Halted lists the shard replicas of this node that stopped at an entry
// they could not apply (see raftmux.HaltedError); nil before Start.
func (n *Node) Halted() []raftmux.HaltedError {
	if n.host == nil {
		return nil
	}
	return n.host.Halted()
}
