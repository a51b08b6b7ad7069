package sim

import (
	"fmt"
	"math"
	"time"

	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/wire"
)

// A client sends one request at a time, as Shoal's client protocol frames,
// to a node of its choice: metadata requests to any node, produce and
// fetch to the owner its answers so far name. What it sees is recorded
// for the checkers; requests that get no answer within opTimeout count as
// failed (their outcome is unknown).
const (
	opTimeout  = 3 * time.Second
	thinkMin   = 5 * time.Millisecond
	thinkMax   = 60 * time.Millisecond
	clientLag  = 300 * time.Microsecond
	clientLagX = 2 * time.Millisecond
)

type route struct {
	owner string
	epoch uint64
}

type client struct {
	w      *World
	id     string
	routes map[string]route
	nextID uint64
	// cur is the request in flight (nil: none).
	cur *request
	// stuck: where the side client writes (see World.side).
	stuck *stuckTo
	// sess numbers the client's writes, as the client library does: a
	// retry, or a copy the network made, repeats the write's number.
	sess *session.Writer
	// then, if set, runs once the request in flight finished (the mover's
	// second move).
	then func()
}

type stuckTo struct {
	to    *host
	topic string
	epoch uint64
}

// moveAway assigns topic to a node other than from, as a client that saw
// its owner fail would.
func (c *client) moveAway(topic string, from *host) {
	w := c.w
	to := w.hosts[(from.index+1+w.rng.IntN(len(w.hosts)-1))%len(w.hosts)]
	w.hotTarget = to
	req := &request{topic: topic, start: w.now, kind: wire.KindAssign, owner: to.id, to: w.hosts[w.rng.IntN(len(w.hosts))]}
	c.send(req, wire.AppendAssign(nil, &wire.Assign{Topic: []byte(topic), Owner: []byte(to.id)}))
}

// moveTo assigns topic to to, as an operator would.
func (c *client) moveTo(topic string, to *host) {
	w := c.w
	req := &request{topic: topic, start: w.now, kind: wire.KindAssign, owner: to.id, to: w.hosts[w.rng.IntN(len(w.hosts))]}
	c.send(req, wire.AppendAssign(nil, &wire.Assign{Topic: []byte(topic), Owner: []byte(to.id)}))
}

// stickTo sends one produce of topic at epoch to h, and keeps doing so
// while the fault that made topic hot lasts (see World.side).
func (c *client) stickTo(h *host, topic string, epoch uint64) {
	if c.cur != nil || h.down {
		return
	}
	c.stuck = &stuckTo{to: h, topic: topic, epoch: epoch}
	req := &request{topic: topic, start: c.w.now, kind: wire.KindProduce, epoch: epoch, to: h}
	req.records = [][]byte{fmt.Appendf(nil, "%s-%d", c.id, c.nextID+1)}
	c.send(req, wire.AppendProduce(nil, &wire.Produce{Topic: []byte(topic), Epoch: epoch, Records: req.records}))
}

type request struct {
	id    uint64
	kind  wire.Kind
	topic string
	to    *host
	start time.Time
	// owner is an assign's named owner; parts an assign's or update's
	// partition count; lin a lookup's linearizable flag.
	owner   string
	parts   uint32
	lin     bool
	epoch   uint64   // a produce's or fetch's epoch
	records [][]byte // a produce's records
	done    bool
	// seq is a write's number in the client's session; frame its last
	// frame; retried whether it was sent again after a time-out.
	seq     session.Ticket
	frame   []byte
	retried bool
	// refused: the answer was an error that says the request did nothing
	// (not found, bad request); any other error leaves a change's outcome
	// unknown.
	refused bool
}

// clientConn is the connection a client's request reaches a node on.
type clientConn struct {
	c   *client
	req *request
}

func (cc clientConn) Write(frame []byte) error {
	f := append([]byte(nil), frame...)
	w := cc.c.w
	w.noteAnswer(cc.req.to.id, cc.req.topic, f)
	roll := w.rng.IntN(100)
	if roll < clientLoss {
		return nil // lost on its way back
	}
	lag := w.between(clientLag, clientLagX)
	if roll < clientLoss+clientLate {
		lag += w.between(0, clientLateMax)
	}
	w.after(lag, nil, func() { cc.c.answer(cc.req, f) })
	return nil
}
func (clientConn) Role() wire.Role { return wire.RoleClient }
func (clientConn) Node() string    { return "" }

// step starts the client's next request.
func (c *client) step() {
	if c.w.stopped() {
		return
	}
	w := c.w
	topic := fmt.Sprintf("topic-%d", w.rng.IntN(w.cfg.Topics))
	roll := w.rng.IntN(100)
	if h := w.cutOff; h != nil && !h.down && w.rng.IntN(2) == 0 {
		// A node cut off from the others: half the requests go to the
		// topics of the shards it led, whose new leaders change them
		// while it may still believe it leads (its linearizable lookups
		// go to it, below).
		var led []string
		for i := range w.cfg.Topics {
			t := fmt.Sprintf("topic-%d", i)
			if l, _, _ := h.node.ShardLeader(h.node.ShardOf(t)); l == h.id {
				led = append(led, t)
			}
		}
		if len(led) > 0 {
			topic = led[w.rng.IntN(len(led))]
		}
	}
	if w.hot != "" && w.rng.IntN(2) == 0 {
		// A fault cut the hot topic's owner off: half the requests go to
		// that topic, mostly writes and moves away from the owner.
		topic = w.hot
		roll = 18 + w.rng.IntN(82)
		if w.rng.IntN(6) == 0 {
			roll = 0
		}
	}
	req := &request{topic: topic, start: w.now}
	var payload []byte
	switch {
	case roll < 14:
		req.kind = wire.KindAssign
		if w.rng.IntN(2) == 0 {
			req.owner = w.hosts[w.rng.IntN(len(w.hosts))].id
		}
		if topic == w.hot && w.hotOwner != nil {
			// Away from the owner the fault cut off.
			o := w.hosts[(w.hotOwner.index+1+w.rng.IntN(len(w.hosts)-1))%len(w.hosts)]
			req.owner = o.id
			w.hotTarget = o
		}
		req.parts = uint32(w.rng.IntN(4))
		payload = wire.AppendAssign(nil, &wire.Assign{Topic: []byte(topic), Owner: []byte(req.owner), Partitions: req.parts})
	case roll < 16:
		req.kind = wire.KindUpdatePartition
		req.parts = 1 + uint32(w.rng.IntN(8))
		payload = wire.AppendUpdatePartition(nil, &wire.UpdatePartition{Topic: []byte(topic), Partitions: req.parts})
	case roll < 18:
		req.kind = wire.KindRevoke
		payload = wire.AppendRevoke(nil, &wire.Revoke{Topic: []byte(topic)})
	case roll < 30:
		req.kind = wire.KindLookup
		payload = wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic)})
	case roll < 45:
		req.kind, req.lin = wire.KindLookup, true
		payload = wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic), Linearizable: true})
	case roll < 88:
		req.kind = wire.KindProduce
		r := c.routes[topic]
		req.epoch = r.epoch
		req.records = [][]byte{fmt.Appendf(nil, "%s-%d", c.id, c.nextID+1)}
		payload = wire.AppendProduce(nil, &wire.Produce{Topic: []byte(topic), Epoch: r.epoch, Records: req.records})
	default:
		req.kind = wire.KindFetch
		r := c.routes[topic]
		req.epoch = r.epoch
		payload = wire.AppendFetch(nil, &wire.Fetch{Topic: []byte(topic), Epoch: r.epoch})
	}
	req.to = w.hosts[w.rng.IntN(len(w.hosts))]
	if h := w.cutOff; req.lin && h != nil && !h.down {
		if l, _, _ := h.node.ShardLeader(h.node.ShardOf(topic)); l == h.id {
			req.to = h
		}
	}
	if req.kind == wire.KindProduce || req.kind == wire.KindFetch {
		if r, ok := c.routes[topic]; ok {
			if h := w.byID[r.owner]; h != nil {
				req.to = h
			}
		}
		if topic == w.hot && w.hotTarget != nil && w.rng.IntN(2) == 0 {
			// A client that heard of the move away from the cut-off
			// owner writes to the node it was moved to (redirected there
			// to the new epoch by the answer if it had the old one).
			req.to = w.hotTarget
		}
	}
	c.send(req, payload)
	if w.racer != nil && w.racer.cur == nil && w.rng.IntN(4) == 0 {
		w.racer.race(req)
	}
}

// race sends, at the same instant and to the same node, a change that
// conflicts with req: both pass the leader's check against the state it
// holds when they arrive, and the one applied second must be refused by
// the state machine itself (a move and an update of partitions, two
// partition counts, a revoke and an update).
func (c *client) race(req *request) {
	w := c.w
	r := &request{topic: req.topic, start: w.now, to: req.to}
	topic := []byte(req.topic)
	var payload []byte
	switch req.kind {
	case wire.KindAssign:
		r.kind = wire.KindAssign
		r.owner = req.owner
		r.parts = 1 + (req.parts+uint32(w.rng.IntN(3)))%4
		payload = wire.AppendAssign(nil, &wire.Assign{Topic: topic, Owner: []byte(r.owner), Partitions: r.parts})
	case wire.KindUpdatePartition, wire.KindRevoke:
		r.kind = wire.KindUpdatePartition
		r.parts = 1 + uint32(w.rng.IntN(8))
		payload = wire.AppendUpdatePartition(nil, &wire.UpdatePartition{Topic: topic, Partitions: r.parts})
	default:
		return
	}
	c.send(r, payload)
}

// Faults on the clients' own frames, in percent: a request or an answer
// lost (the client times out), a request duplicated (a copy arrives
// later), a request or answer held back.
const (
	clientLoss     = 1
	clientDup      = 3
	clientLate     = 3
	clientLateMax  = 150 * time.Millisecond
	clientRetryLag = 50 * time.Millisecond
	// retryAfter: a write unanswered this long is sent again (once); a
	// request unanswered for opTimeout in all counts as failed.
	retryAfter = time.Second
)

// send frames req and delivers it to req.to after the client's lag,
// through the client faults. A write carries the client's session, so a
// copy or a retry applies once.
func (c *client) send(req *request, payload []byte) {
	if c.sess == nil {
		c.sess = session.WithID(c.w.rng.Uint64() | 1)
	}
	if isWrite(req.kind) {
		req.seq = c.sess.Begin()
		payload = stampSession(req.kind, payload, c.sess.Stamp(req.seq))
	}
	req.frame = payload
	c.cur = req
	c.transmit(req)
}

// transmit sends req's frame, under a new request id, to req.to, and
// times it out.
func (c *client) transmit(req *request) {
	w := c.w
	c.nextID++
	req.id = c.nextID
	f, start := wire.BeginFrame(nil, req.kind, req.id)
	f = append(f, req.frame...)
	f, _ = wire.EndFrame(f, start)
	to := req.to
	deliver := func() {
		to.node.DeliverFrame(clientConn{c: c, req: req}, f)
		to.wake()
	}
	if roll := w.rng.IntN(100); roll >= clientLoss {
		lag := w.between(clientLag, clientLagX)
		if roll < clientLoss+clientLate {
			lag += w.between(0, clientLateMax)
		}
		w.after(lag, to, deliver)
		if w.rng.IntN(100) < clientDup {
			w.after(lag+w.between(0, clientLateMax), to, deliver)
		}
	}
	id := req.id
	wait := opTimeout - w.now.Sub(req.start)
	if req.seq.Seq() != 0 && !req.retried {
		wait = retryAfter
	}
	w.after(wait, nil, func() {
		if req.done || req.id != id {
			return
		}
		if req.seq.Seq() != 0 && !req.retried && !w.stopped() {
			// Sent again with the same number, as the client library
			// does, to another node for a change.
			req.retried = true
			if req.kind != wire.KindProduce {
				req.to = w.hosts[w.rng.IntN(len(w.hosts))]
			}
			w.after(clientRetryLag, nil, func() {
				if !req.done {
					c.transmit(req)
				}
			})
			return
		}
		c.finish(req, history.Op{Err: "timed out", Unknown: true}, false)
	})
}

func isWrite(k wire.Kind) bool {
	return k == wire.KindAssign || k == wire.KindRevoke || k == wire.KindUpdatePartition || k == wire.KindProduce
}

// stampSession returns a write's payload with its session set.
func stampSession(k wire.Kind, payload []byte, s wire.Session) []byte {
	switch k {
	case wire.KindAssign:
		var m wire.Assign
		_ = wire.DecodeAssign(payload, &m)
		m.Session = s
		return wire.AppendAssign(nil, &m)
	case wire.KindRevoke:
		var m wire.Revoke
		_ = wire.DecodeRevoke(payload, &m)
		m.Session = s
		return wire.AppendRevoke(nil, &m)
	case wire.KindUpdatePartition:
		var m wire.UpdatePartition
		_ = wire.DecodeUpdatePartition(payload, &m)
		m.Session = s
		return wire.AppendUpdatePartition(nil, &m)
	case wire.KindProduce:
		var m wire.Produce
		_ = wire.DecodeProduce(payload, &m)
		m.Session = s
		return wire.AppendProduce(nil, &m)
	}
	return payload
}

// answer takes a node's answer to req.
func (c *client) answer(req *request, frame []byte) {
	if req.done || c.cur != req {
		return
	}
	var h wire.Header
	if wire.DecodeHeader(frame, &h) != nil || h.RequestID != req.id {
		return
	}
	payload := frame[wire.HeaderSize:]
	op := history.Op{Node: req.to.id}
	switch h.Kind {
	case wire.KindError:
		var e wire.Error
		if wire.DecodeError(payload, &e) == nil {
			op.Err = fmt.Sprintf("%v: %s", e.Code, e.Message)
			op.NotFound = e.Code == wire.CodeNotFound
			req.refused = e.Code == wire.CodeNotFound || e.Code == wire.CodeBadRequest
			if e.Code == wire.CodeNotLeaderForTopic {
				if len(e.NodeID) > 0 && e.Epoch > c.routes[req.topic].epoch {
					c.routes[req.topic] = route{owner: string(e.NodeID), epoch: e.Epoch}
				} else {
					delete(c.routes, req.topic)
				}
			}
			if e.Code == wire.CodeNotFound && req.kind == wire.KindLookup && req.lin {
				c.w.lin.add(req.topic, linOp{kind: linLookup, found: false}, req.start, c.w.now, true)
			}
			if e.Code == wire.CodeNotFound && req.kind == wire.KindRevoke {
				c.w.lin.add(req.topic, linOp{kind: linRevoke, found: false}, req.start, c.w.now, true)
			}
			if req.kind == wire.KindUpdatePartition {
				switch e.Code {
				case wire.CodeNotFound:
					c.w.lin.add(req.topic, linOp{kind: linUpdate, parts: req.parts, found: false}, req.start, c.w.now, true)
				case wire.CodeBadRequest:
					c.w.lin.add(req.topic, linOp{kind: linUpdate, parts: req.parts, found: true, refused: true}, req.start, c.w.now, true)
				}
			}
		}
		c.finish(req, op, false)
		return
	case wire.KindAssignment:
		var a wire.Assignment
		if wire.DecodeAssignment(payload, &a) != nil {
			return
		}
		if w := c.w; w.cutAfterAnswer && req.kind != wire.KindLookup && w.now.Before(w.slowDisks) && !w.quiet &&
			w.shardLeader(req.topic) == w.fastDisk.id {
			w.cutAfter(req.topic)
		}
		c.routes[req.topic] = route{owner: string(a.Owner), epoch: a.Epoch}
		if a.Epoch >= c.w.owners[req.topic].epoch {
			c.w.owners[req.topic] = route{owner: string(a.Owner), epoch: a.Epoch}
		}
		op.Epoch = a.Epoch
		switch {
		case req.kind == wire.KindAssign:
			c.w.lin.add(req.topic, linOp{kind: linAssign, owner: req.owner, parts: req.parts, found: true, gotOwner: string(a.Owner), gotParts: a.Partitions, epoch: a.Epoch}, req.start, c.w.now, true)
		case req.kind == wire.KindUpdatePartition:
			c.w.lin.add(req.topic, linOp{kind: linUpdate, parts: req.parts, found: true, gotOwner: string(a.Owner), gotParts: a.Partitions, epoch: a.Epoch}, req.start, c.w.now, true)
		case req.lin:
			c.w.lin.add(req.topic, linOp{kind: linLookup, found: true, gotOwner: string(a.Owner), gotParts: a.Partitions, epoch: a.Epoch}, req.start, c.w.now, true)
		}
	case wire.KindRevoked:
		var r wire.Revoked
		if wire.DecodeRevoked(payload, &r) != nil {
			return
		}
		delete(c.routes, req.topic)
		op.Epoch = r.Epoch
		c.w.lin.add(req.topic, linOp{kind: linRevoke, found: true, epoch: r.Epoch}, req.start, c.w.now, true)
	case wire.KindProduceAck:
		var a wire.ProduceAck
		if wire.DecodeProduceAck(payload, &a) != nil {
			return
		}
		op.Epoch, op.Offset = a.Epoch, a.Offset
		for i, v := range req.records {
			op.Records = append(op.Records, history.Record{Offset: a.Offset + uint64(i), Epoch: a.Epoch, Value: string(v)})
		}
	case wire.KindFetchResult:
		var r wire.FetchResult
		if wire.DecodeFetchResult(payload, &r) != nil {
			return
		}
		op.Epoch = r.Epoch
		// It read its node's log from offset 0 (op.From) up to Next, and
		// to the end when Next reached the high watermark.
		op.Next = r.Next
		if r.Next >= r.HighWatermark {
			op.Next = math.MaxUint64
		}
		for _, rec := range r.Records {
			op.Records = append(op.Records, history.Record{Offset: rec.Offset, Epoch: rec.Epoch, Value: string(rec.Value)})
		}
	default:
		return
	}
	c.finish(req, op, true)
}

// finish records req's outcome and schedules the next request.
func (c *client) finish(req *request, op history.Op, ok bool) {
	w := c.w
	if req.seq.Seq() != 0 && !req.done {
		c.sess.Finish(req.seq)
	}
	req.done = true
	c.cur = nil
	op.Client, op.Topic, op.Start, op.End, op.OK = c.id, req.topic, req.start, w.now, ok
	switch req.kind {
	case wire.KindProduce:
		op.Kind = history.Produce
	case wire.KindFetch:
		op.Kind = history.Fetch
	case wire.KindAssign:
		op.Kind = history.Assign
	case wire.KindRevoke:
		op.Kind = history.Revoke
	case wire.KindLookup:
		op.Kind = history.Lookup
	case wire.KindUpdatePartition:
		op.Kind = history.Lookup // an answer naming the owner and epoch
	}
	if !ok && !req.refused && (req.kind == wire.KindAssign || req.kind == wire.KindRevoke || req.kind == wire.KindUpdatePartition) {
		// It may still take effect.
		kind := linAssign
		switch req.kind {
		case wire.KindRevoke:
			kind = linRevoke
		case wire.KindUpdatePartition:
			kind = linUpdate
		}
		w.lin.addWrite(req.topic, linOp{kind: kind, owner: req.owner, parts: req.parts, unknown: true}, req.start, w.now, false,
			writeKey{session: req.seq.ID(), seq: req.seq.Seq()})
		op.Unknown = true
	}
	// Plain lookups may lag (bounded staleness); they are not part of
	// the ordered history.
	if !(req.kind == wire.KindLookup && !req.lin) {
		w.hist.Add(op)
	}
	if ok {
		w.logf("%s %s %s at %s: epoch %d", c.id, req.kindName(), req.topic, req.to.id, op.Epoch)
	}
	if c == w.racer {
		// The racer sends only beside another client's change.
		return
	}
	if c == w.mover {
		// It sends only when a fault asks it to.
		if then := c.then; then != nil && !w.stopped() {
			c.then = nil
			then()
		}
		return
	}
	if c == w.side {
		if c.stuck != nil && w.hot == c.stuck.topic && !w.stopped() {
			s := c.stuck
			w.after(w.between(2*time.Millisecond, 20*time.Millisecond), nil, func() { c.stickTo(s.to, s.topic, s.epoch) })
		} else {
			c.stuck = nil
		}
		return
	}
	w.after(w.between(thinkMin, thinkMax), nil, c.step)
}

func (r *request) kindName() string {
	if r.kind == wire.KindLookup && r.lin {
		return "lookup-lin"
	}
	return r.kind.String()
}

// writeKey names a client write: its session and number.
type writeKey struct{ session, seq uint64 }

// answeredWrite is a write's first answer, at a raft entry, and when a
// replica first applied it.
type answeredWrite struct {
	node         string
	shard, index uint64
	at           time.Time
	a            meta.Assignment
	err          error
}

// writeApplied takes a write a replica answered for the first time
// (node.Config.OnWriteApplied): every replica of the shard tells of the
// same entry; a second entry that answers the write for the first time
// applied it twice.
func (w *World) writeApplied(node string, shard, index uint64, aw shardsm.AnsweredWrite) {
	key := writeKey{session: aw.Session.ID, seq: aw.Session.Seq}
	if first, ok := w.answered[key]; ok {
		if first.shard != shard || first.index != index {
			w.twice = append(w.twice, fmt.Sprintf("write applied twice: session %x number %d answered first by %s at shard %d index %d (%v), again by %s at shard %d index %d (%v)",
				key.session, key.seq, first.node, first.shard, first.index, first.at.Sub(epoch), node, shard, index, w.now.Sub(epoch)))
		}
		return
	}
	w.answered[key] = answeredWrite{node: node, shard: shard, index: index, at: w.now, a: aw.Assignment, err: aw.Err}
}
