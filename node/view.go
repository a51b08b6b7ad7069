package node

import (
	"github.com/shoalmq/shoal/node/view"
	"github.com/shoalmq/shoal/swim"
)

// The membership as the node last built it, the ring's placement for it
// and the members' raft ids are the view room's (node/view). Here the room
// is given the node's marks, raft host, network and clock, and each view
// it builds is published to the rooms (Node.view) and to the metadata
// sync.

// newViews builds the node's view room.
func (n *Node) newViews() (*view.Builder, error) {
	return view.New(view.Config{
		Self:     n.cfg.ID,
		RaftID:   RaftID,
		Shards:   n.cfg.Shards,
		Replicas: n.cfg.Replicas,
		Logger:   n.log,
		Env:      viewEnv{parts{n}},
	})
}

// viewEnv is what the view room tells the node. It reads the node's raft
// host and network when called: they are set after New.
type viewEnv struct{ parts }

func (e viewEnv) Marks(ms []swim.Member) (drained, removed map[string]bool) {
	return e.n.marks.Apply(ms)
}
func (e viewEnv) NodeDead(id uint64)          { e.n.host.NodeDead(id) }
func (e viewEnv) NodeAlive(id uint64)         { e.n.host.NodeAlive(id) }
func (e viewEnv) SetPeerAddr(id, addr string) { e.n.net.SetPeerAddr(id, addr) }

// rebuildView rebuilds the view from SWIM's members (and the marks, when
// they changed: viewDirty) and publishes it, unless nothing changed.
func (n *Node) rebuildView() {
	ms := n.swim.Members()
	old := n.view.Load()
	v := n.views.Rebuild(old, ms, n.viewDirty.Swap(false), n.leaders.Map())
	if v == old {
		return
	}
	n.view.Store(v)
	n.msync.Observe(ms)
}
