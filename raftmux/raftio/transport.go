package raftio

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

// Errors of the transport and the decoders.
var (
	// ErrUnknownRaftID: a raft id that no known peer maps to.
	ErrUnknownRaftID = errors.New("raftio: unknown raft id")
	// ErrBadChunk: a snapshot chunk whose framing does not decode.
	ErrBadChunk = errors.New("raftio: malformed snapshot chunk")
)

// PeerSender is the part of netio.Transport the transport uses: it queues
// one whole frame for a peer and copies it before returning.
type PeerSender interface {
	Send(node string, frame []byte) error
}

// Transport adapts peer connections to raftmux.Transport: every batch
// raftmux hands it (one per destination node per round) becomes one
// KindRaftBatch frame.
type Transport struct {
	peers PeerSender
	names func(raftID uint64) (string, bool)
	bufs  sync.Pool

	framesOut atomic.Uint64
	chunksOut atomic.Uint64
	bytesOut  atomic.Uint64
	sendErrs  atomic.Uint64
	chunkErrs atomic.Uint64
}

var _ raftmux.Transport = (*Transport)(nil)

// NewTransport returns a transport sending through peers; names maps a raft
// id to the peer's node name (false: unknown, the send fails with
// ErrUnknownRaftID). names is called from raftmux's workers concurrently.
func NewTransport(peers PeerSender, names func(raftID uint64) (string, bool)) *Transport {
	return &Transport{peers: peers, names: names}
}

// TransportStats are the counters of a Transport.
type TransportStats struct {
	FramesOut   uint64 // RaftBatch frames handed to the peer connections
	ChunksOut   uint64 // SnapshotChunk frames handed to them
	BytesOut    uint64 // the bytes of both, headers included
	SendErrors  uint64 // batches not sent
	ChunkErrors uint64 // snapshot chunks not sent
}

// Stats returns the counters.
func (t *Transport) Stats() TransportStats {
	return TransportStats{
		FramesOut: t.framesOut.Load(), ChunksOut: t.chunksOut.Load(), BytesOut: t.bytesOut.Load(),
		SendErrors: t.sendErrs.Load(), ChunkErrors: t.chunkErrs.Load(),
	}
}

type sendBuf struct {
	frame []byte
	batch wire.RaftBatch
}

func (t *Transport) get() *sendBuf {
	if b, ok := t.bufs.Get().(*sendBuf); ok {
		return b
	}
	return &sendBuf{}
}

// maxPooledFrame: a buffer that grew past this (a large append) is not
// kept, so one burst does not pin its memory.
const maxPooledFrame = 1 << 20

func (t *Transport) put(b *sendBuf) {
	clear(b.batch.Messages)
	b.batch.Messages = b.batch.Messages[:0]
	if cap(b.frame) > maxPooledFrame {
		b.frame = nil
	}
	t.bufs.Put(b)
}

func toWireBatch(dst *wire.RaftBatch, b *raftmux.RaftBatch) {
	if cap(dst.Messages) < len(b.Messages) {
		dst.Messages = make([]wire.ShardMessage, len(b.Messages))
	}
	dst.Messages = dst.Messages[:len(b.Messages)]
	for i := range b.Messages {
		dst.Messages[i].Shard = b.Messages[i].Shard
		dst.Messages[i].Msg = *b.Messages[i].Msg
	}
	dst.Heartbeats = dst.Heartbeats[:0]
	for _, h := range b.Heartbeats {
		dst.Heartbeats = append(dst.Heartbeats, wire.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: wireFlags(h.Flags, raftmux.FlagQuiesce)})
	}
	dst.HeartbeatResponses = dst.HeartbeatResponses[:0]
	for _, h := range b.HeartbeatResponses {
		// A response never quiesces anyone, so its bit 0 carries raftmux's
		// FlagWake (a follower asking its quiesced leader to wake).
		dst.HeartbeatResponses = append(dst.HeartbeatResponses, wire.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: wireFlags(h.Flags, raftmux.FlagWake)})
	}
}

// wireFlags turns raftmux heartbeat flags into wire ones: bit0, the flag
// that travels as wire.HeartbeatQuiesce, and FlagRead. muxFlags undoes it.
func wireFlags(fl, bit0 uint8) uint8 {
	var w uint8
	if fl&bit0 != 0 {
		w |= wire.HeartbeatQuiesce
	}
	if fl&raftmux.FlagRead != 0 {
		w |= wire.HeartbeatRead
	}
	return w
}

func muxFlags(w, bit0 uint8) uint8 {
	var fl uint8
	if w&wire.HeartbeatQuiesce != 0 {
		fl |= bit0
	}
	if w&wire.HeartbeatRead != 0 {
		fl |= raftmux.FlagRead
	}
	return fl
}

// Send implements raftmux.Transport: b becomes one KindRaftBatch frame.
func (t *Transport) Send(to uint64, b *raftmux.RaftBatch) error {
	name, ok := t.names(to)
	if !ok {
		t.sendErrs.Add(1)
		return fmt.Errorf("%w: %d", ErrUnknownRaftID, to)
	}
	sb := t.get()
	toWireBatch(&sb.batch, b)
	f, start := wire.BeginFrame(sb.frame[:0], wire.KindRaftBatch, 0)
	f = wire.AppendRaftBatch(f, &sb.batch)
	f, err := wire.EndFrame(f, start)
	sb.frame = f
	if err == nil {
		err = t.peers.Send(name, f)
	}
	t.put(sb)
	if err != nil {
		t.sendErrs.Add(1)
		return fmt.Errorf("raftio: raft batch to %s: %w", name, err)
	}
	t.framesOut.Add(1)
	t.bytesOut.Add(uint64(len(f)))
	return nil
}

// SendSnapshotChunk implements raftmux.Transport. A chunk travels as a
// wire.SnapshotChunk whose fields carry raftmux's stream: Index is the
// stream id, Offset the chunk's sequence number, Term the codec. Data
// starts with a uvarint length and, on the first chunk, that many bytes of
// a one-message RaftBatch holding the MsgSnap; the chunk's data follows.
func (t *Transport) SendSnapshotChunk(to uint64, c *raftmux.SnapshotChunk) error {
	name, ok := t.names(to)
	if !ok {
		t.chunkErrs.Add(1)
		return fmt.Errorf("%w: %d", ErrUnknownRaftID, to)
	}
	var head []byte
	if c.Msg != nil {
		var one wire.RaftBatch
		one.Messages = make([]wire.ShardMessage, 1)
		one.Messages[0].Shard = c.Shard
		one.Messages[0].Msg = *c.Msg
		head = wire.AppendRaftBatch(nil, &one)
	}
	data := binary.AppendUvarint(make([]byte, 0, len(head)+len(c.Data)+10), uint64(len(head)))
	data = append(data, head...)
	data = append(data, c.Data...)
	wc := wire.SnapshotChunk{Shard: c.Shard, Index: c.ID, Term: uint64(c.Codec), Offset: uint64(c.Seq), Last: c.Last, Data: data}
	f, start := wire.BeginFrame(nil, wire.KindSnapshotChunk, 0)
	f = wire.AppendSnapshotChunk(f, &wc)
	f, err := wire.EndFrame(f, start)
	if err == nil {
		err = t.peers.Send(name, f)
	}
	if err != nil {
		t.chunkErrs.Add(1)
		return fmt.Errorf("raftio: snapshot chunk to %s: %w", name, err)
	}
	t.chunksOut.Add(1)
	t.bytesOut.Add(uint64(len(f)))
	return nil
}

// DecodeRaftBatch turns a KindRaftBatch frame's payload into a batch for
// Host.Deliver. The messages come from a fresh decode whose memory is never
// reused, since raft keeps pointers into what it is stepped with; their
// byte fields alias payload, which must not be reused either. Inbound
// decodes with a decoder instead, which amortizes the allocations.
func DecodeRaftBatch(payload []byte) (*raftmux.RaftBatch, error) {
	var d decoder
	rb, err := d.decode(payload)
	if err != nil {
		return nil, err
	}
	out := *rb
	return &out, nil
}

// msgSlabChunk is how many raft messages a decoder allocates at once.
const msgSlabChunk = 64

// decoder decodes RaftBatch payloads for one goroutine. The batch it
// returns, and its slices, are overwritten by the next decode: Host.Deliver
// copies what it keeps out of them before returning. The messages the
// batch points to are never reused (raft keeps them): they are carved from
// chunks of msgSlabChunk, and wire.DecodeRaftBatch carves what they point
// to from its own slabs, so a steady stream of small batches allocates a
// fraction of an object per message.
type decoder struct {
	wb   wire.RaftBatch
	rb   raftmux.RaftBatch
	msgs []raftpb.Message
}

func (d *decoder) decode(payload []byte) (*raftmux.RaftBatch, error) {
	if err := wire.DecodeRaftBatch(payload, &d.wb); err != nil {
		return nil, err
	}
	rb := &d.rb
	rb.Reset()
	for i := range d.wb.Messages {
		if len(d.msgs) == 0 {
			d.msgs = make([]raftpb.Message, max(msgSlabChunk, len(d.wb.Messages)-i))
		}
		m := &d.msgs[0]
		d.msgs = d.msgs[1:]
		*m = d.wb.Messages[i].Msg
		rb.Messages = append(rb.Messages, raftmux.ShardMessage{Shard: d.wb.Messages[i].Shard, Msg: m})
	}
	for _, h := range d.wb.Heartbeats {
		rb.Heartbeats = append(rb.Heartbeats, raftmux.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: muxFlags(h.Flags, raftmux.FlagQuiesce)})
	}
	for _, h := range d.wb.HeartbeatResponses {
		rb.HeartbeatResponses = append(rb.HeartbeatResponses, raftmux.Heartbeat{Shard: h.Shard, Term: h.Term, Commit: h.Commit, Flags: muxFlags(h.Flags, raftmux.FlagWake)})
	}
	// What the wire batch's values point to is never handed out again, but
	// its Messages array is overwritten by the next decode: drop the
	// references now so it pins nothing meanwhile.
	clear(d.wb.Messages)
	return rb, nil
}

// DecodeSnapshotChunk turns a KindSnapshotChunk frame's payload into a
// chunk for Host.DeliverSnapshotChunk (see Transport.SendSnapshotChunk for
// the layout). Malformed framing is ErrBadChunk.
func DecodeSnapshotChunk(payload []byte) (*raftmux.SnapshotChunk, error) {
	var wc wire.SnapshotChunk
	if err := wire.DecodeSnapshotChunk(payload, &wc); err != nil {
		return nil, err
	}
	if wc.Term > 255 || wc.Offset > 1<<32-1 {
		return nil, ErrBadChunk
	}
	n, k := binary.Uvarint(wc.Data)
	if k <= 0 || n > uint64(len(wc.Data)-k) {
		return nil, ErrBadChunk
	}
	c := &raftmux.SnapshotChunk{Shard: wc.Shard, ID: wc.Index, Seq: uint32(wc.Offset), Last: wc.Last, Codec: uint8(wc.Term)}
	if n > 0 {
		rb, err := DecodeRaftBatch(wc.Data[k : k+int(n)])
		if err != nil {
			return nil, err
		}
		if len(rb.Messages) != 1 {
			return nil, ErrBadChunk
		}
		c.Msg = rb.Messages[0].Msg
	}
	c.Data = append([]byte(nil), wc.Data[k+int(n):]...)
	return c, nil
}
