package node

import (
	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/node/serve"
)

// Metadata requests (Assign, Revoke, UpdatePartition, Lookup) and the
// forwarding of requests between nodes are the serve room's (node/serve):
// the decoding of a request, the answer types, the leader's path through
// raft, the forwards and their waits, the copies of a forward dropped, the
// admission of requests and their latency histograms. Here the room is
// given the node's parts; the dispatch room (node/dispatch) reads the
// frames, answers what is not a metadata request, and hands the room the
// rest.

// newServer builds the node's serve room; its forwards are numbered from
// firstForward, and writes that name no session take own's.
func (n *Node) newServer(firstForward uint64, own *session.Writer) (*serve.Server, error) {
	return serve.New(serve.Config{
		Self:         n.cfg.ID,
		Timeout:      n.cfg.RequestTimeout,
		FirstForward: firstForward,
		Leaders:      n.leaders,
		Routes:       n.cache,
		Session:      own,
		Events:       n.events,
		Lease:        n.lease,
		Machine:      n.sm,
		Env:          serveEnv{parts{n}},
	})
}

// serveEnv is what the serve room touches of the node. It reads the
// node's network, raft host and view when called: they are set after
// New.
type serveEnv struct{ parts }

func (e serveEnv) ClientAddr(id string) string { return e.n.clientAddrOf(id) }
func (e serveEnv) Members() serve.Members      { return e.n.view.Load() }
