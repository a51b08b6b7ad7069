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

// Heartbeat is one shard's coalesced heartbeat (or its response).
type Heartbeat struct {
	Shard, Term, Commit uint64
	Flags               uint8 // HeartbeatQuiesce, HeartbeatRead; the other bits must be zero
}

// Heartbeat flags.
const (
	// HeartbeatQuiesce: the leader's group is idle and its followers are
	// caught up; the follower stops ticking the group until it hears from it
	// again (or SWIM reports the leader's node suspect or dead).
	HeartbeatQuiesce uint8 = 1 << 0
	// HeartbeatRead: a read heartbeat, whose Commit is the id of the
	// leader's read confirmation rather than a commit index; on a
	// response, the follower's acknowledgement of that id.
	HeartbeatRead uint8 = 1 << 1

	knownHeartbeatFlags = HeartbeatQuiesce | HeartbeatRead
)

// The raft messages are encoded by hand rather than with raftpb's protobuf
// marshalling: BenchmarkRaftBatch in bench_test.go measures both on the
// same batch, and the hand encoding is the faster of the two both ways
// (decoding aliases entry data instead of copying it, and takes entries,
// responses, snapshots and id lists from slabs instead of allocating each).
//
// raftpb's fields are plain values, so there is no presence to keep: each
// message, entry and snapshot starts with a mask of its fields that are not
// zero, and only those follow. A zero field and an absent one are the same
// (an empty byte string or id list decodes as nil). The one pointer,
// Message.Snapshot, keeps nil apart from non-nil: a non-nil snapshot, even
// an empty one, decodes non-nil. Boolean fields are mask bits with no
// payload. A mask bit set on a zero value (a zero uvarint, an empty byte
// string, a zero count) is accepted and decodes as that zero.

// Mask bits of a message's fields, in encoding order.
const (
	mType = 1 << iota
	mTo
	mFrom
	mTerm
	mLogTerm
	mIndex
	mCommit
	mVote
	mReject // Reject is true; no payload
	mRejectHint
	mContext
	mSnapshot
	mEntries
	mResponses
	mKnown = 1<<iota - 1
)

// Mask bits of an entry's fields.
const (
	eType = 1 << iota
	eTerm
	eIndex
	eData
	eKnown = 1<<iota - 1
)

// Mask bits of a snapshot's fields, its metadata's and its ConfState's
// flattened into one byte.
const (
	sData = 1 << iota
	sIndex
	sTerm
	sAutoLeave // ConfState.AutoLeave is true; no payload
	sVoters
	sLearners
	sVotersOutgoing
	sLearnersNext
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

// setIf is bit when v is not zero.
func setIf(v uint64, bit uint64) uint64 {
	if v != 0 {
		return bit
	}
	return 0
}

func appendIf(dst []byte, v uint64) []byte {
	if v != 0 {
		dst = appendUvarint(dst, v)
	}
	return dst
}

func appendRaftMessage(dst []byte, m *raftpb.Message) []byte {
	typ := uint64(uint32(m.Type))
	mask := setIf(typ, mType) | setIf(m.To, mTo) | setIf(m.From, mFrom) | setIf(m.Term, mTerm) |
		setIf(m.LogTerm, mLogTerm) | setIf(m.Index, mIndex) | setIf(m.Commit, mCommit) | setIf(m.Vote, mVote) |
		setIf(m.RejectHint, mRejectHint) | setIf(uint64(len(m.Context)), mContext) |
		setIf(uint64(len(m.Entries)), mEntries) | setIf(uint64(len(m.Responses)), mResponses)
	if m.Reject {
		mask |= mReject
	}
	if m.Snapshot != nil {
		mask |= mSnapshot
	}
	dst = appendUvarint(dst, mask)
	dst = appendIf(dst, typ)
	dst = appendIf(dst, m.To)
	dst = appendIf(dst, m.From)
	dst = appendIf(dst, m.Term)
	dst = appendIf(dst, m.LogTerm)
	dst = appendIf(dst, m.Index)
	dst = appendIf(dst, m.Commit)
	dst = appendIf(dst, m.Vote)
	dst = appendIf(dst, m.RejectHint)
	if len(m.Context) > 0 {
		dst = appendBytes(dst, m.Context)
	}
	if m.Snapshot != nil {
		dst = appendSnapshot(dst, m.Snapshot)
	}
	if len(m.Entries) > 0 {
		dst = appendUvarint(dst, uint64(len(m.Entries)))
		for i := range m.Entries {
			dst = appendEntry(dst, &m.Entries[i])
		}
	}
	if len(m.Responses) > 0 {
		dst = appendUvarint(dst, uint64(len(m.Responses)))
		for i := range m.Responses {
			dst = appendRaftMessage(dst, &m.Responses[i])
		}
	}
	return dst
}

func appendEntry(dst []byte, e *raftpb.Entry) []byte {
	typ := uint64(uint32(e.Type))
	mask := byte(setIf(typ, eType) | setIf(e.Term, eTerm) | setIf(e.Index, eIndex) | setIf(uint64(len(e.Data)), eData))
	dst = append(dst, mask)
	dst = appendIf(dst, typ)
	dst = appendIf(dst, e.Term)
	dst = appendIf(dst, e.Index)
	if len(e.Data) > 0 {
		dst = appendBytes(dst, e.Data)
	}
	return dst
}

func appendSnapshot(dst []byte, s *raftpb.Snapshot) []byte {
	md, cs := &s.Metadata, &s.Metadata.ConfState
	mask := byte(setIf(uint64(len(s.Data)), sData) | setIf(md.Index, sIndex) | setIf(md.Term, sTerm) |
		setIf(uint64(len(cs.Voters)), sVoters) | setIf(uint64(len(cs.Learners)), sLearners) |
		setIf(uint64(len(cs.VotersOutgoing)), sVotersOutgoing) | setIf(uint64(len(cs.LearnersNext)), sLearnersNext))
	if cs.AutoLeave {
		mask |= sAutoLeave
	}
	dst = append(dst, mask)
	if len(s.Data) > 0 {
		dst = appendBytes(dst, s.Data)
	}
	dst = appendIf(dst, md.Index)
	dst = appendIf(dst, md.Term)
	for _, ids := range [...][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		if len(ids) > 0 {
			dst = appendUvarint(dst, uint64(len(ids)))
			for _, id := range ids {
				dst = appendUvarint(dst, id)
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
// What a message's fields point to (its Entries, Responses, Snapshot and the
// ConfState id lists) is carved from slabs whose elements are never handed
// out twice, because raft keeps them after Step returns (its unstable log
// may hold the Entries slice itself, and a pending MsgReadIndex keeps the
// message's entries): they stay valid and unchanged for as long as they are
// referenced. So a caller may Step raft with m.Messages[i].Msg (raft takes
// it by value) and decode the next frame into m, provided b outlives raft's
// use of the aliased bytes (or the caller copies them). Slabs are allocated
// in chunks of up to a few hundred elements, so a decode allocates a
// fraction of an object per message; the garbage they become is what
// DecodeRaftBatchReuse avoids.
func DecodeRaftBatch(b []byte, m *RaftBatch) error { return decodeRaftBatch(b, m, false) }

// DecodeRaftBatchReuse is DecodeRaftBatch for a caller that is done with
// every decoded message, and everything it points to, before the next
// decode into m (a relay, a test, or a raft driver that copies what raft
// keeps): it rewinds m's slabs and overwrites the previous decode's
// entries, responses, snapshots and id lists, so steady-state decoding
// allocates nothing. Stepping raft with such messages without copying
// their entries corrupts raft's unstable log at the next decode.
func DecodeRaftBatchReuse(b []byte, m *RaftBatch) error { return decodeRaftBatch(b, m, true) }

func decodeRaftBatch(b []byte, m *RaftBatch, reuse bool) error {
	if reuse {
		m.a.rewind()
	}
	m.a.items, m.a.idCount = 0, 0
	r := reader{b: b}
	// A message takes at least 2 bytes: shard and mask.
	n := r.count(MaxRaftMessagesPerBatch, 2)
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

// Slab chunk sizes, in elements: a first chunk, then doubling up to the
// largest (kept under 32 KiB so chunks come from the allocator's size
// classes rather than the heap lock). An entry is 48 bytes, a message
// about 170, a snapshot about 150.
const (
	entrySlabChunk = 64
	entrySlabMax   = 512
	idSlabChunk    = 64
	idSlabMax      = 1024
	respSlabChunk  = 4
	respSlabMax    = 128
	snapSlabChunk  = 1
	snapSlabMax    = 4
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

type raftArena struct {
	items   int // entries and responses decoded in this batch
	idCount int // ConfState node ids decoded in this batch
	entries slab[raftpb.Entry]
	resps   slab[raftpb.Message]
	snaps   slab[raftpb.Snapshot]
	ids     slab[uint64]
}

func (a *raftArena) rewind() {
	a.entries.rewind()
	a.resps.rewind()
	a.snaps.rewind()
	a.ids.rewind()
}

// uvarintIf reads a uvarint if bit is set in mask, else returns 0.
func uvarintIf(r *reader, mask, bit uint64) uint64 {
	if mask&bit == 0 {
		return 0
	}
	return r.uvarint()
}

// decodeMessage decodes into m, which is zero.
func (a *raftArena) decodeMessage(r *reader, m *raftpb.Message, depth int) {
	mask := r.uvarint()
	if r.err != nil {
		return
	}
	if mask&^mKnown != 0 {
		r.fail(ErrMalformed)
		return
	}
	if mask&mType != 0 {
		m.Type = raftpb.MessageType(r.u32v())
	}
	m.To = uvarintIf(r, mask, mTo)
	m.From = uvarintIf(r, mask, mFrom)
	m.Term = uvarintIf(r, mask, mTerm)
	m.LogTerm = uvarintIf(r, mask, mLogTerm)
	m.Index = uvarintIf(r, mask, mIndex)
	m.Commit = uvarintIf(r, mask, mCommit)
	m.Vote = uvarintIf(r, mask, mVote)
	m.Reject = mask&mReject != 0
	m.RejectHint = uvarintIf(r, mask, mRejectHint)
	if mask&mContext != 0 {
		m.Context = r.bytes(MaxFrame)
	}
	if mask&mSnapshot != 0 {
		m.Snapshot = a.decodeSnapshot(r)
	}
	if mask&mEntries != 0 {
		// An entry takes at least its mask byte.
		if n := r.count(MaxEntriesPerRaftMessage, 1); n > 0 {
			if a.items += n; a.items > MaxRaftEntriesPerBatch {
				r.fail(ErrTooLarge)
				return
			}
			m.Entries = a.entries.take(n, entrySlabChunk, entrySlabMax)
			for i := range m.Entries {
				decodeEntry(r, &m.Entries[i])
			}
		}
	}
	if mask&mResponses != 0 {
		// A response takes at least its mask byte.
		if n := r.count(MaxEntriesPerRaftMessage, 1); n > 0 {
			if a.items += n; depth >= MaxRaftResponseDepth || a.items > MaxRaftEntriesPerBatch {
				r.fail(ErrTooLarge)
				return
			}
			m.Responses = a.resps.take(n, respSlabChunk, respSlabMax)
			for i := range m.Responses {
				a.decodeMessage(r, &m.Responses[i], depth+1)
			}
		}
	}
}

// decodeEntry decodes into e, which is zero.
func decodeEntry(r *reader, e *raftpb.Entry) {
	mask := uint64(r.u8())
	if mask&^eKnown != 0 {
		r.fail(ErrMalformed)
		return
	}
	if mask&eType != 0 {
		e.Type = raftpb.EntryType(r.u32v())
	}
	e.Term = uvarintIf(r, mask, eTerm)
	e.Index = uvarintIf(r, mask, eIndex)
	if mask&eData != 0 {
		e.Data = r.bytes(MaxFrame)
	}
}

func (a *raftArena) decodeSnapshot(r *reader) *raftpb.Snapshot {
	s := &a.snaps.take(1, snapSlabChunk, snapSlabMax)[0]
	mask := uint64(r.u8())
	if mask&sData != 0 {
		s.Data = r.bytes(MaxFrame)
	}
	md, cs := &s.Metadata, &s.Metadata.ConfState
	md.Index = uvarintIf(r, mask, sIndex)
	md.Term = uvarintIf(r, mask, sTerm)
	cs.AutoLeave = mask&sAutoLeave != 0
	cs.Voters = a.decodeIDs(r, mask, sVoters)
	cs.Learners = a.decodeIDs(r, mask, sLearners)
	cs.VotersOutgoing = a.decodeIDs(r, mask, sVotersOutgoing)
	cs.LearnersNext = a.decodeIDs(r, mask, sLearnersNext)
	return s
}

func (a *raftArena) decodeIDs(r *reader, mask, bit uint64) []uint64 {
	if mask&bit == 0 {
		return nil
	}
	n := r.count(MaxConfStateIDs, 1)
	if n == 0 {
		return nil
	}
	if a.idCount += n; a.idCount > MaxConfStateIDsPerBatch {
		r.fail(ErrTooLarge)
		return nil
	}
	ids := a.ids.take(n, idSlabChunk, idSlabMax)
	for i := range ids {
		ids[i] = r.uvarint()
	}
	return ids
}
