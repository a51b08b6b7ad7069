package node

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// The operators' requests (shoalctl drain, undrain, transfer-leader,
// remove). Each is answered by an AdminResult; with client tokens only
// the admin role may make them (auth.go).
//
//   - Drain and Undrain are served by the node they name (any other node
//     forwards them there): it records and spreads its drain mark
//     (marks.go) and answers with what it still owns and leads. The work
//     is the cluster's: shard leaders move its topics, shard managers its
//     leaderships. Both are idempotent; a client repeats Drain to watch
//     the node empty.
//   - TransferLeader is served by the shard's leader: it checks that the
//     node named is a voter of the shard, tells that node to keep the
//     leadership (Prepare: a pin the shard manager respects while the
//     placement stays), hands leadership over through raft and answers
//     once its replica sees the new leader, with its term.
//   - RemoveNode is served by every node for itself: it records and
//     spreads the removal, and answers how many of the shards it leads
//     still count the removed node. A client asks every live member until
//     none does.

// transferPoll: how often a leader that handed a shard over looks whether
// the new leader took it up.
const transferPoll = 20 * time.Millisecond

// adminResult encodes an AdminResult answer.
func adminResult(r *wire.AdminResult) serve.Answer {
	return serve.NewAnswer(wire.KindAdminResult, wire.AppendAdminResult(nil, r))
}

// handleAdmin serves an admin request (kind.IsAdminRequest()).
func (n *Node) handleAdmin(kind wire.Kind, payload []byte, hops int, done serve.Done) {
	switch kind {
	case wire.KindDrain, wire.KindUndrain:
		var m wire.AdminNode
		if err := wire.DecodeAdminNode(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		n.drain(kind, string(m.Node), payload, hops, done)
	case wire.KindTransferLeader:
		var m wire.TransferLeader
		if err := wire.DecodeTransferLeader(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		n.transferLeader(&m, payload, hops, done)
	case wire.KindRemoveNode:
		var m wire.AdminNode
		if err := wire.DecodeAdminNode(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		n.removeNode(string(m.Node), m.Force, done)
	default:
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("unexpected %v request", kind)))
	}
}

// liveMember answers an error unless id is a live member of the view.
func (n *Node) liveMember(id string, done serve.Done) bool {
	v := n.view.Load()
	if v.removed[id] {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("node %q was removed from the cluster", id)))
		return false
	}
	if _, known := v.byID[id]; !known {
		done(serve.ErrAnswer(wire.CodeNotFound, fmt.Sprintf("no member %q", id)))
		return false
	}
	if !v.alive(id) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("member %q is not alive (shoalctl remove forgets a node gone for good)", id)))
		return false
	}
	return true
}

// drain serves Drain and Undrain: at the node named, or forwarded there.
func (n *Node) drain(kind wire.Kind, target string, payload []byte, hops int, done serve.Done) {
	if target != n.cfg.ID {
		if n.liveMember(target, done) {
			n.srv.ForwardTo(target, kind, payload, hops, done)
		}
		return
	}
	drained := kind == wire.KindDrain
	if err := n.setDrained(drained); err != nil {
		done(serve.ErrAnswer(wire.CodeInternal, err.Error()))
		return
	}
	done(adminResult(&wire.AdminResult{Node: []byte(n.cfg.ID), Drained: drained,
		Topics: uint64(n.lease.Owned()), Leaders: uint64(n.events.Led())}))
}

// transferLeader serves TransferLeader: Prepare at the node named, the
// transfer at the shard's leader (any other node forwards it there).
func (n *Node) transferLeader(m *wire.TransferLeader, payload []byte, hops int, done serve.Done) {
	if m.Shard >= uint64(n.cfg.Shards) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d does not exist (shards 0..%d)", m.Shard, n.cfg.Shards-1)))
		return
	}
	target := string(m.Node)
	if !n.liveMember(target, done) {
		return
	}
	if v := n.view.Load(); v.drained[target] {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%q is drained (shoalctl undrain first)", target)))
		return
	}
	if m.Prepare {
		if target != n.cfg.ID {
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("a prepare for %s reached %s", target, n.cfg.ID)))
			return
		}
		n.rec.Pin(m.Shard, n.view.Load().placement)
		done(adminResult(&wire.AdminResult{Node: []byte(n.cfg.ID), Shard: m.Shard}))
		return
	}
	if !n.events.Leads(m.Shard) {
		n.srv.ToLeader(wire.KindTransferLeader, payload, hops, uint32(m.Shard), done)
		return
	}
	n.host.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			done(n.srv.RaftError(m.Shard, r.Err))
			return
		}
		i := slices.IndexFunc(infos, func(in raftmux.Info) bool { return in.Shard == m.Shard })
		if i < 0 || infos[i].Leader != n.self {
			l, _, _ := n.leaders.Get(uint32(m.Shard))
			done(n.srv.NotLeader(m.Shard, l))
			return
		}
		in := infos[i]
		if !slices.Contains(in.Voters, RaftID(target)) {
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%s is not a replica of shard %d (voters: %s)",
				target, m.Shard, strings.Join(n.namesOf(in.Voters), ","))))
			return
		}
		if target == n.cfg.ID {
			n.rec.Pin(m.Shard, n.view.Load().placement)
			done(adminResult(&wire.AdminResult{Node: []byte(target), Shard: m.Shard, Term: in.Term}))
			return
		}
		prep := wire.AppendTransferLeader(nil, &wire.TransferLeader{Shard: m.Shard, Node: m.Node, Prepare: true})
		n.srv.ForwardTo(target, wire.KindTransferLeader, prep, hops, func(a serve.Answer) {
			if a.Kind != wire.KindAdminResult {
				done(a)
				return
			}
			n.host.Submit(raftmux.Op{Kind: raftmux.OpTransferLeader, Shard: m.Shard, Node: RaftID(target)}, func(r raftmux.Result) {
				if r.Err != nil {
					done(n.srv.RaftError(m.Shard, r.Err))
					return
				}
				n.counters.transfers.Add(1)
				n.awaitLeader(m.Shard, target, in.Term, n.clock().Add(n.cfg.RequestTimeout/2), done)
			})
		})
	})
}

// awaitLeader answers once this node's replica of shard sees target lead
// at a term above from, or Unavailable at deadline.
func (n *Node) awaitLeader(shard uint64, target string, from uint64, deadline time.Time, done serve.Done) {
	lead, term := n.lease.ReplicaLead(shard)
	if lead == RaftID(target) && term > from {
		done(adminResult(&wire.AdminResult{Node: []byte(target), Shard: shard, Term: term}))
		return
	}
	if !n.clock().Before(deadline) {
		done(serve.Unavailable(fmt.Sprintf("leadership of shard %d did not move to %s in time", shard, target)))
		return
	}
	n.after(transferPoll, func() { n.awaitLeader(shard, target, from, deadline, done) })
}

// namesOf returns the node ids of raft ids (the raft id in hex when
// unknown).
func (n *Node) namesOf(ids []uint64) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if name, ok := n.nameOf(id); ok {
			out = append(out, name)
		} else {
			out = append(out, fmt.Sprintf("%x", id))
		}
	}
	slices.Sort(out)
	return out
}

// removeNode serves RemoveNode on this node: it records the removal
// (refusing a live or unknown node without force) and counts the shards
// it leads whose configuration still has the node.
func (n *Node) removeNode(target string, force bool, done serve.Done) {
	if target == n.cfg.ID {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%s cannot remove itself; ask another node", target)))
		return
	}
	v := n.view.Load()
	if !v.removed[target] {
		mem, known := v.byID[target]
		switch {
		case !known && !force:
			done(serve.ErrAnswer(wire.CodeNotFound, fmt.Sprintf("no member %q (--force removes an id the membership does not know)", target)))
			return
		case v.alive(target) && !force:
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%s is alive; stop it first, or --force", target)))
			return
		}
		at := max(uint64(n.clock().UnixNano()), mem.Generation)
		if err := n.recordRemoval(target, at); err != nil {
			done(serve.ErrAnswer(wire.CodeInternal, err.Error()))
			return
		}
	}
	rid := RaftID(target)
	n.host.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			done(serve.Unavailable(r.Err.Error()))
			return
		}
		var left uint64
		for _, in := range infos {
			if in.Leader == n.self && (slices.Contains(in.Voters, rid) || slices.Contains(in.Learners, rid)) {
				left++
			}
		}
		done(adminResult(&wire.AdminResult{Node: []byte(target), Shards: left}))
	})
}
