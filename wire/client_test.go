package wire

import (
	"errors"
	"testing"
)

func TestClientMessagesRoundTrip(t *testing.T) {
	rec := []byte("hello")
	roundTrip(t, &Assign{Topic: []byte("topic-blue"), Owner: []byte("n2"), Partitions: 12}, AppendAssign, DecodeAssign)
	roundTrip(t, &Assign{Topic: []byte("topic-blue")}, AppendAssign, DecodeAssign)
	roundTrip(t, &Revoke{Topic: []byte("t")}, AppendRevoke, DecodeRevoke)
	sess := Session{ID: 1 << 63, Seq: 90, Floor: 88}
	roundTrip(t, &Assign{Topic: []byte("t"), Partitions: 2, Session: sess}, AppendAssign, DecodeAssign)
	roundTrip(t, &Revoke{Topic: []byte("t"), Session: sess}, AppendRevoke, DecodeRevoke)
	roundTrip(t, &UpdatePartition{Topic: []byte("t"), Partitions: 3, Session: sess}, AppendUpdatePartition, DecodeUpdatePartition)
	roundTrip(t, &Produce{Topic: []byte("t"), Epoch: 3, Records: [][]byte{rec}, Session: sess}, AppendProduce, DecodeProduce)
	roundTrip(t, &UpdatePartition{Topic: []byte("t"), Partitions: MaxPartitions}, AppendUpdatePartition, DecodeUpdatePartition)
	roundTrip(t, &Lookup{Topic: []byte("t"), Linearizable: true}, AppendLookup, DecodeLookup)
	roundTrip(t, &Produce{Topic: []byte("t"), Epoch: 3, Records: [][]byte{rec, nil, rec}}, AppendProduce, DecodeProduce)
	roundTrip(t, &Fetch{Topic: []byte("t"), Epoch: 3, From: 100, MaxBytes: 1 << 20}, AppendFetch, DecodeFetch)
	roundTrip(t, &Assignment{Topic: []byte("t"), Owner: []byte("n2"), OwnerAddr: []byte("127.0.0.1:7102"), Epoch: 1, Partitions: 1, Shard: 977}, AppendAssignment, DecodeAssignment)
	roundTrip(t, &Revoked{Topic: []byte("t"), Epoch: 4}, AppendRevoked, DecodeRevoked)
	roundTrip(t, &ProduceAck{Topic: []byte("t"), Epoch: 4, Offset: 1 << 40}, AppendProduceAck, DecodeProduceAck)
	roundTrip(t, &FetchResult{Topic: []byte("t"), Epoch: 4, Records: []Record{{Offset: 7, Value: rec}, {Offset: 8}}, Next: 9, HighWatermark: 20}, AppendFetchResult, DecodeFetchResult)
	roundTrip(t, &FetchResult{Topic: []byte("t"), Epoch: 4, Next: 9, HighWatermark: 9}, AppendFetchResult, DecodeFetchResult)
	roundTrip(t, &MemberList{Members: []Member{
		{ID: []byte("n1"), Generation: 2, Incarnation: 5, State: MemberAlive, Rack: []byte("r1"), SwimAddr: []byte("127.0.0.1:7201"), ClientAddr: []byte("127.0.0.1:7101"), PeerAddr: []byte("127.0.0.1:7301")},
		{ID: []byte("n2"), State: MemberDead},
	}}, AppendMemberList, DecodeMemberList)
	roundTrip(t, &ShardList{Shards: []ShardInfo{
		{Shard: 1, Replicas: [][]byte{[]byte("n1"), []byte("n2"), []byte("n3")}, Leader: []byte("n2"), Term: 6},
		{Shard: 2},
	}}, AppendShardList, DecodeShardList)
	roundTrip(t, &StatusInfo{Node: []byte("n1"), Generation: 3, MembersAlive: 3, ShardsHosted: 700, ShardsLed: 240, TopicsOwned: 12, Ready: true}, AppendStatusInfo, DecodeStatusInfo)
}

func TestClientMessagesReject(t *testing.T) {
	var p Produce
	if err := DecodeProduce(AppendProduce(nil, &Produce{Topic: []byte("t")}), &p); !errors.Is(err, ErrMalformed) {
		t.Fatalf("produce without records: %v", err)
	}
	if err := DecodeAssign(AppendAssign(nil, &Assign{}), new(Assign)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty topic: %v", err)
	}
	if err := DecodeRevoke(AppendRevoke(nil, &Revoke{Topic: make([]byte, MaxTopicLen+1)}), new(Revoke)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("long topic: %v", err)
	}
	if err := DecodeUpdatePartition(AppendUpdatePartition(nil, &UpdatePartition{Topic: []byte("t")}), new(UpdatePartition)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("zero partitions: %v", err)
	}
	if err := DecodeAssign(AppendAssign(nil, &Assign{Topic: []byte("t"), Partitions: MaxPartitions + 1}), new(Assign)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too many partitions: %v", err)
	}
	for _, bad := range []Session{{ID: 1}, {ID: 1, Seq: 5, Floor: 5}} {
		b := AppendRevoke(nil, &Revoke{Topic: []byte("t")})
		b = append(b[:len(b)-1], 1)
		b = appendUvarint(appendUvarint(appendUvarint(b, bad.ID), bad.Seq), bad.Floor)
		if err := DecodeRevoke(b, new(Revoke)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("session %+v: %v", bad, err)
		}
	}
	if err := DecodeLookup([]byte{1, 't', 2}, new(Lookup)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bool 2: %v", err)
	}
	if err := DecodeMemberList(AppendMemberList(nil, &MemberList{Members: []Member{{ID: []byte("n1"), State: 9}}}), new(MemberList)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad state: %v", err)
	}
	// A record count above the limit is refused before anything is sized.
	b := AppendProduce(nil, &Produce{Topic: []byte("t")})
	b = append(b[:len(b)-2], appendUvarint(nil, MaxRecordsPerProduce+1)...)
	if err := DecodeProduce(b, &p); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("record count: %v", err)
	}
	if err := DecodeEmpty([]byte{0}); !errors.Is(err, ErrTrailing) {
		t.Fatalf("empty: %v", err)
	}
	if err := DecodeEmpty(nil); err != nil {
		t.Fatal(err)
	}
}

func TestProduceRecordSize(t *testing.T) {
	m := &Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{make([]byte, 10)}}
	before := len(AppendProduce(nil, m))
	m.Records = append(m.Records, make([]byte, 300))
	if got, want := len(AppendProduce(nil, m))-before, ProduceRecordSize(300); got != want {
		t.Fatalf("a 300-byte record added %d bytes, ProduceRecordSize says %d", got, want)
	}
}

func TestDecodeReusesSlices(t *testing.T) {
	big := &ShardList{Shards: []ShardInfo{{Shard: 1, Replicas: [][]byte{[]byte("a"), []byte("b")}}, {Shard: 2, Replicas: [][]byte{[]byte("c")}}}}
	small := &ShardList{Shards: []ShardInfo{{Shard: 3, Replicas: [][]byte{[]byte("d")}}}}
	var m ShardList
	if err := DecodeShardList(AppendShardList(nil, big), &m); err != nil {
		t.Fatal(err)
	}
	first := &m.Shards[0]
	if err := DecodeShardList(AppendShardList(nil, small), &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) != 1 || &m.Shards[0] != first || string(m.Shards[0].Replicas[0]) != "d" || len(m.Shards[0].Replicas) != 1 {
		t.Fatalf("reuse: %+v", m)
	}
	// A failed decode leaves no stale entries behind.
	if err := DecodeShardList([]byte{1}, &m); err == nil || len(m.Shards) != 0 {
		t.Fatalf("failed decode: %v %+v", err, m)
	}
}
