package node

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// hostilePeer is a peer connection to a node, opened with a handshake of
// its own choosing, over which a test writes whatever frames it likes.
type hostilePeer struct {
	t  *testing.T
	nc net.Conn
}

func dialHostilePeer(t *testing.T, addr, id string) *hostilePeer {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	m := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: 42, Generation: 1, NodeID: []byte(id)}
	_, _ = rand.Read(m.Nonce[:])
	p := &hostilePeer{t: t, nc: nc}
	p.send(wire.KindHello, wire.AppendHello(nil, &m))
	var hdr [wire.HeaderSize]byte
	var h wire.Header
	if _, err := io.ReadFull(nc, hdr[:]); err != nil || wire.DecodeHeader(hdr[:], &h) != nil || h.Kind != wire.KindHello || h.Length > 256 {
		t.Fatalf("node's Hello: %v %+v", err, h)
	}
	if _, err := io.CopyN(io.Discard, nc, int64(h.Length)); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetDeadline(time.Time{})
	return p
}

func (p *hostilePeer) send(kind wire.Kind, payload []byte) {
	p.t.Helper()
	f, start := wire.BeginFrame(nil, kind, 0)
	f = append(f, payload...)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		p.t.Fatal(err)
	}
	if _, err := p.nc.Write(f); err != nil {
		p.t.Fatalf("write %v: %v", kind, err)
	}
}

func (p *hostilePeer) batch(shard uint64, ms ...raftpb.Message) {
	var b wire.RaftBatch
	for _, m := range ms {
		b.Messages = append(b.Messages, wire.ShardMessage{Shard: shard, Msg: m})
	}
	p.send(wire.KindRaftBatch, wire.AppendRaftBatch(nil, &b))
}

// chunk sends a snapshot chunk laid out as raftio's transport does.
func (p *hostilePeer) chunk(shard, stream uint64, last bool, msg *raftpb.Message, data []byte) {
	var head []byte
	if msg != nil {
		var one wire.RaftBatch
		one.Messages = []wire.ShardMessage{{Shard: shard, Msg: *msg}}
		head = wire.AppendRaftBatch(nil, &one)
	}
	d := binary.AppendUvarint(nil, uint64(len(head)))
	d = append(append(d, head...), data...)
	p.send(wire.KindSnapshotChunk, wire.AppendSnapshotChunk(nil, &wire.SnapshotChunk{Shard: shard, Index: stream, Last: last, Data: d}))
}

// liveHeap is the process's live heap after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// TestHostilePeerCannotCrashHaltOrBloatANode plays a hostile peer against
// a running node over its real sockets: on the peer port, every frame that
// once killed or wiped a node (a commit index past the log, a message type
// of -1, a raw MsgSnap without data, an append rewriting committed
// entries, snapshot chunks for shards it does not host, and with data that
// does not decode); on the SWIM port, 64 connections each declaring a 16
// MiB push-pull frame. The node refuses or defuses each (its counters say
// so), halts nothing, still serves, and the process's live heap grows by
// less than maxHeapGrowth.
func TestHostilePeerCannotCrashHaltOrBloatANode(t *testing.T) {
	// Not parallel: it measures the process's heap.
	const maxHeapGrowth = 16 << 20
	const pushPullConns = 64
	c := startCluster(t, 3)
	victim := c.nodes[0]
	_, peerAddr, swimAddr := victim.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	var follows, leads raftmux.Info
	infos, err := victim.host.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range infos {
		switch {
		case in.Leader == victim.self:
			leads = in
		case in.Leader != 0:
			follows = in
		}
	}
	if follows.Term == 0 || leads.Term == 0 {
		t.Fatalf("the victim should both lead and follow some shard: %d shards", len(infos))
	}
	before := victim.host.Stats()
	heapBefore := liveHeap()

	mallory := RaftID("mallory")
	self := victim.self
	p := dialHostilePeer(t, peerAddr, "mallory")
	// A commit index past the log: a coalesced heartbeat and a message
	// with a read context, at a later term (a leader the victim has not
	// heard of yet, as raft would take it).
	p.send(wire.KindRaftBatch, wire.AppendRaftBatch(nil, &wire.RaftBatch{Heartbeats: []wire.Heartbeat{{Shard: follows.Shard, Term: follows.Term + 1, Commit: 1 << 40}}}))
	p.batch(follows.Shard, raftpb.Message{Type: raftpb.MsgHeartbeat, From: mallory, To: self, Term: follows.Term + 2, Commit: 1 << 40, Context: []byte("read")})
	// A type outside raft's tables.
	p.batch(follows.Shard, raftpb.Message{Type: -1, From: mallory, To: self, Term: follows.Term})
	// A raw MsgSnap without data, which would wipe the replica.
	p.batch(follows.Shard, raftpb.Message{Type: raftpb.MsgSnap, From: mallory, To: self, Term: follows.Term + 3,
		Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1 << 30, Term: follows.Term + 3, ConfState: raftpb.ConfState{Voters: []uint64{self}}}}})
	// An append rewriting the committed log, and an ack past the log.
	p.batch(follows.Shard, raftpb.Message{Type: raftpb.MsgApp, From: mallory, To: self, Term: follows.Term + 3, Index: follows.Applied, LogTerm: follows.Term,
		Entries: []raftpb.Entry{{Index: 1, Term: follows.Term + 3, Data: []byte("rewrite")}}})
	p.batch(leads.Shard, raftpb.Message{Type: raftpb.MsgAppResp, From: mallory, To: self, Term: leads.Term, Index: 1 << 40})
	// Snapshot streams for shards the node does not host, and one whose
	// data does not decode for a shard it does.
	snap := func(term uint64) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MsgSnap, From: mallory, To: self, Term: term,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 1 << 30, Term: term, ConfState: raftpb.ConfState{Voters: []uint64{self, mallory}}}}}
	}
	for i := range uint64(64) {
		p.chunk(1<<40+i, i, false, snap(7), make([]byte, 64<<10))
	}
	p.chunk(follows.Shard, 999, true, snap(follows.Term+4), []byte("\x7fnot a snapshot stream"))

	waitUntil(t, 30*time.Second, "the node to refuse the crafted raft frames", func() bool {
		st := victim.host.Stats()
		return st.RefusedType >= before.RefusedType+2 && st.RefusedMalformed > before.RefusedMalformed &&
			st.ClampedCommits >= before.ClampedCommits+1 && st.RefusedSnapshots > before.RefusedSnapshots &&
			st.RefusedNonMember > before.RefusedNonMember
	})

	// The SWIM port: 64 connections, each a Hello (the cluster runs
	// without a secret) and a 16 MiB push-pull declaration.
	declaration := make([]byte, wire.HeaderSize)
	declaration[0], declaration[1] = wire.ProtocolVersion, byte(wire.KindPushPull)
	binary.LittleEndian.PutUint32(declaration[4:], wire.MaxFrame)
	hello := wire.Hello{Version: wire.ProtocolVersion, Role: wire.RolePeer, ClusterID: 42, Generation: 1, NodeID: []byte("mallory")}
	helloFrame, start := wire.BeginFrame(nil, wire.KindHello, 0)
	helloFrame, _ = wire.EndFrame(wire.AppendHello(helloFrame, &hello), start)
	swimBefore := victim.started.Swim.Stats()
	for range pushPullConns {
		nc, err := net.DialTimeout("tcp", swimAddr, 2*time.Second)
		if err != nil {
			t.Fatalf("dial the SWIM port: %v", err)
		}
		t.Cleanup(func() { _ = nc.Close() })
		if _, err := nc.Write(append(append([]byte(nil), helloFrame...), declaration...)); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 30*time.Second, "the SWIM port to turn away what it cannot serve", func() bool {
		st := victim.started.Swim.Stats()
		return st.PushPullsRefused+st.PushPullHandshakeFailures-swimBefore.PushPullsRefused-swimBefore.PushPullHandshakeFailures >= pushPullConns-4
	})
	grown := int64(liveHeap()) - int64(heapBefore)
	t.Logf("live heap grew by %d KiB under the hostile peer", grown>>10)
	if grown > maxHeapGrowth {
		t.Fatalf("live heap grew by %d MiB under the hostile peer (bound %d MiB)", grown>>20, maxHeapGrowth>>20)
	}

	if err := victim.host.Err(); err != nil {
		t.Fatalf("raft host halted: %v", err)
	}
	if h := victim.Halted(); len(h) > 0 {
		t.Fatalf("replicas halted: %v", h)
	}
	cl := clientOf(t, victim)
	for i := range 8 {
		topic := fmt.Sprintf("after-the-attack-%d", i)
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{}); err != nil {
			t.Fatalf("assign %s through the node: %v", topic, err)
		}
		if _, err := cl.Lookup(ctx, topic, true); err != nil {
			t.Fatalf("lookup %s through the node: %v", topic, err)
		}
	}
}
