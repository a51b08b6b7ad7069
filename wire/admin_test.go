package wire

import (
	"errors"
	"testing"
)

func TestAdminMessagesRoundTrip(t *testing.T) {
	roundTrip(t, &AdminNode{Node: []byte("n3")}, AppendAdminNode, DecodeAdminNode)
	roundTrip(t, &AdminNode{Node: []byte("n3"), Force: true}, AppendAdminNode, DecodeAdminNode)
	roundTrip(t, &TransferLeader{Shard: 977, Node: []byte("n2"), Prepare: true}, AppendTransferLeader, DecodeTransferLeader)
	roundTrip(t, &SplitShard{Shard: 1 << 20}, AppendSplitShard, DecodeSplitShard)
	roundTrip(t, &AdminResult{Node: []byte("n2"), Shard: 7, Term: 9, Topics: 30, Leaders: 21, Shards: 4, Drained: true}, AppendAdminResult, DecodeAdminResult)
}

func TestAdminMessagesReject(t *testing.T) {
	if err := DecodeAdminNode(AppendAdminNode(nil, &AdminNode{}), new(AdminNode)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("empty node id: %v", err)
	}
	long := make([]byte, MaxNodeIDLen+1)
	if err := DecodeTransferLeader(AppendTransferLeader(nil, &TransferLeader{Shard: 1, Node: long}), new(TransferLeader)); err == nil {
		t.Fatal("a node id past MaxNodeIDLen was taken")
	}
	if err := DecodeAdminResult(AppendAdminResult(nil, &AdminResult{Node: []byte("n1")})[:3], new(AdminResult)); err == nil {
		t.Fatal("a truncated AdminResult was taken")
	}
	b := append(AppendAdminNode(nil, &AdminNode{Node: []byte("n1")}), 0)
	if err := DecodeAdminNode(b, new(AdminNode)); err == nil {
		t.Fatal("trailing bytes were taken")
	}
}

func TestAdminKinds(t *testing.T) {
	for _, k := range []Kind{KindDrain, KindUndrain, KindTransferLeader, KindRemoveNode, KindSplitShard} {
		if !k.Known() || !k.IsClientRequest() || !k.IsAdminRequest() || k.IsPeer() {
			t.Errorf("%v: known %v, client request %v, admin %v, peer %v", k, k.Known(), k.IsClientRequest(), k.IsAdminRequest(), k.IsPeer())
		}
	}
	if !KindAdminResult.Known() || !KindAdminResult.IsClientResponse() {
		t.Errorf("%v is not a known client response", KindAdminResult)
	}
	if KindStatus.IsAdminRequest() || KindAssign.IsAdminRequest() || KindShardLeaders.IsAdminRequest() {
		t.Error("a data request counts as an admin request")
	}
}

func TestPropertyAdminMessages(t *testing.T) {
	prop(t, "AdminNode", func(g gen) *AdminNode { return &AdminNode{Node: g.nodeID(), Force: g.bool()} }, AppendAdminNode, DecodeAdminNode)
	prop(t, "TransferLeader", func(g gen) *TransferLeader {
		return &TransferLeader{Shard: g.u64(), Node: g.nodeID(), Prepare: g.bool()}
	}, AppendTransferLeader, DecodeTransferLeader)
	prop(t, "SplitShard", func(g gen) *SplitShard { return &SplitShard{Shard: g.u64()} }, AppendSplitShard, DecodeSplitShard)
	prop(t, "AdminResult", func(g gen) *AdminResult {
		return &AdminResult{Node: g.nodeID(), Shard: g.u64(), Term: g.u64(), Topics: g.u64(), Leaders: g.u64(), Shards: g.u64(), Drained: g.bool()}
	}, AppendAdminResult, DecodeAdminResult)
}

func TestNodeMeta(t *testing.T) {
	m := &NodeMeta{Drained: true, Origin: 1 << 60, Removed: []RemovedNode{{Node: []byte("n2"), At: 5}, {Node: []byte("n4"), At: 1 << 62}}}
	roundTrip(t, m, AppendNodeMeta, DecodeNodeMeta)
	roundTrip(t, &NodeMeta{Origin: 3}, AppendNodeMeta, DecodeNodeMeta)
	if got, want := NodeMetaLen(m), len(AppendNodeMeta(nil, m)); got != want {
		t.Fatalf("NodeMetaLen %d, encoding %d bytes", got, want)
	}
	unordered := AppendNodeMeta(nil, &NodeMeta{Removed: []RemovedNode{{Node: []byte("n4")}, {Node: []byte("n2")}}})
	if err := DecodeNodeMeta(unordered, new(NodeMeta)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("ids out of order: %v", err)
	}
	if err := DecodeNodeMeta([]byte{2, 0, 0}, new(NodeMeta)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown flag: %v", err)
	}
	if err := DecodeNodeMeta(make([]byte, MaxMetaLen+1), new(NodeMeta)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("too long: %v", err)
	}
}
