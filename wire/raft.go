package wire

import (
	"go.etcd.io/raft/v3/raftpb"
)

// RaftBatch is every raft message one node sends another in one round of
// the raft Ready loop, for all the shards they share (KindRaftBatch), plus
// the round's coalesced heartbeats: instead of a MsgHeartbeat per shard, one
// (shard, term, commit) tuple per shard whose leader needs a heartbeat.
type RaftBatch struct {
	Messages           []ShardMessage
	Heartbeats         []Heartbeat // leader → follower
	HeartbeatResponses []Heartbeat // follower → leader

	a raftArena
}

// ShardMessage is a raft message tagged with its shard (raft group).
type ShardMessage struct {
	Shard uint64
	Msg   raftpb.Message
}

// Owned returns a new raftpb.Message with the same fields as sm.Msg. What
// they point to is never reused by DecodeRaftBatch, so the result stays
// valid after the next decode (byte fields still alias the decoded frame).
// Raft keeps the *Message of a MsgReadIndex after Step: step it with this.
func (sm *ShardMessage) Owned() *raftpb.Message {
	m := &sm.Msg
	return &raftpb.Message{
		Type: m.Type, To: m.To, From: m.From, Term: m.Term, LogTerm: m.LogTerm, Index: m.Index,
		Entries: m.Entries, Commit: m.Commit, Vote: m.Vote, Snapshot: m.Snapshot, Reject: m.Reject,
		RejectHint: m.RejectHint, Context: m.Context, Responses: m.Responses,
	}
}

// Heartbeat is one shard's coalesced heartbeat (or its response).
type Heartbeat struct {
	Shard, Term, Commit uint64
	Flags               uint8 // HeartbeatQuiesce; the other bits must be zero
}

// Heartbeat flags.
const (
	// HeartbeatQuiesce: the leader's group is idle and its followers are
	// caught up; the follower stops ticking the group until it hears from it
	// again (or SWIM reports the leader's node suspect or dead).
	HeartbeatQuiesce uint8 = 1 << 0

	knownHeartbeatFlags = HeartbeatQuiesce
)

// The raft messages are encoded by hand rather than with raftpb's protobuf
// marshalling: BenchmarkRaftBatch in raft_test.go measures both on the same
// batch, and the hand encoding is the faster of the two both ways (decoding
// aliases entry data instead of copying it, and takes its structs from
// slabs instead of allocating each). The encoding keeps protobuf's presence
// semantics: a nil pointer field decodes as nil, a set one (even to zero)
// as set, a nil []byte as nil and a non-nil empty one as non-nil empty.

// Presence bits of a message's fields, in encoding order.
const (
	mType = 1 << iota
	mTo
	mFrom
	mTerm
	mLogTerm
	mIndex
	mCommit
	mVote
	mReject
	mRejectHint
	mContext
	mSnapshot
	mKnown = 1<<iota - 1
)

// Presence bits of an entry's fields.
const (
	eType = 1 << iota
	eTerm
	eIndex
	eData
	eKnown = 1<<iota - 1
)

// Presence bits of a snapshot, its metadata and its ConfState.
const (
	sData     = 1 << 0
	sMetadata = 1 << 1
	sKnown    = sData | sMetadata

	mdConfState = 1 << 0
	mdIndex     = 1 << 1
	mdTerm      = 1 << 2
	mdKnown     = mdConfState | mdIndex | mdTerm

	csAutoLeave = 1 << 0
	csKnown     = csAutoLeave
)

// AppendRaftBatch appends m's payload.
func AppendRaftBatch(dst []byte, m *RaftBatch) []byte {
	dst = appendUvarint(dst, uint64(len(m.Messages)))
	for i := range m.Messages {
		dst = appendUvarint(dst, m.Messages[i].Shard)
		dst = appendRaftMessage(dst, &m.Messages[i].Msg)
	}
	dst = appendHeartbeats(dst, m.Heartbeats)
	return appendHeartbeats(dst, m.HeartbeatResponses)
}

func appendHeartbeats(dst []byte, hbs []Heartbeat) []byte {
	dst = appendUvarint(dst, uint64(len(hbs)))
	for i := range hbs {
		h := &hbs[i]
		dst = appendUvarint(dst, h.Shard)
		dst = appendUvarint(dst, h.Term)
		dst = appendUvarint(dst, h.Commit)
		dst = append(dst, h.Flags)
	}
	return dst
}

// appendRaftMessage appends m; a nil message (which raft never produces)
// is encoded as a message with no fields set.
func appendRaftMessage(dst []byte, m *raftpb.Message) []byte {
	if m == nil {
		return append(dst, 0, 0, 0)
	}
	var mask uint64
	if m.Type != nil {
		mask |= mType
	}
	if m.To != nil {
		mask |= mTo
	}
	if m.From != nil {
		mask |= mFrom
	}
	if m.Term != nil {
		mask |= mTerm
	}
	if m.LogTerm != nil {
		mask |= mLogTerm
	}
	if m.Index != nil {
		mask |= mIndex
	}
	if m.Commit != nil {
		mask |= mCommit
	}
	if m.Vote != nil {
		mask |= mVote
	}
	if m.Reject != nil {
		mask |= mReject
	}
	if m.RejectHint != nil {
		mask |= mRejectHint
	}
	if m.Context != nil {
		mask |= mContext
	}
	if m.Snapshot != nil {
		mask |= mSnapshot
	}
	dst = appendUvarint(dst, mask)
	if m.Type != nil {
		dst = appendUvarint(dst, uint64(uint32(*m.Type)))
	}
	for _, v := range [...]*uint64{m.To, m.From, m.Term, m.LogTerm, m.Index, m.Commit, m.Vote} {
		if v != nil {
			dst = appendUvarint(dst, *v)
		}
	}
	if m.Reject != nil {
		dst = appendBool(dst, *m.Reject)
	}
	if m.RejectHint != nil {
		dst = appendUvarint(dst, *m.RejectHint)
	}
	if m.Context != nil {
		dst = appendBytes(dst, m.Context)
	}
	if m.Snapshot != nil {
		dst = appendSnapshot(dst, m.Snapshot)
	}
	dst = appendUvarint(dst, uint64(len(m.Entries)))
	for _, e := range m.Entries {
		dst = appendEntry(dst, e)
	}
	dst = appendUvarint(dst, uint64(len(m.Responses)))
	for _, resp := range m.Responses {
		dst = appendRaftMessage(dst, resp)
	}
	return dst
}

// appendEntry appends e; a nil entry (which raft never produces) is
// encoded as an entry with no fields set.
func appendEntry(dst []byte, e *raftpb.Entry) []byte {
	if e == nil {
		return append(dst, 0)
	}
	var mask byte
	if e.Type != nil {
		mask |= eType
	}
	if e.Term != nil {
		mask |= eTerm
	}
	if e.Index != nil {
		mask |= eIndex
	}
	if e.Data != nil {
		mask |= eData
	}
	dst = append(dst, mask)
	if e.Type != nil {
		dst = appendUvarint(dst, uint64(uint32(*e.Type)))
	}
	if e.Term != nil {
		dst = appendUvarint(dst, *e.Term)
	}
	if e.Index != nil {
		dst = appendUvarint(dst, *e.Index)
	}
	if e.Data != nil {
		dst = appendBytes(dst, e.Data)
	}
	return dst
}

func appendSnapshot(dst []byte, s *raftpb.Snapshot) []byte {
	var mask byte
	if s.Data != nil {
		mask |= sData
	}
	if s.Metadata != nil {
		mask |= sMetadata
	}
	dst = append(dst, mask)
	if s.Data != nil {
		dst = appendBytes(dst, s.Data)
	}
	if md := s.Metadata; md != nil {
		var mm byte
		if md.ConfState != nil {
			mm |= mdConfState
		}
		if md.Index != nil {
			mm |= mdIndex
		}
		if md.Term != nil {
			mm |= mdTerm
		}
		dst = append(dst, mm)
		if md.Index != nil {
			dst = appendUvarint(dst, *md.Index)
		}
		if md.Term != nil {
			dst = appendUvarint(dst, *md.Term)
		}
		if cs := md.ConfState; cs != nil {
			if cs.AutoLeave != nil {
				dst = append(dst, csAutoLeave)
				dst = appendBool(dst, *cs.AutoLeave)
			} else {
				dst = append(dst, 0)
			}
			for _, ids := range [...][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
				dst = appendUvarint(dst, uint64(len(ids)))
				for _, id := range ids {
					dst = appendUvarint(dst, id)
				}
			}
		}
	}
	return dst
}

// DecodeRaftBatch decodes a RaftBatch payload into m, reusing m.Messages,
// m.Heartbeats and m.HeartbeatResponses.
//
// Lifetimes: entry Data, Context and snapshot Data alias b. The
// ShardMessage values themselves are overwritten by the next decode into m.
// Everything a message points to (entries and the slice holding them,
// snapshots, responses, the cells behind the optional scalar fields) is
// carved from slabs whose elements are never handed out twice, because raft
// keeps those pointers after Step returns (its unstable log holds the
// *Entry values and may hold the Entries slice itself): they stay valid and
// unchanged for as long as they are referenced. So a caller may Step raft
// with &m.Messages[i].Msg and decode the next frame into m, provided b
// outlives raft's use of the aliased bytes (or the caller copies them) —
// except for a MsgReadIndex, whose *Message raft itself keeps (pending
// read-index requests): step those with Messages[i].Owned(). Slabs are allocated in chunks
// of up to a few hundred elements, so a decode allocates a fraction of an
// object per message; the garbage they become is what DecodeRaftBatchReuse
// avoids.
func DecodeRaftBatch(b []byte, m *RaftBatch) error { return decodeRaftBatch(b, m, false) }

// DecodeRaftBatchReuse is DecodeRaftBatch for a caller that is done with
// every decoded message, and everything it points to, before the next
// decode into m (a relay, a test, or a raft driver that copies what raft
// keeps): it rewinds m's slabs and overwrites the previous decode's
// entries, snapshots and cells, so steady-state decoding allocates nothing.
// Stepping raft with such messages without copying their entries corrupts
// raft's unstable log at the next decode (TestRaftGroupOverRaftBatch, run
// with this function, ends in a raft panic).
func DecodeRaftBatchReuse(b []byte, m *RaftBatch) error { return decodeRaftBatch(b, m, true) }

func decodeRaftBatch(b []byte, m *RaftBatch, reuse bool) error {
	if reuse {
		m.a.rewind()
	}
	m.a.items = 0
	r := reader{b: b}
	// A message takes at least 4 bytes: shard, mask, and two empty counts.
	n := r.count(MaxRaftMessagesPerBatch, 4)
	m.Messages = grow(m.Messages[:0], n)
	for i := range m.Messages {
		sm := &m.Messages[i]
		sm.Shard = r.uvarint()
		sm.Msg = raftpb.Message{}
		m.a.decodeMessage(&r, &sm.Msg, 0)
	}
	m.Heartbeats = decodeHeartbeats(&r, m.Heartbeats)
	m.HeartbeatResponses = decodeHeartbeats(&r, m.HeartbeatResponses)
	if err := r.end(); err != nil {
		m.Messages = m.Messages[:0]
		m.Heartbeats = m.Heartbeats[:0]
		m.HeartbeatResponses = m.HeartbeatResponses[:0]
		return err
	}
	return nil
}

func decodeHeartbeats(r *reader, hbs []Heartbeat) []Heartbeat {
	n := r.count(MaxHeartbeatsPerBatch, 4)
	hbs = grow(hbs[:0], n)
	for i := range hbs {
		h := &hbs[i]
		h.Shard = r.uvarint()
		h.Term = r.uvarint()
		h.Commit = r.uvarint()
		h.Flags = r.u8()
		if h.Flags&^knownHeartbeatFlags != 0 {
			r.fail(ErrBadFlags)
		}
	}
	return hbs
}

// emptyBytes is a present-but-empty []byte field. Its capacity is zero, so
// no one can write through it.
var emptyBytes = []byte{}

// Slab chunk sizes, in elements: a first chunk, then doubling up to the
// largest (kept under 32 KiB so chunks come from the allocator's size
// classes rather than the heap lock).
const (
	entrySlabChunk = 64
	entrySlabMax   = 256
	ptrSlabChunk   = 256
	ptrSlabMax     = 2048
	cellSlabChunk  = 64
	cellSlabMax    = 256
	idSlabChunk    = 64
	idSlabMax      = 1024
	respSlabChunk  = 4
	respSlabMax    = 64
)

// slab hands out zeroed elements from chunks. Without rewind an element is
// never handed out twice.
type slab[T any] struct {
	buf   []T
	used  int // elements of buf handed out
	taken int // elements handed out since the last rewind, in all chunks
}

func (s *slab[T]) take(n, chunk, maxChunk int) []T {
	s.taken += n
	if len(s.buf)-s.used < n {
		size := min(max(2*len(s.buf), chunk), maxChunk)
		s.buf = make([]T, max(size, n))
		s.used = 0
	}
	v := s.buf[s.used : s.used+n : s.used+n]
	s.used += n
	return v
}

// rewind makes the elements handed out available again, zeroed. If they
// spanned several chunks, one chunk that holds them all replaces them, so
// the next decode of the same shape takes no new chunk.
func (s *slab[T]) rewind() {
	if s.taken > len(s.buf) {
		s.buf = make([]T, s.taken)
	} else {
		clear(s.buf[:s.used])
	}
	s.used, s.taken = 0, 0
}

type entryCell struct {
	e           raftpb.Entry
	term, index uint64
	typ         raftpb.EntryType
}

// msgCells backs the optional scalar fields of one message.
type msgCells struct {
	typ                                                      raftpb.MessageType
	reject                                                   bool
	to, from, term, logTerm, index, commit, vote, rejectHint uint64
}

type snapCell struct {
	s           raftpb.Snapshot
	md          raftpb.SnapshotMetadata
	cs          raftpb.ConfState
	index, term uint64
	autoLeave   bool
}

type respCell struct {
	m raftpb.Message
}

type raftArena struct {
	items    int // entries and responses decoded in this batch
	entries  slab[entryCell]
	entryPtr slab[*raftpb.Entry]
	cells    slab[msgCells]
	snaps    slab[snapCell]
	ids      slab[uint64]
	resps    slab[respCell]
	respPtr  slab[*raftpb.Message]
}

func (a *raftArena) rewind() {
	a.entries.rewind()
	a.entryPtr.rewind()
	a.cells.rewind()
	a.snaps.rewind()
	a.ids.rewind()
	a.resps.rewind()
	a.respPtr.rewind()
}

func (a *raftArena) decodeMessage(r *reader, m *raftpb.Message, depth int) {
	mask := r.uvarint()
	if r.err != nil {
		return
	}
	if mask&^mKnown != 0 {
		r.fail(ErrMalformed)
		return
	}
	if mask&(mType|mTo|mFrom|mTerm|mLogTerm|mIndex|mCommit|mVote|mReject|mRejectHint) != 0 {
		c := &a.cells.take(1, cellSlabChunk, cellSlabMax)[0]
		if mask&mType != 0 {
			c.typ = raftpb.MessageType(r.u32v())
			m.Type = &c.typ
		}
		if mask&mTo != 0 {
			c.to = r.uvarint()
			m.To = &c.to
		}
		if mask&mFrom != 0 {
			c.from = r.uvarint()
			m.From = &c.from
		}
		if mask&mTerm != 0 {
			c.term = r.uvarint()
			m.Term = &c.term
		}
		if mask&mLogTerm != 0 {
			c.logTerm = r.uvarint()
			m.LogTerm = &c.logTerm
		}
		if mask&mIndex != 0 {
			c.index = r.uvarint()
			m.Index = &c.index
		}
		if mask&mCommit != 0 {
			c.commit = r.uvarint()
			m.Commit = &c.commit
		}
		if mask&mVote != 0 {
			c.vote = r.uvarint()
			m.Vote = &c.vote
		}
		if mask&mReject != 0 {
			c.reject = r.bool()
			m.Reject = &c.reject
		}
		if mask&mRejectHint != 0 {
			c.rejectHint = r.uvarint()
			m.RejectHint = &c.rejectHint
		}
	}
	if mask&mContext != 0 {
		m.Context = r.bytes(MaxFrame)
		if m.Context == nil {
			m.Context = emptyBytes
		}
	}
	if mask&mSnapshot != 0 {
		m.Snapshot = a.decodeSnapshot(r)
	}
	// An entry takes at least its mask byte.
	if n := r.count(MaxEntriesPerRaftMessage, 1); n > 0 {
		if a.items += n; a.items > MaxRaftEntriesPerBatch {
			r.fail(ErrTooLarge)
			return
		}
		cells := a.entries.take(n, entrySlabChunk, entrySlabMax)
		m.Entries = a.entryPtr.take(n, ptrSlabChunk, ptrSlabMax)
		for i := range cells {
			m.Entries[i] = a.decodeEntry(r, &cells[i])
		}
	}
	// A response takes at least its mask and two counts.
	if n := r.count(MaxEntriesPerRaftMessage, 3); n > 0 {
		if a.items += n; depth >= MaxRaftResponseDepth || a.items > MaxRaftEntriesPerBatch {
			r.fail(ErrTooLarge)
			return
		}
		resps := a.resps.take(n, respSlabChunk, respSlabMax)
		m.Responses = a.respPtr.take(n, ptrSlabChunk, ptrSlabMax)
		for i := range resps {
			a.decodeMessage(r, &resps[i].m, depth+1)
			m.Responses[i] = &resps[i].m
		}
	}
}

func (a *raftArena) decodeEntry(r *reader, c *entryCell) *raftpb.Entry {
	e := &c.e
	mask := r.u8()
	if mask&^eKnown != 0 {
		r.fail(ErrMalformed)
		return e
	}
	if mask&eType != 0 {
		c.typ = raftpb.EntryType(r.u32v())
		e.Type = &c.typ
	}
	if mask&eTerm != 0 {
		c.term = r.uvarint()
		e.Term = &c.term
	}
	if mask&eIndex != 0 {
		c.index = r.uvarint()
		e.Index = &c.index
	}
	if mask&eData != 0 {
		e.Data = r.bytes(MaxFrame)
		if e.Data == nil {
			e.Data = emptyBytes
		}
	}
	return e
}

func (a *raftArena) decodeSnapshot(r *reader) *raftpb.Snapshot {
	c := &a.snaps.take(1, 1, 4)[0]
	s := &c.s
	mask := r.u8()
	if mask&^sKnown != 0 {
		r.fail(ErrMalformed)
		return s
	}
	if mask&sData != 0 {
		s.Data = r.bytes(MaxFrame)
		if s.Data == nil {
			s.Data = emptyBytes
		}
	}
	if mask&sMetadata == 0 {
		return s
	}
	s.Metadata = &c.md
	mm := r.u8()
	if mm&^mdKnown != 0 {
		r.fail(ErrMalformed)
		return s
	}
	if mm&mdIndex != 0 {
		c.index = r.uvarint()
		c.md.Index = &c.index
	}
	if mm&mdTerm != 0 {
		c.term = r.uvarint()
		c.md.Term = &c.term
	}
	if mm&mdConfState == 0 {
		return s
	}
	c.md.ConfState = &c.cs
	cm := r.u8()
	if cm&^csKnown != 0 {
		r.fail(ErrMalformed)
		return s
	}
	if cm&csAutoLeave != 0 {
		c.autoLeave = r.bool()
		c.cs.AutoLeave = &c.autoLeave
	}
	c.cs.Voters = a.decodeIDs(r)
	c.cs.Learners = a.decodeIDs(r)
	c.cs.VotersOutgoing = a.decodeIDs(r)
	c.cs.LearnersNext = a.decodeIDs(r)
	return s
}

func (a *raftArena) decodeIDs(r *reader) []uint64 {
	n := r.count(MaxConfStateIDs, 1)
	if n == 0 {
		return nil
	}
	ids := a.ids.take(n, idSlabChunk, idSlabMax)
	for i := range ids {
		ids[i] = r.uvarint()
	}
	return ids
}
