package raftmux

import (
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/internal/mutant"
)

// Reads on a leader are confirmed by raftmux, not by raft's ReadIndex.
//
// raft's ReadIndex answers a read at the leader's commit index once a
// quorum has acknowledged a heartbeat sent after the read arrived; it
// sends that heartbeat, with the read's context, as a raft message of its
// own to every follower, for every read, and steps the acknowledgements
// back through raft on both sides (two Readies per follower, one on the
// leader). Here the same protocol runs beside raft, in the round's
// coalesced heartbeat tuples:
//
//   - A read that reaches a leader which has committed an entry of its
//     term (the empty entry it appended on election) waits for the end of
//     the round. Then each replica with reads waiting sends its voters
//     one read heartbeat (FlagRead; the tuple's commit field carries the
//     confirmation's id) for all of them, and notes the commit index.
//   - A follower answers a read heartbeat, without stepping raft, only
//     while it follows the sender at the heartbeat's term: raft's term
//     and leader, not yet persisted ones, so that a vote it granted for a
//     later term (sent only once persisted) ends its acknowledgements.
//     One that does not follow the sender yet (restarted in a quiesced
//     group) steps the heartbeat into raft first, as raft's own read
//     heartbeat would be, and answers if raft then follows the sender.
//   - Confirmation ids count up from 1 in each worker's life. A leader
//     matches an acknowledgement by term and id, and a restarted node
//     leads again only at a later term, so an acknowledgement meant for
//     its previous life counts for nothing.
//   - An acknowledgement of confirmation id, at the term it was sent at,
//     counts for it and for every earlier one of the same term: it left
//     the follower after the heartbeat arrived, so after all those reads
//     did. A voter counts once; non-voters not at all. Once a quorum of
//     the configuration (both halves of a joint one) acknowledged, the
//     reads are answered at the noted commit index when it is applied.
//
// Any other read (a follower, a leader new to its term, a leader that
// lost its leadership with reads waiting) goes through raft's ReadIndex,
// which forwards it or waits for the commit. Confirmations without a
// quorum for Config.ReadRetryTicks are sent again.

// confirmation is one read heartbeat a leader sent its voters.
type confirmation struct {
	id, term, index uint64
	sent            uint64   // worker tick
	acks            []uint64 // voters that acknowledged it (or a later one)
	reqs            []*request
}

// readsPending reports whether r holds reads not yet answered.
func (r *replica) readsPending() bool {
	return len(r.reads) > 0 || len(r.readWaits) > 0 || len(r.unconfirmed) > 0 || len(r.confirms) > 0
}

// read takes a read request: a leader confirms it itself (at the end of
// the round), anything else asks raft.
func (w *worker) read(shard uint64, req *request) {
	r, err := w.hosted(shard)
	if err != nil {
		req.finish(result{err: err})
		return
	}
	w.wake(r)
	req.issued = w.tickCount
	if r.state != raft.StateLeader {
		w.issueRead(r, req)
		return
	}
	w.queueConfirm(r, req)
}

func (w *worker) queueConfirm(r *replica, req *request) {
	r.unconfirmed = append(r.unconfirmed, req)
	if !r.confirmQueued {
		r.confirmQueued = true
		w.confirmQ = append(w.confirmQ, r)
	}
}

// sendConfirms sends the round's read heartbeats (before its messages are
// flushed).
func (w *worker) sendConfirms() {
	if len(w.confirmQ) == 0 {
		return
	}
	self := w.h.cfg.NodeID
	for _, r := range w.confirmQ {
		r.confirmQueued = false
		reqs := r.unconfirmed
		r.unconfirmed = nil
		if len(reqs) == 0 {
			continue
		}
		if r.destroyed || r.halted != nil {
			// failAll answers the reads of a replica it ends; none should be
			// left, and none is left waiting.
			var err error = ErrRemoved
			if r.halted != nil {
				err = r.halted
			}
			for _, req := range reqs {
				req.finish(result{err: err})
			}
			continue
		}
		st := r.rn.BasicStatus()
		if st.RaftState != raft.StateLeader || r.state != raft.StateLeader || r.leadIndex == 0 || st.Commit < r.leadIndex {
			for _, req := range reqs {
				w.issueRead(r, req)
			}
			continue
		}
		w.confirmSeq++
		c := confirmation{id: w.confirmSeq, term: st.Term, index: st.Commit, sent: w.tickCount, reqs: reqs}
		r.confirms = append(r.confirms, c)
		if mutant.On(mutant.ReadUnconfirmed) {
			w.confirmed(r, len(r.confirms))
			continue
		}
		for _, id := range voters(r.confState) {
			if id == self {
				continue
			}
			b := w.outbound(id)
			b.Heartbeats = append(b.Heartbeats, Heartbeat{Shard: r.shard, Term: c.term, Commit: c.id, Flags: FlagRead})
		}
		// A group of one (or whose quorum this node makes alone).
		w.readAcked(r, self, c.term, c.id)
	}
	clear(w.confirmQ)
	w.confirmQ = w.confirmQ[:0]
}

// voters returns every voter of cs, both halves of a joint configuration.
func voters(cs *raftpb.ConfState) []uint64 {
	if len(cs.VotersOutgoing) == 0 {
		return cs.Voters
	}
	out := slices.Clone(cs.Voters)
	for _, v := range cs.VotersOutgoing {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// answerReadHeartbeat is a follower's side: it acknowledges the read
// heartbeat only while it follows its sender at that term.
func (w *worker) answerReadHeartbeat(shard, from uint64, hb Heartbeat) {
	r := w.replicas[shard]
	if r == nil || r.destroyed || r.halted != nil || r.ended {
		return
	}
	st := r.rn.BasicStatus()
	if st.Term > hb.Term {
		return
	}
	if st.RaftState != raft.StateFollower || st.Term != hb.Term || st.Lead != from {
		// Not following the sender at its term yet (a restarted replica
		// that has not heard from its leader, a candidate of that term):
		// as a raft heartbeat with a read context would, it makes the
		// replica follow the sender first, raft deciding.
		if !w.admit(r, from, raftpb.MsgHeartbeat, hb.Term) {
			return
		}
		w.wake(r)
		_ = r.rn.Step(hbMessage(raftpb.MsgHeartbeat, from, w.h.cfg.NodeID, hb.Term, 0))
		w.touch(r)
		if st = r.rn.BasicStatus(); st.RaftState != raft.StateFollower || st.Term != hb.Term || st.Lead != from {
			return
		}
	}
	r.heardTick = w.tickCount
	b := w.outbound(from)
	b.HeartbeatResponses = append(b.HeartbeatResponses, Heartbeat{Shard: shard, Term: hb.Term, Commit: hb.Commit, Flags: FlagRead})
}

// readAcked counts voter from's acknowledgement of confirmation id at
// term, and answers the reads of the confirmations that now have a quorum.
func (w *worker) readAcked(r *replica, from, term, id uint64) {
	if r.destroyed || r.halted != nil || r.state != raft.StateLeader || len(r.confirms) == 0 {
		return
	}
	if st := r.rn.BasicStatus(); st.RaftState != raft.StateLeader || st.Term != term {
		return
	}
	if !slices.Contains(r.confState.Voters, from) && !slices.Contains(r.confState.VotersOutgoing, from) {
		return
	}
	n := 0
	for i := range r.confirms {
		c := &r.confirms[i]
		if c.id > id {
			break
		}
		if c.term != term {
			continue
		}
		if !slices.Contains(c.acks, from) {
			c.acks = append(c.acks, from)
		}
		if n == i && quorum(r.confState, c.acks) {
			n = i + 1
		}
	}
	if n > 0 {
		w.confirmed(r, n)
	}
}

// confirmed answers, as they apply, the reads of r's first n
// confirmations.
func (w *worker) confirmed(r *replica, n int) {
	for i := range r.confirms[:n] {
		c := &r.confirms[i]
		for _, req := range c.reqs {
			r.readWaits = append(r.readWaits, readWait{index: c.index, req: req})
		}
	}
	clear(r.confirms[:n])
	r.confirms = slices.Delete(r.confirms, 0, n)
	w.answerReads(r)
}

// quorum reports whether acks hold a majority of cs's voters, and of its
// outgoing voters in a joint configuration.
func quorum(cs *raftpb.ConfState, acks []uint64) bool {
	return majority(cs.Voters, acks) && (len(cs.VotersOutgoing) == 0 || majority(cs.VotersOutgoing, acks))
}

func majority(voters, acks []uint64) bool {
	n := 0
	for _, v := range voters {
		if slices.Contains(acks, v) {
			n++
		}
	}
	return n > len(voters)/2
}

// retryConfirms sends again, at the next round, the reads of
// confirmations unanswered for ReadRetryTicks; reads whose caller gave up
// are forgotten.
func (w *worker) retryConfirms(r *replica) {
	if len(r.confirms) == 0 {
		return
	}
	n := 0
	for _, c := range r.confirms {
		if w.tickCount-c.sent < uint64(w.h.cfg.ReadRetryTicks) {
			r.confirms[n] = c
			n++
			continue
		}
		for _, req := range c.reqs {
			if req.ctx.Err() == nil {
				w.queueConfirm(r, req)
			}
		}
	}
	clear(r.confirms[n:])
	r.confirms = r.confirms[:n]
}

// rerouteReads hands the reads r was confirming to raft's ReadIndex: it
// lost its leadership.
func (w *worker) rerouteReads(r *replica) {
	reqs := r.unconfirmed
	r.unconfirmed = nil
	for _, c := range r.confirms {
		reqs = append(reqs, c.reqs...)
	}
	clear(r.confirms)
	r.confirms = r.confirms[:0]
	for _, req := range reqs {
		if req.ctx.Err() == nil {
			w.issueRead(r, req)
		}
	}
}
