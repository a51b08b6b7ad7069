package records

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// Record handoff: when a topic moves with its previous owner alive (an
// assign with a new owner, a move off a silent or leaving owner), the
// OpenTopic names that owner, and the new owner pulls its records
// (RecordsPull, answered by RecordsChunk, at most MaxChunkBytes of values
// each) before it serves the topic: until then its produces and fetches
// of the topic are refused with ErrHandingOver. The records keep their
// offsets and epochs, and the new owner writes above them (offsets.go).
// The chunk that ends the pull carries the topic's producer sessions,
// merged into the new owner's in the batch of its records, so that a
// produce retried at the new owner is answered with its first answer
// rather than appended again (shardstore/producers.go).
//
// The previous owner answers only once it no longer serves the topic at
// an epoch below the asker's (its Close came, or its lease on the topic
// ran out: see ended), and after every produce of the topic in flight
// there finished (a produce is inside the topic's gate): its log no
// longer changes, and what the asker copies holds no record that is still
// to be refused and removed (handover.go).
//
// A leaving node stays up, after it stopped serving and left SWIM, until
// the new owners of its topics pulled them to the end, or
// Config.HandoffTimeout passed (ExpectHandoffs, AwaitHandoffs).
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

// MaxChunkBytes bounds the record values of one RecordsChunk.
const MaxChunkBytes = 1 << 20

// maxHandoffs bounds the pulls that run at once; more wait their turn.
const maxHandoffs = 16

// maxUnanswered is how many pulls in a row a previous owner may leave
// unanswered (each waits Config.PullWait, a lease renewal interval, and
// half of one between two) before the new owner stops asking: a topic
// moved off an owner that cannot answer waits about 4 renewal intervals
// longer for it (half of one when the leader took that owner for silent:
// silentPullWait).
const maxUnanswered = 3

// silentPullWait is, in Config.PullWait, how long the one pull asked of a
// previous owner taken for silent waits for its answer: a round trip
// between live nodes takes milliseconds, and every interval waited is an
// interval the topic cannot be written.
const silentPullWait = 0.5

// handoffWarnEvery bounds the warnings of cut handoffs to one in this
// long: a dead owner's thousands of topics are cut together, and a line
// each would cost more than the moves.
const handoffWarnEvery = time.Second

// warn logs a cut handoff, unless one was logged within
// handoffWarnEvery: then it is counted, and the next line logged says
// how many were not (Stats.PullsCut counts them all).
func (k *Keeper) warn(msg string, args ...any) {
	h := &k.ho
	now := k.env.Now()
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
	k.cfg.Logger.Warn(msg, args...)
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

// MarkPull marks topic's records at epoch as being pulled, before the
// node holds the topic at epoch, so that no lease can let it be served
// before they came over; it reports false on a node that does not hand
// records over (not enabled). StartPull or UnmarkPull follows.
func (k *Keeper) MarkPull(topic string, epoch uint64) bool {
	h := &k.ho
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.enabled {
		return false
	}
	if _, ok := h.active[topic]; !ok {
		h.n.Add(1)
	}
	h.active[topic] = epoch
	h.checkLocked()
	return true
}

// UnmarkPull ends what MarkPull began for topic at epoch, with no pull:
// the open it was marked for did not take.
func (k *Keeper) UnmarkPull(topic string, epoch uint64) { k.ho.unmark(topic, epoch) }

func (h *handoffs) unmark(topic string, epoch uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.active[topic]; ok && e == epoch {
		delete(h.active, topic)
		h.n.Add(-1)
	}
	h.checkLocked()
}

// StartPull starts the pull of topic's records at epoch from prev, which
// MarkPull marked; silent: the leader takes prev for unable to answer
// (OpenTopic.PrevSilent). The node calls it in the order its opens are
// written (under its ownership write lock).
//
// A pull is a small state machine driven by events, the same on a started
// node and on a driven one: each step sends one RecordsPull and arms a
// timer; the chunk that answers it, or the timer, takes the next step
// (Env.Spawn). At most maxHandoffs pulls run at once; more wait in line.
func (k *Keeper) StartPull(topic string, epoch uint64, prev string, silent bool) {
	k.stats.pullsStarted.Add(1)
	if silent {
		k.stats.pullsSilent.Add(1)
	}
	p := &pull{k: k, topic: topic, epoch: epoch, prev: prev, silent: silent}
	h := &k.ho
	h.mu.Lock()
	if h.running >= maxHandoffs {
		h.queue = append(h.queue, p)
		h.checkLocked()
		h.mu.Unlock()
		return
	}
	h.running++
	h.checkLocked()
	h.mu.Unlock()
	k.env.Spawn(p.start)
}

// pull is one topic's record pull from its previous owner. Its steps run
// one at a time: each is started by the one event (an answer, a timer)
// that the step before armed.
type pull struct {
	k           *Keeper
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
	k := p.k
	if p.silent && !k.env.PeerAlive(p.prev) {
		k.warn("records: previous owner silent or dead to the leader, and not alive here; serving without its records", "topic", p.topic, "from", p.prev)
		p.finish(false)
		return
	}
	p.chunk = k.cfg.PullChunkBytes
	p.deadline = k.env.Now().Add(k.cfg.HandoffTimeout)
	p.wait, p.giveUp = k.cfg.PullWait, maxUnanswered
	if p.silent {
		p.wait, p.giveUp = time.Duration(silentPullWait*float64(p.wait)), 1
	}
	p.step()
}

// step asks prev for the next chunk, unless the pull is over.
func (p *pull) step() {
	k := p.k
	if k.env.Stopped() || !p.stillHeld() {
		p.finish(false)
		return
	}
	if k.env.PeerDead(p.prev) || p.unanswered >= p.giveUp {
		k.warn("records: previous owner died or stopped answering during the handoff; serving what was copied", "topic", p.topic, "from", p.prev, "at", p.from)
		p.finish(false)
		return
	}
	if !k.env.Now().Before(p.deadline) {
		k.warn("records: handoff timed out; serving what was copied", "topic", p.topic, "from", p.prev, "at", p.from)
		p.finish(false)
		return
	}
	h := &k.ho
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
	h.checkLocked()
	h.mu.Unlock()
	if err := k.env.Send(prev, f); err != nil {
		if h.take(id) != nil {
			p.unanswered++
			p.later(p.wait / 2)
		}
		return
	}
	// The answer and this timer race for the pull (take): a timer that
	// loses does nothing.
	k.env.After(wait, func() {
		if h.take(id) != nil {
			k.env.Spawn(p.timedOut)
		}
	})
}

func (p *pull) stillHeld() bool {
	t, ok := p.k.lease.Holding([]byte(p.topic))
	return ok && t.Epoch == p.epoch
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
	p.k.env.After(d, func() { p.k.env.Spawn(p.step) })
}

// answered takes prev's chunk c.
func (p *pull) answered(c *wire.RecordsChunk) {
	k := p.k
	if p.unanswered = 0; p.silent {
		// It answered: it can, after all; pull as from any owner.
		p.silent, p.wait, p.giveUp = false, k.cfg.PullWait, maxUnanswered
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
		if err := k.store.PutRecords([]byte(p.topic), recs, c.Producers); err != nil {
			k.cfg.Logger.Error("records: handoff: store records", "topic", p.topic, "err", err)
			p.later(p.wait)
			return
		}
		k.stats.pulledRecs.Add(uint64(len(recs)))
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
	k := p.k
	h := &k.ho
	h.unmark(p.topic, p.epoch)
	if !complete {
		k.stats.pullsCut.Add(1)
	}
	if f := k.cfg.OnHandoff; f != nil {
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
	h.checkLocked()
	h.mu.Unlock()
	if next != nil {
		k.env.Spawn(next.start)
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

// TakeChunk hands c, a RecordsChunk from node from answering request
// reqID, to the pull that asked for it; a chunk nobody asked from for
// (late, or from another node) is dropped. c is the pull's from then on.
func (k *Keeper) TakeChunk(from string, reqID uint64, c *wire.RecordsChunk) {
	h := &k.ho
	h.mu.Lock()
	asked := h.from[reqID] == from
	h.mu.Unlock()
	if !asked {
		return
	}
	if p := h.take(reqID); p != nil {
		k.env.Spawn(func() { p.answered(c) })
	}
}
