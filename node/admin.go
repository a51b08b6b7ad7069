package node

import "github.com/shoalmq/shoal/node/admin"

// The operators' requests (shoalctl drain, undrain, transfer-leader,
// remove) are the admin room's (node/admin). Here the room is given the
// node's parts (the view, the raft host) and the rooms it reads and
// tells: the events and lease rooms, the marks (marks.go) and the shard
// manager.

// newAdmin builds the node's admin room.
func (n *Node) newAdmin() (*admin.Handler, error) {
	return admin.New(admin.Config{
		Self:           n.cfg.ID,
		RequestTimeout: n.cfg.RequestTimeout,
		RaftID:         RaftID,
		Server:         n.srv,
		Leaders:        n.leaders,
		Events:         n.events,
		Lease:          n.lease,
		Marks:          n.marks,
		Manager:        n.rec,
		Env:            adminEnv{parts{n}},
	})
}

// adminEnv is what the admin room touches of the node. It reads the
// node's raft host and SWIM when called: they are set after New.
type adminEnv struct{ parts }

func (e adminEnv) Members() admin.Members { return e.n.view.Load() }
func (e adminEnv) Transferred()           { e.n.counters.transfers.Add(1) }
