package wire

import (
	"bytes"
	"reflect"
	"testing"
)

// propIters is the number of random values per message type: small, so the
// package's tests stay fast; the fuzz targets explore further.
const propIters = 200

// prop checks random values of one message type: decode(encode(v)) == v and
// encoding is deterministic.
func prop[T any](t *testing.T, name string, mk func(g gen) *T, enc func([]byte, *T) []byte, dec func([]byte, *T) error) {
	t.Run(name, func(t *testing.T) {
		g := newGen(uint64(len(name)) * 7919)
		var reused T
		for i := range propIters {
			m := mk(g)
			b := enc(nil, m)
			got := new(T)
			if err := dec(b, got); err != nil {
				t.Fatalf("value %d: decode: %v\n%+v", i, err, m)
			}
			if !reflect.DeepEqual(got, m) {
				t.Fatalf("value %d:\n got %+v\nwant %+v", i, got, m)
			}
			// Decoding into a struct that held an earlier value gives the
			// same bytes back.
			if err := dec(b, &reused); err != nil {
				t.Fatalf("value %d: decode into reused: %v", i, err)
			}
			if again := enc(nil, &reused); !bytes.Equal(again, b) {
				t.Fatalf("value %d: reused decode re-encodes differently", i)
			}
		}
	})
}

func TestPropertyClientMessages(t *testing.T) {
	prop(t, "Assign", func(g gen) *Assign {
		return &Assign{Topic: g.topic(), Owner: g.bytes(0, MaxNodeIDLen), Partitions: g.u32(MaxPartitions)}
	}, AppendAssign, DecodeAssign)
	prop(t, "Revoke", func(g gen) *Revoke { return &Revoke{Topic: g.bytes(1, MaxTopicLen)} }, AppendRevoke, DecodeRevoke)
	prop(t, "UpdatePartition", func(g gen) *UpdatePartition {
		return &UpdatePartition{Topic: g.topic(), Partitions: 1 + g.u32(MaxPartitions-1)}
	}, AppendUpdatePartition, DecodeUpdatePartition)
	prop(t, "Lookup", func(g gen) *Lookup { return &Lookup{Topic: g.topic(), Linearizable: g.bool()} }, AppendLookup, DecodeLookup)
	prop(t, "Produce", genProduce, AppendProduce, DecodeProduce)
	prop(t, "Fetch", func(g gen) *Fetch {
		return &Fetch{Topic: g.topic(), Epoch: g.u64(), From: g.u64(), MaxBytes: g.u32(1<<32 - 1)}
	}, AppendFetch, DecodeFetch)
	prop(t, "Assignment", genAssignment, AppendAssignment, DecodeAssignment)
	prop(t, "Revoked", func(g gen) *Revoked { return &Revoked{Topic: g.topic(), Epoch: g.u64()} }, AppendRevoked, DecodeRevoked)
	prop(t, "ProduceAck", func(g gen) *ProduceAck {
		return &ProduceAck{Topic: g.topic(), Epoch: g.u64(), Offset: g.u64()}
	}, AppendProduceAck, DecodeProduceAck)
	prop(t, "FetchResult", func(g gen) *FetchResult {
		m := &FetchResult{Topic: g.topic(), Epoch: g.u64(), Next: g.u64(), HighWatermark: g.u64()}
		for range g.n(20) {
			m.Records = append(m.Records, Record{Offset: g.u64(), Epoch: g.u64(), Value: g.bytes(0, 64)})
		}
		return m
	}, AppendFetchResult, DecodeFetchResult)
	prop(t, "MemberList", func(g gen) *MemberList {
		m := &MemberList{}
		for range g.n(10) {
			m.Members = append(m.Members, Member{ID: g.nodeID(), Generation: g.u64(), Incarnation: g.u64(),
				State: MemberState(1 + g.r.IntN(4)), Rack: g.bytes(0, MaxRackLen), SwimAddr: g.addr(), ClientAddr: g.addr(), PeerAddr: g.addr()})
		}
		return m
	}, AppendMemberList, DecodeMemberList)
	prop(t, "ShardList", func(g gen) *ShardList {
		m := &ShardList{}
		for range g.n(10) {
			e := ShardInfo{Shard: g.u64(), Leader: g.bytes(0, 8), Term: g.u64()}
			for range g.n(7) {
				e.Replicas = append(e.Replicas, g.nodeID())
			}
			m.Shards = append(m.Shards, e)
		}
		return m
	}, AppendShardList, DecodeShardList)
	prop(t, "StatusInfo", func(g gen) *StatusInfo {
		return &StatusInfo{Node: g.nodeID(), Generation: g.u64(), MembersAlive: g.u32(1<<32 - 1), ShardsHosted: g.u32(1<<32 - 1),
			ShardsLed: g.u32(1<<32 - 1), TopicsOwned: g.u64(), Ready: g.bool()}
	}, AppendStatusInfo, DecodeStatusInfo)
	prop(t, "Error", func(g gen) *Error {
		return &Error{Code: ErrorCode(1 + g.r.IntN(int(maxErrorCode))), Message: g.bytes(0, MaxMessageLen), Shard: g.u64(), Epoch: g.u64(),
			NodeID: g.bytes(0, MaxNodeIDLen), Addr: g.addr(), RetryAfter: g.u32(1<<32 - 1)}
	}, AppendError, DecodeError)
}

func genProduce(g gen) *Produce {
	m := &Produce{Topic: g.topic(), Epoch: g.u64()}
	for range 1 + g.n(30) {
		m.Records = append(m.Records, g.bytes(0, 100))
	}
	return m
}

func genAssignment(g gen) *Assignment {
	return &Assignment{Topic: g.topic(), Owner: g.bytes(0, MaxNodeIDLen), OwnerAddr: g.addr(), Epoch: g.u64(), Partitions: g.u32(MaxPartitions), Shard: g.u64()}
}
