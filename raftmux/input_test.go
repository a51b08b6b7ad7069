package raftmux_test

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
)

// Garbage from a peer is dropped without harm: nil or misaddressed
// messages, votes for unknown shards, broken snapshot streams.
func TestMalformedInboundIsIgnored(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	h := c.hosts[lead]
	h.Deliver(2, &raftmux.RaftBatch{Messages: []raftmux.ShardMessage{
		{Shard: 0, Msg: nil},
		{Shard: 0, Msg: &raftpb.Message{Type: raftpb.MsgApp, To: uint64(99), From: uint64(2)}},
		{Shard: 0, Msg: &raftpb.Message{Type: raftpb.MsgApp, To: lead, From: uint64(3)}}, // From ≠ sender
		{Shard: 5, Msg: &raftpb.Message{Type: raftpb.MsgVote, To: lead, From: uint64(2), Term: uint64(9)}},
		{Shard: 0, Msg: &raftpb.Message{Type: raftpb.MsgHup, To: lead, From: uint64(2)}}, // local type
	}})
	h.DeliverSnapshotChunk(2, &raftmux.SnapshotChunk{Shard: 0, ID: 1, Seq: 3, Data: []byte("x")})
	h.DeliverSnapshotChunk(2, &raftmux.SnapshotChunk{Shard: 0, ID: 2, Seq: 0, Last: true})
	h.DeliverSnapshotChunk(2, nil)
	h.DeliverSnapshotChunk(2, &raftmux.SnapshotChunk{Shard: 0, ID: 3, Seq: 0, Codec: raftmux.CodecZstd, Data: []byte("not zstd")})
	h.DeliverSnapshotChunk(2, &raftmux.SnapshotChunk{Shard: 0, ID: 4, Seq: 0, Codec: 9, Data: []byte("x")})
	if _, err := c.propose(0, []byte("still fine")); err != nil {
		t.Fatal(err)
	}
	inf, err := h.Shards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(inf) != 1 {
		t.Fatalf("a vote for an unknown shard created a replica: %+v", inf)
	}
	c.checkSameLogs([]uint64{0})
}
