package node

import (
	"time"

	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/shardsm"
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
		Shards:       n.cfg.Shards,
		Timeout:      n.cfg.RequestTimeout,
		FirstForward: firstForward,
		Leaders:      n.leaders,
		Routes:       n.cache,
		Session:      own,
		Env:          serveEnv{parts{n}},
	})
}

// serveEnv is what the serve room touches of the node. It reads the
// node's network, raft host and view when called: they are set after
// New.
type serveEnv struct{ parts }

func (e serveEnv) ClientAddr(id string) string         { return e.n.clientAddrOf(id) }
func (e serveEnv) Members() serve.Members              { return e.n.view.Load() }
func (e serveEnv) Leads(shard uint32) bool             { return e.n.events.Leads(uint64(shard)) }
func (e serveEnv) Deposed(shard uint64)                { e.n.events.Deposed(shard) }
func (e serveEnv) LeadsAt(shard uint64) (uint64, bool) { return e.n.lease.LeadsAt(shard) }

func (e serveEnv) LeaderProof(shard, term uint64, at time.Time) { e.n.lease.Proof(shard, term, at) }

func (e serveEnv) WhenSettled(shard uint64, topic []byte, epoch uint64, fresh bool, done func(bool)) {
	e.n.lease.WhenSettled(shard, topic, epoch, fresh, done)
}

func (e serveEnv) State(shard uint64, fn func(st *meta.State)) error {
	return e.n.sm.With(shard, fn)
}

func (e serveEnv) Hosted(shard uint64, fn func(st *meta.State)) bool {
	return e.n.events.AnswersLocally(shard) && e.n.sm.Hosted(shard, fn)
}

func (e serveEnv) Propose(shard uint64, data []byte, done func(serve.Applied, bool, error)) {
	e.n.lease.Propose(shard, data, func(ar *shardsm.Result, err error) {
		if ar == nil {
			done(serve.Applied{}, false, err)
			return
		}
		done(serve.Applied{Assignment: ar.Assignment, Err: ar.Err}, true, err)
	})
}
