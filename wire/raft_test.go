package wire

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// genRaftMessage makes a random raft message. With full set every field is
// non-zero (including the recursive Responses down to depth 2); otherwise
// each field is zero or a random value (which may itself be zero).
func genRaftMessage(g gen, full bool, depth int) raftpb.Message {
	set := func() bool { return full || g.bool() }
	u64 := func() uint64 {
		if !set() {
			return 0
		}
		if full {
			return 1 + g.u64()%(1<<64-1)
		}
		return g.u64()
	}
	m := raftpb.Message{To: u64(), From: u64(), Term: u64(), LogTerm: u64(), Index: u64(), Commit: u64(), Vote: u64(), RejectHint: u64()}
	if set() {
		m.Type = raftpb.MessageType(b2i(full) + g.r.IntN(24-b2i(full)))
	}
	m.Reject = full || g.bool()
	if set() {
		m.Context = g.bytes(b2i(full), 16)
	}
	for range g.n(4) + b2i(full) {
		e := raftpb.Entry{Term: u64(), Index: u64()}
		if set() {
			e.Type = raftpb.EntryType(b2i(full) + g.r.IntN(3-b2i(full)))
		}
		if set() {
			e.Data = g.bytes(b2i(full), 200)
		}
		m.Entries = append(m.Entries, e)
	}
	if set() {
		s := &raftpb.Snapshot{}
		if set() {
			s.Data = g.bytes(1, 300)
		}
		s.Metadata.Index, s.Metadata.Term = u64(), u64()
		ids := func() []uint64 {
			var v []uint64
			for range g.n(5) + b2i(full) {
				v = append(v, g.u64())
			}
			return v
		}
		cs := &s.Metadata.ConfState
		cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext = ids(), ids(), ids(), ids()
		cs.AutoLeave = full || g.bool()
		m.Snapshot = s
	}
	if depth < 2 {
		for range g.n(2) + b2i(full) {
			m.Responses = append(m.Responses, genRaftMessage(g, full, depth+1))
		}
	}
	return m
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func genRaftBatch(g gen, full bool) *RaftBatch {
	b := &RaftBatch{}
	for range g.n(6) + b2i(full) {
		b.Messages = append(b.Messages, ShardMessage{Shard: g.u64(), Msg: genRaftMessage(g, full, 0)})
	}
	hbs := func() []Heartbeat {
		var v []Heartbeat
		for range g.n(5) + b2i(full) {
			v = append(v, Heartbeat{Shard: g.u64(), Term: g.u64(), Commit: g.u64(), Flags: uint8(g.r.IntN(2))})
		}
		return v
	}
	b.Heartbeats, b.HeartbeatResponses = hbs(), hbs()
	return b
}

// equalMessage is field equality with zero and absent the same: nil and
// empty byte strings, entry lists, response lists and id lists are equal.
// Only Snapshot keeps nil apart from non-nil.
func equalMessage(a, b *raftpb.Message) bool {
	if a.Type != b.Type || a.To != b.To || a.From != b.From || a.Term != b.Term || a.LogTerm != b.LogTerm ||
		a.Index != b.Index || a.Commit != b.Commit || a.Vote != b.Vote || a.Reject != b.Reject ||
		a.RejectHint != b.RejectHint || !bytes.Equal(a.Context, b.Context) ||
		len(a.Entries) != len(b.Entries) || len(a.Responses) != len(b.Responses) || (a.Snapshot == nil) != (b.Snapshot == nil) {
		return false
	}
	for i := range a.Entries {
		x, y := &a.Entries[i], &b.Entries[i]
		if x.Type != y.Type || x.Term != y.Term || x.Index != y.Index || !bytes.Equal(x.Data, y.Data) {
			return false
		}
	}
	if a.Snapshot != nil {
		x, y := a.Snapshot, b.Snapshot
		xc, yc := &x.Metadata.ConfState, &y.Metadata.ConfState
		if !bytes.Equal(x.Data, y.Data) || x.Metadata.Index != y.Metadata.Index || x.Metadata.Term != y.Metadata.Term ||
			xc.AutoLeave != yc.AutoLeave || !slices.Equal(xc.Voters, yc.Voters) || !slices.Equal(xc.Learners, yc.Learners) ||
			!slices.Equal(xc.VotersOutgoing, yc.VotersOutgoing) || !slices.Equal(xc.LearnersNext, yc.LearnersNext) {
			return false
		}
	}
	for i := range a.Responses {
		if !equalMessage(&a.Responses[i], &b.Responses[i]) {
			return false
		}
	}
	return true
}

func equalRaftBatch(t *testing.T, got, want *RaftBatch) {
	t.Helper()
	if len(got.Messages) != len(want.Messages) {
		t.Fatalf("%d messages, want %d", len(got.Messages), len(want.Messages))
	}
	for i := range want.Messages {
		g, w := &got.Messages[i], &want.Messages[i]
		if g.Shard != w.Shard || !equalMessage(&g.Msg, &w.Msg) {
			t.Fatalf("message %d:\n got shard %d %v\nwant shard %d %v", i, g.Shard, &g.Msg, w.Shard, &w.Msg)
		}
	}
	if !equalHeartbeats(got.Heartbeats, want.Heartbeats) || !equalHeartbeats(got.HeartbeatResponses, want.HeartbeatResponses) {
		t.Fatalf("heartbeats:\n got %v %v\nwant %v %v", got.Heartbeats, got.HeartbeatResponses, want.Heartbeats, want.HeartbeatResponses)
	}
}

func equalHeartbeats(a, b []Heartbeat) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestPropertyRaftBatch round-trips random batches, with every field of
// every raft message non-zero, and with random fields left zero: the
// decoded messages equal the originals field by field, re-encode to the
// same bytes, and raftpb's own marshalling agrees.
func TestPropertyRaftBatch(t *testing.T) {
	g := newGen(42)
	var reused, rewound RaftBatch
	for i := range propIters {
		want := genRaftBatch(g, i%2 == 0)
		b := AppendRaftBatch(nil, want)
		var got RaftBatch
		if err := DecodeRaftBatch(b, &got); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
		equalRaftBatch(t, &got, want)
		if again := AppendRaftBatch(nil, &got); !bytes.Equal(again, b) {
			t.Fatalf("batch %d re-encodes differently", i)
		}
		if err := DecodeRaftBatch(b, &reused); err != nil {
			t.Fatalf("batch %d into reused: %v", i, err)
		}
		equalRaftBatch(t, &reused, want)
		if err := DecodeRaftBatchReuse(b, &rewound); err != nil {
			t.Fatalf("batch %d with reuse: %v", i, err)
		}
		equalRaftBatch(t, &rewound, want)
		// The protobuf baseline agrees.
		var viaProto RaftBatch
		if err := decodeRaftBatchProto(appendRaftBatchProto(nil, want), &viaProto); err != nil {
			t.Fatal(err)
		}
		equalRaftBatch(t, &viaProto, want)
	}
}

// nonZeroFields fails t for every field of v (a struct) that is zero,
// following pointers and nested structs.
func nonZeroFields(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	for i := range v.NumField() {
		f, name := v.Field(i), path+"."+v.Type().Field(i).Name
		if f.IsZero() {
			t.Errorf("generator leaves %s zero", name)
			continue
		}
		if f.Kind() == reflect.Struct || f.Kind() == reflect.Pointer && f.Elem().Kind() == reflect.Struct {
			nonZeroFields(t, name, f)
		}
	}
}

func TestRaftBatchEveryFieldSet(t *testing.T) {
	m := genRaftMessage(newGen(7), true, 0)
	nonZeroFields(t, "Message", reflect.ValueOf(m))
	nonZeroFields(t, "Entry", reflect.ValueOf(m.Entries[0]))
	var want RaftBatch
	want.Messages = append(want.Messages, ShardMessage{Shard: 9, Msg: m})
	var got RaftBatch
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &want), &got); err != nil {
		t.Fatal(err)
	}
	equalRaftBatch(t, &got, &want)
	if s := got.Messages[0].Msg.Snapshot; s == nil || !s.Metadata.ConfState.AutoLeave || s.Metadata.Index == 0 || len(s.Metadata.ConfState.LearnersNext) == 0 {
		t.Fatalf("snapshot metadata lost: %v", s)
	}
}

// TestRaftBatchZeroFields: zero fields are omitted and come back zero
// (empty bytes as nil), the Snapshot pointer keeps nil apart from an empty
// snapshot, and a mask bit set on a zero value decodes as that zero.
func TestRaftBatchZeroFields(t *testing.T) {
	var want RaftBatch
	want.Messages = append(want.Messages,
		ShardMessage{Shard: 1, Msg: raftpb.Message{Term: 0, Context: []byte{}, Entries: []raftpb.Entry{{Data: []byte{}}, {}}}},
		ShardMessage{Shard: 2, Msg: raftpb.Message{Snapshot: &raftpb.Snapshot{}}},
		ShardMessage{Shard: 3})
	b := AppendRaftBatch(nil, &want)
	// Messages 1 and 3 are a shard and an empty mask; message 2 adds the
	// snapshot's empty mask. Message 1's two entries are each a zero mask
	// behind a count.
	if wantLen := 1 + (1 + 2 + 1 + 1 + 1) + (1 + 2 + 1) + (1 + 1) + 2; len(b) != wantLen {
		t.Fatalf("encoded %d bytes, want %d: zero fields must be omitted", len(b), wantLen)
	}
	var got RaftBatch
	if err := DecodeRaftBatch(b, &got); err != nil {
		t.Fatal(err)
	}
	m1, m2, m3 := &got.Messages[0].Msg, &got.Messages[1].Msg, &got.Messages[2].Msg
	switch {
	case m1.Context != nil || len(m1.Entries) != 2 || m1.Entries[0].Data != nil:
		t.Fatal("empty bytes must decode as nil, entries must stay")
	case m2.Snapshot == nil || !reflect.DeepEqual(*m2.Snapshot, raftpb.Snapshot{}):
		t.Fatal("an empty snapshot must stay non-nil and empty")
	case !reflect.DeepEqual(*m3, raftpb.Message{}):
		t.Fatalf("an empty message gained fields: %v", m3)
	}
	// A set bit on a zero value: shard 1, mask (To | Context | Entries),
	// to 0, an empty context, an entry count of 0; no heartbeats.
	var z RaftBatch
	zb := appendUvarint([]byte{1, 1}, mTo|mContext|mEntries)
	zb = append(zb, 0, 0, 0, 0, 0)
	if err := DecodeRaftBatch(zb, &z); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(z.Messages[0].Msg, raftpb.Message{}) {
		t.Fatalf("zero values under set bits: %v", &z.Messages[0].Msg)
	}
}

// cloneMessage deep-copies m through raftpb's own marshalling.
func cloneMessage(t *testing.T, m *raftpb.Message) *raftpb.Message {
	t.Helper()
	b, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	c := &raftpb.Message{}
	if err := c.Unmarshal(b); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestRaftBatchDecodeKeepsEarlierValues: raft keeps the Entries slice (and
// a MsgReadIndex's message) after Step, so decoding the next batch into the
// same RaftBatch must not overwrite what the previous decode handed out.
func TestRaftBatchDecodeKeepsEarlierValues(t *testing.T) {
	g := newGen(3)
	var m RaftBatch
	var kept []*raftpb.Message
	var want []*raftpb.Message
	for range 50 {
		b := genRaftBatch(g, true)
		enc := AppendRaftBatch(nil, b)
		if err := DecodeRaftBatch(enc, &m); err != nil {
			t.Fatal(err)
		}
		for i := range m.Messages {
			km := new(m.Messages[i].Msg) // what a caller keeps: a copy
			kept = append(kept, km)
			want = append(want, cloneMessage(t, km))
		}
	}
	for i := range kept {
		if !equalMessage(kept[i], want[i]) {
			t.Fatalf("message %d was overwritten by a later decode", i)
		}
	}
}

func TestRaftBatchReuseAllocatesNothing(t *testing.T) {
	b := AppendRaftBatch(nil, genRaftBatch(newGen(11), true))
	var m RaftBatch
	if err := DecodeRaftBatchReuse(b, &m); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(20, func() {
		if err := DecodeRaftBatchReuse(b, &m); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocs per steady-state decode", n)
	}
}

func TestRaftBatchRejects(t *testing.T) {
	good := AppendRaftBatch(nil, genRaftBatch(newGen(5), true))
	var m RaftBatch
	for n := 0; n < len(good); n += 1 + n/64 {
		if err := DecodeRaftBatch(good[:n], &m); err == nil {
			t.Fatalf("truncated to %d of %d decoded", n, len(good))
		}
	}
	if err := DecodeRaftBatch(append(good[:len(good):len(good)], 0), &m); !errors.Is(err, ErrTrailing) {
		t.Fatalf("trailing: %v", err)
	}
	// Unknown mask bits, of a message and of an entry.
	if err := DecodeRaftBatch(append(appendUvarint([]byte{1, 5}, mKnown+1), 0, 0), &m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown message bit: %v", err)
	}
	if err := DecodeRaftBatch(appendUvarint([]byte{1, 5}, mEntries), &m); !errors.Is(err, ErrTruncated) {
		t.Fatalf("missing entry count: %v", err)
	}
	if err := DecodeRaftBatch(append(appendUvarint([]byte{1, 5}, mEntries), 1, eKnown+1, 0, 0), &m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown entry bit: %v", err)
	}
	// A message type beyond 32 bits.
	if err := DecodeRaftBatch(append(appendUvarint(appendUvarint([]byte{1, 5}, mType), 1<<32), 0, 0), &m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("64-bit type: %v", err)
	}
	// Unknown heartbeat flag.
	hb := AppendRaftBatch(nil, &RaftBatch{Heartbeats: []Heartbeat{{Shard: 1, Flags: 0x80}}})
	if err := DecodeRaftBatch(hb, &m); !errors.Is(err, ErrBadFlags) {
		t.Fatalf("heartbeat flags: %v", err)
	}
	// Responses nested deeper than MaxRaftResponseDepth.
	deep := raftpb.Message{}
	for range MaxRaftResponseDepth + 1 {
		deep = raftpb.Message{Responses: []raftpb.Message{deep}}
	}
	d := RaftBatch{Messages: []ShardMessage{{Shard: 1, Msg: deep}}}
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &d), &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("deep responses: %v", err)
	}
	// More entries in a batch than MaxRaftEntriesPerBatch, in messages that
	// are each within MaxEntriesPerRaftMessage.
	var many RaftBatch
	for i := range MaxRaftEntriesPerBatch/MaxEntriesPerRaftMessage + 1 {
		many.Messages = append(many.Messages, ShardMessage{Shard: uint64(i)})
		many.Messages[i].Msg.Entries = make([]raftpb.Entry, MaxEntriesPerRaftMessage)
	}
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &many), &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("entries per batch: %v", err)
	}
	// A huge entry count in a short input fails before anything is sized.
	huge := appendUvarint(appendUvarint([]byte{1, 1}, mEntries), MaxEntriesPerRaftMessage)
	if err := DecodeRaftBatch(huge, &m); !errors.Is(err, ErrTruncated) {
		t.Fatalf("huge count: %v", err)
	}
	// A ConfState id list longer than MaxConfStateIDs.
	ids := appendUvarint(append(appendUvarint([]byte{1, 1}, mSnapshot), sVoters), MaxConfStateIDs+1)
	ids = append(ids, make([]byte, MaxConfStateIDs+1+2)...)
	if err := DecodeRaftBatch(ids, &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("conf state ids: %v", err)
	}
	// More ConfState ids in a batch than MaxConfStateIDsPerBatch, in
	// snapshots whose lists are each within MaxConfStateIDs.
	full := make([]uint64, MaxConfStateIDs)
	for i := range full {
		full[i] = uint64(i + 1)
	}
	snaps := func(n int) *RaftBatch {
		b := &RaftBatch{}
		for i := range n {
			cs := raftpb.ConfState{Voters: full, Learners: full, VotersOutgoing: full, LearnersNext: full}
			b.Messages = append(b.Messages, ShardMessage{Shard: uint64(i), Msg: raftpb.Message{Type: raftpb.MsgSnap,
				Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1, Term: 1, ConfState: cs}}}})
		}
		return b
	}
	fit := MaxConfStateIDsPerBatch / (4 * MaxConfStateIDs)
	if err := DecodeRaftBatch(AppendRaftBatch(nil, snaps(fit)), &m); err != nil {
		t.Fatalf("%d full conf states: %v", fit, err)
	}
	if err := DecodeRaftBatch(AppendRaftBatch(nil, snaps(fit+1)), &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("conf state ids per batch: %v", err)
	}
}

// The protobuf baseline: the same framing as AppendRaftBatch, but each
// message is raftpb's own protobuf encoding behind a length. Kept only to
// measure against the hand encoding.
func appendRaftBatchProto(dst []byte, m *RaftBatch) []byte {
	dst = appendUvarint(dst, uint64(len(m.Messages)))
	for i := range m.Messages {
		msg := &m.Messages[i].Msg
		dst = appendUvarint(dst, m.Messages[i].Shard)
		size := msg.Size()
		dst = appendUvarint(dst, uint64(size))
		dst = slices.Grow(dst, size)
		if _, err := msg.MarshalToSizedBuffer(dst[len(dst) : len(dst)+size]); err != nil {
			panic(err) // test-only baseline; raftpb messages always marshal
		}
		dst = dst[:len(dst)+size]
	}
	dst = appendHeartbeats(dst, m.Heartbeats)
	return appendHeartbeats(dst, m.HeartbeatResponses)
}

func decodeRaftBatchProto(b []byte, m *RaftBatch) error {
	r := reader{b: b}
	n := r.count(MaxRaftMessagesPerBatch, 2)
	m.Messages = grow(m.Messages[:0], n)
	for i := range m.Messages {
		m.Messages[i].Shard = r.uvarint()
		p := r.bytes(MaxFrame)
		if r.err != nil {
			break
		}
		m.Messages[i].Msg = raftpb.Message{}
		if err := m.Messages[i].Msg.Unmarshal(p); err != nil {
			return ErrMalformed
		}
	}
	m.Heartbeats = decodeHeartbeats(&r, m.Heartbeats)
	m.HeartbeatResponses = decodeHeartbeats(&r, m.HeartbeatResponses)
	return r.end()
}
