package fuzz

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

// codec runs the decode → encode → decode check for one message type.
func codec[T any](f *testing.F, seeds []*T, enc func([]byte, *T) []byte, dec func([]byte, *T) error) {
	for _, s := range seeds {
		f.Add(enc(nil, s))
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) { check(t, data, enc, dec) })
}

// check is codec's test of one input.
func check[T any](t *testing.T, data []byte, enc func([]byte, *T) []byte, dec func([]byte, *T) error) {
	t.Helper()
	var m T
	if dec(data, &m) != nil {
		return
	}
	b := enc(nil, &m)
	var again T
	if err := dec(b, &again); err != nil {
		t.Fatalf("re-encoding of an accepted input fails to decode: %v\ninput %x\nre-encoded %x", err, data, b)
	}
	if !reflect.DeepEqual(m, again) {
		t.Fatalf("decode(encode(decode(x))) differs:\n%+v\n%+v", m, again)
	}
	if b2 := enc(nil, &again); !bytes.Equal(b, b2) {
		t.Fatalf("encoding is not stable:\n%x\n%x", b, b2)
	}
}

func b(s string) []byte { return []byte(s) }

func FuzzHeader(f *testing.F) {
	for _, h := range []wire.Header{
		{Version: wire.ProtocolVersion, Kind: wire.KindProduce, Length: 100, RequestID: 7},
		{Version: wire.ProtocolVersion, Kind: wire.KindRaftBatch, Flags: wire.FlagCompressed, Length: wire.MaxFrame},
	} {
		f.Add(wire.AppendHeader(nil, &h))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var h wire.Header
		if wire.DecodeHeader(data, &h) != nil {
			return
		}
		enc := wire.AppendHeader(nil, &h)
		if !bytes.Equal(enc, data[:wire.HeaderSize]) {
			t.Fatalf("header re-encodes as %x, was %x", enc, data[:wire.HeaderSize])
		}
		var again wire.Header
		if err := wire.DecodeHeader(enc, &again); err != nil || again != h {
			t.Fatalf("%v %+v %+v", err, again, h)
		}
	})
}

func FuzzHello(f *testing.F) {
	codec(f, []*wire.Hello{
		{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: 7, Generation: 2, NodeID: b("n1")},
		{Version: wire.ProtocolVersion, Role: wire.RoleClient, ClusterID: 7},
	}, wire.AppendHello, wire.DecodeHello)
}

func FuzzHelloAuth(f *testing.F) {
	codec(f, []*wire.HelloAuth{{Tag: [wire.AuthTagSize]byte{1, 2, 3}}}, wire.AppendHelloAuth, wire.DecodeHelloAuth)
}

func FuzzError(f *testing.F) {
	codec(f, []*wire.Error{
		{Code: wire.CodeNotLeader, Message: b("moved"), Shard: 7, NodeID: b("n2"), Addr: b("127.0.0.1:7102")},
		{Code: wire.CodeNotLeaderForTopic, Epoch: 9},
		{Code: wire.CodeUnavailable, RetryAfter: 100},
	}, wire.AppendError, wire.DecodeError)
}

func FuzzAssign(f *testing.F) {
	codec(f, []*wire.Assign{{Topic: b("topic-blue"), Owner: b("n2"), Partitions: 3}, {Topic: b("t")}}, wire.AppendAssign, wire.DecodeAssign)
}

func FuzzRevoke(f *testing.F) {
	codec(f, []*wire.Revoke{{Topic: b("topic-blue")}}, wire.AppendRevoke, wire.DecodeRevoke)
}

func FuzzUpdatePartition(f *testing.F) {
	codec(f, []*wire.UpdatePartition{{Topic: b("topic-blue"), Partitions: 8}}, wire.AppendUpdatePartition, wire.DecodeUpdatePartition)
}

func FuzzLookup(f *testing.F) {
	codec(f, []*wire.Lookup{{Topic: b("topic-blue"), Linearizable: true}}, wire.AppendLookup, wire.DecodeLookup)
}

func FuzzProduce(f *testing.F) {
	codec(f, []*wire.Produce{{Topic: b("topic-blue"), Epoch: 1, Records: [][]byte{b("hello"), nil, b("world")}}}, wire.AppendProduce, wire.DecodeProduce)
}

func FuzzFetch(f *testing.F) {
	codec(f, []*wire.Fetch{{Topic: b("topic-blue"), Epoch: 1, From: 10, MaxBytes: 1 << 20}}, wire.AppendFetch, wire.DecodeFetch)
}

func FuzzAssignment(f *testing.F) {
	codec(f, []*wire.Assignment{{Topic: b("topic-blue"), Owner: b("n2"), OwnerAddr: b("127.0.0.1:7102"), Epoch: 1, Partitions: 1, Shard: 99}}, wire.AppendAssignment, wire.DecodeAssignment)
}

func FuzzRevoked(f *testing.F) {
	codec(f, []*wire.Revoked{{Topic: b("topic-blue"), Epoch: 2}}, wire.AppendRevoked, wire.DecodeRevoked)
}

func FuzzProduceAck(f *testing.F) {
	codec(f, []*wire.ProduceAck{{Topic: b("topic-blue"), Epoch: 2, Offset: 40}}, wire.AppendProduceAck, wire.DecodeProduceAck)
}

func FuzzFetchResult(f *testing.F) {
	codec(f, []*wire.FetchResult{{Topic: b("t"), Epoch: 2, Records: []wire.Record{{Offset: 0, Epoch: 2, Value: b("a")}, {Offset: 1 << 40, Epoch: 3}}, Next: 2, HighWatermark: 5}},
		wire.AppendFetchResult, wire.DecodeFetchResult)
}

func FuzzMemberList(f *testing.F) {
	codec(f, []*wire.MemberList{{Members: []wire.Member{
		{ID: b("n1"), Generation: 1, Incarnation: 2, State: wire.MemberAlive, Rack: b("r1"), SwimAddr: b("127.0.0.1:7201"), ClientAddr: b("127.0.0.1:7101"), PeerAddr: b("127.0.0.1:7301")},
		{ID: b("n2"), State: wire.MemberSuspect},
	}}}, wire.AppendMemberList, wire.DecodeMemberList)
}

func FuzzShardList(f *testing.F) {
	codec(f, []*wire.ShardList{{Shards: []wire.ShardInfo{{Shard: 1, Replicas: [][]byte{b("n1"), b("n2")}, Leader: b("n1"), Term: 3}, {Shard: 2}}}},
		wire.AppendShardList, wire.DecodeShardList)
}

func FuzzLeaderTableAnswer(f *testing.F) {
	codec(f, []*wire.LeaderTable{{Shards: 3, Base: 3, Nodes: []wire.LeaderNode{{ID: b("n1"), Addr: b("127.0.0.1:7101")}, {ID: b("n2")}},
		Leaders: []uint32{1, 0, 2}, Terms: []uint64{4, 0, 9}},
		{Shards: 5, Base: 1, Nodes: []wire.LeaderNode{{ID: b("n1")}}, Leaders: []uint32{0, 1, 0, 1, 1}, Terms: []uint64{0, 2, 0, 3, 3}}},
		wire.AppendLeaderTableAnswer, wire.DecodeLeaderTableAnswer)
}

func FuzzStatusInfo(f *testing.F) {
	codec(f, []*wire.StatusInfo{{Node: b("n1"), Generation: 1, MembersAlive: 3, ShardsHosted: 10, ShardsLed: 4, TopicsOwned: 2, Ready: true}},
		wire.AppendStatusInfo, wire.DecodeStatusInfo)
}

func FuzzOpenTopic(f *testing.F) {
	codec(f, []*wire.OpenTopic{{Topic: b("t"), Epoch: 3, Partitions: 2, Shard: 5, Term: 2, Prev: b("n1")}, {Topic: b("t"), Epoch: 4, Shard: 5, Term: 3, Prev: b("n1"), PrevSilent: true}}, wire.AppendOpenTopic, wire.DecodeOpenTopic)
}

func FuzzCloseTopic(f *testing.F) {
	codec(f, []*wire.CloseTopic{{Topic: b("t"), Epoch: 3, Shard: 5, Term: 2}}, wire.AppendCloseTopic, wire.DecodeCloseTopic)
}

func FuzzRecordsPull(f *testing.F) {
	codec(f, []*wire.RecordsPull{{Topic: b("t"), Epoch: 3, From: 7, MaxBytes: 1 << 20}}, wire.AppendRecordsPull, wire.DecodeRecordsPull)
}

func FuzzRecordsChunk(f *testing.F) {
	codec(f, []*wire.RecordsChunk{{Topic: b("t"), Records: []wire.Record{{Offset: 1, Epoch: 2, Value: b("v")}}, Next: 2, End: 9,
		Producers: []wire.Producer{{ID: 5, Floor: 1, Used: 1, Answers: []wire.ProducerAnswer{{Seq: 2, Epoch: 2, Offset: 1, Count: 1}}}}}},
		wire.AppendRecordsChunk, wire.DecodeRecordsChunk)
}

func FuzzTopicAck(f *testing.F) {
	codec(f, []*wire.TopicAck{{Topic: b("t"), Epoch: 3}}, wire.AppendTopicAck, wire.DecodeTopicAck)
}

func FuzzLeaseRound(f *testing.F) {
	codec(f, []*wire.LeaseRound{{Seq: 3, Requests: []wire.LeaseRequest{{Shard: 1, Digest: 7}}, Vouch: []wire.ShardTerm{{Shard: 2, Term: 5}}, Released: true,
		Held: wire.Summary{Count: 1, Digest: 9}, Led: wire.Summary{Count: 2, Digest: 1 << 60}}},
		wire.AppendLeaseRound, wire.DecodeLeaseRound)
}

func FuzzLeaseReply(f *testing.F) {
	codec(f, []*wire.LeaseReply{{Seq: 3, Grants: []wire.LeaseGrant{{Shard: 1, Term: 2, Listed: true, Topics: []wire.TopicEpoch{{Topic: b("t"), Epoch: 4}}}},
		Refused: []wire.LeaseRefusal{{Shard: 9, Leader: b("n2"), Term: 3}}, Vouched: []uint64{4}, HeldMatched: true, LedMatched: true}},
		wire.AppendLeaseReply, wire.DecodeLeaseReply)
}

// FuzzMemberRecords: a pushed member list decodes or is refused; one that
// decodes is sorted by id, with valid states.
func FuzzMemberRecords(f *testing.F) {
	f.Add(wire.AppendMemberRecords(nil, []wire.MemberRecord{{ID: b("n1"), Rack: b("r1"), SwimAddr: b("127.0.0.1:7301"), Generation: 5, Incarnation: 1, State: wire.MemberAlive}}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := wire.DecodeMemberRecords(in, nil)
		if err != nil {
			return
		}
		for i, r := range rs {
			if len(r.ID) == 0 || !r.State.Valid() || (i > 0 && string(rs[i-1].ID) >= string(r.ID)) {
				t.Fatalf("bad record %d: %+v", i, r)
			}
		}
	})
}

// FuzzLeaderTable: a pushed shard-leader table decodes or is refused; a
// decoded row names a shard in range and a leader.
func FuzzLeaderTable(f *testing.F) {
	f.Add(wire.AppendLeaderTable(nil, []wire.LeaderRow{{Shard: 3, Term: 4, Leader: b("n1")}}))
	f.Fuzz(func(t *testing.T, in []byte) {
		rows, err := wire.DecodeLeaderTable(in, 64, nil)
		if err != nil {
			return
		}
		for _, r := range rows {
			if r.Shard >= 64 || len(r.Leader) == 0 {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}

func FuzzForward(f *testing.F) {
	inner := wire.AppendLookup(nil, &wire.Lookup{Topic: b("t")})
	codec(f, []*wire.Forward{{Hops: 1, Origin: b("n1"), Kind: wire.KindLookup, Payload: inner}}, wire.AppendForward, wire.DecodeForward)
}

func FuzzForwardReply(f *testing.F) {
	inner := wire.AppendError(nil, &wire.Error{Code: wire.CodeNotFound})
	codec(f, []*wire.ForwardReply{{Kind: wire.KindError, Payload: inner}}, wire.AppendForwardReply, wire.DecodeForwardReply)
}

func FuzzSnapshotChunk(f *testing.F) {
	codec(f, []*wire.SnapshotChunk{{Shard: 1, Index: 100, Term: 3, Offset: 0, Last: true, Data: b("state")}}, wire.AppendSnapshotChunk, wire.DecodeSnapshotChunk)
}

func FuzzSnapshotAck(f *testing.F) {
	codec(f, []*wire.SnapshotAck{{Shard: 1, Index: 100, Offset: 5}}, wire.AppendSnapshotAck, wire.DecodeSnapshotAck)
}

func FuzzMetadataPull(f *testing.F) {
	codec(f, []*wire.MetadataPull{{Kind: wire.MetaRing, Have: 4, Digest: 7, Buckets: []uint64{1, 2}}}, wire.AppendMetadataPull, wire.DecodeMetadataPull)
}

func FuzzMetadataPush(f *testing.F) {
	codec(f, []*wire.MetadataPush{{Kind: wire.MetaMembership, Version: 5, Form: wire.PushDelta, Digest: 9, Data: b("members")}}, wire.AppendMetadataPush, wire.DecodeMetadataPush)
}

func FuzzEmpty(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := wire.DecodeEmpty(data); (err == nil) != (len(data) == 0) {
			t.Fatalf("%d bytes: %v", len(data), err)
		}
	})
}

// FuzzAdmin runs the operators' messages and the node metadata through
// one target (each input through every decoder): small formats, one short
// smoke run.
func FuzzAdmin(f *testing.F) {
	f.Add(wire.AppendAdminNode(nil, &wire.AdminNode{Node: b("n4"), Force: true}))
	f.Add(wire.AppendTransferLeader(nil, &wire.TransferLeader{Shard: 7, Node: b("n2"), Prepare: true}))
	f.Add(wire.AppendSplitShard(nil, &wire.SplitShard{Shard: 300}))
	f.Add(wire.AppendAdminResult(nil, &wire.AdminResult{Node: b("n2"), Shard: 7, Term: 3, Topics: 30, Leaders: 21, Shards: 4, Drained: true}))
	f.Add(wire.AppendNodeMeta(nil, &wire.NodeMeta{Drained: true, Origin: 9, Removed: []wire.RemovedNode{{Node: b("n2"), At: 5}, {Node: b("n4"), At: 7}}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data, wire.AppendAdminNode, wire.DecodeAdminNode)
		check(t, data, wire.AppendTransferLeader, wire.DecodeTransferLeader)
		check(t, data, wire.AppendSplitShard, wire.DecodeSplitShard)
		check(t, data, wire.AppendAdminResult, wire.DecodeAdminResult)
		check(t, data, wire.AppendNodeMeta, wire.DecodeNodeMeta)
	})
}

// FuzzWatchMessages runs the watch and listing messages through one
// target (each input through every decoder).
func FuzzWatchMessages(f *testing.F) {
	f.Add(wire.AppendWatch(nil, &wire.Watch{Match: b("topic-"), WaitMillis: 2500,
		Positions: []wire.ShardPosition{{Shard: 0, Index: 9}, {Shard: 3, Index: 1 << 40, Skip: 2}}}))
	f.Add(wire.AppendWatch(nil, &wire.Watch{Match: b("topic-blue"), Exact: true, Positions: []wire.ShardPosition{{Shard: 37, Index: 12}}}))
	f.Add(wire.AppendWatchEvents(nil, &wire.WatchEvents{
		Positions: []wire.ShardPosition{{Shard: 1, Index: 20}, {Shard: 2, Index: 7}},
		Events: []wire.WatchEvent{
			{Shard: 1, Index: 18, Seq: 1, Change: wire.ChangeMoved, Topic: b("t"), Owner: b("n2"), OwnerAddr: b("127.0.0.1:7102"), Epoch: 2, Partitions: 1},
			{Shard: 1, Index: 19, Change: wire.ChangeRevoked, Topic: b("t"), Epoch: 3},
		},
		NotHosted: []uint64{4, 9},
		Compacted: []wire.ShardPosition{{Shard: 5, Index: 100}},
		Splits:    []wire.ShardSplit{{Shard: 1, Index: 21, Low: 9, High: 17}, {Shard: 6, Index: 4, Low: 14, High: 22}},
	}))
	f.Add(wire.AppendListTopics(nil, &wire.ListTopics{Prefix: b("topic-"), Shard: 3, After: b("topic-b"), Limit: 100}))
	f.Add(wire.AppendTopicList(nil, &wire.TopicList{
		Topics:    []wire.Assignment{{Topic: b("topic-blue"), Owner: b("n2"), OwnerAddr: b("127.0.0.1:7102"), Epoch: 1, Partitions: 1, Shard: 3}},
		NextShard: 3, NextAfter: b("topic-blue"),
		Positions: []wire.ShardPosition{{Shard: 3, Index: 40}},
	}))
	f.Add(wire.AppendTopicList(nil, &wire.TopicList{Done: true}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data, wire.AppendWatch, wire.DecodeWatch)
		check(t, data, wire.AppendWatchEvents, wire.DecodeWatchEvents)
		check(t, data, wire.AppendListTopics, wire.DecodeListTopics)
		check(t, data, wire.AppendTopicList, wire.DecodeTopicList)
	})
}
