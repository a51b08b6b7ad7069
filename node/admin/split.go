package admin

import (
	"fmt"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// split serves SplitShard: at the shard's leader (any other node forwards
// it there) the split is proposed, and answered once it applied and both
// children have a leader this node knows, or at half the request timeout
// with the split applied all the same (docs/shards.md).
func (a *Handler) split(m *wire.SplitShard, payload []byte, hops int, done serve.Done) {
	sm := a.leaders.Map()
	if m.Shard > uint64(^uint32(0)) || !sm.Live(uint32(m.Shard)) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d does not exist (the cluster has %d shards, born with 0..%d)", m.Shard, sm.Len(), sm.Base()-1)))
		return
	}
	low, high, err := sm.Space().Children(uint32(m.Shard))
	if err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d cannot split: its range is the smallest this cluster's shards take", m.Shard)))
		return
	}
	if !a.events.Leads(m.Shard) {
		a.srv.ToLeader(wire.KindSplitShard, payload, hops, uint32(m.Shard), done)
		return
	}
	data, err := meta.AppendCommand(nil, &meta.Command{Op: meta.OpSplit, Shard: m.Shard})
	if err != nil {
		done(serve.ErrAnswer(wire.CodeInternal, err.Error()))
		return
	}
	a.env.Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: m.Shard, Data: data}, func(r raftmux.Result) {
		if r.Err != nil {
			done(a.srv.RaftError(m.Shard, r.Err))
			return
		}
		res, _ := r.Value.(*shardsm.Result)
		switch {
		case res == nil:
			done(serve.ErrAnswer(wire.CodeInternal, "no apply result"))
		case res.Err != nil:
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d did not split: %v", m.Shard, res.Err)))
		default:
			_, term := a.lease.ReplicaLead(m.Shard)
			a.awaitChildren(m.Shard, []uint32{low, high}, term, a.env.Now().Add(a.timeout/2), done)
		}
	})
}

// awaitChildren answers a split once this node knows a leader of each
// child, or at deadline.
func (a *Handler) awaitChildren(shard uint64, children []uint32, term uint64, deadline time.Time, done serve.Done) {
	known := true
	for _, c := range children {
		if _, _, ok := a.leaders.Get(c); !ok {
			known = false
		}
	}
	if known || !a.env.Now().Before(deadline) {
		done(result(&wire.AdminResult{Node: []byte(a.self), Shard: shard, Term: term}))
		return
	}
	a.env.After(transferPoll, func() { a.awaitChildren(shard, children, term, deadline, done) })
}
