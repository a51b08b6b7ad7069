package node

import (
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/swim"
)

// A topic's records on its owner, and their handoff to the next one, are
// the records room's (node/records): produces, fetches, offsets, the
// produce gates and the record pulls on both sides. Here the room is given
// the node's parts, and the lease room once that is built (newNode); the
// dispatch room (node/dispatch) decodes the frames it serves and puts its
// answers on the wire, the lease room tells it when an OpenTopic or a
// CloseTopic applies, and Leave when the node leaves.

// newRecords builds the node's records room.
func (n *Node) newRecords() (*records.Keeper, error) {
	return records.New(records.Config{
		Store:          n.store,
		Env:            recordsEnv{parts{n}},
		HandoffTimeout: n.cfg.HandoffTimeout,
		PullWait:       n.cfg.LeaseRenewInterval,
		MaxFetchBytes:  n.cfg.MaxFetchBytes,
		PullChunkBytes: n.hooks.handoffChunkBytes,
		OnHandoff:      n.cfg.OnHandoff,
		AfterAppend:    n.hooks.afterAppend,
		AnswerPull:     n.hooks.answerPull,
		Logger:         n.log,
	})
}

// recordsEnv is what the records room touches of the node. It reads the
// node's network, context and view when called: they are set after New.
type recordsEnv struct{ parts }

func (e recordsEnv) PeerAlive(peer string) bool {
	m, ok := e.n.view.Load().Members[peer]
	return ok && m.State == swim.StateAlive
}

func (e recordsEnv) PeerDead(peer string) bool { return e.n.view.Load().Died(peer) }

func (e recordsEnv) Resume(f func()) { e.n.resume(f) }
func (e recordsEnv) Stopped() bool   { return e.n.life.Stopped() }
