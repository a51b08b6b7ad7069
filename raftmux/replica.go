package raftmux

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// replica is one shard's raft group member on this host. Owned by its worker.
type replica struct {
	shard uint64
	rn    *raft.RawNode
	rs    raft.Storage
	// ended: the replica applied its shard's split (EndObserver).
	ended bool
	// seedCampaign: a child born here of a split whose parent this
	// replica's host led, seeded at seededTick, campaigns until it knows
	// a leader (seededCampaign).
	seedCampaign bool
	seededTick   uint64

	touched  bool
	quiesced bool
	// removed: the last configuration this replica applied leaves it out.
	// It goes on handling its Readies, and is destroyed, with its data,
	// only once it has stayed out and heard nothing for
	// removedGraceElections election timeouts (and has no write in flight):
	// entries it already acknowledged may add it back, and the leader
	// counts on what it acknowledged.
	removed   bool
	destroyed bool
	// confTail is the index of the last configuration change this
	// replica's log took (0: none since it opened, nor above its applied
	// index then); one above applied may make it a voter once applied.
	confTail    uint64
	removedTick uint64
	// tombApplied: the applied index of this shard's replica this host
	// destroyed before (see Tombstone); r takes no snapshot at or below it.
	tombApplied uint64
	heardTick   uint64 // the tick of the last message for this replica
	// suspect is the leader the membership layer reported suspect while
	// this replica followed it, and suspectTick when; a message from it
	// clears the suspicion (see suspectCampaign).
	suspect     uint64
	suspectTick uint64
	// warnedBeyond: a heartbeat past the log was logged once already.
	warnedBeyond bool
	// confCommitting: the Ready being handled commits a configuration
	// change, or the group is in a joint configuration; commit-only
	// appends are then sent (a replica being removed learns its removal
	// from them, and hears nothing once it is out).
	confCommitting bool
	// hbResps: followers whose heartbeat response was stepped since its
	// last Ready was routed (an append raft sends in answer to one may be
	// recovering a lost append, and is never left unsent).
	hbResps []uint64
	// appSent: the tick of the last append sent to each follower.
	appSent []appSent
	// skipTicks holds a woken leader's clock back so that CheckQuorum does
	// not count the silence of its quiescence against its followers before
	// they have answered the wake-up heartbeat.
	skipTicks int
	// busyTick is the worker tick of its last proposal; a leader quiesces
	// only after quiesceIdleTicks without one, so that a group between two
	// proposals of a steady load does not fall asleep and wake (a round of
	// heartbeats each way) every tick.
	busyTick uint64

	state raft.StateType
	// lead is the leader OnLeaderChange last named, at leadTerm.
	lead, leadTerm uint64
	term           uint64
	persistedVote  uint64
	// persistedCommit is the commit index of the HardState last written.
	persistedCommit uint64
	applied         uint64
	compacted       uint64
	confState       *raftpb.ConfState

	proposals map[uint64]*request // proposal id → waiter
	ccPending bool                // a conf change of ours is in flight
	// leadIndex: the index of the empty entry this replica appended when
	// it last became leader. raft ignores conf changes proposed before
	// the entries up to it are applied (it cannot tell whether the log
	// holds an unapplied one), turning them into empty entries.
	leadIndex uint64
	reads     map[uint64]*request // read ctx id → waiter (not yet answered by raft)
	readWaits []readWait          // answered, waiting for apply
	// Reads a leader confirms itself (reads.go): arrived this round, and
	// sent in read heartbeats, in id order.
	unconfirmed   []*request
	confirms      []confirmation
	confirmQueued bool // r is in worker.confirmQ

	// Incoming snapshot being assembled, and those fully received
	// awaiting raft's Ready: raft may take one and refuse another that
	// arrives before the Ready (an older one, or a deposed leader's), so
	// each keeps its data until a Ready shows which, if any, raft took.
	inSnap *inSnapshot
	snaps  []heldSnap

	// tail is raft's last log index as of the last Ready taken (or the
	// stored one at open); logMayShrink: a message stepped since may have
	// truncated the log below it (a conflicting append, a snapshot). See
	// lastBound.
	tail         uint64
	logMayShrink bool
	// halted: the replica stopped at an entry it could not apply (halt.go).
	halted *HaltedError
}

type appSent struct{ to, tick uint64 }

func (r *replica) noteHeartbeatResp(from uint64) {
	if !slices.Contains(r.hbResps, from) {
		r.hbResps = append(r.hbResps, from)
	}
}

func (r *replica) noteAppend(to, tick uint64) {
	for i := range r.appSent {
		if r.appSent[i].to == to {
			r.appSent[i].tick = tick
			return
		}
	}
	r.appSent = append(r.appSent, appSent{to: to, tick: tick})
}

// appendedSince reports whether an append went to follower to at tick
// since or later.
func (r *replica) appendedSince(to, since uint64) bool {
	for _, a := range r.appSent {
		if a.to == to {
			return a.tick >= since && a.tick > 0
		}
	}
	return false
}

type readWait struct {
	index uint64
	req   *request
}

type inSnapshot struct {
	id   uint64
	from uint64
	next uint32
	msg  *raftpb.Message
	buf  []byte
	// lastTick: the worker tick of its last chunk (see expireSnapshots).
	lastTick uint64
	started  time.Time // its first chunk's arrival, for Host.SnapshotLatencies
}

func (w *worker) raftConfig(shard, id uint64, rs raft.Storage, applied uint64) *raft.Config {
	c := &w.h.cfg
	return &raft.Config{
		ID:                        id,
		ElectionTick:              c.ElectionTicks,
		HeartbeatTick:             c.HeartbeatTicks,
		Storage:                   rs,
		Applied:                   applied,
		MaxSizePerMsg:             c.MaxSizePerMsg,
		MaxCommittedSizePerReady:  c.MaxSizePerMsg * 4,
		MaxUncommittedEntriesSize: c.MaxUncommittedEntriesSize,
		MaxInflightMsgs:           c.MaxInflightMsgs,
		MaxInflightBytes:          c.MaxInflightBytes,
		CheckQuorum:               !c.DisableCheckQuorum,
		PreVote:                   !c.DisablePreVote,
		ReadOnlyOption:            raft.ReadOnlySafe,
		DisableProposalForwarding: true,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{l: c.Logger, shard: shard},
	}
}

// openReplica opens shard from storage (empty storage gives an
// uninitialized replica waiting for a snapshot).
func (w *worker) openReplica(shard uint64) (*replica, error) {
	st := w.h.cfg.Storage
	rs, err := st.Storage(shard)
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: open storage: %w", shard, err)
	}
	applied, err := st.Applied(shard)
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: applied index: %w", shard, err)
	}
	hs, cs, err := rs.InitialState()
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: initial state: %w", shard, err)
	}
	if applied > hs.Commit {
		// Written by a version that could persist the applied index before
		// the commit index covering it. Entries are applied only once
		// committed, so the commit index is at least the applied one.
		last, err := rs.LastIndex()
		if err != nil || applied > last {
			return nil, fmt.Errorf("raftmux: shard %d: applied index %d beyond the log (last %d): %w", shard, applied, last, ErrCorrupt)
		}
		w.h.cfg.Logger.Warn("raftmux: commit index raised to the applied index", "shard", shard, "commit", hs.Commit, "applied", applied)
		b := st.NewBatch()
		b.Append(shard, &raftpb.HardState{Term: hs.Term, Vote: hs.Vote, Commit: applied}, nil)
		if err := b.Commit(true); err != nil {
			return nil, fmt.Errorf("raftmux: shard %d: raise commit index: %w", shard, err)
		}
		hs.Commit = applied
	}
	var tombApplied uint64
	if applied == 0 && len(cs.Voters) == 0 && len(cs.Learners) == 0 {
		// Empty: created by a message, maybe after this host destroyed an
		// earlier replica of the shard. That replica's term and vote hold.
		t, ok, err := st.Tombstone(shard)
		if err != nil {
			return nil, fmt.Errorf("raftmux: shard %d: tombstone: %w", shard, err)
		}
		if ok {
			tombApplied = t.Applied
			if t.Term > hs.Term {
				hs = raftpb.HardState{Term: t.Term, Vote: t.Vote, Commit: hs.Commit}
				b := st.NewBatch()
				b.Append(shard, &hs, nil)
				if err := b.Commit(true); err != nil {
					return nil, fmt.Errorf("raftmux: shard %d: restore term from tombstone: %w", shard, err)
				}
			}
		}
	}
	first, err := rs.FirstIndex()
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: first index: %w", shard, err)
	}
	last, err := rs.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: last index: %w", shard, err)
	}
	rn, err := raft.NewRawNode(w.raftConfig(shard, w.h.cfg.NodeID, rs, applied))
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: %w", shard, err)
	}
	confTail, err := lastConfChange(rs, max(applied, first-1), last)
	if err != nil {
		return nil, fmt.Errorf("raftmux: shard %d: %w", shard, err)
	}
	r := &replica{
		shard:           shard,
		rn:              rn,
		rs:              rs,
		confTail:        confTail,
		term:            hs.Term,
		persistedVote:   hs.Vote,
		persistedCommit: hs.Commit,
		applied:         applied,
		tombApplied:     tombApplied,
		compacted:       first - 1,
		tail:            last,
		confState:       &cs,
		proposals:       make(map[uint64]*request),
		reads:           make(map[uint64]*request),
	}
	if eo, ok := w.h.cfg.StateMachine.(EndObserver); ok && applied > 0 {
		r.ended = eo.Ended(shard)
	}
	w.replicas[shard] = r
	w.orderStale = true
	w.awake[shard] = r
	w.touch(r)
	w.confChanged(r)
	// A replica opens knowing no leader, and says so: one that never
	// learns one (a replica its group removed while it was away, seeded
	// again by a split it applied late) is then known to be leaderless
	// from its opening, not taken for one that follows a leader.
	w.leaderChanged(r, 0, hs.Term)
	return r, nil
}

// confChanged reports r's configuration to Config.OnConfState.
func (w *worker) confChanged(r *replica) {
	if f := w.h.cfg.OnConfState; f != nil {
		cs := raftpb.ConfState{}
		if r.confState != nil && !r.destroyed {
			cs = *r.confState
		}
		f(r.shard, cs)
	}
}

func (w *worker) bootstrap(shard uint64, voters []uint64) error {
	if r, ok := w.replicas[shard]; ok {
		// A replica created empty by a peer's message (the peers
		// bootstrapped first and already elected) may still be bootstrapped;
		// one that holds a configuration may not.
		// Nor one with state from its peers still being written (the
		// leader then fills it by snapshot, as it would anyway).
		if r.applied != 0 || len(r.confState.Voters) > 0 || len(r.confState.Learners) > 0 || r.halted != nil {
			return ErrShardExists
		}
		w.discardEmpty(r)
	}
	if _, ok, err := w.h.cfg.Storage.Tombstone(shard); err != nil || ok {
		// This host held a replica of the shard already: its group was
		// born before, and a replica starting at index 1 would have
		// forgotten its votes.
		return errors.Join(ErrShardExists, err)
	}
	voters = slices.Clone(voters)
	slices.Sort(voters)
	voters = slices.Compact(voters)
	snap := &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{
		Index:     1,
		Term:      1,
		ConfState: raftpb.ConfState{Voters: voters},
	}}
	if err := w.h.cfg.Storage.ApplySnapshot(shard, snap, emptyReader{}); err != nil {
		return fmt.Errorf("raftmux: shard %d: bootstrap: %w", shard, err)
	}
	if err := w.h.cfg.StateMachine.Restore(shard, 1); err != nil {
		return fmt.Errorf("raftmux: shard %d: bootstrap restore: %w", shard, err)
	}
	delete(w.tombstones, shard)
	_, err := w.openReplica(shard)
	return err
}

// openSeeded opens the replica of shard, seeded by a split applied here
// (Splitter), once the seed is committed; campaign: the parent's replica
// here led. A replica created empty by a message meanwhile is replaced,
// as bootstrap replaces one; one the store shows filled otherwise is kept.
func (w *worker) openSeeded(shard uint64, campaign bool) {
	r := w.replicas[shard]
	if r != nil && r.halted != nil {
		return
	}
	if r == nil || (r.applied == 0 && len(r.confState.Voters) == 0 && len(r.confState.Learners) == 0) {
		// Not open, or open empty (a message came first): open it from
		// the store. One the store filled (a message after the seed
		// committed) is kept.
		if r != nil {
			w.discardEmpty(r)
		}
		applied, err := w.h.cfg.Storage.Applied(shard)
		if err == nil {
			err = w.h.cfg.StateMachine.Restore(shard, applied)
		}
		if err == nil {
			r, err = w.openReplica(shard)
		}
		if err != nil {
			w.h.cfg.Logger.Error("raftmux: open a shard born of a split", "shard", shard, "err", err)
			return
		}
	}
	if campaign && r.rn.BasicStatus().Lead == raft.None {
		// At once, and again seedCampaignTicks later if no leader came
		// of it: the other replicas open their children only once they
		// applied the split, which the parent's next heartbeat tells them.
		w.wake(r)
		_ = r.rn.Campaign()
		r.seededTick, r.seedCampaign = w.tickCount, true
		w.touch(r)
	}
}

// seedCampaignTicks: how often a child's replica on the parent's leader
// campaigns again while it knows no leader, for an election timeout after
// the split: the other replicas open their children only once they
// applied the split, which the parent's next heartbeat tells them. A
// pre-vote that finds them without the child changes no term.
const seedCampaignTicks = 2

// seededCampaign runs every tick for an awake replica (see
// seedCampaignTicks).
func (w *worker) seededCampaign(r *replica) {
	if !r.seedCampaign {
		return
	}
	since := w.tickCount - r.seededTick
	if r.lead != 0 || r.state == raft.StateLeader || since > uint64(w.h.cfg.ElectionTicks) {
		r.seedCampaign = false
		return
	}
	if since%seedCampaignTicks == 0 {
		_ = r.rn.Campaign()
	}
}

// discardEmpty drops r, a replica created empty by a message, from the
// worker without touching the store: its shard is about to be opened from
// a state written otherwise (a bootstrap, a split's seed).
func (w *worker) discardEmpty(r *replica) {
	r.failAll(ErrShardExists)
	w.dropInSnap(r)
	w.releaseSnapData(r)
	r.destroyed = true
	delete(w.replicas, r.shard)
	w.orderStale = true
	delete(w.awake, r.shard)
}

type emptyReader struct{}

func (emptyReader) Read([]byte) (int, error) { return 0, io.EOF }

func (r *replica) notLeader() error {
	return &NotLeaderError{Shard: r.shard, Leader: r.lead, Term: r.term}
}

func (r *replica) info() Info {
	return Info{
		Shard:    r.shard,
		Leader:   r.lead,
		Term:     r.term,
		Applied:  r.applied,
		Quiesced: r.quiesced,
		Halted:   r.halted != nil,
		Ended:    r.ended,
		Voters:   slices.Clone(r.confState.Voters),
		Learners: slices.Clone(r.confState.Learners),
	}
}

// failProposals resolves every pending proposal of r with err.
func (r *replica) failProposals(err error) {
	for _, id := range slices.Sorted(maps.Keys(r.proposals)) {
		r.proposals[id].finish(result{err: err})
		delete(r.proposals, id)
	}
	r.ccPending = false
}

// failAll resolves every waiter of r with err.
func (r *replica) failAll(err error) {
	r.failProposals(err)
	for _, id := range slices.Sorted(maps.Keys(r.reads)) {
		r.reads[id].finish(result{err: err})
		delete(r.reads, id)
	}
	for _, rw := range r.readWaits {
		rw.req.finish(result{err: err})
	}
	r.readWaits = r.readWaits[:0]
	for _, req := range r.unconfirmed {
		req.finish(result{err: err})
	}
	r.unconfirmed = nil
	for _, c := range r.confirms {
		for _, req := range c.reqs {
			req.finish(result{err: err})
		}
	}
	r.confirms = nil
}

func (w *worker) wake(r *replica) {
	if !r.quiesced || r.halted != nil {
		return
	}
	r.quiesced = false
	w.awake[r.shard] = r
	if r.state == raft.StateLeader {
		r.skipTicks = 2
		w.heartbeatAll(r, 0)
	}
}

// isMember reports whether id is in cs (any role).
func isMember(cs *raftpb.ConfState, id uint64) bool {
	return slices.Contains(cs.Voters, id) || slices.Contains(cs.Learners, id) ||
		slices.Contains(cs.VotersOutgoing, id) || slices.Contains(cs.LearnersNext, id)
}

// createsReplica: messages that may create an uninitialized replica of a
// shard this host does not have: only a leader's traffic, never votes, so
// an absent node cannot be counted in an election it knows nothing about.
func createsReplica(t raftpb.MessageType) bool {
	return t == raftpb.MsgApp || t == raftpb.MsgHeartbeat || t == raftpb.MsgSnap
}

// replicaFor returns the replica a message of type t from node from is
// for. A leader's first message for a shard not hosted here creates an
// empty replica, waiting for a snapshot, if Config.AcceptReplica agrees
// that this node is to hold one. nil: refused (and counted).
func (w *worker) replicaFor(shard, from uint64, t raftpb.MessageType) *replica {
	if r := w.replicas[shard]; r != nil {
		if r.halted != nil {
			w.h.refuse(refuseHalted, shard, from, t)
			return nil
		}
		return r
	}
	if !createsReplica(t) {
		w.h.refuse(refuseUnplaced, shard, from, t)
		return nil
	}
	if at, dead := w.tombstones[shard]; dead {
		if w.tickCount-at < uint64(removedGraceElections*w.h.cfg.ElectionTicks) {
			return nil
		}
		delete(w.tombstones, shard)
	}
	if accept := w.h.cfg.AcceptReplica; accept != nil && !accept(shard, from) {
		w.h.refuse(refuseUnplaced, shard, from, t)
		return nil
	}
	r, err := w.openReplica(shard)
	if err != nil {
		w.h.cfg.Logger.Error("raftmux: create replica", "shard", shard, "err", err)
		return nil
	}
	return r
}

// admit reports whether r takes a message of type t at term from node
// from: the sender is a member of r's group as r knows it (any role, either
// side of a joint configuration), or the leader r follows. A leader's
// traffic is also taken from a non-member at a later term than r's, or at
// r's term while r knows no leader for it (a term has one leader): a leader
// elected after configuration changes r has not applied yet (it catches r
// up, with the entries or a snapshot that make it a member), or the leader
// filling a replica created empty. Votes, acks and forwarded reads from
// outside the group are refused: a removed node cannot disturb its old
// group, and an empty replica votes for no one.
//
// A leader's traffic from a non-member at an earlier term than r's is
// refused too, but answered, as raft answers a member's, with an empty
// ack at r's term: r may be a replica whose term rose while it was cut
// off (a campaign its group never heard of) and whose configuration is
// older than the leader's, which counts r in it. Told nothing, that
// leader would keep sending at its term, refused forever, and r would
// never learn the configuration that makes the leader a member. Told r's
// term, it steps down, and the group's next leader is at a term r admits.
func (w *worker) admit(r *replica, from uint64, t raftpb.MessageType, term uint64) bool {
	if isMember(r.confState, from) {
		if (t == raftpb.MsgVote || t == raftpb.MsgPreVote) && !r.votes(w.h.cfg.NodeID) {
			w.h.refuse(refuseNonVoter, r.shard, from, t)
			return false
		}
		return true
	}
	if t == raftpb.MsgVote || t == raftpb.MsgPreVote {
		// Not even from the leader r follows: an empty replica, or one
		// behind on its group's changes, must not make a stale member
		// leader of a group it has left.
		w.h.refuse(refuseNonMember, r.shard, from, t)
		return false
	}
	st := r.rn.BasicStatus()
	if from == st.Lead || (leaderTraffic(t) && (term > st.Term || (term == st.Term && st.Lead == 0))) {
		return true
	}
	w.h.refuse(refuseNonMember, r.shard, from, t)
	if leaderTraffic(t) && term < st.Term {
		b := w.outbound(from)
		b.Messages = append(b.Messages, ShardMessage{Shard: r.shard, Msg: &raftpb.Message{Type: raftpb.MsgAppResp, From: w.h.cfg.NodeID, To: from, Term: st.Term}})
	}
	return false
}

// votes reports whether r may answer a vote request: it is a voter in the
// configuration it applied, or its log holds a configuration change beyond
// it, which may make it one. A replica out of its group's voters (removed
// and not yet destroyed, or a learner) does not vote: a candidate that
// counts it goes by a configuration older than the group's — raft elects
// by the configuration a replica applied, and a replica restarted with its
// commit index behind its log applies one that may be several changes old
// — and with that vote could win a term the group's voters gave another
// leader.
func (r *replica) votes(self uint64) bool {
	cs := r.confState
	return cs == nil || slices.Contains(cs.Voters, self) || slices.Contains(cs.VotersOutgoing, self) || r.confTail > r.applied
}

// lastConfChange returns the index of the last configuration change in
// rs's log in (from, last], 0 if there is none; from is at least the
// index before the log's first entry.
func lastConfChange(rs raft.Storage, from, last uint64) (uint64, error) {
	var at uint64
	for lo := from + 1; lo <= last; {
		ents, err := rs.Entries(lo, last+1, 4<<20)
		if err != nil {
			return 0, fmt.Errorf("read the log above the applied index: %w", err)
		}
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			if e.Type == raftpb.EntryConfChange || e.Type == raftpb.EntryConfChangeV2 {
				at = e.Index
			}
		}
		lo = ents[len(ents)-1].Index + 1
	}
	return at, nil
}

// lastBound is an index r's raft log is known to reach, for the checks
// that keep a peer from naming entries past it: raft panics on a commit
// index past its log and records acks it cannot match. It is the log's end
// as of the last Ready (entries are only ever appended between two Readies
// by proposals and leaders' appends), or raft's commit index when a
// message stepped since may have truncated the log (an append that
// conflicts with its uncommitted tail, a snapshot): the commit index never
// passes the log and is never truncated.
func (r *replica) lastBound() uint64 {
	if r.logMayShrink {
		return r.rn.BasicStatus().Commit
	}
	return r.tail
}

// noteReady records what a Ready taken from r says about its log.
func (w *worker) noteReady(r *replica, rd *raft.Ready) {
	if !raft.IsEmptySnap(rd.Snapshot) {
		r.tail = rd.Snapshot.Metadata.Index
	}
	if n := len(rd.Entries); n > 0 {
		r.tail = rd.Entries[n-1].Index
		for i := range rd.Entries {
			if e := &rd.Entries[i]; e.Type == raftpb.EntryConfChange || e.Type == raftpb.EntryConfChangeV2 {
				r.confTail = e.Index
			}
		}
	}
	r.logMayShrink = false
	if len(r.snaps) > 0 {
		// What raft did not take (not newer than what the replica has,
		// or refused) will not be asked for.
		keep := uint64(0)
		if !raft.IsEmptySnap(rd.Snapshot) {
			keep = rd.Snapshot.Metadata.Index
		}
		w.releaseSnapsBut(r, keep)
	}
}

func (w *worker) handleMsg(shard, from uint64, m *raftpb.Message) {
	r := w.replicaFor(shard, from, m.Type)
	if r == nil || !w.admit(r, from, m.Type, m.Term) {
		return
	}
	t := m.Type
	switch t {
	case raftpb.MsgApp:
		if len(m.Entries) > 0 {
			r.logMayShrink = true
		}
	case raftpb.MsgHeartbeat:
		m.Commit = w.clampCommit(r, from, m.Commit)
	case raftpb.MsgAppResp:
		if last := r.lastBound(); m.Index > last || m.RejectHint > last {
			// An ack of entries this replica never sent: raft would
			// record a match past its log.
			w.h.refuse(refuseBeyondLog, shard, from, t)
			return
		}
		if m.Reject && r.state == raft.StateLeader {
			w.fillLostLog(r, from, m.RejectHint)
		}
	}
	r.heardTick = w.tickCount
	if from == r.suspect {
		r.suspect = 0
	}
	if t == raftpb.MsgHeartbeatResp {
		r.noteHeartbeatResp(from)
	}
	if t != raftpb.MsgHeartbeatResp && t != raftpb.MsgAppResp {
		w.wake(r)
	} else if r.quiesced && r.state != raft.StateLeader {
		w.wake(r)
	}
	_ = r.rn.Step(*m)
	w.touch(r)
}

// fillLostLog answers a follower's rejection whose hint (where its log
// ends, as far as it matches this leader's) lies below the follower's
// match: the follower lost entries it acknowledged. A replica does when
// it was destroyed after its removal and created again empty once its
// node was added back, and an ack the earlier replica sent reached the
// leader after the new progress was made (replica ids are node ids: raft
// cannot tell the two replicas apart). raft never probes below match+1,
// and probes again at once after each rejection: leader and follower
// would trade the same append and rejection as fast as the network
// carries them, and the follower would never catch up. Only a snapshot
// fills it, and raft sends one when the entry it would probe at is
// compacted: the log is compacted just past the match.
func (w *worker) fillLostLog(r *replica, from, hint uint64) {
	var match uint64
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == from {
			match = pr.Match
		}
	})
	if hint >= match || r.compacted > match || match >= r.applied {
		// The follower holds what it acknowledged, or raft already
		// sends it a snapshot, or the log cannot be compacted past
		// the match yet (only applied entries are).
		return
	}
	w.compact(r, match+1)
}

// clampCommit lowers a heartbeat's commit index to what r's log is known
// to hold. A leader vouches only for entries the follower acknowledged, so
// a commit past the log means a peer's stale view, data lost under the
// replica, or a forged heartbeat; raft would stop the process on it. The
// replica keeps what it has, and the leader's probes or a snapshot repair
// it.
func (w *worker) clampCommit(r *replica, from, commit uint64) uint64 {
	last := r.lastBound()
	if commit <= last {
		return commit
	}
	w.h.counters.clamped.Add(1)
	if !r.logMayShrink && !r.warnedBeyond {
		r.warnedBeyond = true
		w.h.cfg.Logger.Warn("raftmux: heartbeat commit beyond the log", "shard", r.shard, "from", from, "commit", commit, "last", last)
	}
	return last
}

func (w *worker) handleHeartbeat(shard, from uint64, hb Heartbeat) {
	if hb.Flags&FlagRead != 0 {
		w.answerReadHeartbeat(shard, from, hb)
		return
	}
	r := w.replicaFor(shard, from, raftpb.MsgHeartbeat)
	if r == nil || !w.admit(r, from, raftpb.MsgHeartbeat, hb.Term) {
		return
	}
	r.heardTick = w.tickCount
	if from == r.suspect {
		r.suspect = 0
	}
	quiesce := hb.Flags&FlagQuiesce != 0
	if !quiesce {
		w.wake(r)
	}
	commit := w.clampCommit(r, from, hb.Commit)
	_ = r.rn.Step(hbMessage(raftpb.MsgHeartbeat, from, w.h.cfg.NodeID, hb.Term, commit))
	w.touch(r)
	if !quiesce {
		return
	}
	st := r.rn.BasicStatus()
	if st.RaftState == raft.StateFollower && st.Lead == from && st.Term == hb.Term &&
		st.Commit == hb.Commit && !r.readsPending() && !w.h.cfg.DisableQuiesce {
		r.quiesced = true
		delete(w.awake, shard)
		return
	}
	// Not caught up: stay awake and make sure the leader does too.
	w.wake(r)
	b := w.outbound(from)
	b.HeartbeatResponses = append(b.HeartbeatResponses, Heartbeat{Shard: shard, Term: st.Term, Flags: FlagWake})
}

func (w *worker) handleHeartbeatResp(shard, from uint64, hb Heartbeat) {
	if hb.Flags&FlagRead != 0 {
		if r := w.replicas[shard]; r != nil {
			w.readAcked(r, from, hb.Term, hb.Commit)
		}
		return
	}
	r := w.replicaFor(shard, from, raftpb.MsgHeartbeatResp)
	if r == nil || !w.admit(r, from, raftpb.MsgHeartbeatResp, hb.Term) {
		return
	}
	if hb.Flags&FlagWake != 0 {
		w.wake(r)
	}
	r.noteHeartbeatResp(from)
	_ = r.rn.Step(hbMessage(raftpb.MsgHeartbeatResp, from, w.h.cfg.NodeID, hb.Term, 0))
	w.touch(r)
}

// hbMessage is the raft message a coalesced heartbeat tuple is stepped as.
func hbMessage(t raftpb.MessageType, from, to, term, commit uint64) raftpb.Message {
	return raftpb.Message{Type: t, From: from, To: to, Term: term, Commit: commit}
}

// heartbeatAll sends every live follower a coalesced heartbeat with flags,
// vouching for the commit index it is known to have.
func (w *worker) heartbeatAll(r *replica, flags uint8) {
	self := w.h.cfg.NodeID
	commit := r.rn.BasicStatus().Commit
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == self || w.dead[id] {
			return
		}
		b := w.outbound(id)
		b.Heartbeats = append(b.Heartbeats, Heartbeat{Shard: r.shard, Term: r.term, Commit: min(pr.Match, commit), Flags: flags})
	})
}

// quiesceIdleTicks: ticks without a proposal before a leader quiesces.
const quiesceIdleTicks = 3

// maybeQuiesce puts an idle leader to sleep: nothing pending, everything
// applied, and every follower not reported dead has the whole log.
func (w *worker) maybeQuiesce(r *replica) {
	if r.state != raft.StateLeader || len(r.proposals) > 0 || r.readsPending() ||
		r.inSnap != nil || r.skipTicks > 0 || w.tickCount-r.busyTick < quiesceIdleTicks {
		return
	}
	st := r.rn.BasicStatus()
	if st.LeadTransferee != 0 || st.Applied != st.Commit || len(r.confState.VotersOutgoing) > 0 {
		return
	}
	self := w.h.cfg.NodeID
	ok := true
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if !ok || (id != self && w.dead[id]) {
			return
		}
		if pr.Match != st.Commit || (id != self && pr.State != tracker.StateReplicate) {
			ok = false
		}
	})
	if !ok {
		return
	}
	r.quiesced = true
	delete(w.awake, r.shard)
	w.heartbeatAll(r, FlagQuiesce)
}

func (w *worker) handleLiveness(node uint64, s nodeState) {
	switch s {
	case nodeAlive:
		delete(w.dead, node)
		for _, r := range w.ordered() {
			if r.halted != nil {
				continue
			}
			if r.suspect == node {
				r.suspect = 0
			}
			if r.state == raft.StateLeader && r.quiesced && isMember(r.confState, node) {
				w.wake(r)
				w.touch(r)
			}
		}
	case nodeSuspect:
		// Followers of the suspect wake and ask it to answer; those it
		// leaves unanswered for suspectGraceTicks elect a new leader
		// (suspectCampaign) without waiting for the death to be confirmed.
		for _, r := range w.ordered() {
			if r.lead != node || r.state == raft.StateLeader || r.halted != nil {
				continue
			}
			r.suspect, r.suspectTick = node, w.tickCount
			if r.quiesced {
				w.wake(r)
				b := w.outbound(node)
				b.HeartbeatResponses = append(b.HeartbeatResponses, Heartbeat{Shard: r.shard, Term: r.term, Flags: FlagWake})
			}
		}
	case nodeDead:
		w.dead[node] = true
		self := w.h.cfg.NodeID
		for _, r := range w.ordered() {
			if r.lead != node || r.state == raft.StateLeader || r.halted != nil {
				continue
			}
			w.wake(r)
			_ = r.rn.ForgetLeader()
			// One deterministic candidate (see candidate) campaigns
			// at once; the others have forgotten the leader and grant it
			// their votes without waiting out their leases.
			if w.candidate(r) == self {
				w.campaignNow(r, node)
			}
			w.touch(r)
		}
	case nodeUnreachable:
		for _, r := range inOrder(w.awake) {
			if r.state == raft.StateLeader && isMember(r.confState, node) {
				r.rn.ReportUnreachable(node)
			}
		}
	}
}

// campaignNow starts an election for r's shard whose leader, dead, was
// on node: as a leadership transfer would (raft's MsgTimeoutNow), without
// the pre-vote round, and with a vote request its peers grant even if they
// have not yet heard of the death (their leader lease would otherwise make
// them ignore it until their election timeout). Failover then costs one
// vote round trip instead of two, or of an election timeout.
func (w *worker) campaignNow(r *replica, dead uint64) {
	st := r.rn.BasicStatus()
	if st.RaftState != raft.StateFollower {
		_ = r.rn.Campaign()
		return
	}
	_ = r.rn.Step(raftpb.Message{
		Type: raftpb.MsgTimeoutNow,
		From: dead,
		To:   w.h.cfg.NodeID,
		Term: st.Term,
	})
}

// suspectGraceTicks: how long the followers of a leader reported suspect
// wait for it to answer their wake-up before one of them campaigns. An
// alive leader, woken, heartbeats within a tick; SWIM has already waited
// out a probe timeout and the indirect probes before suspecting it.
const suspectGraceTicks = 3

// suspectCampaign runs every tick for an awake follower whose leader was
// reported suspect: a message from the leader (handleMsg, handleHeartbeat)
// or a new leader clears the suspicion; one silent for suspectGraceTicks is voted out by the one
// deterministic candidate among the others, as campaignNow does for a dead
// one. Raft's safety does not depend on the suspicion being right: a wrong
// one costs an election, and the suspect, if alive, rejoins as a follower.
func (w *worker) suspectCampaign(r *replica) {
	if r.suspect == 0 {
		return
	}
	if r.lead != r.suspect || r.state == raft.StateLeader {
		r.suspect = 0
		return
	}
	if w.tickCount-r.suspectTick < suspectGraceTicks {
		return
	}
	if w.candidateWithout(r, r.suspect) == w.h.cfg.NodeID {
		w.campaignNow(r, r.suspect)
	}
	r.suspect = 0
}

// candidate picks, the same way on every host, the live voter that
// campaigns for r's shard when its leader dies; spreading the choice by
// shard spreads the elections' work and the new leaderships.
func (w *worker) candidate(r *replica) uint64 { return w.candidateWithout(r, 0) }

// candidateWithout is candidate with node also left out.
func (w *worker) candidateWithout(r *replica, node uint64) uint64 {
	n := uint64(0)
	for _, v := range r.confState.Voters { // sorted by raft
		if !w.dead[v] && v != node {
			n++
		}
	}
	if n == 0 {
		return 0
	}
	k := r.shard % n
	for _, v := range r.confState.Voters {
		if !w.dead[v] && v != node {
			if k == 0 {
				return v
			}
			k--
		}
	}
	return 0
}

// hosted returns the replica of shard for a caller's request:
// ErrUnknownShard if there is none, its *HaltedError if it is halted.
func (w *worker) hosted(shard uint64) (*replica, error) {
	r := w.replicas[shard]
	switch {
	case r == nil:
		return nil, ErrUnknownShard
	case r.halted != nil:
		return nil, r.halted
	}
	return r, nil
}

func (w *worker) propose(shard uint64, req *request) {
	r, err := w.hosted(shard)
	if err != nil {
		req.finish(result{err: err})
		return
	}
	if r.state != raft.StateLeader {
		req.finish(result{err: r.notLeader()})
		return
	}
	w.wake(r)
	r.busyTick = w.tickCount
	w.seq++
	putHeader(req.data, w.h.cfg.NodeID, w.seq)
	if err := r.rn.Propose(req.data); err != nil {
		req.finish(result{err: fmt.Errorf("%w: %w", ErrDropped, err)})
		return
	}
	r.proposals[w.seq] = req
	w.touch(r)
}

func (w *worker) proposeConf(shard uint64, req *request) {
	r, err := w.hosted(shard)
	if err != nil {
		req.finish(result{err: err})
		return
	}
	if r.state != raft.StateLeader {
		req.finish(result{err: r.notLeader()})
		return
	}
	w.wake(r)
	// raft turns a conf change proposed while another may be pending into
	// an empty entry, which would leave this waiter hanging: refuse
	// instead, on the same grounds (a new leader's log may hold an
	// unapplied change until its own first entry is applied).
	if r.ccPending || len(r.confState.VotersOutgoing) > 0 || r.applied < r.rn.BasicStatus().Commit || r.applied < r.leadIndex {
		req.finish(result{err: fmt.Errorf("%w: configuration change in progress", ErrDropped)})
		return
	}
	if err := w.learnerCaughtUp(r, req.cc); err != nil {
		req.finish(result{err: err})
		return
	}
	if ch := req.cc.Changes; len(ch) == 2 && (!slices.Contains(r.confState.Learners, ch[0].NodeID) || !slices.Contains(r.confState.Voters, ch[1].NodeID)) {
		// Replace: a learner in, a voter out.
		req.finish(result{err: fmt.Errorf("%w: shard %d: replace voter %d by learner %d: voters %v, learners %v",
			ErrInvalid, r.shard, ch[1].NodeID, ch[0].NodeID, r.confState.Voters, r.confState.Learners)})
		return
	}
	w.seq++
	putHeader(req.cc.Context, w.h.cfg.NodeID, w.seq)
	if err := r.rn.ProposeConfChange(req.cc); err != nil {
		req.finish(result{err: fmt.Errorf("%w: %w", ErrDropped, err)})
		return
	}
	r.proposals[w.seq] = req
	r.ccPending = true
	w.touch(r)
}

// learnerCaughtUp refuses to promote a learner that does not yet hold the
// leader's committed log (within Config.PromoteMaxLag entries): as a voter
// it would count towards quorums it cannot help form until it catches up.
// Only changes that turn a current learner into a voter are checked.
func (w *worker) learnerCaughtUp(r *replica, cc *raftpb.ConfChangeV2) error {
	var learner uint64
	for _, c := range cc.Changes {
		if c.Type == raftpb.ConfChangeAddNode && slices.Contains(r.confState.Learners, c.NodeID) {
			learner = c.NodeID
		}
	}
	if learner == 0 {
		return nil
	}
	commit := r.rn.BasicStatus().Commit
	var match uint64
	var state tracker.StateType
	found := false
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == learner {
			match, state, found = pr.Match, pr.State, true
		}
	})
	if found && state == tracker.StateReplicate && match+w.h.cfg.PromoteMaxLag >= commit {
		return nil
	}
	return &LearnerBehindError{Shard: r.shard, Node: learner, Match: match, Commit: commit}
}

func (w *worker) issueRead(r *replica, req *request) {
	w.seq++
	var ctx [8]byte
	binary.LittleEndian.PutUint64(ctx[:], w.seq)
	req.issued = w.tickCount
	r.reads[w.seq] = req
	r.rn.ReadIndex(ctx[:])
	w.touch(r)
}

// retryReads re-issues reads raft has not answered for a while with a
// fresh id (raft drops read requests silently, e.g. when no leader is
// known), and forgets those whose caller gave up.
func (w *worker) retryReads(r *replica) {
	if len(r.reads) == 0 {
		return
	}
	var again []*request
	for _, id := range slices.Sorted(maps.Keys(r.reads)) {
		req := r.reads[id]
		if req.ctx.Err() != nil {
			delete(r.reads, id)
			continue
		}
		if w.tickCount-req.issued < uint64(w.h.cfg.ReadRetryTicks) {
			continue
		}
		delete(r.reads, id)
		again = append(again, req)
	}
	for _, req := range again {
		w.issueRead(r, req)
	}
}
