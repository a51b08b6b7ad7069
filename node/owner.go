package node

import (
	"fmt"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/ownership"
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
	if err := b.Commit(true); err != nil {
		n.log.Error("node: ownership changes not persisted", "err", err)
		return err
	}
	n.announce(changes, why)
	return nil
}

// takeOwnership applies an OpenTopic or CloseTopic from a shard leader and
// returns the ack to send once it is durable (ok false: nothing to send,
// the leader retries).
func (n *Node) takeOwnership(open *wire.OpenTopic, closeMsg *wire.CloseTopic) (wire.TopicAck, bool) {
	n.ownWrite.Lock()
	defer n.ownWrite.Unlock()
	var topic []byte
	var shard uint64
	if open != nil {
		topic, shard = open.Topic, open.Shard
	} else {
		topic, shard = closeMsg.Topic, closeMsg.Shard
	}
	floor, err := n.store.TopicFloor(string(topic))
	if err != nil {
		n.log.Error("node: read topic floor", "topic", topic, "err", err)
		return wire.TopicAck{}, false
	}
	var st wire.TopicStatus
	var epoch uint64
	var changes []ownership.Change
	n.ownMu.Lock()
	before, _ := n.own.Get(topic)
	// A topic newly held after a move is marked as handed over before
	// the holder has it, so that no lease can let it be served before.
	handing := open != nil && len(open.Prev) > 0 && string(open.Prev) != n.cfg.ID && before.Epoch < open.Epoch &&
		n.ho.mark(string(topic), open.Epoch)
	if open != nil {
		st, epoch, changes = n.own.Open(open, floor)
	} else {
		st, epoch, changes = n.own.Close(closeMsg, floor)
	}
	after, held := n.own.Get(topic)
	n.ownMu.Unlock()
	why := ReasonClosed
	if open != nil {
		why = ReasonSuperseded
	}
	err = n.persistOwnership(changes, why)
	if handing {
		if err == nil && st == wire.TopicDone && held && after.Epoch == open.Epoch {
			// Newly held after a move: the previous owner's records
			// come over before the topic is served.
			n.beginHandoff(string(topic), open.Epoch, string(open.Prev), open.PrevSilent)
		} else {
			n.ho.unmark(string(topic), open.Epoch)
		}
	}
	if err != nil {
		return wire.TopicAck{}, false
	}
	if open != nil && st == wire.TopicDone && len(changes) > 0 {
		// A topic newly held is served once a lease covers it: ask now
		// rather than at the next round.
		n.kickLeases(shard)
	}
	if closeMsg != nil && closeMsg.Revoked && st == wire.TopicDone && (!held || after.Epoch <= closeMsg.Epoch) {
		// A revoked topic's records go with it, once no produce of it
		// is in flight.
		g := n.ho.gate(topic)
		g.Lock()
		err := n.store.DeleteTopic(topic)
		g.Unlock()
		if err != nil {
			n.log.Error("node: delete the records of a revoked topic", "topic", topic, "err", err)
			return wire.TopicAck{}, false
		}
		n.counters.topicsDeleted.Add(1)
	}
	return wire.TopicAck{Topic: topic, Epoch: epoch, Status: st}, true
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
// for it on the shard (see stateMachine.grant).
func (n *Node) onEffects(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time) {
	// A node given a topic here counts as asking for leases from now: its
	// silence (reassignDead) starts when it became an owner, not at the
	// last lease it asked for before, or never.
	now := n.clock()
	_ = n.sm.withShard(shard, func(sh *shardState) {
		for _, e := range effs {
			if e.Kind != meta.EffectOpen {
				continue
			}
			if sh.lastAsk == nil {
				sh.lastAsk = make(map[string]time.Time)
			}
			if now.After(sh.lastAsk[e.Node]) {
				sh.lastAsk[e.Node] = now
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

func (n *Node) kickDuty() {
	select {
	case n.dutyKick <- struct{}{}:
	default:
	}
}

// ownershipLoop sends the ownership messages as soon as they are due (off
// the raft worker that applied them: opening a topic on this node costs an
// fsync); messages held back by a fence, and resends, are sent when their
// time comes (nextDue), or at the next kick.
func (n *Node) ownershipLoop() {
	defer n.wg.Done()
	timer := time.NewTimer(n.cfg.LeaseRenewInterval)
	defer timer.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.dutyKick:
		case <-timer.C:
		}
		n.sendDue()
		now := n.clock()
		timer.Reset(n.nextDue(now).Sub(now))
	}
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
	for i := range due {
		n.sendRPC(&due[i])
	}
}

// sendRPC sends one ownership message; the node's own topics are opened
// or closed in place.
func (n *Node) sendRPC(r *duty.RPC) {
	open := &wire.OpenTopic{Topic: []byte(r.Topic), Epoch: r.Epoch, Partitions: r.Partitions, Shard: r.Shard, Term: r.Term, Prev: []byte(r.Prev)}
	if r.Open && r.Prev != "" {
		open.PrevSilent = n.prevSilent(r.Shard, r.Prev)
	}
	closeMsg := &wire.CloseTopic{Topic: []byte(r.Topic), Epoch: r.Epoch, Shard: r.Shard, Term: r.Term, Revoked: r.Revoked}
	if r.Open {
		closeMsg = nil
		n.counters.opensSent.Add(1)
	} else {
		open = nil
		n.counters.closesSent.Add(1)
	}
	if r.Node == n.cfg.ID {
		if ack, ok := n.takeOwnership(open, closeMsg); ok {
			n.dutyMu.Lock()
			n.duty.Ack(n.cfg.ID, r.ReqID, &ack)
			n.dutyMu.Unlock()
			n.recheckSettling()
		}
		return
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
		return
	}
	_ = n.net.Send(r.Node, f)
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
