package node

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shoalmq/shoal/node/ownership"
)

// Embedding: a broker that runs a Node in its own process learns which
// topics the node holds from OwnershipEvents, and checks a Guard before it
// acknowledges a write of its own. The events say what changed; the guard
// is the authority (a held topic is served only under a lease, which an
// event cannot announce: leases run out without any message).

// OwnershipEventKind says what an OwnershipEvent announces.
type OwnershipEventKind uint8

const (
	// Acquired: this node holds the topic at Epoch with Partitions. An
	// Acquired at the epoch already held announces more partitions.
	Acquired OwnershipEventKind = 1
	// Released: this node no longer holds the topic at Epoch, for Reason.
	Released OwnershipEventKind = 2
)

func (k OwnershipEventKind) String() string {
	switch k {
	case Acquired:
		return "acquired"
	case Released:
		return "released"
	}
	return fmt.Sprintf("OwnershipEventKind(%d)", uint8(k))
}

// ReleaseReason says why a topic was released.
type ReleaseReason uint8

const (
	// ReasonClosed: the topic's shard leader closed it here: the topic
	// moved to another node or was revoked.
	ReasonClosed ReleaseReason = 1
	// ReasonSuperseded: the epoch is over without a Close having arrived:
	// the shard leader's lease answer shows the topic at a later epoch or
	// not at all, or an Open at a later epoch came first.
	ReasonSuperseded ReleaseReason = 2
	// ReasonLeaving: the node is leaving the cluster (Leave) and serves
	// nothing more.
	ReasonLeaving ReleaseReason = 3
)

func (r ReleaseReason) String() string {
	switch r {
	case ReasonClosed:
		return "closed"
	case ReasonSuperseded:
		return "superseded"
	case ReasonLeaving:
		return "leaving"
	}
	return fmt.Sprintf("ReleaseReason(%d)", uint8(r))
}

// OwnershipEvent is one change of what this node holds.
type OwnershipEvent struct {
	Kind       OwnershipEventKind
	Topic      string
	Epoch      uint64
	Partitions uint32        // Acquired only
	Reason     ReleaseReason // Released only
}

// maxPendingPerTopic bounds the events of one topic waiting for the
// consumer; past it they fold into the net change (ownershipFeed.push).
const maxPendingPerTopic = 2

// heldAt is a topic's holding as the events announced it (epoch 0: not
// held).
type heldAt struct {
	epoch      uint64
	partitions uint32
}

// topicBacklog is one topic's events not yet handed to the consumer, and
// the holding the consumer knows once it took every event before them.
type topicBacklog struct {
	before heldAt
	events []OwnershipEvent
}

// ownershipFeed queues ownership events for OwnershipEvents. Pushing never
// blocks: a topic's events wait in its backlog, in order; a backlog that
// grows past maxPendingPerTopic is folded into the net change from what
// the consumer knows (the Released of the epoch it was told of, then the
// Acquired of the epoch held now), so that memory stays at most two
// events per topic that changed since the consumer last read. Topics take
// turns, so a busy topic does not hold the others back; events of
// different topics are not ordered against each other.
//
// A feed is off until its consumer first asks for the channel: a node
// nobody embeds keeps no second copy of its holdings.
type ownershipFeed struct {
	on      atomic.Bool // set once, while no ownership change is made (lease.Agent.Holdings)
	mu      sync.Mutex
	known   map[string]heldAt // as the last pushed event left it
	backlog map[string]*topicBacklog
	order   []string // topics with a backlog, in turn
	folded  uint64
	wake    chan struct{}
	out     chan OwnershipEvent
}

func newOwnershipFeed() *ownershipFeed {
	return &ownershipFeed{
		known:   make(map[string]heldAt),
		backlog: make(map[string]*topicBacklog),
		wake:    make(chan struct{}, 1),
		out:     make(chan OwnershipEvent),
	}
}

// held records that topic is held at epoch with partitions, pushing the
// events that take the consumer there.
func (f *ownershipFeed) held(topic string, epoch uint64, partitions uint32) {
	if !f.on.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur := f.known[topic]
	switch {
	case cur.epoch == epoch && cur.partitions >= partitions:
		return
	case cur.epoch > epoch:
		return // an epoch once over never comes back
	case cur.epoch != 0 && cur.epoch < epoch:
		f.pushLocked(OwnershipEvent{Kind: Released, Topic: topic, Epoch: cur.epoch, Reason: ReasonSuperseded}, cur)
		cur = heldAt{}
	}
	f.pushLocked(OwnershipEvent{Kind: Acquired, Topic: topic, Epoch: epoch, Partitions: partitions}, cur)
}

// dropped records that topic is no longer held, for why.
func (f *ownershipFeed) dropped(topic string, why ReleaseReason) {
	if !f.on.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.known[topic]
	if !ok {
		return
	}
	f.pushLocked(OwnershipEvent{Kind: Released, Topic: topic, Epoch: cur.epoch, Reason: why}, cur)
}

// pushLocked queues ev, which changes the holding from prev.
func (f *ownershipFeed) pushLocked(ev OwnershipEvent, prev heldAt) {
	if ev.Kind == Acquired {
		f.known[ev.Topic] = heldAt{epoch: ev.Epoch, partitions: ev.Partitions}
	} else {
		delete(f.known, ev.Topic)
	}
	b := f.backlog[ev.Topic]
	if b == nil {
		b = &topicBacklog{before: prev}
		f.backlog[ev.Topic] = b
		f.order = append(f.order, ev.Topic)
	}
	b.events = append(b.events, ev)
	if len(b.events) > maxPendingPerTopic {
		f.foldLocked(ev.Topic, b)
	}
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// foldLocked replaces b's events with the net change from b.before to the
// holding known now.
func (f *ownershipFeed) foldLocked(topic string, b *topicBacklog) {
	f.folded += uint64(len(b.events))
	why := ReasonSuperseded
	for _, e := range b.events {
		if e.Kind == Released {
			why = e.Reason
			break
		}
	}
	now := f.known[topic]
	b.events = b.events[:0]
	if b.before.epoch != 0 && b.before.epoch != now.epoch {
		b.events = append(b.events, OwnershipEvent{Kind: Released, Topic: topic, Epoch: b.before.epoch, Reason: why})
	}
	if now.epoch != 0 && now != b.before {
		b.events = append(b.events, OwnershipEvent{Kind: Acquired, Topic: topic, Epoch: now.epoch, Partitions: now.partitions})
	}
	f.folded -= uint64(len(b.events))
}

// next takes the next event to hand out: the first of the topic whose turn
// it is.
func (f *ownershipFeed) next() (OwnershipEvent, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for len(f.order) > 0 {
		topic := f.order[0]
		f.order[0] = ""
		f.order = f.order[1:]
		b := f.backlog[topic]
		if len(b.events) == 0 {
			delete(f.backlog, topic)
			continue
		}
		ev := b.events[0]
		b.events = b.events[1:]
		if ev.Kind == Acquired {
			b.before = heldAt{epoch: ev.Epoch, partitions: ev.Partitions}
		} else {
			b.before = heldAt{}
		}
		if len(b.events) == 0 {
			delete(f.backlog, topic)
		} else {
			f.order = append(f.order, topic)
		}
		return ev, true
	}
	return OwnershipEvent{}, false
}

// foldedCount is how many events folding has saved.
func (f *ownershipFeed) foldedCount() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.folded
}

// pump hands the queued events to the consumer until the node stops,
// then closes the channel.
func (n *Node) pumpOwnershipEvents() {
	defer n.wg.Done()
	f := n.ownFeed
	defer close(f.out)
	for {
		ev, ok := f.next()
		if !ok {
			select {
			case <-n.ctx.Done():
				return
			case <-f.wake:
			}
			continue
		}
		select {
		case <-n.ctx.Done():
			return
		case f.out <- ev:
		}
	}
}

// OwnershipEvents returns the channel of this node's ownership events:
// Acquired when it comes to hold a topic (and, after a restart, for every
// topic it still holds), Released when it stops holding one. The events of
// one topic arrive in the order they happened and always alternate: an
// Acquired at a higher epoch is preceded by the Released of the one before.
// Events of different topics are not ordered against each other.
//
// The node never waits for the reader: a topic's unread events stay in a
// per-topic backlog, and a backlog longer than two events folds into the
// net change from what the reader was last told (at most a Released of
// that epoch, then an Acquired of the epoch held now), so holdings that
// began and ended unread are skipped and memory stays at two events per
// topic changed since the last read. A node that is not started delivers
// nothing. The channel closes when the node stops; a stopped node serves
// nothing, whatever the last events said.
//
// Events are kept from the first call on, which begins with an Acquired
// for every topic held then: a node nobody asks keeps none. A program
// that embeds the node calls it before Start, as the node's own records
// then give it every topic it holds after a restart.
//
// Being told Acquired does not make a write safe to acknowledge: check the
// topic's Guard for that.
func (n *Node) OwnershipEvents() <-chan OwnershipEvent {
	n.ownFeedOnce.Do(n.startOwnershipFeed)
	return n.ownFeed.out
}

// startOwnershipFeed turns the feed on with an Acquired for every topic
// held now, in topic order, while no change of the holdings can be made
// or announced (lease.Agent.Holdings; the topics loaded from the store are
// announced before the node is shared), so each change reaches the feed
// once: held now, or announced after.
func (n *Node) startOwnershipFeed() {
	n.lease.Holdings(func(held map[string]ownership.Topic) {
		n.ownFeed.on.Store(true)
		for _, topic := range slices.Sorted(maps.Keys(held)) {
			t := held[topic]
			n.ownFeed.held(topic, t.Epoch, t.Partitions)
		}
	})
}

// ErrNotServing is wrapped by the error of a Guard whose lease does not
// cover its topic at its epoch.
var ErrNotServing = errors.New("node: not serving topic at that epoch")

// NotServingError is a Guard's refusal: Held is the epoch this node holds
// the topic at (0: not held), Why the reason in words (not held, another
// epoch, no lease, released).
type NotServingError struct {
	Topic string
	Epoch uint64
	Held  uint64
	Why   string
}

func (e *NotServingError) Error() string {
	return fmt.Sprintf("node: not serving %q at epoch %d (held at %d): %s", e.Topic, e.Epoch, e.Held, e.Why)
}

func (e *NotServingError) Unwrap() error { return ErrNotServing }

// Guard checks that this node may acknowledge a write of topic at epoch.
// Take one per Acquired event and call Check after the write is durable
// and before acknowledging it, as the node does for its own produces.
type Guard struct {
	n     *Node
	topic []byte
	epoch uint64
}

// Guard returns the guard of topic at epoch.
func (n *Node) Guard(topic string, epoch uint64) Guard {
	return Guard{n: n, topic: []byte(topic), epoch: epoch}
}

// Check returns nil while this node holds the topic at the guard's epoch
// under an unexpired lease from the topic's shard leader, and a
// *NotServingError otherwise. It takes a read lock and reads the clock; it
// neither allocates nor waits when it returns nil. A check that passed
// covers a write made before it: one owner at a time (docs/leases.md)
// means no write at a later epoch was acknowledged before it.
func (g Guard) Check() error {
	t, r := g.n.lease.Serve(g.topic, g.epoch)
	if r == ownership.Servable {
		return nil
	}
	return &NotServingError{Topic: string(g.topic), Epoch: g.epoch, Held: t.Epoch, Why: r.String()}
}

// Topic and Epoch return what the guard covers.
func (g Guard) Topic() string { return string(g.topic) }

// Epoch returns the epoch the guard covers.
func (g Guard) Epoch() uint64 { return g.epoch }

// announce turns durable ownership changes into events; why is the reason
// of the drops among them.
func (n *Node) announce(changes []ownership.Change, why ReleaseReason) {
	for _, c := range changes {
		switch {
		case c.Put:
			n.ownFeed.held(c.Topic, c.Held.Epoch, c.Held.Partitions)
		case c.Drop:
			n.ownFeed.dropped(c.Topic, why)
		}
		if n.ownedFn != nil {
			var held uint64
			if c.Put {
				held = c.Held.Epoch
			}
			n.ownedFn(c.Topic, held, c.Floor)
		}
	}
}
