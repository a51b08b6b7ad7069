package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// This file wires the two halves of the ownership protocol to the node:
// the topics this node holds (ownership.Holder, under ownMu) and the
// messages and fences it owes as a shard leader (duty.Leader, under
// dutyMu). docs/leases.md has the protocol.

// loadOwned fills the holder with the topics the store says this node
// owns. Topics at or below their floor (a close that was written after the
// open it overtook) are dropped.
func (n *Node) loadOwned() error {
	var err error
	lerr := n.store.OwnedTopics(func(topic string, t shardstore.OwnedTopic) bool {
		var floor uint64
		if floor, err = n.store.TopicFloor(topic); err != nil {
			return false
		}
		if t.Epoch > floor {
			n.own.Load(topic, ownership.Topic{Epoch: t.Epoch, Partitions: t.Partitions, Shard: t.Shard})
			n.ownFeed.held(topic, t.Epoch, t.Partitions)
		}
		return true
	})
	if lerr != nil {
		return fmt.Errorf("node: load owned topics: %w", lerr)
	}
	if err != nil {
		return fmt.Errorf("node: load owned topics: %w", err)
	}
	return nil
}

// persistOwnership makes changes durable in one synced batch, then
// announces them (why: the reason of the drops among them). The caller
// holds ownWrite, so batches commit, and events queue, in the order their
// changes were made.
func (n *Node) persistOwnership(changes []ownership.Change, why ReleaseReason) error {
	if len(changes) == 0 {
		return nil
	}
	b := n.store.NewBatch()
	putOwnership(b, changes)
	if err := b.Commit(true); err != nil {
		n.log.Error("node: ownership changes not persisted", "err", err)
		return err
	}
	n.announce(changes, why)
	return nil
}

// putOwnership adds changes to b.
func putOwnership(b *shardstore.Batch, changes []ownership.Change) {
	for _, c := range changes {
		switch {
		case c.Put:
			b.PutOwnedTopic(c.Topic, shardstore.OwnedTopic{Epoch: c.Held.Epoch, Partitions: c.Held.Partitions, Shard: c.Held.Shard})
		case c.Drop:
			b.DeleteOwnedTopic(c.Topic)
		}
		if c.Floor != 0 {
			b.PutTopicFloor(c.Topic, c.Floor)
		}
	}
}

// Opening a topic costs its owner a synced write. The OpenTopic and
// CloseTopic messages that arrive while one such write is under way are
// taken together, in arrival order, and made durable in one synced batch
// (group commit): one fsync for all of them instead of one each, and none
// of them is acknowledged before that fsync.

// maxOwnershipBatch bounds the ownership messages made durable in one
// synced batch; more wait for the next one.
const maxOwnershipBatch = 256

// ownershipMsg is one OpenTopic (open set) or CloseTopic (closeMsg set)
// from a shard leader, and what to do with its ack once it is durable (ok
// false: nothing to send, the leader retries).
type ownershipMsg struct {
	open     *wire.OpenTopic
	closeMsg *wire.CloseTopic
	done     func(ack wire.TopicAck, ok bool)
	// from and reqID name the message: a leader sends an unacknowledged
	// one again, under the same request id (0: unnamed, never a copy).
	from  string
	reqID uint64
}

type ownershipKey struct {
	from  string
	reqID uint64
}

// ownershipQueue holds the messages waiting for the next synced batch.
// The goroutine that finds no batch under way writes it, and the batches
// after it while messages keep arriving; the others leave theirs here.
// A copy of a message already waiting (a leader's resend while this node
// is behind) is dropped, unacknowledged: the first one's ack answers both,
// and a queue that took every copy would grow with each resend while it
// drains.
type ownershipQueue struct {
	mu      sync.Mutex
	waiting []ownershipMsg
	queued  map[ownershipKey]struct{}
	busy    bool
}

// takeOwnershipMsgs applies msgs, with the messages waiting, in batches
// of at most maxOwnershipBatch, each made durable in one synced write
// before its acks are handed to the messages' done. The calling goroutine
// writes every batch due while messages keep arriving, or leaves msgs to
// the one already doing so: done may run on another goroutine, after this
// returns.
func (n *Node) takeOwnershipMsgs(msgs ...ownershipMsg) { n.queueOwnership(true, msgs) }

// queueOwnership is takeOwnershipMsgs; with stay false the caller writes
// one batch at most and hands what waits after it to a goroutine of its
// own: the ownership loop is not kept from sending its own messages by
// the messages other leaders send this node.
func (n *Node) queueOwnership(stay bool, msgs []ownershipMsg) {
	q := &n.ownQ
	q.mu.Lock()
	var dropped []ownershipMsg
	for _, m := range msgs {
		if m.reqID != 0 {
			k := ownershipKey{m.from, m.reqID}
			if _, dup := q.queued[k]; dup {
				dropped = append(dropped, m)
				continue
			}
			if q.queued == nil {
				q.queued = make(map[ownershipKey]struct{})
			}
			q.queued[k] = struct{}{}
		}
		q.waiting = append(q.waiting, m)
	}
	if len(dropped) > 0 {
		n.counters.ownershipDups.Add(uint64(len(dropped)))
		// done takes the duties' lock (a local message) or writes to a
		// connection: not under the queue's.
		q.mu.Unlock()
		for _, m := range dropped {
			m.done(wire.TopicAck{}, false)
		}
		q.mu.Lock()
	}
	if q.busy {
		q.mu.Unlock()
		return
	}
	q.busy = true
	n.writeOwnershipQueue(stay)
}

// writeOwnershipQueue writes the batches waiting (see queueOwnership).
// The caller holds ownQ.mu and set ownQ.busy; it returns with ownQ.mu
// released.
func (n *Node) writeOwnershipQueue(stay bool) {
	q := &n.ownQ
	for len(q.waiting) > 0 {
		// The batch keeps its place in the backing array, capped so that
		// no append to what waits after it can write into it; cleared
		// once taken, so that it holds nothing alive.
		k := min(len(q.waiting), maxOwnershipBatch)
		batch := q.waiting[:k:k]
		if q.waiting = q.waiting[k:]; len(q.waiting) == 0 {
			q.waiting = nil
		}
		for _, m := range batch {
			delete(q.queued, ownershipKey{m.from, m.reqID})
		}
		q.mu.Unlock()
		n.takeOwnershipBatch(batch)
		clear(batch)
		q.mu.Lock()
		if !stay && len(q.waiting) > 0 {
			q.mu.Unlock()
			if n.spawn(func() {
				q.mu.Lock()
				n.writeOwnershipQueue(true)
			}) {
				return
			}
			q.mu.Lock()
		}
	}
	q.busy = false
	q.mu.Unlock()
}

// ownershipStep is what applying one message left for after its batch is
// durable.
type ownershipStep struct {
	topic   []byte
	shard   uint64
	st      wire.TopicStatus
	epoch   uint64
	changes []ownership.Change
	handing bool // marked as handed over before the holder had it
	held    bool
	after   ownership.Topic
	skip    bool // its floor did not read: no ack
	// deleteRecords: the topic was revoked; its records are deleted
	// before the ack.
	deleteRecords bool
	why           ReleaseReason
}

// takeOwnershipBatch applies msgs in order, makes their changes durable
// in one synced batch, announces them, and hands each message its ack.
func (n *Node) takeOwnershipBatch(msgs []ownershipMsg) {
	acks := n.writeOwnershipBatch(msgs)
	// The acks go out after ownWrite is released, as a single message's
	// always did: what done does takes the duties' lock, and may answer
	// clients.
	for i := range msgs {
		a, done := acks[i], msgs[i].done
		if !a.ok || a.deleteRecords == nil {
			done(a.ack, a.ok)
			continue
		}
		// A revoked topic's records are deleted once the produces that
		// entered its gate before the close have answered (those after
		// it found the topic given up), and acked after.
		n.records.DeleteRevoked(a.deleteRecords, a.revokedAt, func(deleted bool) {
			done(a.ack, deleted)
		})
	}
}

// ownershipAck is a message's ack, ok false when there is none to send.
// deleteRecords names a revoked topic whose records go before the ack.
type ownershipAck struct {
	ack           wire.TopicAck
	ok            bool
	deleteRecords []byte
	revokedAt     uint64
}

// writeOwnershipBatch applies msgs in order, makes their changes durable
// in one synced batch, announces them, and returns each message's ack.
func (n *Node) writeOwnershipBatch(msgs []ownershipMsg) []ownershipAck {
	n.ownWrite.Lock()
	defer n.ownWrite.Unlock()
	steps := make([]ownershipStep, len(msgs))
	// floors written by messages earlier in the batch: a close followed
	// by an open it overtook must find the floor it set.
	var floors map[string]uint64
	for i := range msgs {
		n.applyOwnershipMsg(&msgs[i], &steps[i], floors)
		for _, c := range steps[i].changes {
			if c.Floor != 0 {
				if floors == nil {
					floors = make(map[string]uint64)
				}
				floors[c.Topic] = c.Floor
			}
		}
	}
	var err error
	b := n.store.NewBatch()
	writes := 0
	for i := range steps {
		putOwnership(b, steps[i].changes)
		writes += len(steps[i].changes)
	}
	if writes > 0 {
		if err = b.Commit(true); err != nil {
			n.log.Error("node: ownership changes not persisted", "err", err)
		}
	} else {
		b.Close()
	}
	acks := make([]ownershipAck, len(msgs))
	for i := range steps {
		s := &steps[i]
		if err == nil {
			n.announce(s.changes, s.why)
		}
		acks[i].ack, acks[i].ok = n.finishOwnershipMsg(&msgs[i], s, err)
		if s.deleteRecords {
			acks[i].deleteRecords, acks[i].revokedAt = s.topic, msgs[i].closeMsg.Epoch
		}
	}
	return acks
}

// applyOwnershipMsg applies m to the holder, into s. floors holds the
// floors set earlier in the batch. The caller holds ownWrite.
func (n *Node) applyOwnershipMsg(m *ownershipMsg, s *ownershipStep, floors map[string]uint64) {
	open, closeMsg := m.open, m.closeMsg
	if open != nil {
		s.topic, s.shard = open.Topic, open.Shard
	} else {
		s.topic, s.shard = closeMsg.Topic, closeMsg.Shard
	}
	floor, inBatch := floors[string(s.topic)]
	if !inBatch {
		var err error
		if floor, err = n.store.TopicFloor(string(s.topic)); err != nil {
			n.log.Error("node: read topic floor", "topic", s.topic, "err", err)
			s.skip = true
			return
		}
	}
	n.ownMu.Lock()
	before, _ := n.own.Get(s.topic)
	// A topic newly held after a move is marked as handed over before
	// the holder has it, so that no lease can let it be served before.
	s.handing = open != nil && len(open.Prev) > 0 && string(open.Prev) != n.cfg.ID && before.Epoch < open.Epoch &&
		n.records.MarkPull(string(s.topic), open.Epoch)
	if open != nil {
		s.st, s.epoch, s.changes = n.own.Open(open, floor)
	} else {
		s.st, s.epoch, s.changes = n.own.Close(closeMsg, floor)
	}
	s.after, s.held = n.own.Get(s.topic)
	n.ownMu.Unlock()
	s.why = ReasonClosed
	if open != nil {
		s.why = ReasonSuperseded
	}
}

// finishOwnershipMsg does what m asks once its batch was written (err:
// how that went) and returns its ack. The caller holds ownWrite.
func (n *Node) finishOwnershipMsg(m *ownershipMsg, s *ownershipStep, err error) (wire.TopicAck, bool) {
	if s.skip {
		return wire.TopicAck{}, false
	}
	open, closeMsg := m.open, m.closeMsg
	if s.handing {
		if err == nil && s.st == wire.TopicDone && s.held && s.after.Epoch == open.Epoch {
			// Newly held after a move: the previous owner's records
			// come over before the topic is served.
			n.records.StartPull(string(s.topic), open.Epoch, string(open.Prev), open.PrevSilent)
		} else {
			n.records.UnmarkPull(string(s.topic), open.Epoch)
		}
	}
	if err != nil {
		return wire.TopicAck{}, false
	}
	if open != nil && s.st == wire.TopicDone && len(s.changes) > 0 {
		// A topic newly held is served once a lease covers it: ask now
		// rather than at the next round.
		n.kickLeases(s.shard)
	}
	if closeMsg != nil && closeMsg.Revoked && s.st == wire.TopicDone && (!s.held || s.after.Epoch <= closeMsg.Epoch) {
		// A revoked topic's records go with it, once no produce of it
		// is in flight (takeOwnershipBatch).
		s.deleteRecords = true
	}
	return wire.TopicAck{Topic: s.topic, Epoch: s.epoch, Status: s.st}, true
}

// serveCheck reports whether this node may answer a data request for
// topic at epoch now: see ownership.Holder.Serve.
func (n *Node) serveCheck(topic []byte, epoch uint64) (ownership.Topic, ownership.Refusal) {
	now := n.clock()
	n.ownMu.RLock()
	t, r := n.own.Serve(now, topic, epoch)
	n.ownMu.RUnlock()
	return t, r
}

func (n *Node) dutyPending() int {
	n.dutyMu.Lock()
	defer n.dutyMu.Unlock()
	return n.duty.Pending()
}

func (n *Node) dutyFences() int {
	n.dutyMu.Lock()
	defer n.dutyMu.Unlock()
	return n.duty.Fences()
}

func (n *Node) ownedCount() int {
	n.ownMu.RLock()
	defer n.ownMu.RUnlock()
	return n.own.Count()
}

// onEffects runs on a raftmux worker after a shard applied commands:
// only the shard's leader owes the messages. lastGrant holds, for every
// node a Close effect names, when this node last computed a lease grant
// for it on the shard (see shardsm.Machine.Grant).
func (n *Node) onEffects(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time) {
	// A node given a topic here counts as asking for leases from now: its
	// silence (reassignDead) starts when it became an owner, not at the
	// last lease it asked for before, or never.
	now := n.clock()
	_ = n.sm.WithShard(shard, func(sh *shardsm.Shard) {
		for _, e := range effs {
			if e.Kind != meta.EffectOpen {
				continue
			}
			if sh.LastAsk == nil {
				sh.LastAsk = make(map[string]time.Time)
			}
			if now.After(sh.LastAsk[e.Node]) {
				sh.LastAsk[e.Node] = now
			}
		}
	})
	n.dutyMu.Lock()
	n.duty.Effects(n.clock(), shard, effs, func(node string) time.Time { return lastGrant[node] })
	pending := n.duty.Pending()
	n.dutyMu.Unlock()
	if pending > 0 {
		n.kickDuty()
	}
}

func (n *Node) kickDuty() { n.dutyTask.kick() }

// ownershipDuty sends the ownership messages as soon as they are due (off
// the raft worker that applied them: opening a topic on this node costs an
// fsync); messages held back by a fence, and resends, are sent when their
// time comes (nextDue), or at the next kick.
func (n *Node) ownershipDuty(time.Time) time.Time {
	n.sendDue()
	return n.nextDue(n.clock())
}

// dutyWakeFloor: in lease renewal intervals, the least time between two
// looks at the ownership messages due, so that many messages due at
// slightly different times are sent together.
const dutyWakeFloor = 0.05

// nextDue is when sendDue, last called at now, has work next: when the
// earliest queued ownership message is due (a held-back open whose fences
// and new-leader wait end: the topic's next owner is told then, not up to
// a renewal interval later), else a renewal interval after now; never
// sooner than dutyWakeFloor after now.
func (n *Node) nextDue(now time.Time) time.Time {
	next := now.Add(n.cfg.LeaseRenewInterval)
	n.dutyMu.Lock()
	at, ok := n.duty.Next()
	n.dutyMu.Unlock()
	if ok && at.Before(next) {
		next = at
	}
	if floor := now.Add(time.Duration(dutyWakeFloor * float64(n.cfg.LeaseRenewInterval))); next.Before(floor) {
		next = floor
	}
	return next
}

// sendDue sends the ownership messages that are due.
func (n *Node) sendDue() {
	if !n.born.Load() {
		return
	}
	v := n.view.Load()
	knowsAll := n.knowsAllMembers()
	gone := func(node string) bool {
		if node == n.cfg.ID {
			return false
		}
		_, known := v.byID[node]
		return v.dead[node] || (!known && knowsAll)
	}
	n.dutyMu.Lock()
	due := n.duty.Due(n.clock(), gone)
	n.dutyMu.Unlock()
	var local []ownershipMsg
	for i := range due {
		if m, ok := n.sendRPC(&due[i]); ok {
			local = append(local, m)
		}
	}
	if len(local) > 0 {
		n.queueOwnership(false, local)
	}
}

// sendRPC sends one ownership message; a message to this node itself
// is returned instead (local true), to be taken with the others due.
func (n *Node) sendRPC(r *duty.RPC) (m ownershipMsg, local bool) {
	var open *wire.OpenTopic
	var closeMsg *wire.CloseTopic
	if r.Open {
		open = &wire.OpenTopic{Topic: []byte(r.Topic), Epoch: r.Epoch, Partitions: r.Partitions, Shard: r.Shard, Term: r.Term, Prev: []byte(r.Prev)}
		if r.Prev != "" {
			open.PrevSilent = n.prevSilent(r.Shard, r.Prev)
		}
		n.counters.opensSent.Add(1)
	} else {
		closeMsg = &wire.CloseTopic{Topic: []byte(r.Topic), Epoch: r.Epoch, Shard: r.Shard, Term: r.Term, Revoked: r.Revoked}
		n.counters.closesSent.Add(1)
	}
	if r.Node == n.cfg.ID {
		reqID := r.ReqID
		return ownershipMsg{open: open, closeMsg: closeMsg, from: n.cfg.ID, reqID: reqID, done: func(ack wire.TopicAck, ok bool) {
			if !ok {
				return
			}
			n.dutyMu.Lock()
			n.duty.Ack(n.cfg.ID, reqID, &ack)
			n.dutyMu.Unlock()
			n.recheckSettling()
		}}, true
	}
	var f []byte
	var start int
	if open != nil {
		f, start = wire.BeginFrame(nil, wire.KindOpenTopic, r.ReqID)
		f = wire.AppendOpenTopic(f, open)
	} else {
		f, start = wire.BeginFrame(nil, wire.KindCloseTopic, r.ReqID)
		f = wire.AppendCloseTopic(f, closeMsg)
	}
	f, err := wire.EndFrame(f, start)
	if err != nil {
		return ownershipMsg{}, false
	}
	_ = n.net.Send(r.Node, f)
	return ownershipMsg{}, false
}

// takeTopicAck hands a TopicAck from node from to the duties.
func (n *Node) takeTopicAck(from string, h wire.Header, payload []byte) {
	var a wire.TopicAck
	if wire.DecodeTopicAck(payload, &a) != nil {
		return
	}
	n.dutyMu.Lock()
	n.duty.Ack(from, h.RequestID, &a)
	n.dutyMu.Unlock()
	n.recheckSettling()
	n.kickDuty() // an acknowledged close may let a new owner's open go
}
