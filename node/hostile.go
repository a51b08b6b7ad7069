package node

import (
	"slices"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// acceptReplica is the node's raftmux.Config.AcceptReplica: a leader's
// message or snapshot creates a replica here only for a shard of the
// table that the ring, as this node sees it, places on this node, on the
// word of a member this node knows. A leader whose view is ahead (it added
// this node as a learner before this node saw the change that places the
// shard here) is refused until this node's view catches up; it retries
// with its next heartbeat. Without the check, any peer could make the node
// hold a replica, with its raft state and snapshot buffers, for every shard
// id it names.
func (n *Node) acceptReplica(shard, from uint64) bool {
	if shard >= uint64(n.cfg.Shards) {
		return false
	}
	if _, known := n.nameOf(from); !known {
		return false
	}
	v := n.view.Load()
	if v == nil || v.Placement() == nil {
		return false
	}
	var buf [wire.MaxReplicas]string
	return slices.Contains(v.Placement().Replicas(uint32(shard), buf[:0]), n.cfg.ID)
}

// Halted lists the shard replicas of this node that stopped at an entry
// they could not apply (see raftmux.HaltedError); nil before Start.
func (n *Node) Halted() []raftmux.HaltedError {
	if n.host == nil {
		return nil
	}
	return n.host.Halted()
}
