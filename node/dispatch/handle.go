package dispatch

import (
	"fmt"

	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Handle answers one client request (kind, payload), arrived directly
// (hops 0) or forwarded, through done: at once, or when raft or the node
// it was forwarded to answers.
func (d *Dispatcher) Handle(kind wire.Kind, payload []byte, hops int, done serve.Done) {
	d.requests.Add(1)
	switch kind {
	case wire.KindMembers:
		done(d.members())
		return
	case wire.KindShards:
		d.shardList(done)
		return
	case wire.KindShardLeaders:
		done(d.leaderTableAnswer())
		return
	case wire.KindStatus:
		st := d.env.Status()
		done(serve.NewAnswer(wire.KindStatusInfo, wire.AppendStatusInfo(nil, &st)))
		return
	}
	if hops == 0 && !d.env.Ready() {
		// Not synced yet (or not born): the node's view of the cluster may
		// be older than any client's.
		done(serve.Unavailable("node starting: cluster metadata not synced yet"))
		return
	}
	switch kind {
	case wire.KindProduce:
		d.Produce(payload, done)
		return
	case wire.KindFetch:
		done(d.fetch(payload))
		return
	case wire.KindWatch:
		d.serveWatch(payload, done)
		return
	case wire.KindListTopics:
		d.serveListTopics(payload, done)
		return
	}
	if !d.env.Born() {
		done(serve.Unavailable("cluster not born yet"))
		return
	}
	if d.env.RemovedSelf() {
		done(serve.Unavailable(fmt.Sprintf("node %s was removed from the cluster", d.self)))
		return
	}
	if kind.IsAdminRequest() {
		d.admin.Handle(kind, payload, hops, done)
		return
	}
	d.srv.Meta(kind, payload, hops, done)
}

func (d *Dispatcher) members() serve.Answer {
	var ml wire.MemberList
	v := d.env.Members()
	for _, m := range d.env.SwimMembers() {
		st := wire.MemberState(m.State)
		if v.Removed(m.ID) {
			st = wire.MemberLeft // out for good (reconcile.Marks), whatever SWIM says
		}
		ml.Members = append(ml.Members, wire.Member{ID: []byte(m.ID), Generation: m.Generation, Incarnation: m.Incarnation,
			State: st, Rack: []byte(m.Rack), SwimAddr: []byte(m.SwimAddr), ClientAddr: []byte(m.ClientAddr), PeerAddr: []byte(m.PeerAddr)})
	}
	return serve.NewAnswer(wire.KindMemberList, wire.AppendMemberList(nil, &ml))
}

func (d *Dispatcher) shardList(done serve.Done) {
	d.env.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		if r.Err != nil {
			done(serve.Unavailable(r.Err.Error()))
			return
		}
		infos, _ := r.Value.([]raftmux.Info)
		done(d.shardListAnswer(infos))
	})
}

func (d *Dispatcher) shardListAnswer(infos []raftmux.Info) serve.Answer {
	hosted := make(map[uint64]raftmux.Info, len(infos))
	for _, in := range infos {
		hosted[in.Shard] = in
	}
	v := d.env.Members()
	var sl wire.ShardList
	var reps []string
	sm := d.leaders.Map()
	for s := range sm.Shards() {
		si := wire.ShardInfo{Shard: uint64(s)}
		if in, ok := hosted[uint64(s)]; ok {
			for _, id := range in.Voters {
				if name, ok := d.env.NameOf(id); ok {
					si.Replicas = append(si.Replicas, []byte(name))
				}
			}
		} else {
			// Not hosted here: where the ring places it.
			for _, r := range v.Placement().Replicas(s, reps[:0]) {
				si.Replicas = append(si.Replicas, []byte(r))
			}
		}
		if l, t, ok := d.leaders.Get(s); ok {
			si.Leader, si.Term = []byte(l), t
		}
		sl.Shards = append(sl.Shards, si)
	}
	return serve.NewAnswer(wire.KindShardList, wire.AppendShardList(nil, &sl))
}

// leaderTableAnswer answers ShardLeaders: this node's shard-leader table
// with the client address of every leader it names, so that a client can
// send metadata writes and linearizable reads straight to each shard's
// leader. It is served whether or not the node is ready: a table still
// filling names fewer leaders, and the client sends the rest to any node.
func (d *Dispatcher) leaderTableAnswer() serve.Answer {
	sm := d.leaders.Map()
	limit := sm.IDLimit()
	rows, _ := d.leaders.Snapshot(make([]router.ShardLeader, 0, sm.Len()))
	m := wire.LeaderTable{
		Shards:  uint64(limit),
		Base:    uint64(sm.Base()),
		Leaders: make([]uint32, limit),
		Terms:   make([]uint64, limit),
	}
	index := make(map[string]uint32)
	for _, r := range rows {
		if r.Shard >= limit || !sm.Live(r.Shard) {
			continue // split: its keys route to its children
		}
		i, ok := index[r.Leader]
		if !ok {
			m.Nodes = append(m.Nodes, wire.LeaderNode{ID: []byte(r.Leader), Addr: []byte(d.env.ClientAddr(r.Leader))})
			i = uint32(len(m.Nodes))
			index[r.Leader] = i
		}
		m.Leaders[r.Shard], m.Terms[r.Shard] = i, r.Term
	}
	return serve.NewAnswer(wire.KindLeaderTable, wire.AppendLeaderTableAnswer(make([]byte, 0, 3*int(limit)+64), &m))
}
