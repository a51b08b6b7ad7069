package lease

import (
	"fmt"
	"sync"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// An owner's side: the topics it holds, loaded from the store's node slot
// and changed by the OpenTopic and CloseTopic messages of the shard
// leaders and by lease replies, each change durable before it is
// announced or acknowledged.

// Load fills the holder with the topics the store says this node owns.
// Topics at or below their floor (a close that was written after the open
// it overtook) are dropped.
func (a *Agent) Load() error {
	var err error
	var held [][]ownership.Change
	lerr := a.cfg.Store.OwnedTopics(func(topic string, t shardstore.OwnedTopic) bool {
		var floor uint64
		if floor, err = a.cfg.Store.TopicFloor(topic); err != nil {
			return false
		}
		if t.Epoch > floor {
			if len(held) == 0 || len(held[len(held)-1]) == loadChunk {
				held = append(held, make([]ownership.Change, 0, loadChunk))
			}
			last := &held[len(held)-1]
			*last = append(*last, ownership.Change{Topic: topic, Put: true, Held: ownership.Topic{Epoch: t.Epoch, Partitions: t.Partitions, Shard: t.Shard}})
		}
		return true
	})
	if lerr != nil {
		return fmt.Errorf("node: load owned topics: %w", lerr)
	}
	if err != nil {
		return fmt.Errorf("node: load owned topics: %w", err)
	}
	a.own.LoadAll(held)
	for _, chunk := range held {
		a.env.Announce(chunk, Superseded)
	}
	return nil
}

// loadChunk: the topics Load reads from the store are kept in chunks of
// this many.
const loadChunk = 1 << 14

// persist makes changes durable in one synced batch, then announces them
// (why: the reason of the drops among them). The caller holds ownWrite,
// so batches commit, and announcements are made, in the order their
// changes were made.
func (a *Agent) persist(changes []ownership.Change, why Reason) error {
	if len(changes) == 0 {
		return nil
	}
	b := a.cfg.Store.NewBatch()
	putChanges(b, changes)
	if err := b.Commit(true); err != nil {
		a.log.Error("node: ownership changes not persisted", "err", err)
		return err
	}
	a.env.Announce(changes, why)
	return nil
}

// putChanges adds changes to b.
func putChanges(b *shardstore.Batch, changes []ownership.Change) {
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

// maxBatch bounds the ownership messages made durable in one synced
// batch; more wait for the next one.
const maxBatch = 256

// Message is one OpenTopic (Open set) or CloseTopic (Close set) from a
// shard leader, and what to do with its ack once it is durable (ok false:
// nothing to send, the leader retries).
type Message struct {
	Open  *wire.OpenTopic
	Close *wire.CloseTopic
	Done  func(ack wire.TopicAck, ok bool)
	// From and ReqID name the message: a leader sends an unacknowledged
	// one again, under the same request id (0: unnamed, never a copy).
	From  string
	ReqID uint64
}

type messageKey struct {
	from  string
	reqID uint64
}

// inbox holds the messages waiting for the next synced batch. The
// goroutine that finds no batch under way writes it, and the batches
// after it while messages keep arriving; the others leave theirs here. A
// copy of a message already waiting (a leader's resend while this node is
// behind) is dropped, unacknowledged: the first one's ack answers both,
// and an inbox that took every copy would grow with each resend while it
// drains.
type inbox struct {
	mu      sync.Mutex
	waiting []Message
	queued  map[messageKey]struct{}
	busy    bool
}

// Take applies msgs, with the messages waiting, in batches of at most
// maxBatch, each made durable in one synced write before its acks are
// handed to the messages' Done. The calling goroutine writes every batch
// due while messages keep arriving, or leaves msgs to the one already
// doing so: Done may run on another goroutine, after Take returns.
func (a *Agent) Take(msgs ...Message) { a.queue(true, msgs) }

// queue is Take; with stay false the caller writes one batch at most and
// hands what waits after it to spawned work: the Due task is not kept
// from sending its own messages by the messages other leaders send this
// node.
func (a *Agent) queue(stay bool, msgs []Message) {
	q := &a.inbox
	q.mu.Lock()
	var dropped []Message
	for _, m := range msgs {
		if m.ReqID != 0 {
			k := messageKey{m.From, m.ReqID}
			if _, dup := q.queued[k]; dup {
				dropped = append(dropped, m)
				continue
			}
			if q.queued == nil {
				q.queued = make(map[messageKey]struct{})
			}
			q.queued[k] = struct{}{}
		}
		q.waiting = append(q.waiting, m)
	}
	if len(dropped) > 0 {
		a.counters.dups.Add(uint64(len(dropped)))
		// Done takes the duties' lock (a local message) or writes to a
		// connection: not under the inbox's.
		q.mu.Unlock()
		for _, m := range dropped {
			m.Done(wire.TopicAck{}, false)
		}
		q.mu.Lock()
	}
	if q.busy {
		q.mu.Unlock()
		return
	}
	q.busy = true
	a.writeInbox(stay)
}

// writeInbox writes the batches waiting (see queue). The caller holds
// inbox.mu and set inbox.busy; it returns with inbox.mu released.
func (a *Agent) writeInbox(stay bool) {
	q := &a.inbox
	for len(q.waiting) > 0 {
		// The batch keeps its place in the backing array, capped so that
		// no append to what waits after it can write into it; cleared
		// once taken, so that it holds nothing alive.
		k := min(len(q.waiting), maxBatch)
		batch := q.waiting[:k:k]
		if q.waiting = q.waiting[k:]; len(q.waiting) == 0 {
			q.waiting = nil
		}
		for _, m := range batch {
			delete(q.queued, messageKey{m.From, m.ReqID})
		}
		q.mu.Unlock()
		a.takeBatch(batch)
		clear(batch)
		q.mu.Lock()
		if !stay && len(q.waiting) > 0 {
			q.mu.Unlock()
			if a.env.Spawn(func() {
				q.mu.Lock()
				a.writeInbox(true)
			}) {
				return
			}
			q.mu.Lock()
		}
	}
	q.busy = false
	q.mu.Unlock()
}

// step is what applying one message left for after its batch is durable.
type step struct {
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
	why           Reason
}

// takeBatch applies msgs in order, makes their changes durable in one
// synced batch, announces them, and hands each message its ack.
func (a *Agent) takeBatch(msgs []Message) {
	acks := a.writeBatch(msgs)
	// The acks go out after ownWrite is released, as a single message's
	// always did: what Done does takes the duties' lock, and may answer
	// clients.
	for i := range msgs {
		ack, done := acks[i], msgs[i].Done
		if !ack.ok || ack.deleteRecords == nil {
			done(ack.ack, ack.ok)
			continue
		}
		// A revoked topic's records are deleted once the produces that
		// entered its gate before the close have answered (those after
		// it found the topic given up), and acked after.
		a.cfg.Records.DeleteRevoked(ack.deleteRecords, ack.revokedAt, func(deleted bool) {
			done(ack.ack, deleted)
		})
	}
}

// messageAck is a message's ack, ok false when there is none to send.
// deleteRecords names a revoked topic whose records go before the ack.
type messageAck struct {
	ack           wire.TopicAck
	ok            bool
	deleteRecords []byte
	revokedAt     uint64
}

// writeBatch applies msgs in order, makes their changes durable in one
// synced batch, announces them, and returns each message's ack.
func (a *Agent) writeBatch(msgs []Message) []messageAck {
	a.ownWrite.Lock()
	defer a.ownWrite.Unlock()
	steps := make([]step, len(msgs))
	// floors written by messages earlier in the batch: a close followed
	// by an open it overtook must find the floor it set.
	var floors map[string]uint64
	for i := range msgs {
		a.apply(&msgs[i], &steps[i], floors)
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
	b := a.cfg.Store.NewBatch()
	writes := 0
	for i := range steps {
		putChanges(b, steps[i].changes)
		writes += len(steps[i].changes)
	}
	if writes > 0 {
		if err = b.Commit(true); err != nil {
			a.log.Error("node: ownership changes not persisted", "err", err)
		}
	} else {
		b.Close()
	}
	acks := make([]messageAck, len(msgs))
	for i := range steps {
		s := &steps[i]
		if err == nil {
			a.env.Announce(s.changes, s.why)
		}
		acks[i].ack, acks[i].ok = a.finish(&msgs[i], s, err)
		if s.deleteRecords {
			acks[i].deleteRecords, acks[i].revokedAt = s.topic, msgs[i].Close.Epoch
		}
	}
	return acks
}

// apply applies m to the holder, into s. floors holds the floors set
// earlier in the batch. The caller holds ownWrite.
func (a *Agent) apply(m *Message, s *step, floors map[string]uint64) {
	open, closeMsg := m.Open, m.Close
	if open != nil {
		s.topic, s.shard = open.Topic, open.Shard
	} else {
		s.topic, s.shard = closeMsg.Topic, closeMsg.Shard
	}
	floor, inBatch := floors[string(s.topic)]
	// An open of a topic held at its very epoch (a new leader's resend,
	// a copy) changes nothing whatever the floor, which is below every
	// epoch held: the store is not read for it. Checked under the lock
	// the open is taken under, so no close raises the floor in between.
	locked := false
	if open != nil && !inBatch {
		a.ownMu.Lock()
		if t, ok := a.own.Get(s.topic); ok && t.Epoch == open.Epoch {
			locked = true
		} else {
			a.ownMu.Unlock()
		}
	}
	if !locked {
		if !inBatch {
			var err error
			if floor, err = a.cfg.Store.TopicFloor(string(s.topic)); err != nil {
				a.log.Error("node: read topic floor", "topic", s.topic, "err", err)
				s.skip = true
				return
			}
		}
		a.ownMu.Lock()
	}
	before, _ := a.own.Get(s.topic)
	// A topic newly held after a move is marked as handed over before
	// the holder has it, so that no lease can let it be served before.
	s.handing = open != nil && len(open.Prev) > 0 && string(open.Prev) != a.cfg.Self && before.Epoch < open.Epoch &&
		a.cfg.Records.MarkPull(string(s.topic), open.Epoch)
	if open != nil {
		s.st, s.epoch, s.changes = a.own.Open(open, floor)
	} else {
		s.st, s.epoch, s.changes = a.own.Close(closeMsg, floor)
	}
	s.after, s.held = a.own.Get(s.topic)
	a.ownMu.Unlock()
	s.why = Closed
	if open != nil {
		s.why = Superseded
	}
}

// finish does what m asks once its batch was written (err: how that
// went) and returns its ack. The caller holds ownWrite.
func (a *Agent) finish(m *Message, s *step, err error) (wire.TopicAck, bool) {
	if s.skip {
		return wire.TopicAck{}, false
	}
	open, closeMsg := m.Open, m.Close
	if s.handing {
		if err == nil && s.st == wire.TopicDone && s.held && s.after.Epoch == open.Epoch {
			// Newly held after a move: the previous owner's records
			// come over before the topic is served.
			a.cfg.Records.StartPull(string(s.topic), open.Epoch, string(open.Prev), open.PrevSilent)
		} else {
			a.cfg.Records.UnmarkPull(string(s.topic), open.Epoch)
		}
	}
	if err != nil {
		return wire.TopicAck{}, false
	}
	if open != nil && s.st == wire.TopicDone && len(s.changes) > 0 {
		// A topic newly held is served once a lease covers it: ask now
		// rather than at the next round.
		a.kickRounds()
	}
	if closeMsg != nil && closeMsg.Revoked && s.st == wire.TopicDone && (!s.held || s.after.Epoch <= closeMsg.Epoch) {
		// A revoked topic's records go with it, once no produce of it
		// is in flight (takeBatch).
		s.deleteRecords = true
	}
	return wire.TopicAck{Topic: s.topic, Epoch: s.epoch, Status: s.st}, true
}
