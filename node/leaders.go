package node

import (
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// leaderTableAnswer answers ShardLeaders: this node's shard-leader table
// with the client address of every leader it names, so that a client can
// send metadata writes and linearizable reads straight to each shard's
// leader. It is served whether or not the node is ready: a table still
// filling names fewer leaders, and the client sends the rest to any node.
func (n *Node) leaderTableAnswer() serve.Answer {
	rows, _ := n.leaders.Snapshot(make([]router.ShardLeader, 0, n.cfg.Shards))
	m := wire.LeaderTable{
		Shards:  uint64(n.cfg.Shards),
		Leaders: make([]uint32, n.cfg.Shards),
		Terms:   make([]uint64, n.cfg.Shards),
	}
	index := make(map[string]uint32)
	for _, r := range rows {
		i, ok := index[r.Leader]
		if !ok {
			m.Nodes = append(m.Nodes, wire.LeaderNode{ID: []byte(r.Leader), Addr: []byte(n.clientAddrOf(r.Leader))})
			i = uint32(len(m.Nodes))
			index[r.Leader] = i
		}
		m.Leaders[r.Shard], m.Terms[r.Shard] = i, r.Term
	}
	return serve.NewAnswer(wire.KindLeaderTable, wire.AppendLeaderTableAnswer(make([]byte, 0, 3*int(n.cfg.Shards)+64), &m))
}
