package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// ownedPrefix keys, in the node's local slot, the topics this node was told
// to own: "o" + topic → epoch(8) partitions(4) shard(8).
var ownedPrefix = []byte("o")

type heldTopic struct {
	epoch      uint64
	partitions uint32
	shard      uint64
	// confirmed: a shard leader opened the topic during this life of the
	// node, or confirmed it with a linearizable lookup. A topic loaded from
	// disk at start, or held when this node learned it was declared dead,
	// is not served until then: its owner may have moved meanwhile while
	// the CloseTopic could not reach this node.
	confirmed bool
}

// owned is the set of topics this node serves data for, each at the epoch
// its shard leader opened it at. Persisted, so a restart keeps serving them
// until a leader closes them.
type owned struct {
	mu     sync.RWMutex
	topics map[string]heldTopic
}

func (o *owned) init() { o.topics = make(map[string]heldTopic) }

func (o *owned) load(s *shardstore.Store) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var bad error
	err := s.Iterate(localShard, ownedPrefix, func(k, v []byte) bool {
		if len(v) != 20 {
			bad = fmt.Errorf("node: owned topic %q: %w", k[1:], shardstore.ErrCorrupt)
			return false
		}
		o.topics[string(k[1:])] = heldTopic{epoch: binary.BigEndian.Uint64(v), partitions: binary.BigEndian.Uint32(v[8:]), shard: binary.BigEndian.Uint64(v[12:])}
		return true
	})
	if err != nil {
		return fmt.Errorf("node: load owned topics: %w", err)
	}
	return bad
}

func (o *owned) get(topic []byte) (heldTopic, bool) {
	o.mu.RLock()
	h, ok := o.topics[string(topic)]
	o.mu.RUnlock()
	return h, ok
}

// unconfirm marks every held topic as needing confirmation.
func (o *owned) unconfirm() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for k, h := range o.topics {
		h.confirmed = false
		o.topics[k] = h
	}
}

// unconfirmed returns up to limit held topics awaiting confirmation.
func (o *owned) unconfirmed(limit int) map[string]heldTopic {
	o.mu.RLock()
	defer o.mu.RUnlock()
	out := make(map[string]heldTopic)
	for k, h := range o.topics {
		if !h.confirmed {
			out[k] = h
			if len(out) == limit {
				break
			}
		}
	}
	return out
}

func (o *owned) confirm(topic string, epoch uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if h, ok := o.topics[topic]; ok && h.epoch == epoch {
		h.confirmed = true
		o.topics[topic] = h
	}
}

func (o *owned) count() int {
	o.mu.RLock()
	defer o.mu.RUnlock()
	return len(o.topics)
}

// open records topic at epoch unless a newer epoch is held; it returns the
// epoch now held.
func (n *Node) openTopic(m *wire.OpenTopic) (uint64, error) {
	o := &n.owned
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.topics[string(m.Topic)]
	if ok && (cur.epoch > m.Epoch || (cur.epoch == m.Epoch && cur.partitions == m.Partitions)) {
		if cur.epoch == m.Epoch && !cur.confirmed {
			cur.confirmed = true
			o.topics[string(m.Topic)] = cur
		}
		return cur.epoch, nil
	}
	h := heldTopic{epoch: m.Epoch, partitions: m.Partitions, shard: m.Shard, confirmed: true}
	v := binary.BigEndian.AppendUint64(nil, h.epoch)
	v = binary.BigEndian.AppendUint32(v, h.partitions)
	v = binary.BigEndian.AppendUint64(v, h.shard)
	b := n.store.NewBatch()
	b.Put(localShard, append(append([]byte(nil), ownedPrefix...), m.Topic...), v)
	if err := b.Commit(true); err != nil {
		return 0, err
	}
	o.topics[string(m.Topic)] = h
	return h.epoch, nil
}

// closeTopic forgets topic if held at an epoch up to m.Epoch; it returns
// the epoch still held (0: none).
func (n *Node) closeTopic(m *wire.CloseTopic) (uint64, error) {
	o := &n.owned
	o.mu.Lock()
	defer o.mu.Unlock()
	cur, ok := o.topics[string(m.Topic)]
	if !ok {
		return 0, nil
	}
	if cur.epoch > m.Epoch {
		return cur.epoch, nil
	}
	b := n.store.NewBatch()
	b.Delete(localShard, append(append([]byte(nil), ownedPrefix...), m.Topic...))
	if err := b.Commit(true); err != nil {
		return cur.epoch, err
	}
	delete(o.topics, string(m.Topic))
	return 0, nil
}

// maxConfirmsPerRound bounds the lookups one reconcile round spends on
// confirming held topics.
const maxConfirmsPerRound = 256

// confirmHeld asks each unconfirmed held topic's shard leader (a
// linearizable lookup through the normal request path) whether this node
// still owns it at that epoch: confirmed, it is served again; owned by
// another node or at another epoch, it is closed here.
func (n *Node) confirmHeld() {
	for topic, h := range n.owned.unconfirmed(maxConfirmsPerRound) {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.RequestTimeout)
		n.confirmOne(ctx, topic, h)
		cancel()
		if n.ctx.Err() != nil {
			return
		}
	}
}

// confirmOne asks the shard leader about one held topic (see confirmHeld).
func (n *Node) confirmOne(ctx context.Context, topic string, h heldTopic) {
	kind, out := n.handle(ctx, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic), Linearizable: true}), 0)
	n.log.Debug("confirm held topic", "topic", topic, "epoch", h.epoch, "answer", kind)
	switch kind {
	case wire.KindAssignment:
		var a wire.Assignment
		if wire.DecodeAssignment(out, &a) != nil {
			return
		}
		if string(a.Owner) == n.cfg.ID && a.Epoch == h.epoch {
			n.owned.confirm(topic, h.epoch)
			return
		}
		if a.Epoch > h.epoch || string(a.Owner) != n.cfg.ID {
			_, _ = n.closeTopic(&wire.CloseTopic{Topic: []byte(topic), Epoch: max(a.Epoch, h.epoch), Shard: h.shard})
		}
	case wire.KindError:
		var e wire.Error
		if wire.DecodeError(out, &e) == nil && e.Code == wire.CodeNotFound {
			_, _ = n.closeTopic(&wire.CloseTopic{Topic: []byte(topic), Epoch: h.epoch, Shard: h.shard})
		}
	}
}

// servable returns the topic held at epoch, confirming it first (a
// linearizable lookup) if it was loaded unconfirmed.
func (n *Node) servable(ctx context.Context, topic []byte, epoch uint64) (heldTopic, bool) {
	h, ok := n.owned.get(topic)
	if ok && h.epoch == epoch && !h.confirmed {
		n.confirmOne(ctx, string(topic), h)
		h, ok = n.owned.get(topic)
	}
	return h, ok && h.epoch == epoch && h.confirmed
}

// rpc is an OpenTopic or CloseTopic a shard leader owes a node, resent until
// acknowledged (or the node is dead).
type rpc struct {
	node       string
	open       bool
	topic      string
	epoch      uint64
	partitions uint32
	shard      uint64
	reqID      uint64
	sent       bool
}

// ownership holds the RPCs owed, one per (node, topic): a newer effect for
// the same pair replaces the older.
type ownership struct {
	mu      sync.Mutex
	pending map[string]*rpc // node + "\x00" + topic
	byReq   map[uint64]string
	nextReq atomic.Uint64
	// duty: shards whose leadership this node just took, which owe every
	// topic's OpenTopic (and CloseTopic to previous owners).
	duty map[uint64]bool
	kick chan struct{}
}

func (w *ownership) init() {
	w.pending = make(map[string]*rpc)
	w.byReq = make(map[uint64]string)
	w.duty = make(map[uint64]bool)
	w.kick = make(chan struct{}, 1)
	w.nextReq.Store(1 << 62)
}

func (w *ownership) leaderDutyDue(shard uint64) {
	w.mu.Lock()
	w.duty[shard] = true
	w.mu.Unlock()
}

func (w *ownership) takeDuties() []uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]uint64, 0, len(w.duty))
	for s := range w.duty {
		out = append(out, s)
	}
	clear(w.duty)
	return out
}

func (w *ownership) add(r *rpc) *rpc {
	key := r.node + "\x00" + r.topic
	w.mu.Lock()
	defer w.mu.Unlock()
	if old := w.pending[key]; old != nil {
		if old.epoch > r.epoch {
			return nil
		}
		delete(w.byReq, old.reqID)
	}
	r.reqID = w.nextReq.Add(1)
	w.pending[key] = r
	w.byReq[r.reqID] = key
	return r
}

func (w *ownership) ack(reqID uint64) {
	w.mu.Lock()
	if key, ok := w.byReq[reqID]; ok {
		delete(w.byReq, reqID)
		delete(w.pending, key)
	}
	w.mu.Unlock()
}

func (w *ownership) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.pending)
}

// fresh returns the pending RPCs never sent, marking them sent.
func (w *ownership) fresh() []rpc {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []rpc
	for _, r := range w.pending {
		if !r.sent {
			r.sent = true
			out = append(out, *r)
		}
	}
	return out
}

// due returns the pending RPCs, dropping those to nodes for which drop says so.
func (w *ownership) due(drop func(node string) bool) []rpc {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]rpc, 0, len(w.pending))
	for key, r := range w.pending {
		if drop(r.node) {
			delete(w.pending, key)
			delete(w.byReq, r.reqID)
			continue
		}
		r.sent = true
		out = append(out, *r)
	}
	return out
}

// onEffects runs on a raftmux worker after a shard applied commands: only
// the shard's leader owes the RPCs.
func (n *Node) onEffects(shard uint64, effs []meta.Effect) {
	if shard >= uint64(n.cfg.Shards) || !n.led[shard].Load() {
		return
	}
	added := false
	for _, e := range effs {
		r := &rpc{node: e.Node, open: e.Kind == meta.EffectOpen, topic: e.Topic, epoch: e.Epoch, partitions: e.Partitions, shard: shard}
		added = n.rpcs.add(r) != nil || added
	}
	if added {
		select {
		case n.rpcs.kick <- struct{}{}:
		default:
		}
	}
}

// ownershipLoop sends the ownership RPCs owed as soon as they are added
// (off the raft worker that applied them: opening a topic on this node
// costs an fsync); the reconcile loop resends those not acknowledged.
func (n *Node) ownershipLoop() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.rpcs.kick:
		}
		for _, r := range n.rpcs.fresh() {
			n.sendRPC(&r)
		}
	}
}

// sendRPC sends one ownership RPC; the node's own topics are opened or
// closed in place.
func (n *Node) sendRPC(r *rpc) {
	if r.node == n.cfg.ID {
		var err error
		if r.open {
			_, err = n.openTopic(&wire.OpenTopic{Topic: []byte(r.topic), Epoch: r.epoch, Partitions: r.partitions, Shard: r.shard})
		} else {
			_, err = n.closeTopic(&wire.CloseTopic{Topic: []byte(r.topic), Epoch: r.epoch, Shard: r.shard})
		}
		if err == nil {
			n.rpcs.ack(r.reqID)
		}
		return
	}
	var f []byte
	var start int
	if r.open {
		f, start = wire.BeginFrame(nil, wire.KindOpenTopic, r.reqID)
		f = wire.AppendOpenTopic(f, &wire.OpenTopic{Topic: []byte(r.topic), Epoch: r.epoch, Partitions: r.partitions, Shard: r.shard})
		n.counters.opensSent.Add(1)
	} else {
		f, start = wire.BeginFrame(nil, wire.KindCloseTopic, r.reqID)
		f = wire.AppendCloseTopic(f, &wire.CloseTopic{Topic: []byte(r.topic), Epoch: r.epoch, Shard: r.shard})
		n.counters.closesSent.Add(1)
	}
	f, err := wire.EndFrame(f, start)
	if err != nil {
		return
	}
	_ = n.net.Send(r.node, f)
}
