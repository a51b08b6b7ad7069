package node

import (
	"github.com/shoalmq/shoal/node/admin"
	"github.com/shoalmq/shoal/router"
)

// The operators' requests (shoalctl drain, undrain, transfer-leader,
// remove) are the admin room's (node/admin). Here the room is given the
// node's parts: the view, the raft host, the marks (marks.go), the lease
// room's holdings and the shard manager's pin.

// newAdmin builds the node's admin room.
func (n *Node) newAdmin() (*admin.Handler, error) {
	return admin.New(admin.Config{
		Self:           n.cfg.ID,
		Shards:         n.cfg.Shards,
		RequestTimeout: n.cfg.RequestTimeout,
		RaftID:         RaftID,
		Server:         n.srv,
		Leaders:        n.leaders,
		Env:            adminEnv{parts{n}},
	})
}

// adminEnv is what the admin room touches of the node. It reads the
// node's raft host and SWIM when called: they are set after New.
type adminEnv struct{ parts }

func (e adminEnv) Members() admin.Members                     { return e.n.view.Load() }
func (e adminEnv) Leads(shard uint64) bool                    { return e.n.events.Leads(shard) }
func (e adminEnv) ReplicaLead(shard uint64) (uint64, uint64)  { return e.n.lease.ReplicaLead(shard) }
func (e adminEnv) Owned() int                                 { return e.n.lease.Owned() }
func (e adminEnv) Led() int                                   { return e.n.events.Led() }
func (e adminEnv) SetDrained(drained bool) error              { return e.n.marks.Drain(drained) }
func (e adminEnv) RecordRemoval(node string, at uint64) error { return e.n.marks.Remove(node, at) }
func (e adminEnv) Pin(shard uint64, p *router.Placement)      { e.n.rec.Pin(shard, p) }
func (e adminEnv) Transferred()                               { e.n.counters.transfers.Add(1) }
