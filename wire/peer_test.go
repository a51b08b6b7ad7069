package wire

import (
	"errors"
	"testing"
)

func TestPeerMessagesRoundTrip(t *testing.T) {
	roundTrip(t, &OpenTopic{Topic: []byte("t"), Epoch: 2, Partitions: 3, Shard: 4, Term: 7}, AppendOpenTopic, DecodeOpenTopic)
	roundTrip(t, &OpenTopic{Topic: []byte("t"), Epoch: 2, Partitions: 3, Shard: 4, Term: 7, Prev: []byte("n2")}, AppendOpenTopic, DecodeOpenTopic)
	roundTrip(t, &OpenTopic{Topic: []byte("t"), Epoch: 2, Partitions: 3, Shard: 4, Term: 7, Prev: []byte("n2"), PrevSilent: true}, AppendOpenTopic, DecodeOpenTopic)
	roundTrip(t, &CloseTopic{Topic: []byte("t"), Epoch: 2, Shard: 4, Term: 7}, AppendCloseTopic, DecodeCloseTopic)
	roundTrip(t, &CloseTopic{Topic: []byte("t"), Epoch: 2, Shard: 4, Term: 7, Revoked: true}, AppendCloseTopic, DecodeCloseTopic)
	roundTrip(t, &RecordsPull{Topic: []byte("t"), Epoch: 3, From: 1 << 40, MaxBytes: 1 << 20}, AppendRecordsPull, DecodeRecordsPull)
	roundTrip(t, &RecordsChunk{Topic: []byte("t"), Records: []Record{{Offset: 0, Epoch: 1, Value: []byte("a")}, {Offset: 1 << 40, Epoch: 2, Value: []byte("b")}},
		Next: 1<<40 + 1, End: 1<<40 + 1}, AppendRecordsChunk, DecodeRecordsChunk)
	roundTrip(t, &RecordsChunk{Topic: []byte("t"), Status: HandoffNotClosed}, AppendRecordsChunk, DecodeRecordsChunk)
	roundTrip(t, &RecordsChunk{Topic: []byte("t"), Next: 9, End: 9, Producers: []Producer{
		{ID: 3, Floor: 4, Forgot: 6, Used: 1 << 40, Answers: []ProducerAnswer{{Seq: 7, Epoch: 2, Offset: 1 << 40, Count: 3}, {Seq: 9, Epoch: 2, Offset: 1<<40 + 3, Count: 1}}},
		{ID: 1 << 63, Used: 5},
	}}, AppendRecordsChunk, DecodeRecordsChunk)
	roundTrip(t, &TopicAck{Topic: []byte("t"), Epoch: 2}, AppendTopicAck, DecodeTopicAck)
	roundTrip(t, &TopicAck{Topic: []byte("t"), Epoch: 2, Status: TopicBelowFloor}, AppendTopicAck, DecodeTopicAck)
	roundTrip(t, &LeaseRound{Seq: 9, Requests: []LeaseRequest{{Shard: 1, Digest: 1 << 63}, {Shard: 300, Digest: 5}},
		Vouch: []ShardTerm{{Shard: 2, Term: 4}}, Released: true, Held: Summary{Count: 2, Digest: 1 << 63}, Led: Summary{Count: 300, Digest: 7}},
		AppendLeaseRound, DecodeLeaseRound)
	roundTrip(t, &LeaseRound{Seq: 1}, AppendLeaseRound, DecodeLeaseRound)
	roundTrip(t, &LeaseReply{Seq: 9,
		Grants:  []LeaseGrant{{Shard: 1, Term: 3}, {Shard: 2, Term: 4, Listed: true, Topics: []TopicEpoch{{Topic: []byte("a"), Epoch: 2}, {Topic: []byte("b"), Epoch: 1 << 40}}}},
		Refused: []LeaseRefusal{{Shard: 5, Leader: []byte("n2"), Term: 8}, {Shard: 6}}, Vouched: []uint64{2, 9}, HeldMatched: true, LedMatched: true},
		AppendLeaseReply, DecodeLeaseReply)
	roundTrip(t, &LeaseReply{Seq: 3, HeldMatched: true, HeldGranted: true}, AppendLeaseReply, DecodeLeaseReply)
	roundTrip(t, &LeaseReply{Seq: 2}, AppendLeaseReply, DecodeLeaseReply)
	inner := AppendProduce(nil, &Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{[]byte("x")}})
	roundTrip(t, &Forward{Hops: 1, Origin: []byte("n1"), Kind: KindProduce, Payload: inner}, AppendForward, DecodeForward)
	roundTrip(t, &Forward{Origin: []byte("n1"), Kind: KindMembers}, AppendForward, DecodeForward)
	roundTrip(t, &ForwardReply{Kind: KindProduceAck, Payload: []byte{1, 2, 3}}, AppendForwardReply, DecodeForwardReply)
	roundTrip(t, &ForwardReply{Kind: KindError, Payload: AppendError(nil, &Error{Code: CodeNotFound})}, AppendForwardReply, DecodeForwardReply)
	roundTrip(t, &SnapshotChunk{Shard: 1, Index: 2, Term: 3, Offset: 4, Last: true, Data: []byte("snap")}, AppendSnapshotChunk, DecodeSnapshotChunk)
	roundTrip(t, &SnapshotAck{Shard: 1, Index: 2, Offset: 4, Reject: true}, AppendSnapshotAck, DecodeSnapshotAck)
	roundTrip(t, &MetadataPull{Kind: MetaRing, Have: 9, Digest: 3, Buckets: []uint64{1, 2}}, AppendMetadataPull, DecodeMetadataPull)
	roundTrip(t, &MetadataPush{Kind: MetaShardLeaders, Version: 10, Form: PushDelta, Digest: 4, Data: []byte("table")}, AppendMetadataPush, DecodeMetadataPush)
}

func TestPeerMessagesReject(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"forward hops", DecodeForward(AppendForward(nil, &Forward{Hops: MaxForwardHops + 1, Origin: []byte("n1"), Kind: KindLookup}), new(Forward)), ErrTooLarge},
		{"forward of a response", DecodeForward(AppendForward(nil, &Forward{Origin: []byte("n1"), Kind: KindAssignment}), new(Forward)), ErrUnknownKind},
		{"forward of a peer message", DecodeForward(AppendForward(nil, &Forward{Origin: []byte("n1"), Kind: KindRaftBatch}), new(Forward)), ErrUnknownKind},
		{"forward without origin", DecodeForward(AppendForward(nil, &Forward{Kind: KindLookup}), new(Forward)), ErrMalformed},
		{"reply of a request", DecodeForwardReply(AppendForwardReply(nil, &ForwardReply{Kind: KindLookup}), new(ForwardReply)), ErrUnknownKind},
		{"metadata kind", DecodeMetadataPull(AppendMetadataPull(nil, &MetadataPull{Kind: 0}), new(MetadataPull)), ErrMalformed},
		{"push kind", DecodeMetadataPush(AppendMetadataPush(nil, &MetadataPush{Kind: 4}), new(MetadataPush)), ErrMalformed},
		{"push form", DecodeMetadataPush(AppendMetadataPush(nil, &MetadataPush{Kind: 1, Form: 3}), new(MetadataPush)), ErrMalformed},
		{"same with data", DecodeMetadataPush(AppendMetadataPush(nil, &MetadataPush{Kind: 1, Form: PushSame, Data: []byte{1}}), new(MetadataPush)), ErrMalformed},
		{"buckets", DecodeMetadataPull(AppendMetadataPull(nil, &MetadataPull{Kind: 1, Buckets: make([]uint64, MaxMetaBuckets+1)}), new(MetadataPull)), ErrTooLarge},
		{"open without topic", DecodeOpenTopic(AppendOpenTopic(nil, &OpenTopic{}), new(OpenTopic)), ErrMalformed},
		{"open from a long node id", DecodeOpenTopic(AppendOpenTopic(nil, &OpenTopic{Topic: []byte("t"), Prev: make([]byte, MaxNodeIDLen+1)}), new(OpenTopic)), ErrTooLarge},
		{"chunk status", DecodeRecordsChunk(AppendRecordsChunk(nil, &RecordsChunk{Topic: []byte("t"), Status: 2}), new(RecordsChunk)), ErrMalformed},
		{"producers out of order", DecodeRecordsChunk(AppendRecordsChunk(nil, &RecordsChunk{Topic: []byte("t"), Producers: []Producer{{ID: 2}, {ID: 2}}}), new(RecordsChunk)), ErrMalformed},
		{"producer without id", DecodeRecordsChunk(AppendRecordsChunk(nil, &RecordsChunk{Topic: []byte("t"), Producers: []Producer{{}}}), new(RecordsChunk)), ErrMalformed},
		{"answer at the floor", DecodeRecordsChunk(AppendRecordsChunk(nil, &RecordsChunk{Topic: []byte("t"),
			Producers: []Producer{{ID: 1, Floor: 3, Answers: []ProducerAnswer{{Seq: 3, Count: 1}}}}}), new(RecordsChunk)), ErrMalformed},
		{"answer of no records", DecodeRecordsChunk(AppendRecordsChunk(nil, &RecordsChunk{Topic: []byte("t"),
			Producers: []Producer{{ID: 1, Answers: []ProducerAnswer{{Seq: 1}}}}}), new(RecordsChunk)), ErrMalformed},
		{"pull without topic", DecodeRecordsPull(AppendRecordsPull(nil, &RecordsPull{}), new(RecordsPull)), ErrMalformed},
		{"ack status", DecodeTopicAck(AppendTopicAck(nil, &TopicAck{Topic: []byte("t"), Status: 3}), new(TopicAck)), ErrMalformed},
		{"granted topic without name", DecodeLeaseReply(AppendLeaseReply(nil, &LeaseReply{Grants: []LeaseGrant{{Listed: true, Topics: []TopicEpoch{{Epoch: 1}}}}}), new(LeaseReply)), ErrMalformed},
		{"lease reply flags", DecodeLeaseReply(append(AppendLeaseReply(nil, &LeaseReply{})[:11], 8), new(LeaseReply)), ErrMalformed},
		{"lease requests the input cannot hold", DecodeLeaseRound([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0x7f}, new(LeaseRound)), ErrTruncated},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
}

func TestPropertyPeerMessages(t *testing.T) {
	prop(t, "OpenTopic", func(g gen) *OpenTopic {
		return &OpenTopic{Topic: g.topic(), Epoch: g.u64(), Partitions: g.u32(MaxPartitions), Shard: g.u64(), Prev: g.nodeID(), PrevSilent: g.bool()}
	}, AppendOpenTopic, DecodeOpenTopic)
	prop(t, "CloseTopic", func(g gen) *CloseTopic {
		return &CloseTopic{Topic: g.topic(), Epoch: g.u64(), Shard: g.u64(), Revoked: g.bool()}
	}, AppendCloseTopic, DecodeCloseTopic)
	prop(t, "RecordsPull", func(g gen) *RecordsPull {
		return &RecordsPull{Topic: g.topic(), Epoch: g.u64(), From: g.u64(), MaxBytes: g.u32(1 << 30)}
	}, AppendRecordsPull, DecodeRecordsPull)
	prop(t, "RecordsChunk", func(g gen) *RecordsChunk {
		m := &RecordsChunk{Topic: g.topic(), Status: HandoffStatus(g.r.IntN(2)), Next: g.u64(), End: g.u64()}
		for range g.r.IntN(5) {
			m.Records = append(m.Records, Record{Offset: g.u64(), Epoch: g.u64(), Value: g.bytes(0, 64)})
		}
		id := uint64(0)
		for range g.r.IntN(4) {
			id += 1 + uint64(g.r.IntN(1000))
			p := Producer{ID: id, Floor: uint64(g.r.IntN(100)), Forgot: uint64(g.r.IntN(200)), Used: g.u64()}
			seq := p.Floor
			for range g.r.IntN(4) {
				seq += 1 + uint64(g.r.IntN(5))
				p.Answers = append(p.Answers, ProducerAnswer{Seq: seq, Epoch: g.u64(), Offset: g.u64(), Count: 1 + g.u32(MaxRecordsPerProduce-1)})
			}
			m.Producers = append(m.Producers, p)
		}
		return m
	}, AppendRecordsChunk, DecodeRecordsChunk)
	prop(t, "TopicAck", func(g gen) *TopicAck { return &TopicAck{Topic: g.topic(), Epoch: g.u64()} }, AppendTopicAck, DecodeTopicAck)
	prop(t, "Forward", func(g gen) *Forward {
		return &Forward{Hops: uint8(g.r.IntN(MaxForwardHops + 1)), Origin: g.nodeID(), Kind: KindAssign + Kind(g.r.IntN(int(KindStatus-KindAssign)+1)), Payload: g.bytes(0, 300)}
	}, AppendForward, DecodeForward)
	prop(t, "ForwardReply", func(g gen) *ForwardReply {
		k := KindError
		if g.bool() {
			k = KindAssignment + Kind(g.r.IntN(int(KindStatusInfo-KindAssignment)+1))
		}
		return &ForwardReply{Kind: k, Payload: g.bytes(0, 300)}
	}, AppendForwardReply, DecodeForwardReply)
	prop(t, "SnapshotChunk", func(g gen) *SnapshotChunk {
		return &SnapshotChunk{Shard: g.u64(), Index: g.u64(), Term: g.u64(), Offset: g.u64(), Last: g.bool(), Data: g.bytes(0, 1000)}
	}, AppendSnapshotChunk, DecodeSnapshotChunk)
	prop(t, "SnapshotAck", func(g gen) *SnapshotAck {
		return &SnapshotAck{Shard: g.u64(), Index: g.u64(), Offset: g.u64(), Reject: g.bool()}
	}, AppendSnapshotAck, DecodeSnapshotAck)
	prop(t, "MetadataPull", func(g gen) *MetadataPull {
		m := &MetadataPull{Kind: MetaKind(1 + g.r.IntN(3)), Have: g.u64(), Digest: g.u64()}
		for range g.r.IntN(3) * g.r.IntN(40) {
			m.Buckets = append(m.Buckets, g.u64())
		}
		return m
	}, AppendMetadataPull, DecodeMetadataPull)
	prop(t, "MetadataPush", func(g gen) *MetadataPush {
		m := &MetadataPush{Kind: MetaKind(1 + g.r.IntN(3)), Version: g.u64(), Form: PushForm(g.r.IntN(3)), Digest: g.u64(), Data: g.bytes(0, 500)}
		if m.Form == PushSame {
			m.Data = nil
		}
		return m
	}, AppendMetadataPush, DecodeMetadataPush)
	prop(t, "Hello", func(g gen) *Hello {
		m := &Hello{Version: ProtocolVersion, Role: RoleClient, ClusterID: g.u64(), Generation: g.u64(), NodeID: g.bytes(0, MaxNodeIDLen), Token: g.bytes(0, MaxTokenLen)}
		if g.bool() {
			m.Role, m.NodeID, m.Token = RolePeer, g.nodeID(), nil
		}
		copy(m.Nonce[:], g.bytes(NonceSize, NonceSize))
		return m
	}, AppendHello, DecodeHello)
	prop(t, "HelloAuth", func(g gen) *HelloAuth {
		m := &HelloAuth{}
		copy(m.Tag[:], g.bytes(AuthTagSize, AuthTagSize))
		return m
	}, AppendHelloAuth, DecodeHelloAuth)
}
