package node

import "github.com/shoalmq/shoal/node/reconcile"

// The operators' marks (a drained node, nodes removed for good) are the
// reconcile room's (reconcile.Marks, which says where they live, what
// each does and how they are said). Here they are read from the store's
// node slot and written back to it (reconcile.LoadMarks), and said in
// this node's SWIM record and the view (marksEnv).

// loadMarks reads the marks from the store (reconcile.LoadMarks).
func (n *Node) loadMarks() (err error) {
	n.marks, err = reconcile.LoadMarks(n.cfg.ID, n.store, n.gen, func() bool {
		ids, _ := n.rs.Shards()
		return len(ids) > 0
	})
	if err == nil {
		n.marks.Say(marksEnv{n}, n.log)
	}
	return err
}

// marksEnv is where the marks are said. It reads the node's SWIM when
// called: it is set after New.
type marksEnv struct{ n *Node }

func (e marksEnv) SetMeta(meta []byte) error { return e.n.swim.SetMeta(meta) }

func (e marksEnv) Changed() {
	e.n.viewDirty.Store(true)
	e.n.eventsTask.Kick()
}
