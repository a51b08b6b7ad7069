package node

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// errUnknownRaftID: a raft id that no member known to this node maps to.
var errUnknownRaftID = errors.New("node: unknown raft id")

// peerSender is the part of netio.Transport the raft transport uses.
type peerSender interface {
	Send(node string, frame []byte) error
}

// raftTransport adapts the peer connections to raftmux.Transport: every
// batch raftmux hands it (one per destination node per round) becomes one
// KindRaftBatch frame.
type raftTransport struct {
	peers peerSender
	names func(raftID uint64) (string, bool)
	bufs  sync.Pool

	framesOut atomic.Uint64
	sendErrs  atomic.Uint64
}

var _ raftmux.Transport = (*raftTransport)(nil)

type sendBuf struct {
	frame []byte
	batch wire.RaftBatch
}

func (t *raftTransport) get() *sendBuf {
	if b, ok := t.bufs.Get().(*sendBuf); ok {
		return b
	}
	return &sendBuf{}
}

func (t *raftTransport) put(b *sendBuf) {
	clear(b.batch.Messages)
	b.batch.Messages = b.batch.Messages[:0]
	t.bufs.Put(b)
}

// copyMsg sets dst's fields to src's (the protobuf struct itself must not
// be copied by value).
func copyMsg(dst, src *raftpb.Message) {
	dst.Type, dst.To, dst.From, dst.Term, dst.LogTerm, dst.Index = src.Type, src.To, src.From, src.Term, src.LogTerm, src.Index
	dst.Entries, dst.Commit, dst.Vote, dst.Snapshot, dst.Reject = src.Entries, src.Commit, src.Vote, src.Snapshot, src.Reject
	dst.RejectHint, dst.Context, dst.Responses = src.RejectHint, src.Context, src.Responses
}

func toWireBatch(dst *wire.RaftBatch, b *raftmux.RaftBatch) {
	if cap(dst.Messages) < len(b.Messages) {
		dst.Messages = make([]wire.ShardMessage, len(b.Messages))
	}
	dst.Messages = dst.Messages[:len(b.Messages)]
	for i := range b.Messages {
		dst.Messages[i].Shard = b.Messages[i].Shard
		copyMsg(&dst.Messages[i].Msg, b.Messages[i].Msg)
	}
	dst.Heartbeats = dst.Heartbeats[:0]
	for _, h := range b.Heartbeats {
		dst.Heartbeats = append(dst.Heartbeats, wire.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: h.Flags & wire.HeartbeatQuiesce})
	}
	dst.HeartbeatResponses = dst.HeartbeatResponses[:0]
	for _, h := range b.HeartbeatResponses {
		// A response never quiesces anyone, so its one flag bit carries
		// raftmux's FlagWake (a follower asking its quiesced leader to wake).
		var fl uint8
		if h.Flags&raftmux.FlagWake != 0 {
			fl = wire.HeartbeatQuiesce
		}
		dst.HeartbeatResponses = append(dst.HeartbeatResponses, wire.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: fl})
	}
}

func (t *raftTransport) Send(to uint64, b *raftmux.RaftBatch) error {
	name, ok := t.names(to)
	if !ok {
		t.sendErrs.Add(1)
		return fmt.Errorf("%w: %d", errUnknownRaftID, to)
	}
	sb := t.get()
	defer t.put(sb)
	toWireBatch(&sb.batch, b)
	f, start := wire.BeginFrame(sb.frame[:0], wire.KindRaftBatch, 0)
	f = wire.AppendRaftBatch(f, &sb.batch)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		t.sendErrs.Add(1)
		return fmt.Errorf("node: raft batch to %s: %w", name, err)
	}
	sb.frame = f
	if err := t.peers.Send(name, f); err != nil {
		t.sendErrs.Add(1)
		return err
	}
	t.framesOut.Add(1)
	return nil
}

// A snapshot chunk travels as a wire.SnapshotChunk whose fields carry
// raftmux's stream: Index is the stream id, Offset the chunk's sequence
// number, Term the codec. Data starts with a uvarint length and, on the
// first chunk, that many bytes of a one-message RaftBatch holding the
// MsgSnap; the chunk's data follows.
func (t *raftTransport) SendSnapshotChunk(to uint64, c *raftmux.SnapshotChunk) error {
	name, ok := t.names(to)
	if !ok {
		return fmt.Errorf("%w: %d", errUnknownRaftID, to)
	}
	var head []byte
	if c.Msg != nil {
		var one wire.RaftBatch
		one.Messages = make([]wire.ShardMessage, 1)
		one.Messages[0].Shard = c.Shard
		copyMsg(&one.Messages[0].Msg, c.Msg)
		head = wire.AppendRaftBatch(nil, &one)
	}
	data := binary.AppendUvarint(make([]byte, 0, len(head)+len(c.Data)+10), uint64(len(head)))
	data = append(data, head...)
	data = append(data, c.Data...)
	wc := wire.SnapshotChunk{Shard: c.Shard, Index: c.ID, Term: uint64(c.Codec), Offset: uint64(c.Seq), Last: c.Last, Data: data}
	f, start := wire.BeginFrame(nil, wire.KindSnapshotChunk, 0)
	f = wire.AppendSnapshotChunk(f, &wc)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		return fmt.Errorf("node: snapshot chunk to %s: %w", name, err)
	}
	return t.peers.Send(name, f)
}

// decodeRaftBatch turns a received frame payload into a batch for
// Host.Deliver. The messages come from a fresh decode whose memory is never
// reused, since raft keeps pointers into what it is stepped with.
func decodeRaftBatch(payload []byte) (*raftmux.RaftBatch, error) {
	var wb wire.RaftBatch
	if err := wire.DecodeRaftBatch(payload, &wb); err != nil {
		return nil, err
	}
	rb := &raftmux.RaftBatch{Messages: make([]raftmux.ShardMessage, len(wb.Messages))}
	for i := range wb.Messages {
		rb.Messages[i] = raftmux.ShardMessage{Shard: wb.Messages[i].Shard, Msg: wb.Messages[i].Owned()}
	}
	for _, h := range wb.Heartbeats {
		rb.Heartbeats = append(rb.Heartbeats, raftmux.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: h.Flags})
	}
	for _, h := range wb.HeartbeatResponses {
		var fl uint8
		if h.Flags&wire.HeartbeatQuiesce != 0 {
			fl = raftmux.FlagWake
		}
		rb.HeartbeatResponses = append(rb.HeartbeatResponses, raftmux.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: fl})
	}
	return rb, nil
}

// errBadChunk: a snapshot chunk whose framing does not decode.
var errBadChunk = errors.New("node: malformed snapshot chunk")

func decodeSnapshotChunk(payload []byte) (*raftmux.SnapshotChunk, error) {
	var wc wire.SnapshotChunk
	if err := wire.DecodeSnapshotChunk(payload, &wc); err != nil {
		return nil, err
	}
	if wc.Term > 255 || wc.Offset > 1<<32-1 {
		return nil, errBadChunk
	}
	n, k := binary.Uvarint(wc.Data)
	if k <= 0 || n > uint64(len(wc.Data)-k) {
		return nil, errBadChunk
	}
	c := &raftmux.SnapshotChunk{Shard: wc.Shard, ID: wc.Index, Seq: uint32(wc.Offset), Last: wc.Last, Codec: uint8(wc.Term)}
	if n > 0 {
		rb, err := decodeRaftBatch(wc.Data[k : k+int(n)])
		if err != nil {
			return nil, err
		}
		if len(rb.Messages) != 1 {
			return nil, errBadChunk
		}
		c.Msg = rb.Messages[0].Msg
	}
	c.Data = append([]byte(nil), wc.Data[k+int(n):]...)
	return c, nil
}
