package serve

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Env is what the Server reads of the rest of the node and does to it.
// Its methods are called without the Server's lock held, but for After,
// which must not run f before it returns.
type Env interface {
	// Send sends a frame to a peer.
	Send(peer string, frame []byte) error
	// Now is the node's clock.
	Now() time.Time
	// After runs f once d has passed, unless stop is called first.
	After(d time.Duration, f func()) (stop func() bool)

	// ClientAddr is the client address of member id ("" when unknown).
	ClientAddr(id string) string
	// Members is the node's view of the membership, as it is now.
	Members() Members
	// NameOf returns the node id of a raft replica id, if the node knows
	// it.
	NameOf(raftID uint64) (string, bool)

	// ReadIndex confirms this node's leadership of shard, and calls done
	// once its state holds every command committed before.
	ReadIndex(shard uint64, done func(err error))
}

// Members is a view of the membership.
type Members interface {
	// Alive reports whether id is a live member (alive or suspect).
	Alive(id string) bool
	// Drained reports whether id is drained.
	Drained(id string) bool
	// Candidates are the members that may own topics, with their load in
	// st.
	Candidates(st *meta.State) []meta.Node
}

// Events is what the Server reads and tells of the shards this node's
// replicas lead, as its raft host last said (*events.Loop).
type Events interface {
	// Leads reports whether this node leads shard.
	Leads(shard uint64) bool
	// Deposed records that this node does not lead shard any more.
	Deposed(shard uint64)
	// AnswersLocally reports whether plain lookups of shard may be
	// answered from this node's replica.
	AnswersLocally(shard uint64) bool
}

// Lease is what the Server asks of the node's lease room (*lease.Agent):
// the term it leads a shard at as its duties know it, the proofs of that
// leadership, the proposals and the settling of their commands.
type Lease interface {
	// LeadsAt returns the term at which this node leads shard.
	LeadsAt(shard uint64) (term uint64, led bool)
	// Proof records that this node led shard at term, and that its state
	// held every entry committed before at.
	Proof(shard, term uint64, at time.Time)
	// WhenSettled calls done(true) once the command that took topic to
	// epoch on shard is settled, or done(false) once this node no longer
	// leads shard.
	WhenSettled(shard uint64, topic []byte, epoch uint64, fresh bool, done func(settled bool))
	// Propose proposes a command on shard and calls done with what it
	// applied (nil when the apply gave no result).
	Propose(shard uint64, data []byte, done func(res *shardsm.Result, err error))
}

// Machine is the node's state machine (*shardsm.Machine), as the Server
// reads the shards' states.
type Machine interface {
	// With calls fn with shard's state, once it is loaded.
	With(shard uint64, fn func(st *meta.State)) error
	// Hosted calls fn with shard's state and reports true if this node
	// hosts a replica of shard.
	Hosted(shard uint64, fn func(st *meta.State)) bool
}

// Config configures a Server.
type Config struct {
	// Self is this node's id. Required.
	Self string
	// Timeout is the request timeout: the longest a request waits for its
	// answer, and the window in which a copy of a forward is dropped.
	// Required.
	Timeout time.Duration
	// FirstForward is where the ids of the requests this node forwards
	// start, different in each life of the node so that a peer does not
	// take a new request for a copy of an old one.
	FirstForward uint64
	// Leaders is the node's shard-leader table. Required.
	Leaders *router.LeaderTable
	// Routes is the node's routing cache. Required.
	Routes *router.Cache
	// Session is the node's own write session, given to the writes that
	// arrive naming none (a different id in each life of the node).
	// Required.
	Session *session.Writer
	// Events, Lease and Machine are the rooms the Server asks of the
	// shards this node leads, their leases and proposals, and their
	// states. Required.
	Events  Events
	Lease   Lease
	Machine Machine
	// Env reaches the rest of the node. Required.
	Env Env
}

// Server serves metadata requests, on the shard's leader or forwarded to
// it, and matches the answers of forwarded requests to their waits.
type Server struct {
	self    string
	timeout time.Duration
	leaders *router.LeaderTable
	routes  *router.Cache
	events  Events
	lease   Lease
	sm      Machine
	env     Env

	// mu guards the waits and the forwards taken.
	mu      sync.Mutex
	waiting map[uint64]wait
	next    uint64
	seen    dedup
	// sessions has a lock of its own (sessions.go).
	sessions sessions

	forwardLat histogram.Histogram
	counters   struct{ forwarded, forwardsIn, forwardDups, notLeader atomic.Uint64 }
}

// New builds a Server.
func New(cfg Config) (*Server, error) {
	if cfg.Self == "" || cfg.Timeout <= 0 || cfg.Leaders == nil || cfg.Routes == nil || cfg.Session == nil || cfg.Events == nil || cfg.Lease == nil || cfg.Machine == nil || cfg.Env == nil {
		return nil, errors.New("serve: incomplete config")
	}
	return &Server{self: cfg.Self, timeout: cfg.Timeout, leaders: cfg.Leaders, routes: cfg.Routes,
		events: cfg.Events, lease: cfg.Lease, sm: cfg.Machine, env: cfg.Env,
		waiting: make(map[uint64]wait), next: cfg.FirstForward, sessions: sessions{own: cfg.Session}}, nil
}

// Stats are the Server's counters.
type Stats struct {
	Forwarded   uint64 // requests this node forwarded
	ForwardsIn  uint64 // requests forwarded to this node
	ForwardDups uint64 // copies of a forward already taken, dropped
	NotLeader   uint64 // requests answered NotLeader (or no leader known)
}

// Stats reads the Server's counters.
func (s *Server) Stats() Stats {
	return Stats{Forwarded: s.counters.forwarded.Load(), ForwardsIn: s.counters.forwardsIn.Load(),
		ForwardDups: s.counters.forwardDups.Load(), NotLeader: s.counters.notLeader.Load()}
}

// ForwardLatency is the histogram of the forwards answered: from sending
// each to the peer until its answer came back.
func (s *Server) ForwardLatency() histogram.Snapshot { return s.forwardLat.Snapshot() }

// Bounded returns done, called at most once: with the request's answer,
// or, if none comes within the request timeout, with Unavailable (a
// proposal or read raft never answered, a forward never returned).
func (s *Server) Bounded(done Done) Done {
	var once sync.Once
	stop := s.env.After(s.timeout, func() {
		once.Do(func() { done(Unavailable("request timed out")) })
	})
	return func(a Answer) {
		once.Do(func() {
			stop()
			done(a)
		})
	}
}

// ForwardDone takes a forwarded request's answer, or why there is none.
type ForwardDone func(a Answer, err error)

type wait struct {
	done ForwardDone
	node string
	stop func() bool
	sent time.Time
}

// ErrPeerDown: the node a request was forwarded to became unreachable.
var ErrPeerDown = errors.New("node: forward target unreachable")

// ErrForwardTimeout: the node a request was forwarded to did not answer
// in time.
var ErrForwardTimeout = errors.New("node: forwarded request not answered in time")

// AskShards asks leader for the shards it hosts (a ShardList, forwarded
// at most wire.MaxForwardHops hops); done gets the list, or nil and the
// error when it could not be asked or its answer is something else.
func (s *Server) AskShards(leader string, done func(*wire.ShardList, error)) {
	s.Forward(leader, wire.KindShards, nil, wire.MaxForwardHops, func(ans Answer, err error) {
		var sl wire.ShardList
		if err != nil || ans.Kind != wire.KindShardList || wire.DecodeShardList(ans.Payload, &sl) != nil {
			done(nil, err)
			return
		}
		done(&sl, nil)
	})
}

// Forward sends a request to node to, with hops already made, and hands
// its answer to done, or an error if it cannot be sent or is not answered
// within three quarters of the request timeout (so that the asking client
// hears back before it gives up on this node).
func (s *Server) Forward(to string, kind wire.Kind, payload []byte, hops int, done ForwardDone) {
	s.mu.Lock()
	s.next++
	id := s.next
	s.mu.Unlock()
	fr, start := wire.BeginFrame(nil, wire.KindForward, id)
	fr = wire.AppendForward(fr, &wire.Forward{Hops: uint8(hops), Origin: []byte(s.self), Kind: kind, Payload: payload})
	fr, err := wire.EndFrame(fr, start)
	if err != nil {
		done(Answer{}, err)
		return
	}
	sent := s.env.Now()
	s.mu.Lock()
	w := wait{done: done, node: to, sent: sent}
	w.stop = s.env.After(s.timeout*3/4, func() {
		if w, ok := s.take(id); ok {
			w.done(Answer{}, ErrForwardTimeout)
		}
	})
	s.waiting[id] = w
	s.mu.Unlock()
	if err := s.env.Send(to, fr); err != nil {
		if w, ok := s.take(id); ok {
			w.stop()
			w.done(Answer{}, err)
		}
	}
}

// ForwardTo forwards a request to node to and hands its answer to done:
// Unavailable when no hop is left or no answer comes.
func (s *Server) ForwardTo(to string, kind wire.Kind, payload []byte, hops int, done Done) {
	if hops >= wire.MaxForwardHops {
		done(Unavailable(fmt.Sprintf("no hop left to reach %s", to)))
		return
	}
	s.counters.forwarded.Add(1)
	s.Forward(to, kind, payload, hops+1, func(a Answer, err error) {
		if err != nil {
			done(Unavailable(fmt.Sprintf("forward to %s: %v", to, err)))
			return
		}
		done(a)
	})
}

// take removes and returns the wait of request id.
func (s *Server) take(id uint64) (wait, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.waiting[id]
	delete(s.waiting, id)
	return w, ok
}

// PeerDown fails at once every request waiting on node.
func (s *Server) PeerDown(node string) {
	s.mu.Lock()
	var ids []uint64
	for id, w := range s.waiting {
		if w.node == node {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // fail them in the order they were sent
	down := make([]wait, len(ids))
	for i, id := range ids {
		down[i] = s.waiting[id]
		delete(s.waiting, id)
	}
	s.mu.Unlock()
	for _, w := range down {
		w.stop()
		w.done(Answer{}, ErrPeerDown)
	}
}

// TakeReply takes a ForwardReply frame (header h, payload as it came):
// the answer of the request it names, decoded here, once.
func (s *Server) TakeReply(h wire.Header, payload []byte) {
	w, ok := s.take(h.RequestID)
	if !ok {
		return
	}
	w.stop()
	s.forwardLat.Observe(s.env.Now().Sub(w.sent))
	plain, _, err := wire.FramePayload(&h, payload, nil)
	if err != nil {
		w.done(Answer{}, err)
		return
	}
	var r wire.ForwardReply
	if err := wire.DecodeForwardReply(plain, &r); err != nil {
		w.done(Answer{}, err)
		return
	}
	w.done(Relayed(r.Kind, append([]byte(nil), r.Payload...)), nil)
}

// TakeForward reads a Forward (request id, from peer from): the request
// it carries, to be served, or false for one that does not decode or is a
// copy of a forward taken within the request timeout. A copy is dropped:
// served again later, a change refused the first time could still be
// made, after its origin had answered that it was refused.
func (s *Server) TakeForward(from string, id uint64, payload []byte) (wire.Forward, bool) {
	var fw wire.Forward
	if err := wire.DecodeForward(payload, &fw); err != nil {
		return fw, false
	}
	now := s.env.Now()
	s.mu.Lock()
	first := s.seen.first(from, id, now, s.timeout)
	s.mu.Unlock()
	if !first {
		s.counters.forwardDups.Add(1)
		return fw, false
	}
	s.counters.forwardsIn.Add(1)
	return fw, true
}

// ReplyFrame is the ForwardReply frame that answers forward id with a.
func ReplyFrame(id uint64, a Answer) ([]byte, error) {
	f, start := wire.BeginFrame(nil, wire.KindForwardReply, id)
	f = wire.AppendForwardReply(f, &wire.ForwardReply{Kind: a.Kind, Payload: a.Payload})
	return wire.EndFrame(f, start)
}

// dedup remembers the forwards this node took in the last window (the
// request timeout, after which their origin has stopped waiting), by
// sender and request id, so that a duplicated frame is served once.
type dedup struct {
	seen map[fwdKey]bool
	// ring holds the forwards of seen, n of them, the oldest at head: a
	// ring, so that forgetting the oldest costs the same however many
	// are remembered.
	ring    []fwdSeenAt
	head, n int
}

type fwdKey struct {
	from string
	id   uint64
}

type fwdSeenAt struct {
	key fwdKey
	at  time.Time
}

// maxForwardsSeen bounds the memory of dedup under any load.
const maxForwardsSeen = 1 << 16

// first records the forward id from node from at now and reports whether
// it is the first copy seen within window.
func (d *dedup) first(from string, id uint64, now time.Time, window time.Duration) bool {
	if d.seen == nil {
		d.seen = make(map[fwdKey]bool)
	}
	for d.n > 0 {
		old := &d.ring[d.head]
		if now.Sub(old.at) <= window && d.n < maxForwardsSeen {
			break
		}
		delete(d.seen, old.key)
		*old = fwdSeenAt{}
		d.head = (d.head + 1) % len(d.ring)
		d.n--
	}
	k := fwdKey{from, id}
	if d.seen[k] {
		return false
	}
	d.seen[k] = true
	if d.n == len(d.ring) {
		grown := make([]fwdSeenAt, min(max(16, 2*len(d.ring)), maxForwardsSeen))
		for i := range d.n {
			grown[i] = d.ring[(d.head+i)%len(d.ring)]
		}
		d.ring, d.head = grown, 0
	}
	d.ring[(d.head+d.n)%len(d.ring)] = fwdSeenAt{k, now}
	d.n++
	return true
}
