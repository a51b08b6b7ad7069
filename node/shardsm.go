package node

import (
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/router"
)

// The state of every shard this node hosts is the shardsm room's
// (node/shardsm): the raftmux.StateMachine of the node's raft host, one
// meta.State per hosted shard with its persistence, snapshot restores and
// change log, and the lease grants computed against it. Here the room is
// given the node's store and told where an apply's effects (the lease
// room) and change log growth (the watch room) go.

// newStateMachine builds the node's shardsm room.
func (n *Node) newStateMachine() *shardsm.Machine {
	logLen := n.cfg.ChangeLogLen
	if logLen == 0 {
		logLen = security.DefaultChangeLogLen
	}
	return shardsm.New(shardsm.Config{
		Store:        n.store,
		ChangeLogLen: logLen,
		// The lease room is built after the state machine it reads.
		Effects: func(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time) {
			n.lease.Effects(shard, effs, lastGrant)
		},
		Logged:   n.watch.Changed,
		Space:    router.ShardSpace(n.cfg.Shards),
		Answered: n.cfg.OnWriteApplied,
	})
}
