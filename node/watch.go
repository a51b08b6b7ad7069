package node

import (
	"iter"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/node/watch"
)

// Watch and ListTopics are answered by the watch room (node/watch) from
// this node's replicas; each shard's change log is kept by the state
// machine (node/shardsm), which tells the room when one grew. Here the
// room is given the node's parts; the dispatch room (node/dispatch) hands
// it the requests and puts its answers on the wire.

// newWatch builds the node's watch room.
func (n *Node) newWatch() (*watch.Server, error) {
	return watch.New(watch.Config{
		Map:         n.leaders.Map,
		MaxWatchers: n.cfg.MaxWatchers,
		MaxWait:     n.cfg.RequestTimeout / 2,
		Replicas:    watchReplicas{parts{n}},
		OwnerAddr:   n.clientAddrOf,
		Clock:       n.clock,
		After:       n.after,
		Spawn:       n.spawn,
		Logger:      n.log,
	})
}

// watchReplicas are this node's replicas, as the watch room reads them.
type watchReplicas struct{ parts }

func (r watchReplicas) Hosted() ([]uint64, error) { return r.n.rs.Shards() }

func (r watchReplicas) Read(shard uint64, fn func(l *watch.Log, topicsFrom func([]byte) iter.Seq[meta.Assignment])) error {
	return r.n.sm.WithShard(shard, func(s *shardsm.Shard) { fn(s.Log, s.State.TopicsFrom) })
}
