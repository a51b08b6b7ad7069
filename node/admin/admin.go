package admin

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// transferPoll: how often a leader that handed a shard over looks whether
// the new leader took it up.
const transferPoll = 20 * time.Millisecond

// Env is what the admin requests read of the rest of the node and do to
// it.
type Env interface {
	// Now is the node's clock; After runs f once d has passed.
	Now() time.Time
	After(d time.Duration, f func()) (stop func() bool)
	// Members is the node's view of the membership, as it is now.
	Members() Members
	// Submit hands op to the raft host; done gets its result.
	Submit(op raftmux.Op, done func(raftmux.Result))
	// NameOf returns the node id of a raft replica id, if the node knows
	// it.
	NameOf(raftID uint64) (string, bool)
	// Transferred counts a leadership handed over.
	Transferred()
}

// Forwarder sends a request on to another node, and answers for want of a
// leader (serve.Server).
type Forwarder interface {
	// ForwardTo forwards a request to node to, one hop more.
	ForwardTo(to string, kind wire.Kind, payload []byte, hops int, done serve.Done)
	// ToLeader forwards a request to the leader of shard its table names,
	// or answers NotLeader or Unavailable.
	ToLeader(kind wire.Kind, payload []byte, hops int, shard uint32, done serve.Done)
	// RaftError is the answer to a raft operation on shard that failed.
	RaftError(shard uint64, err error) serve.Answer
	// NotLeader is the answer of a node that does not lead shard.
	NotLeader(shard uint64, leader string) serve.Answer
}

// Events is what the admin requests read of the node's events room
// (*events.Loop): the shards this node leads, as its raft host last said.
type Events interface {
	// Leads reports whether this node leads shard; Led how many shards
	// it leads.
	Leads(shard uint64) bool
	Led() int
}

// Lease is what the admin requests read of the node's lease room
// (*lease.Agent).
type Lease interface {
	// ReplicaLead is the leader and term this node's replica of shard
	// knows.
	ReplicaLead(shard uint64) (lead, term uint64)
	// Owned is how many topics this node holds.
	Owned() int
}

// Marks are the operators' marks (*reconcile.Marks), as the admin
// requests record and spread them.
type Marks interface {
	// Drain records and spreads this node's drain mark.
	Drain(drained bool) error
	// Remove records that node was removed at (unix ns), unless a later
	// removal of it is known, and spreads it.
	Remove(node string, at uint64) error
}

// Manager is the node's shard manager (*reconcile.Controller).
type Manager interface {
	// Pin tells the shard manager to keep this node's leadership of
	// shard while the placement stays p.
	Pin(shard uint64, p *router.Placement)
}

// Members is a view of the membership as the admin requests read it.
type Members interface {
	// Member is the SWIM record of id, if the view knows it.
	Member(id string) (swim.Member, bool)
	// Alive reports whether id is a live member (alive or suspect).
	Alive(id string) bool
	// Drained reports whether id is drained; Removed whether it was
	// removed for good.
	Drained(id string) bool
	Removed(id string) bool
	// Placement is the ring's placement of the view.
	Placement() *router.Placement
}

// Config configures a Handler.
type Config struct {
	// Self is this node's id. Required.
	Self string
	// RequestTimeout bounds a transfer's wait for the new leader (half of
	// it). Required.
	RequestTimeout time.Duration
	// RaftID maps a node id to its raft id. Required.
	RaftID func(id string) uint64
	// Server forwards requests (the serve room's serve.Server). Required.
	Server Forwarder
	// Leaders is the node's shard-leader table. Required.
	Leaders *router.LeaderTable
	// Events, Lease, Marks and Manager are the rooms the requests read
	// and tell: the events room, the lease room, the operators' marks and
	// the shard manager. Required.
	Events  Events
	Lease   Lease
	Marks   Marks
	Manager Manager
	// Env reaches the rest of the node. Required.
	Env Env
}

// Handler serves the operators' requests.
type Handler struct {
	self    string
	selfID  uint64
	timeout time.Duration
	raftID  func(string) uint64
	srv     Forwarder
	leaders *router.LeaderTable
	events  Events
	lease   Lease
	marks   Marks
	manager Manager
	env     Env
}

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Self == "" || cfg.RequestTimeout <= 0 || cfg.RaftID == nil || cfg.Server == nil || cfg.Leaders == nil ||
		cfg.Events == nil || cfg.Lease == nil || cfg.Marks == nil || cfg.Manager == nil || cfg.Env == nil {
		return nil, errors.New("admin: incomplete config")
	}
	return &Handler{self: cfg.Self, selfID: cfg.RaftID(cfg.Self), timeout: cfg.RequestTimeout,
		raftID: cfg.RaftID, srv: cfg.Server, leaders: cfg.Leaders,
		events: cfg.Events, lease: cfg.Lease, marks: cfg.Marks, manager: cfg.Manager, env: cfg.Env}, nil
}

// result encodes an AdminResult answer.
func result(r *wire.AdminResult) serve.Answer {
	return serve.NewAnswer(wire.KindAdminResult, wire.AppendAdminResult(nil, r))
}

// Handle serves an admin request (kind.IsAdminRequest()), arrived directly
// (hops 0) or forwarded, through done.
func (a *Handler) Handle(kind wire.Kind, payload []byte, hops int, done serve.Done) {
	switch kind {
	case wire.KindDrain, wire.KindUndrain:
		var m wire.AdminNode
		if err := wire.DecodeAdminNode(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		a.drain(kind, string(m.Node), payload, hops, done)
	case wire.KindTransferLeader:
		var m wire.TransferLeader
		if err := wire.DecodeTransferLeader(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		a.transferLeader(&m, payload, hops, done)
	case wire.KindSplitShard:
		var m wire.SplitShard
		if err := wire.DecodeSplitShard(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		a.split(&m, payload, hops, done)
	case wire.KindRemoveNode:
		var m wire.AdminNode
		if err := wire.DecodeAdminNode(payload, &m); err != nil {
			done(serve.ErrAnswer(wire.CodeBadRequest, err.Error()))
			return
		}
		a.removeNode(string(m.Node), m.Force, done)
	default:
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("unexpected %v request", kind)))
	}
}

// liveMember answers an error unless id is a live member of the view.
func (a *Handler) liveMember(id string, done serve.Done) bool {
	v := a.env.Members()
	if v.Removed(id) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("node %q was removed from the cluster", id)))
		return false
	}
	if _, known := v.Member(id); !known {
		done(serve.ErrAnswer(wire.CodeNotFound, fmt.Sprintf("no member %q", id)))
		return false
	}
	if !v.Alive(id) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("member %q is not alive (shoalctl remove forgets a node gone for good)", id)))
		return false
	}
	return true
}

// drain serves Drain and Undrain: at the node named, or forwarded there.
func (a *Handler) drain(kind wire.Kind, target string, payload []byte, hops int, done serve.Done) {
	if target != a.self {
		if a.liveMember(target, done) {
			a.srv.ForwardTo(target, kind, payload, hops, done)
		}
		return
	}
	drained := kind == wire.KindDrain
	if err := a.marks.Drain(drained); err != nil {
		done(serve.ErrAnswer(wire.CodeInternal, err.Error()))
		return
	}
	done(result(&wire.AdminResult{Node: []byte(a.self), Drained: drained,
		Topics: uint64(a.lease.Owned()), Leaders: uint64(a.events.Led())}))
}

// transferLeader serves TransferLeader: Prepare at the node named, the
// transfer at the shard's leader (any other node forwards it there).
func (a *Handler) transferLeader(m *wire.TransferLeader, payload []byte, hops int, done serve.Done) {
	if sm := a.leaders.Map(); m.Shard > uint64(^uint32(0)) || !sm.Live(uint32(m.Shard)) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("shard %d does not exist (the cluster has %d shards, born with 0..%d)", m.Shard, sm.Len(), sm.Base()-1)))
		return
	}
	target := string(m.Node)
	if !a.liveMember(target, done) {
		return
	}
	if a.env.Members().Drained(target) {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%q is drained (shoalctl undrain first)", target)))
		return
	}
	if m.Prepare {
		if target != a.self {
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("a prepare for %s reached %s", target, a.self)))
			return
		}
		a.manager.Pin(m.Shard, a.env.Members().Placement())
		done(result(&wire.AdminResult{Node: []byte(a.self), Shard: m.Shard}))
		return
	}
	if !a.events.Leads(m.Shard) {
		a.srv.ToLeader(wire.KindTransferLeader, payload, hops, uint32(m.Shard), done)
		return
	}
	a.env.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			done(a.srv.RaftError(m.Shard, r.Err))
			return
		}
		i := slices.IndexFunc(infos, func(in raftmux.Info) bool { return in.Shard == m.Shard })
		if i < 0 || infos[i].Leader != a.selfID {
			l, _, _ := a.leaders.Get(uint32(m.Shard))
			done(a.srv.NotLeader(m.Shard, l))
			return
		}
		in := infos[i]
		if !slices.Contains(in.Voters, a.raftID(target)) {
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%s is not a replica of shard %d (voters: %s)",
				target, m.Shard, strings.Join(a.namesOf(in.Voters), ","))))
			return
		}
		if target == a.self {
			a.manager.Pin(m.Shard, a.env.Members().Placement())
			done(result(&wire.AdminResult{Node: []byte(target), Shard: m.Shard, Term: in.Term}))
			return
		}
		prep := wire.AppendTransferLeader(nil, &wire.TransferLeader{Shard: m.Shard, Node: m.Node, Prepare: true})
		a.srv.ForwardTo(target, wire.KindTransferLeader, prep, hops, func(ans serve.Answer) {
			if ans.Kind != wire.KindAdminResult {
				done(ans)
				return
			}
			a.env.Submit(raftmux.Op{Kind: raftmux.OpTransferLeader, Shard: m.Shard, Node: a.raftID(target)}, func(r raftmux.Result) {
				if r.Err != nil {
					done(a.srv.RaftError(m.Shard, r.Err))
					return
				}
				a.env.Transferred()
				a.awaitLeader(m.Shard, target, in.Term, a.env.Now().Add(a.timeout/2), done)
			})
		})
	})
}

// awaitLeader answers once this node's replica of shard sees target lead
// at a term above from, or Unavailable at deadline.
func (a *Handler) awaitLeader(shard uint64, target string, from uint64, deadline time.Time, done serve.Done) {
	lead, term := a.lease.ReplicaLead(shard)
	if lead == a.raftID(target) && term > from {
		done(result(&wire.AdminResult{Node: []byte(target), Shard: shard, Term: term}))
		return
	}
	if !a.env.Now().Before(deadline) {
		done(serve.Unavailable(fmt.Sprintf("leadership of shard %d did not move to %s in time", shard, target)))
		return
	}
	a.env.After(transferPoll, func() { a.awaitLeader(shard, target, from, deadline, done) })
}

// namesOf returns the node ids of raft ids (the raft id in hex when
// unknown).
func (a *Handler) namesOf(ids []uint64) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if name, ok := a.env.NameOf(id); ok {
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
func (a *Handler) removeNode(target string, force bool, done serve.Done) {
	if target == a.self {
		done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%s cannot remove itself; ask another node", target)))
		return
	}
	v := a.env.Members()
	if !v.Removed(target) {
		mem, known := v.Member(target)
		switch {
		case !known && !force:
			done(serve.ErrAnswer(wire.CodeNotFound, fmt.Sprintf("no member %q (--force removes an id the membership does not know)", target)))
			return
		case v.Alive(target) && !force:
			done(serve.ErrAnswer(wire.CodeBadRequest, fmt.Sprintf("%s is alive; stop it first, or --force", target)))
			return
		}
		at := max(uint64(a.env.Now().UnixNano()), mem.Generation)
		if err := a.marks.Remove(target, at); err != nil {
			done(serve.ErrAnswer(wire.CodeInternal, err.Error()))
			return
		}
	}
	rid := a.raftID(target)
	a.env.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			done(serve.Unavailable(r.Err.Error()))
			return
		}
		var left uint64
		for _, in := range infos {
			if in.Leader == a.selfID && (slices.Contains(in.Voters, rid) || slices.Contains(in.Learners, rid)) {
				left++
			}
		}
		done(result(&wire.AdminResult{Node: []byte(target), Shards: left}))
	})
}
