package wire

import (
	"errors"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// genRaftMessage makes a random raft message. With full set every field is
// set (including the recursive Responses down to depth 2); otherwise each
// field is present or absent at random.
func genRaftMessage(g gen, full bool, depth int) *raftpb.Message {
	set := func() bool { return full || g.bool() }
	opt := func() *uint64 {
		if !set() {
			return nil
		}
		return new(g.u64())
	}
	m := &raftpb.Message{To: opt(), From: opt(), Term: opt(), LogTerm: opt(), Index: opt(), Commit: opt(), Vote: opt(), RejectHint: opt()}
	if set() {
		m.Type = raftpb.MessageType(g.r.IntN(24)).Enum()
	}
	if set() {
		m.Reject = new(g.bool())
	}
	if set() {
		m.Context = g.bytes(0, 16)
		if m.Context == nil {
			m.Context = []byte{}
		}
	}
	for range g.n(4) + b2i(full) {
		e := &raftpb.Entry{}
		if set() {
			e.Type = raftpb.EntryType(g.r.IntN(3)).Enum()
		}
		if set() {
			e.Term = new(g.u64())
		}
		if set() {
			e.Index = new(g.u64())
		}
		if set() {
			e.Data = g.bytes(0, 200)
			if e.Data == nil {
				e.Data = []byte{}
			}
		}
		m.Entries = append(m.Entries, e)
	}
	if set() {
		s := &raftpb.Snapshot{}
		if set() {
			s.Data = g.bytes(1, 300)
		}
		if set() {
			md := &raftpb.SnapshotMetadata{}
			if set() {
				md.Index = new(g.u64())
			}
			if set() {
				md.Term = new(g.u64())
			}
			if set() {
				cs := &raftpb.ConfState{}
				ids := func() []uint64 {
					var v []uint64
					for range g.n(5) + b2i(full) {
						v = append(v, g.u64())
					}
					return v
				}
				cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext = ids(), ids(), ids(), ids()
				if set() {
					cs.AutoLeave = new(g.bool())
				}
				md.ConfState = cs
			}
			s.Metadata = md
		}
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
		b.Messages = append(b.Messages, ShardMessage{Shard: g.u64()})
		proto.Merge(&b.Messages[len(b.Messages)-1].Msg, genRaftMessage(g, full, 0))
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

func equalRaftBatch(t *testing.T, got, want *RaftBatch) {
	t.Helper()
	if len(got.Messages) != len(want.Messages) {
		t.Fatalf("%d messages, want %d", len(got.Messages), len(want.Messages))
	}
	for i := range want.Messages {
		g, w := &got.Messages[i], &want.Messages[i]
		if g.Shard != w.Shard || !proto.Equal(&g.Msg, &w.Msg) {
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
// every raft message set, and with random fields left unset: the decoded
// messages are proto.Equal to the originals, so presence (nil against a
// set zero, nil against empty bytes) survives.
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

func TestRaftBatchEveryFieldSet(t *testing.T) {
	m := genRaftMessage(newGen(7), true, 0)
	pr := m.ProtoReflect()
	fields := pr.Descriptor().Fields()
	for i := range fields.Len() {
		if !pr.Has(fields.Get(i)) {
			t.Fatalf("generator leaves %s unset", fields.Get(i).Name())
		}
	}
	var want RaftBatch
	want.Messages = append(want.Messages, ShardMessage{Shard: 9})
	proto.Merge(&want.Messages[0].Msg, m)
	var got RaftBatch
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &want), &got); err != nil {
		t.Fatal(err)
	}
	equalRaftBatch(t, &got, &want)
	md := got.Messages[0].Msg.GetSnapshot().GetMetadata()
	if md.GetConfState().AutoLeave == nil || md.Index == nil || len(md.GetConfState().GetLearnersNext()) == 0 {
		t.Fatalf("snapshot metadata lost: %v", md)
	}
}

func TestRaftBatchPresence(t *testing.T) {
	var want RaftBatch
	want.Messages = append(want.Messages,
		ShardMessage{Shard: 1, Msg: raftpb.Message{Term: new(uint64(0)), Context: []byte{}, Entries: []*raftpb.Entry{{Data: []byte{}}, {}}}},
		ShardMessage{Shard: 2, Msg: raftpb.Message{Snapshot: &raftpb.Snapshot{}}},
		ShardMessage{Shard: 3})
	var got RaftBatch
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &want), &got); err != nil {
		t.Fatal(err)
	}
	m1, m2, m3 := &got.Messages[0].Msg, &got.Messages[1].Msg, &got.Messages[2].Msg
	switch {
	case m1.Term == nil || *m1.Term != 0 || m1.From != nil:
		t.Fatal("a set zero term or an unset from changed")
	case m1.Context == nil || m1.Entries[0].Data == nil || m1.Entries[1].Data != nil:
		t.Fatal("empty against nil bytes changed")
	case m2.Snapshot == nil || m2.Snapshot.Metadata != nil:
		t.Fatal("an empty snapshot must stay non-nil (raft checks GetSnapshot() != nil)")
	case m3.Snapshot != nil || m3.Entries != nil || m3.Type != nil:
		t.Fatal("an empty message gained fields")
	}
}

// TestRaftBatchDecodeKeepsEarlierValues: raft keeps *Entry pointers (and
// the Entries slice) after Step, so decoding the next batch into the same
// RaftBatch must not overwrite what the previous decode handed out.
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
			km := m.Messages[i].Owned()
			if !proto.Equal(km, &m.Messages[i].Msg) {
				t.Fatal("Owned differs from the message")
			}
			kept = append(kept, km)
			want = append(want, proto.Clone(km).(*raftpb.Message))
		}
	}
	for i := range kept {
		if !proto.Equal(kept[i], want[i]) {
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
	// Unknown presence bits.
	if err := DecodeRaftBatch([]byte{1, 5, 0x80, 0x40, 0, 0, 0, 0}, &m); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown message bit: %v", err)
	}
	// Unknown heartbeat flag.
	hb := AppendRaftBatch(nil, &RaftBatch{Heartbeats: []Heartbeat{{Shard: 1, Flags: 0x80}}})
	if err := DecodeRaftBatch(hb, &m); !errors.Is(err, ErrBadFlags) {
		t.Fatalf("heartbeat flags: %v", err)
	}
	// Responses nested deeper than MaxRaftResponseDepth.
	deep := &raftpb.Message{}
	for range MaxRaftResponseDepth + 1 {
		deep = &raftpb.Message{Responses: []*raftpb.Message{deep}}
	}
	var d RaftBatch
	d.Messages = append(d.Messages, ShardMessage{Shard: 1})
	proto.Merge(&d.Messages[0].Msg, deep)
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &d), &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("deep responses: %v", err)
	}
	// More entries in a batch than MaxRaftEntriesPerBatch, in messages that
	// are each within MaxEntriesPerRaftMessage.
	var many RaftBatch
	for i := range MaxRaftEntriesPerBatch/MaxEntriesPerRaftMessage + 1 {
		many.Messages = append(many.Messages, ShardMessage{Shard: uint64(i)})
		ents := make([]*raftpb.Entry, MaxEntriesPerRaftMessage)
		for j := range ents {
			ents[j] = &raftpb.Entry{}
		}
		many.Messages[i].Msg.Entries = ents
	}
	if err := DecodeRaftBatch(AppendRaftBatch(nil, &many), &m); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("entries per batch: %v", err)
	}
	// A huge entry count in a short input fails before anything is sized.
	huge := appendUvarint([]byte{1, 1, 0}, MaxEntriesPerRaftMessage)
	if err := DecodeRaftBatch(huge, &m); !errors.Is(err, ErrTruncated) {
		t.Fatalf("huge count: %v", err)
	}
}

// The protobuf baseline: the same framing as AppendRaftBatch, but each
// message is raftpb's own protobuf encoding behind a length. Kept only to
// measure against the hand encoding.
func appendRaftBatchProto(dst []byte, m *RaftBatch) []byte {
	dst = appendUvarint(dst, uint64(len(m.Messages)))
	opts := proto.MarshalOptions{UseCachedSize: true}
	for i := range m.Messages {
		msg := &m.Messages[i].Msg
		dst = appendUvarint(dst, m.Messages[i].Shard)
		dst = appendUvarint(dst, uint64(proto.Size(msg)))
		var err error
		if dst, err = opts.MarshalAppend(dst, msg); err != nil {
			panic(err) // test-only baseline; raftpb messages always marshal
		}
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
		if err := proto.Unmarshal(p, &m.Messages[i].Msg); err != nil {
			return ErrMalformed
		}
	}
	m.Heartbeats = decodeHeartbeats(&r, m.Heartbeats)
	m.HeartbeatResponses = decodeHeartbeats(&r, m.HeartbeatResponses)
	return r.end()
}
