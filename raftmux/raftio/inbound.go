package raftio

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// Receiver is what inbound raft traffic is handed to; *raftmux.Host is one.
type Receiver interface {
	Deliver(from uint64, b *raftmux.RaftBatch)
	DeliverSnapshotChunk(from uint64, c *raftmux.SnapshotChunk)
}

var _ Receiver = (*raftmux.Host)(nil)

// DefaultInboundFrames and DefaultInboundBytes are InboundConfig's
// QueueFrames and QueueBytes defaults.
const (
	DefaultInboundFrames = 4096
	DefaultInboundBytes  = 64 << 20
)

// InboundConfig configures an Inbound. Zero fields take the documented
// defaults.
type InboundConfig struct {
	// Receiver gets every decoded batch and chunk. Required.
	Receiver Receiver
	// RaftID maps a peer's node name (netio.Conn.Node) to its raft id.
	// Required.
	RaftID func(node string) uint64
	// QueueFrames bounds the frames copied off the event loops and waiting
	// to be decoded; past it Offer refuses (netio drops and counts the
	// frame; raft retransmits). Default DefaultInboundFrames.
	QueueFrames int
	// QueueBytes bounds the bytes of those frames together, so that
	// QueueFrames frames of the largest size cannot pile up; past it Offer
	// refuses too. A frame is taken whatever its size when the queue is
	// empty. Default DefaultInboundBytes.
	QueueBytes int
	// Logger receives undecodable frames, at debug level (they are
	// counted: see BadFrames). Default slog.Default().
	Logger *slog.Logger
}

// ErrInvalidConfig: an InboundConfig misses a required field or has a
// negative limit.
var ErrInvalidConfig = errors.New("raftio: invalid config")

// inboundFrame is a copied peer frame waiting to be decoded.
type inboundFrame struct {
	from  string
	h     wire.Header
	frame []byte
}

// Inbound receives raft frames from peers: Offer (on a netio event loop)
// copies a frame onto a bounded queue; Run, on a goroutine its owner starts
// and stops through the context, decodes each and hands it to the
// Receiver. Frames of one peer keep their order.
type Inbound struct {
	cfg    InboundConfig
	q      chan inboundFrame
	queued atomic.Int64 // bytes of the frames in q
	badIn  atomic.Uint64
	dec    decoder // Run's
}

// BadFrames counts the frames that did not decode (dropped). A peer can
// send any number of them, so they are logged at debug level only.
func (in *Inbound) BadFrames() uint64 { return in.badIn.Load() }

func (in *Inbound) bad(msg string, args ...any) {
	in.badIn.Add(1)
	in.cfg.Logger.Debug(msg, args...)
}

// NewInbound validates cfg and returns an Inbound; nothing runs until Run.
func NewInbound(cfg InboundConfig) (*Inbound, error) {
	switch {
	case cfg.Receiver == nil || cfg.RaftID == nil:
		return nil, errors.Join(ErrInvalidConfig, errors.New("Receiver and RaftID are required"))
	case cfg.QueueFrames < 0 || cfg.QueueBytes < 0:
		return nil, errors.Join(ErrInvalidConfig, errors.New("negative QueueFrames or QueueBytes"))
	}
	if cfg.QueueFrames == 0 {
		cfg.QueueFrames = DefaultInboundFrames
	}
	if cfg.QueueBytes == 0 {
		cfg.QueueBytes = DefaultInboundBytes
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Inbound{cfg: cfg, q: make(chan inboundFrame, cfg.QueueFrames)}, nil
}

// IsRaftFrame reports whether a frame of kind k belongs to an Inbound.
func IsRaftFrame(k wire.Kind) bool {
	return k == wire.KindRaftBatch || k == wire.KindSnapshotChunk
}

// Offer copies frame (header and payload, as netio delivers it) from peer
// node from onto the queue; false when the queue is full or the frame is
// not a raft frame. It never blocks.
func (in *Inbound) Offer(from string, h wire.Header, frame []byte) bool {
	if !IsRaftFrame(h.Kind) || len(frame) < wire.HeaderSize {
		return false
	}
	n := int64(len(frame))
	if q := in.queued.Add(n); q > int64(in.cfg.QueueBytes) && q != n {
		in.queued.Add(-n)
		return false
	}
	select {
	case in.q <- inboundFrame{from: from, h: h, frame: append([]byte(nil), frame...)}:
		return true
	default:
		in.queued.Add(-n)
		return false
	}
}

// Deliver implements netio.Handler for a transport that carries nothing
// but raft traffic: raft frames from peers are offered, anything else is
// refused.
func (in *Inbound) Deliver(c *netio.Conn, h wire.Header, frame []byte) bool {
	if c.Role() != wire.RolePeer {
		return false
	}
	return in.Offer(c.Node(), h, frame)
}

// Len is the number of frames waiting to be decoded.
func (in *Inbound) Len() int { return len(in.q) }

// Run decodes queued frames and hands them to the Receiver until ctx is
// done. Frames still queued then are dropped.
func (in *Inbound) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case f := <-in.q:
			in.queued.Add(-int64(len(f.frame)))
			in.handle(&f)
		}
	}
}

// Drain decodes the frames queued when it is called and hands them to the
// Receiver on the caller's goroutine, instead of Run: a caller that runs
// its own worker when frames are queued. It returns how many it took and
// must not run beside Run or another Drain.
func (in *Inbound) Drain() int {
	k := len(in.q)
	for i := range k {
		select {
		case f := <-in.q:
			in.queued.Add(-int64(len(f.frame)))
			in.handle(&f)
		default:
			return i
		}
	}
	return k
}

// Handle decodes a raft frame from peer from and hands it to the Receiver
// now, on the caller's goroutine, instead of queueing it for Run (a
// caller that drives the host itself). It must not run beside Run.
func (in *Inbound) Handle(from string, h wire.Header, frame []byte) {
	if !IsRaftFrame(h.Kind) || len(frame) < wire.HeaderSize {
		return
	}
	in.handle(&inboundFrame{from: from, h: h, frame: append([]byte(nil), frame...)})
}

func (in *Inbound) handle(f *inboundFrame) {
	// A compressed payload is decompressed into a buffer of its own: the
	// decoded messages alias it and raft keeps them.
	payload, _, err := wire.FramePayload(&f.h, f.frame[wire.HeaderSize:], nil)
	if err != nil {
		in.bad("raftio: bad raft frame", "from", f.from, "err", err)
		return
	}
	from := in.cfg.RaftID(f.from)
	if f.h.Kind == wire.KindRaftBatch {
		rb, err := in.dec.decode(payload)
		if err != nil {
			in.bad("raftio: bad raft batch", "from", f.from, "err", err)
			return
		}
		in.cfg.Receiver.Deliver(from, rb)
		return
	}
	c, err := DecodeSnapshotChunk(payload)
	if err != nil {
		in.bad("raftio: bad snapshot chunk", "from", f.from, "err", err)
		return
	}
	in.cfg.Receiver.DeliverSnapshotChunk(from, c)
}
