package serve

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// Meta serves a metadata request (Assign, Revoke, UpdatePartition,
// Lookup), arrived directly (hops 0) or forwarded, through done: decoded
// once here, answered from this node's replica or the routing cache (a
// plain lookup), by this node as the shard's leader, or forwarded to the
// leader its table names.
func (s *Server) Meta(kind wire.Kind, payload []byte, hops int, done Done) {
	req, err := DecodeRequest(kind, payload)
	if err != nil {
		done(ErrAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	if req.Write() && hops == 0 && req.Session.IsZero() {
		var sess wire.Session
		sess, done = s.ownSession(done)
		req.SetSession(sess)
	}
	if req.Kind == wire.KindLookup && !req.Linearizable {
		if a, ok := s.LocalLookup(req.Topic); ok {
			done(a)
			return
		}
	}
	shard := s.leaders.Map().Of(req.Topic)
	if !s.events.Leads(uint64(shard)) {
		s.ToLeader(req.Kind, req.Payload, hops, shard, done)
		return
	}
	s.serveLeader(&req, uint64(shard), false, func(a Answer) {
		if a.Is(wire.CodeNotLeader) {
			// Not the leader any more: as if it had never been.
			s.ToLeader(req.Kind, req.Payload, hops, shard, done)
			return
		}
		done(a)
	})
}

// ToLeader forwards a request to the shard's leader as this node's table
// knows it, or answers NotLeader (Unavailable with no leader known, or no
// hop left). An assignment it brings back fills the routing cache.
func (s *Server) ToLeader(kind wire.Kind, payload []byte, hops int, shard uint32, done Done) {
	leader, _, ok := s.leaders.Get(shard)
	if !ok || leader == s.self || hops >= wire.MaxForwardHops {
		s.counters.notLeader.Add(1)
		done(s.NotLeader(uint64(shard), leader))
		return
	}
	s.counters.forwarded.Add(1)
	s.Forward(leader, kind, payload, hops+1, func(a Answer, err error) {
		if err != nil {
			done(Unavailable(fmt.Sprintf("forward to shard %d leader %s: %v", shard, leader, err)))
			return
		}
		if a.Kind == wire.KindAssignment {
			var m wire.Assignment
			if wire.DecodeAssignment(a.Payload, &m) == nil && len(m.Owner) > 0 {
				s.routes.Put(m.Topic, string(m.Owner), string(m.OwnerAddr), m.Epoch, m.Partitions)
			}
		}
		done(a)
	})
}

// NotLeader is the answer of a node that does not lead shard: NotLeader
// with the leader it knows as the hint, or Unavailable with a retry hint
// when it knows none (or only itself).
func (s *Server) NotLeader(shard uint64, leader string) Answer {
	e := &wire.ErrorResponse{Code: wire.CodeNotLeader, Message: fmt.Sprintf("shard %d is led elsewhere", shard), Shard: shard}
	if leader != "" && leader != s.self {
		e.NodeID = leader
		e.Addr = s.env.ClientAddr(leader)
	} else {
		e.Code = wire.CodeUnavailable
		e.Message = fmt.Sprintf("shard %d has no known leader", shard)
		e.RetryAfter = 100 * time.Millisecond
	}
	return ErrorAnswer(e)
}

// RaftError is the answer to a request raft failed on shard: NotLeader
// with the leader raft named (which the table learns), or Unavailable.
func (s *Server) RaftError(shard uint64, err error) Answer {
	var nl *raftmux.NotLeaderError
	if errors.As(err, &nl) {
		s.events.Deposed(shard)
		name, _ := s.env.NameOf(nl.Leader)
		if name != "" && nl.Leader != 0 {
			_, _ = s.leaders.Update(uint32(shard), name, nl.Term)
		}
		return s.NotLeader(shard, name)
	}
	return Unavailable(fmt.Sprintf("shard %d: %v", shard, err))
}

// LocalLookup answers a non-linearizable lookup without asking the shard
// leader: from this node's replica of the shard when it hosts one (behind
// the leader by the replication lag at most), else from the routing cache
// while the cached owner is alive. A stale answer is fenced by its epoch.
// Only the leader answers that a topic is not assigned.
func (s *Server) LocalLookup(topic []byte) (Answer, bool) {
	shard := uint64(s.leaders.Map().Of(topic))
	var a meta.Assignment
	var found, split bool
	if s.events.AnswersLocally(shard) && s.sm.Hosted(shard, func(st *meta.State) { a, found, split = get(st, topic) }) && !split {
		if !found || a.State != meta.Active {
			if !s.events.Leads(shard) {
				// A follower may not have applied an assignment its leader
				// already acknowledged: "not assigned" is the leader's to
				// say, or a client that assigned a topic and then looks it
				// up is told it does not exist.
				return Answer{}, false
			}
			return ErrAnswer(wire.CodeNotFound, fmt.Sprintf("topic %q is not assigned", topic)), true
		}
		return s.assignment(topic, a.Owner, a.Epoch, a.Partitions, shard, false), true
	}
	if r, ok := s.routes.Get(topic); ok && s.env.Members().Alive(r.Owner) {
		return s.assignment(topic, r.Owner, r.Epoch, r.Partitions, shard, true), true
	}
	return Answer{}, false
}

// assignment is the Assignment answer of topic; one not from the cache
// fills it.
func (s *Server) assignment(topic []byte, owner string, epoch uint64, partitions uint32, shard uint64, cached bool) Answer {
	addr := s.env.ClientAddr(owner)
	if !cached && owner != "" {
		s.routes.Put(topic, owner, addr, epoch, partitions)
	}
	return NewAnswer(wire.KindAssignment, wire.AppendAssignment(nil, &wire.Assignment{Topic: topic, Owner: []byte(owner), OwnerAddr: []byte(addr), Epoch: epoch, Partitions: partitions, Shard: shard}))
}

// leaderOf is the shard's leader as this node's table knows it.
func (s *Server) leaderOf(shard uint64) string {
	if shard > uint64(^uint32(0)) {
		return ""
	}
	l, _, _ := s.leaders.Get(uint32(shard))
	return l
}

// notSettled answers a request whose command this node could not see
// settled: it no longer leads the shard.
func (s *Server) notSettled(shard uint64, done Done) {
	done(s.NotLeader(shard, s.leaderOf(shard)))
}

// serveLeader serves a metadata request on the shard's leader, through
// done; current says a read index has just shown this node's state to
// hold every committed command.
func (s *Server) serveLeader(req *Request, shard uint64, current bool, done Done) {
	v := s.env.Members()
	var cmd meta.Command
	var perr error
	sess := req.Session
	switch req.Kind {
	case wire.KindLookup:
		if !req.Linearizable {
			done(s.leaderLookup(shard, req.Topic))
			return
		}
		term, led := s.lease.LeadsAt(shard)
		start := s.env.Now()
		s.env.ReadIndex(shard, func(err error) {
			if err != nil {
				done(s.RaftError(shard, err))
				return
			}
			if led {
				s.lease.Proof(shard, term, start)
			}
			// A move or revoke is visible to a linearizable read only once
			// settled, as to its own client: until then the old owner may
			// still acknowledge writes at its epoch.
			var a meta.Assignment
			var found bool
			_ = s.sm.With(shard, func(st *meta.State) { a, found = st.Get(req.Topic) })
			fresh := found && a.State == meta.Active && a.Epoch == 1 && a.Previous == ""
			s.lease.WhenSettled(shard, req.Topic, math.MaxUint64, fresh, func(settled bool) {
				if !settled {
					s.notSettled(shard, done)
					return
				}
				done(s.leaderLookup(shard, req.Topic))
			})
		})
		return
	case wire.KindAssign:
		var refusal meta.Refusal
		switch {
		case len(req.Owner) > 0 && !v.Alive(string(req.Owner)):
			refusal = meta.RefuseOwnerNotLive
		case len(req.Owner) > 0 && v.Drained(string(req.Owner)):
			refusal = meta.RefuseOwnerDrained
		}
		if refusal != meta.RefuseNone && sess.IsZero() {
			done(MetaError(refusalErr(refusal, req.Owner)))
			return
		}
		if refusal != meta.RefuseNone {
			// Through the log, as the write's answer (see below).
			cmd = meta.Command{Op: meta.OpAssign, Topic: req.Topic, Owner: string(req.Owner), Partitions: req.Partitions, Refusal: refusal}
			break
		}
		if err := s.sm.With(shard, func(st *meta.State) {
			cmd, perr = st.PrepareAssign(req.Topic, string(req.Owner), req.Partitions, v.Candidates(st))
		}); err != nil {
			done(ErrAnswer(wire.CodeInternal, err.Error()))
			return
		}
	case wire.KindRevoke:
		cmd = meta.Command{Op: meta.OpRevoke, Topic: req.Topic}
		_ = s.sm.With(shard, func(st *meta.State) { perr = st.Check(&cmd) })
	case wire.KindUpdatePartition:
		cmd = meta.Command{Op: meta.OpUpdatePartition, Topic: req.Topic, Partitions: req.Partitions}
		_ = s.sm.With(shard, func(st *meta.State) { perr = st.Check(&cmd) })
	}
	if !sess.IsZero() {
		// A write of a session is proposed even if the state refuses it
		// now: the refusal, applied, is its answer to every retry. Refused
		// here, a copy of it still on its way (an earlier forward, a
		// proposal of a deposed leader) could apply after the answer.
		cmd.Session = meta.SessionRef{ID: sess.ID, Seq: sess.Seq, Floor: sess.Floor}
		cmd.Clock = s.stamp(shard)
		perr = nil
	}
	if perr != nil && !current {
		// A refusal is an answer too: it must come from a state that holds
		// every committed command, which a leader that is new, or deposed
		// without knowing it, may not have yet.
		s.env.ReadIndex(shard, func(err error) {
			if err != nil {
				done(s.RaftError(shard, err))
				return
			}
			s.serveLeader(req, shard, true, done)
		})
		return
	}
	if perr != nil {
		done(MetaError(perr))
		return
	}
	data, err := meta.AppendCommand(nil, &cmd)
	if err != nil {
		done(MetaError(err))
		return
	}
	topic := cmd.Topic
	s.lease.Propose(shard, data, func(res *shardsm.Result, err error) {
		if err != nil {
			done(s.RaftError(shard, err))
			return
		}
		switch {
		case res == nil:
			done(ErrAnswer(wire.CodeInternal, "no apply result"))
		case res.Err != nil:
			done(MetaError(res.Err))
		case req.Kind == wire.KindRevoke:
			a := res.Assignment
			s.routes.Invalidate(topic, a.Epoch)
			s.lease.WhenSettled(shard, topic, a.Epoch, a.Epoch == 1 && a.Previous == "", func(settled bool) {
				if !settled {
					s.notSettled(shard, done)
					return
				}
				done(NewAnswer(wire.KindRevoked, wire.AppendRevoked(nil, &wire.Revoked{Topic: topic, Epoch: a.Epoch})))
			})
		default:
			a := res.Assignment
			s.lease.WhenSettled(shard, topic, a.Epoch, a.Epoch == 1 && a.Previous == "", func(settled bool) {
				if !settled {
					s.notSettled(shard, done)
					return
				}
				done(s.assignment(topic, a.Owner, a.Epoch, a.Partitions, shard, false))
			})
		}
	})
}

// refusalErr is the error of a refusal decided outside the state.
func refusalErr(r meta.Refusal, owner []byte) error {
	if r == meta.RefuseOwnerDrained {
		return fmt.Errorf("owner %q: %w", owner, meta.ErrOwnerDrained)
	}
	return fmt.Errorf("owner %q: %w", owner, meta.ErrOwnerNotLive)
}

// leaderLookup answers a lookup from the leader's state.
func (s *Server) leaderLookup(shard uint64, topic []byte) Answer {
	var a meta.Assignment
	var ok, split bool
	if err := s.sm.With(shard, func(st *meta.State) { a, ok, split = get(st, topic) }); err != nil {
		return ErrAnswer(wire.CodeInternal, err.Error())
	}
	if split {
		return MetaError(fmt.Errorf("shard %d: %w", shard, meta.ErrShardSplit))
	}
	if !ok || a.State != meta.Active {
		return ErrAnswer(wire.CodeNotFound, fmt.Sprintf("topic %q is not assigned", topic))
	}
	return s.assignment(topic, a.Owner, a.Epoch, a.Partitions, shard, false)
}

// splitRetry is the retry hint of a request that reached a shard after it
// split: its children's leaders are known within a round of their
// election.
const splitRetry = 50 * time.Millisecond

// get reads topic from a shard's state; split reports that the shard split,
// whose state no longer changes and answers nothing.
func get(st *meta.State, topic []byte) (a meta.Assignment, found, split bool) {
	if st.Split() {
		return meta.Assignment{}, false, true
	}
	a, found = st.Get(topic)
	return a, found, false
}

// MetaError is the answer to a request the metadata state refused.
func MetaError(err error) Answer {
	switch {
	case errors.Is(err, meta.ErrUnknownTopic):
		return ErrAnswer(wire.CodeNotFound, err.Error())
	case errors.Is(err, meta.ErrNoOwner), errors.Is(err, meta.ErrTooManySessions):
		return Unavailable(err.Error())
	case errors.Is(err, meta.ErrOwnerNotLive), errors.Is(err, meta.ErrOwnerDrained):
		return ErrAnswer(wire.CodeBadRequest, err.Error())
	case errors.Is(err, meta.ErrSessionStale):
		return ErrAnswer(wire.CodeSessionExpired, err.Error())
	case errors.Is(err, meta.ErrShardSplit):
		// Its topics are in its children: asked again, a node that knows
		// them sends the request there.
		return ErrorAnswer(&wire.ErrorResponse{Code: wire.CodeUnavailable, Message: err.Error(), RetryAfter: splitRetry})
	default:
		return ErrAnswer(wire.CodeBadRequest, err.Error())
	}
}
