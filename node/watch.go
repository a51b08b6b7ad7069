package node

import (
	"errors"
	"iter"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// Watch and ListTopics are answered by the watch room (node/watch) from
// this node's replicas; each shard's change log is kept by the state
// machine (node/shardsm), which tells the room when one grew. Here the
// room is given the node's parts, and its answers are put on the wire.

// newWatch builds the node's watch room.
func (n *Node) newWatch() (*watch.Server, error) {
	return watch.New(watch.Config{
		Shards:      int(n.cfg.Shards),
		MaxWatchers: n.cfg.MaxWatchers,
		MaxWait:     n.cfg.RequestTimeout / 2,
		Replicas:    watchReplicas{n},
		OwnerAddr:   n.clientAddrOf,
		Clock:       n.clock,
		After:       n.after,
		Spawn:       n.spawn,
		Logger:      n.log,
	})
}

// watchReplicas are this node's replicas, as the watch room reads them.
type watchReplicas struct{ n *Node }

func (r watchReplicas) Hosted() ([]uint64, error) { return r.n.rs.Shards() }

func (r watchReplicas) Read(shard uint64, fn func(l *watch.Log, topics iter.Seq[meta.Assignment])) error {
	return r.n.sm.WithShard(shard, func(s *shardsm.Shard) { fn(s.Log, s.State.Topics()) })
}

func (r watchReplicas) ReadIndex(shard uint64, done func(err error)) {
	r.n.host.Submit(raftmux.Op{Kind: raftmux.OpReadIndex, Shard: shard}, func(res raftmux.Result) { done(res.Err) })
}

// serveWatch answers a Watch through done.
func (n *Node) serveWatch(payload []byte, done serve.Done) {
	var m wire.Watch
	if err := wire.DecodeWatch(payload, &m); err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	n.watch.Watch(&m, func(ev *wire.WatchEvents, err error) {
		if err != nil {
			done(watchRefusal(err))
			return
		}
		done(serve.NewAnswer(wire.KindWatchEvents, wire.AppendWatchEvents(nil, ev)))
	})
}

// serveListTopics answers a ListTopics through done.
func (n *Node) serveListTopics(payload []byte, done serve.Done) {
	var m wire.ListTopics
	if err := wire.DecodeListTopics(payload, &m); err != nil {
		done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	n.watch.List(&m, func(page *wire.TopicList, err error) {
		if err != nil {
			done(watchRefusal(err))
			return
		}
		done(serve.NewAnswer(wire.KindTopicList, wire.AppendTopicList(nil, page)))
	})
}

// watchRefusal is the answer to a watch or a listing the room refused.
func watchRefusal(err error) serve.Answer {
	switch {
	case errors.Is(err, watch.ErrBadRequest):
		return serve.ErrAnswer(wire.CodeBadRequest, err.Error())
	case errors.Is(err, watch.ErrFull), errors.Is(err, watch.ErrUnreadable):
		return serve.Unavailable(err.Error())
	}
	return serve.ErrAnswer(wire.CodeInternal, err.Error())
}
