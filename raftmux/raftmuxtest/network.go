package raftmuxtest

import (
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
)

// Receiver is the inbound side of a host (raftmux.Host implements it).
type Receiver interface {
	Deliver(from uint64, b *raftmux.RaftBatch)
	DeliverSnapshotChunk(from uint64, c *raftmux.SnapshotChunk)
}

// ErrUnreachable: no host is registered under the destination id.
var ErrUnreachable = errors.New("raftmuxtest: node unreachable")

// Network connects hosts of one process. Every message is encoded and
// decoded on the way, as over a wire, and its bytes counted.
type Network struct {
	mu     sync.RWMutex
	hosts  map[uint64]Receiver
	filter func(from, to uint64) bool

	bytes  atomic.Int64
	frames atomic.Int64
	tuples atomic.Int64
	byType [32]atomic.Int64
}

// NewNetwork returns an empty network.
func NewNetwork() *Network { return &Network{hosts: make(map[uint64]Receiver)} }

// Register attaches a host under id; Unregister detaches it (its peers'
// sends then fail as to a dead node).
func (n *Network) Register(id uint64, r Receiver) {
	n.mu.Lock()
	n.hosts[id] = r
	n.mu.Unlock()
}

// Unregister detaches host id.
func (n *Network) Unregister(id uint64) {
	n.mu.Lock()
	delete(n.hosts, id)
	n.mu.Unlock()
}

// SetFilter installs f: a batch or chunk from→to is delivered only if f
// returns true. nil delivers everything.
func (n *Network) SetFilter(f func(from, to uint64) bool) {
	n.mu.Lock()
	n.filter = f
	n.mu.Unlock()
}

// Partition drops all traffic between the two groups of nodes.
func (n *Network) Partition(a, b []uint64) {
	n.SetFilter(func(from, to uint64) bool {
		cross := (slices.Contains(a, from) && slices.Contains(b, to)) || (slices.Contains(b, from) && slices.Contains(a, to))
		return !cross
	})
}

// Heal removes the filter.
func (n *Network) Heal() { n.SetFilter(nil) }

// Bytes and Frames count what was sent (frame header and tuple sizes as the
// wire encoding would have them).
func (n *Network) Bytes() int64 { return n.bytes.Load() }

// Frames counts batches and chunks sent.
func (n *Network) Frames() int64 { return n.frames.Load() }

// Messages counts raft messages of type t sent as messages (not tuples).
func (n *Network) Messages(t raftpb.MessageType) int64 {
	if int(t) < 0 || int(t) >= len(n.byType) {
		return 0
	}
	return n.byType[t].Load()
}

// HeartbeatTuples counts coalesced heartbeat and response tuples sent.
func (n *Network) HeartbeatTuples() int64 { return n.tuples.Load() }

// Endpoint returns the Transport of node id.
func (n *Network) Endpoint(id uint64) raftmux.Transport { return &endpoint{n: n, id: id} }

type endpoint struct {
	n  *Network
	id uint64
}

func (n *Network) route(from, to uint64) (Receiver, bool, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	r := n.hosts[to]
	if r == nil {
		return nil, false, ErrUnreachable
	}
	if n.filter != nil && !n.filter(from, to) {
		return nil, false, nil
	}
	return r, true, nil
}

const (
	frameHeaderLen = 16
	tupleLen       = 25
)

func (e *endpoint) Send(to uint64, b *raftmux.RaftBatch) error {
	r, ok, err := e.n.route(e.id, to)
	if !ok {
		return err
	}
	out := &raftmux.RaftBatch{
		Messages:           make([]raftmux.ShardMessage, 0, len(b.Messages)),
		Heartbeats:         slices.Clone(b.Heartbeats),
		HeartbeatResponses: slices.Clone(b.HeartbeatResponses),
	}
	size := frameHeaderLen + tupleLen*(len(b.Heartbeats)+len(b.HeartbeatResponses))
	var buf []byte
	for _, m := range b.Messages {
		buf = appendMarshal(buf[:0], m.Msg)
		size += 8 + 4 + len(buf)
		var dm raftpb.Message
		if err := dm.Unmarshal(buf); err != nil {
			return err
		}
		out.Messages = append(out.Messages, raftmux.ShardMessage{Shard: m.Shard, Msg: &dm})
		if t := int(dm.Type); t >= 0 && t < len(e.n.byType) {
			e.n.byType[t].Add(1)
		}
	}
	e.n.tuples.Add(int64(len(b.Heartbeats) + len(b.HeartbeatResponses)))
	e.n.bytes.Add(int64(size))
	e.n.frames.Add(1)
	r.Deliver(e.id, out)
	return nil
}

func (e *endpoint) SendSnapshotChunk(to uint64, c *raftmux.SnapshotChunk) error {
	r, ok, err := e.n.route(e.id, to)
	if !ok {
		return err
	}
	out := &raftmux.SnapshotChunk{Shard: c.Shard, ID: c.ID, Seq: c.Seq, Last: c.Last, Codec: c.Codec, Data: slices.Clone(c.Data)}
	size := frameHeaderLen + 32 + len(c.Data)
	if c.Msg != nil {
		buf := appendMarshal(nil, c.Msg)
		size += len(buf)
		var dm raftpb.Message
		if err := dm.Unmarshal(buf); err != nil {
			return err
		}
		out.Msg = &dm
	}
	e.n.bytes.Add(int64(size))
	e.n.frames.Add(1)
	r.DeliverSnapshotChunk(e.id, out)
	return nil
}
