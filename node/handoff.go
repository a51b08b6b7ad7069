package node

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Record handoff: when a topic moves with its previous owner alive (an
// assign with a new owner, a move off a silent or leaving owner), the
// OpenTopic names that owner, and the new owner pulls its records
// (RecordsPull, answered by RecordsChunk, at most maxHandoffChunkBytes of
// values each) before it serves the topic: until then its produces and
// fetches of the topic are answered Unavailable. The records keep their
// offsets and epochs, and the new owner writes above them (offsets.go).
// The chunk that ends the pull carries the topic's producer sessions,
// merged into the new owner's in the batch of its records, so that a
// produce retried at the new owner is answered with its first answer
// rather than appended again (shardstore/producers.go).
//
// The previous owner answers only once it no longer serves the topic at
// an epoch below the asker's (its Close came, or its lease on the topic
// ran out: see ended), and after every produce of the topic in flight
// there finished (produce takes the topic's gate for reading): its log no
// longer changes, and what the asker copies holds no record that is still
// to be refused and removed.
//
// A leaving node (Leave) stays up, after it stopped serving and left SWIM,
// until the new owners of its topics pulled them to the end, or
// Config.HandoffTimeout passed.
//
// A pull ends without the rest when the previous owner is declared dead by
// SWIM, when it leaves maxUnanswered pulls in a row unanswered (it left
// and closed, or cannot reach this node), when Config.HandoffTimeout has
// passed, or when this node stops holding the topic at that epoch; the new
// owner then serves what it copied.
//
// A topic the leader moved off an owner it takes for unable to answer
// (OpenTopic.PrevSilent: silent towards the leader for three lease
// lengths, or dead) is not held up for it that long: the new owner asks
// once, waiting silentPullWait, and goes on without the records if no
// answer comes; it does not ask at all while its own SWIM view does not
// count that owner alive (suspect, dead or unknown). An answer, even
// "not closed yet", shows the owner can answer after all: the pull then
// goes on as any other. Records the silent owner acknowledged and this
// node did not copy stay in that owner's log only (docs/ownership.md,
// "Records across ownership moves").
//
// A pull is not resumed after a restart of the new owner.
//
// A produce gate is kept for every topic this node was asked to write to
// (a lock and the topic's name), as the store keeps each topic's bounds.

// maxHandoffChunkBytes bounds the record values of one RecordsChunk.
const maxHandoffChunkBytes = 1 << 20

// maxHandoffs bounds the pulls that run at once; more wait their turn.
const maxHandoffs = 16

// maxUnanswered is how many pulls in a row a previous owner may leave
// unanswered (each waits a lease renewal interval, and half of one
// between two) before the new owner stops asking: a topic moved off an
// owner that cannot answer waits about 4 renewal intervals longer for it
// (half of one when the leader took that owner for silent: silentPullWait).
const maxUnanswered = 3

// silentPullWait is, in lease renewal intervals, how long the one pull
// asked of a previous owner taken for silent waits for its answer: a
// round trip between live nodes takes milliseconds, and every interval
// waited is an interval the topic cannot be written.
const silentPullWait = 0.5

// handoffWarnEvery bounds the warnings of cut handoffs to one in this
// long: a dead owner's thousands of topics are cut together, and a line
// each would cost more than the moves.
const handoffWarnEvery = time.Second

// warn logs a cut handoff, unless one was logged within
// handoffWarnEvery: then it is counted, and the next line logged says
// how many were not (handoffsCut counts them all).
func (h *handoffs) warn(n *Node, msg string, args ...any) {
	now := n.clock()
	h.warnMu.Lock()
	if !h.warnAt.IsZero() && now.Sub(h.warnAt) < handoffWarnEvery {
		h.warnQuiet++
		h.warnMu.Unlock()
		return
	}
	quiet := h.warnQuiet
	h.warnAt, h.warnQuiet = now, 0
	h.warnMu.Unlock()
	if quiet > 0 {
		args = append(args, "more_not_logged", quiet)
	}
	n.log.Warn(msg, args...)
}

// handoffs is the state of the record pulls of this node.
type handoffs struct {
	mu      sync.Mutex
	active  map[string]uint64 // topic → epoch whose records are being pulled
	waiting map[uint64]*pull  // request id → the pull waiting for its answer
	from    map[uint64]string // request id → node asked
	n       atomic.Int32      // len(active), read without the lock
	seq     uint64
	running int     // pulls started and not finished, at most maxHandoffs
	queue   []*pull // pulls waiting for one of those to finish
	enabled bool    // records are handed over (a started or driven node)
	// gates: topic → *topicGate (gate.go).
	gates sync.Map
	// leaving: while this node leaves, the topics it held (→ epoch) whose
	// records no new owner has pulled to the end yet; left is closed when
	// none is left.
	leaving map[string]uint64
	left    chan struct{}
	// warnAt: when warn last logged; warnQuiet: the warnings since.
	warnMu    sync.Mutex
	warnAt    time.Time
	warnQuiet int
}

func (h *handoffs) init() {
	h.active = make(map[string]uint64)
	h.waiting = make(map[uint64]*pull)
	h.from = make(map[uint64]string)
}

// gate returns topic's produce gate.
func (h *handoffs) gate(topic []byte) *topicGate {
	if g, ok := h.gates.Load(string(topic)); ok {
		return g.(*topicGate)
	}
	g, _ := h.gates.LoadOrStore(string(topic), new(topicGate))
	return g.(*topicGate)
}

// pending reports whether topic's records are still being pulled.
func (h *handoffs) pending(topic []byte) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.active[string(topic)]
	return ok
}

// mark marks topic's records at epoch as being pulled, before the topic is
// held at epoch; it reports false on a node that does not hand records
// over (not started).
func (h *handoffs) mark(topic string, epoch uint64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.enabled {
		return false
	}
	if _, ok := h.active[topic]; !ok {
		h.n.Add(1)
	}
	h.active[topic] = epoch
	return true
}

// unmark ends what mark began for topic at epoch.
func (h *handoffs) unmark(topic string, epoch uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.active[topic]; ok && e == epoch {
		delete(h.active, topic)
		h.n.Add(-1)
	}
}

// beginHandoff starts the pull of topic's records at epoch from prev,
// which mark announced; silent: the leader takes prev for unable to answer
// (OpenTopic.PrevSilent). The caller holds ownWrite.
//
// A pull is a small state machine driven by events, the same on a started
// node and on a driven one: each step sends one RecordsPull and arms a
// timer; the chunk that answers it, or the timer, takes the next step
// (Node.spawn). At most maxHandoffs pulls run at once; more wait in line.
func (n *Node) beginHandoff(topic string, epoch uint64, prev string, silent bool) {
	n.counters.handoffsStarted.Add(1)
	if silent {
		n.counters.handoffsSilent.Add(1)
	}
	p := &pull{n: n, topic: topic, epoch: epoch, prev: prev, silent: silent}
	h := &n.ho
	h.mu.Lock()
	if h.running >= maxHandoffs {
		h.queue = append(h.queue, p)
		h.mu.Unlock()
		return
	}
	h.running++
	h.mu.Unlock()
	n.spawn(p.start)
}

// pull is one topic's record pull from its previous owner. Its steps run
// one at a time: each is started by the one event (an answer, a timer)
// that the step before armed.
type pull struct {
	n           *Node
	topic, prev string
	epoch       uint64
	silent      bool
	chunk       uint32
	deadline    time.Time
	wait        time.Duration
	giveUp      int
	from        uint64
	unanswered  int
	finished    bool
}

// start checks that prev may answer and takes the first step. A silent
// previous owner gets one short pull, or none while SWIM here does not
// count it alive.
func (p *pull) start() {
	n := p.n
	if p.silent {
		if m, ok := n.view.Load().byID[p.prev]; !ok || m.State != swim.StateAlive {
			n.ho.warn(n, "node: previous owner silent or dead to the leader, and not alive here; serving without its records", "topic", p.topic, "from", p.prev)
			p.finish(false)
			return
		}
	}
	p.chunk = uint32(maxHandoffChunkBytes)
	if c := n.cfg.testHooks.handoffChunkBytes; c != 0 {
		p.chunk = c
	}
	p.deadline = n.clock().Add(n.cfg.HandoffTimeout)
	p.wait, p.giveUp = n.cfg.LeaseRenewInterval, maxUnanswered
	if p.silent {
		p.wait, p.giveUp = time.Duration(silentPullWait*float64(p.wait)), 1
	}
	p.step()
}

// step asks prev for the next chunk, unless the pull is over.
func (p *pull) step() {
	n := p.n
	if n.ctx.Err() != nil || !p.stillHeld() {
		p.finish(false)
		return
	}
	if v := n.view.Load(); (v.dead[p.prev] && v.byID[p.prev].State != swim.StateLeft) || p.unanswered >= p.giveUp {
		n.ho.warn(n, "node: previous owner died or stopped answering during the handoff; serving what was copied", "topic", p.topic, "from", p.prev, "at", p.from)
		p.finish(false)
		return
	}
	if !n.clock().Before(p.deadline) {
		n.ho.warn(n, "node: handoff timed out; serving what was copied", "topic", p.topic, "from", p.prev, "at", p.from)
		p.finish(false)
		return
	}
	h := &n.ho
	h.mu.Lock()
	h.seq++
	id := h.seq
	h.mu.Unlock()
	f, start := wire.BeginFrame(nil, wire.KindRecordsPull, id)
	f = wire.AppendRecordsPull(f, &wire.RecordsPull{Topic: []byte(p.topic), Epoch: p.epoch, From: p.from, MaxBytes: p.chunk})
	f, err := wire.EndFrame(f, start)
	if err != nil {
		p.finish(false)
		return
	}
	// Once the pull waits for its answer, that answer may step it on
	// another goroutine: from here on nothing reads its fields.
	wait, prev := p.wait, p.prev
	h.mu.Lock()
	h.waiting[id] = p
	h.from[id] = prev
	h.mu.Unlock()
	if err := n.net.Send(prev, f); err != nil {
		if h.take(id) != nil {
			p.unanswered++
			p.later(p.wait / 2)
		}
		return
	}
	// The answer and this timer race for the pull (take): a timer that
	// loses does nothing.
	n.after(wait, func() {
		if h.take(id) != nil {
			n.spawn(p.timedOut)
		}
	})
}

func (p *pull) stillHeld() bool {
	t, ok := p.n.holding(p.topic)
	return ok && t == p.epoch
}

// timedOut: the RecordsPull in flight got no answer in time.
func (p *pull) timedOut() {
	p.unanswered++
	if p.unanswered < p.giveUp {
		p.later(p.wait / 2)
		return
	}
	p.step()
}

// later takes the next step after d.
func (p *pull) later(d time.Duration) {
	p.n.after(d, func() { p.n.spawn(p.step) })
}

// answered takes prev's chunk c.
func (p *pull) answered(c *wire.RecordsChunk) {
	n := p.n
	if p.unanswered = 0; p.silent {
		// It answered: it can, after all; pull as from any owner.
		p.silent, p.wait, p.giveUp = false, n.cfg.LeaseRenewInterval, maxUnanswered
	}
	if c.Status == wire.HandoffNotClosed {
		p.later(p.wait / 2)
		return
	}
	if !p.stillHeld() {
		p.finish(false)
		return
	}
	recs := make([]shardstore.Record, len(c.Records))
	for i, r := range c.Records {
		recs[i] = shardstore.Record{Offset: r.Offset, Epoch: r.Epoch, Value: r.Value}
	}
	if mutant.On(mutant.HandoffShort) && len(recs) > 0 {
		recs = recs[:len(recs)-1]
	}
	if len(recs) > 0 || len(c.Producers) > 0 {
		if err := n.store.PutRecords([]byte(p.topic), recs, c.Producers); err != nil {
			n.log.Error("node: handoff: store records", "topic", p.topic, "err", err)
			p.later(p.wait)
			return
		}
		n.counters.handoffRecords.Add(uint64(len(recs)))
	}
	if c.Next >= c.End || (len(recs) == 0 && c.Next <= p.from) {
		p.finish(true)
		return
	}
	p.from = c.Next
	p.step()
}

// finish ends the pull (complete: every record came over) and starts the
// next one waiting in line.
func (p *pull) finish(complete bool) {
	if p.finished {
		return
	}
	p.finished = true
	n := p.n
	h := &n.ho
	h.unmark(p.topic, p.epoch)
	if !complete {
		n.counters.handoffsCut.Add(1)
	}
	if f := n.cfg.OnHandoff; f != nil {
		f(p.topic, p.epoch, p.prev, complete)
	}
	h.mu.Lock()
	var next *pull
	if len(h.queue) > 0 {
		next = h.queue[0]
		h.queue[0] = nil
		h.queue = h.queue[1:]
	} else {
		h.running--
	}
	h.mu.Unlock()
	if next != nil {
		n.spawn(next.start)
	}
}

// take removes and returns the pull waiting for the answer to request id
// (nil if none): the answer and the time-out race for it, and one wins.
func (h *handoffs) take(id uint64) *pull {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.waiting[id]
	delete(h.waiting, id)
	delete(h.from, id)
	return p
}

// holding returns the epoch this node holds topic at.
func (n *Node) holding(topic string) (uint64, bool) {
	n.ownMu.RLock()
	defer n.ownMu.RUnlock()
	t, ok := n.own.Get([]byte(topic))
	return t.Epoch, ok
}

// takeRecordsChunk hands a RecordsChunk from node from to the pull that
// asked for it.
func (n *Node) takeRecordsChunk(from string, h wire.Header, frame []byte) {
	payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil)
	if err != nil {
		return
	}
	c := new(wire.RecordsChunk)
	if wire.DecodeRecordsChunk(append([]byte(nil), payload...), c) != nil {
		return
	}
	n.ho.mu.Lock()
	asked := n.ho.from[h.RequestID] == from
	n.ho.mu.Unlock()
	if !asked {
		return
	}
	if p := n.ho.take(h.RequestID); p != nil {
		n.spawn(func() { p.answered(c) })
	}
}

// serveRecordsPull answers a new owner's RecordsPull with a chunk of this
// node's log of the topic, once this node no longer holds the topic below
// the asker's epoch and its produces in flight finished.
func (n *Node) serveRecordsPull(c Conn, h wire.Header, payload []byte) {
	var m wire.RecordsPull
	if wire.DecodeRecordsPull(payload, &m) != nil || m.Epoch == 0 {
		return
	}
	if hook := n.cfg.testHooks.answerPull; hook != nil && !hook(string(m.Topic)) {
		return
	}
	if e, ok := n.holding(string(m.Topic)); ok && e < m.Epoch && !n.ended(m.Topic, e) {
		n.sendRecordsChunk(c, h.RequestID, &wire.RecordsChunk{Topic: m.Topic, Status: wire.HandoffNotClosed})
		return
	}
	// The log is read once the produces in flight have answered; the
	// frame's bytes may be reused by then.
	m.Topic = bytes.Clone(m.Topic)
	reqID := h.RequestID
	n.ho.gate(m.Topic).await(func() {
		res := wire.RecordsChunk{Topic: m.Topic}
		maxBytes := int(min(m.MaxBytes, maxHandoffChunkBytes))
		next, err := n.store.ReadRecords(m.Topic, m.From, max(maxBytes, 1), func(off, epoch uint64, v []byte) bool {
			res.Records = append(res.Records, wire.Record{Offset: off, Epoch: epoch, Value: append([]byte(nil), v...)})
			return len(res.Records) < wire.MaxRecordsPerProduce
		})
		hw, herr := n.store.HighWatermark(m.Topic)
		switch {
		case errors.Is(err, shardstore.ErrOffsetOutOfRange) && herr == nil && m.From > hw:
			res.Next, res.End = m.From, hw // nothing beyond what the asker has
		case err != nil || herr != nil:
			return // the asker asks again
		default:
			res.Next, res.End = next, max(hw, next)
		}
		if res.Next >= res.End {
			// The last chunk: the topic's producer sessions go with it.
			ps, err := n.store.Producers(m.Topic)
			if err != nil {
				return // the asker asks again
			}
			res.Producers = ps
			n.handedOver(string(m.Topic), m.Epoch)
		}
		n.sendRecordsChunk(c, reqID, &res)
	})
}

func (n *Node) sendRecordsChunk(c Conn, reqID uint64, res *wire.RecordsChunk) {
	f, start := wire.BeginFrame(nil, wire.KindRecordsChunk, reqID)
	f = wire.AppendRecordsChunk(f, res)
	if f, err := wire.EndFrame(f, start); err == nil {
		_ = c.Write(f)
	}
}

// ended reports whether this node's hold of topic at epoch, which a new
// owner at a higher epoch asks it to hand over, is over as surely as a
// Close would end it: it gave up every topic (it is leaving), or no
// unexpired lease covers the topic at epoch. A lease that ran out is never
// renewed for that epoch: the asker's OpenTopic left its leader only after
// the move was applied and every grant that could cover the epoch ran out
// (the fences), and no leader grants it again once the move is applied.
// So an owner cut off from its leader (whose Close cannot reach it) hands
// its records over as soon as its lease has lapsed, instead of keeping
// the new owner waiting for the Close until the cut heals.
func (n *Node) ended(topic []byte, epoch uint64) bool {
	_, r := n.serveCheck(topic, epoch)
	return r == ownership.Released || r == ownership.NoLease
}

// expectHandoffs notes the topics a leaving node held, at their epochs,
// before anyone can learn that it released them: a new owner may pull a
// topic's records at once, and a pull answered before the leaving node
// waits must count too.
func (n *Node) expectHandoffs(held map[string]uint64) {
	if len(held) == 0 {
		return
	}
	h := &n.ho
	h.mu.Lock()
	h.leaving = held
	h.left = make(chan struct{})
	h.mu.Unlock()
}

// awaitHandoffs is the leaving node's wait for the new owners of the
// topics expectHandoffs noted to pull their records, bounded by ctx and
// Config.HandoffTimeout.
func (n *Node) awaitHandoffs(ctx context.Context) {
	h := &n.ho
	h.mu.Lock()
	left := h.left
	h.mu.Unlock()
	if left == nil {
		return
	}
	t := time.NewTimer(n.cfg.HandoffTimeout)
	defer t.Stop()
	select {
	case <-left:
	case <-t.C:
		h.mu.Lock()
		n.log.Warn("node: left before every topic's records were pulled", "topics", len(h.leaving))
		h.mu.Unlock()
	case <-ctx.Done():
	}
}

// handedOver notes that a new owner at epoch pulled topic's records to the
// end.
func (n *Node) handedOver(topic string, epoch uint64) {
	h := &n.ho
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.leaving[topic]; !ok || e >= epoch {
		return
	}
	delete(h.leaving, topic)
	if len(h.leaving) == 0 {
		close(h.left)
	}
}
