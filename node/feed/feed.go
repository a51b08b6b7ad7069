package feed

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/shoalmq/shoal/internal/enum"
	"github.com/shoalmq/shoal/node/ownership"
)

// Kind says what an Event announces.
type Kind uint8

const (
	// Acquired: this node holds the topic at Epoch with Partitions. An
	// Acquired at the epoch already held announces more partitions.
	Acquired Kind = 1
	// Released: this node no longer holds the topic at Epoch, for Reason.
	Released Kind = 2
)

var kindNames = enum.New("OwnershipEventKind", map[Kind]string{Acquired: "acquired", Released: "released"})

func (k Kind) String() string { return kindNames.Name(k) }

// Reason says why a topic was released.
type Reason uint8

const (
	// ReasonClosed: the topic's shard leader closed it here: the topic
	// moved to another node or was revoked.
	ReasonClosed Reason = 1
	// ReasonSuperseded: the epoch is over without a Close having arrived:
	// the shard leader's lease answer shows the topic at a later epoch or
	// not at all, or an Open at a later epoch came first.
	ReasonSuperseded Reason = 2
	// ReasonLeaving: the node is leaving the cluster (Leave) and serves
	// nothing more.
	ReasonLeaving Reason = 3
)

var reasonNames = enum.New("ReleaseReason", map[Reason]string{
	ReasonClosed: "closed", ReasonSuperseded: "superseded", ReasonLeaving: "leaving",
})

func (r Reason) String() string { return reasonNames.Name(r) }

// Event is one change of what this node holds.
type Event struct {
	Kind       Kind
	Topic      string
	Epoch      uint64
	Partitions uint32 // Acquired only
	Reason     Reason // Released only
}

// String says e in short: "topic+epoch/partitions" for an Acquired,
// "topic-epoch(reason)" for a Released.
func (e Event) String() string {
	if e.Kind == Acquired {
		return fmt.Sprintf("%s+%d/%d", e.Topic, e.Epoch, e.Partitions)
	}
	return fmt.Sprintf("%s-%d(%s)", e.Topic, e.Epoch, e.Reason)
}

// maxPendingPerTopic bounds the events of one topic waiting for the
// consumer; past it they fold into the net change (Feed.push).
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
	events []Event
}

// Feed queues ownership events for their reader. Pushing never blocks: a
// topic's events wait in its backlog, in order; a backlog that grows past
// maxPendingPerTopic is folded into the net change from what the consumer
// knows (the Released of the epoch it was told of, then the Acquired of
// the epoch held now), so that memory stays at most two events per topic
// that changed since the consumer last read. Topics take turns, so a busy
// topic does not hold the others back; events of different topics are not
// ordered against each other.
//
// A feed is off until Start: a node nobody embeds keeps no second copy of
// its holdings.
type Feed struct {
	on      atomic.Bool // set once, by Start
	once    sync.Once   // Open's
	mu      sync.Mutex
	known   map[string]heldAt // as the last pushed event left it
	backlog map[string]*topicBacklog
	order   []string // topics with a backlog, in turn
	folded  uint64
	wake    chan struct{}
	out     chan Event
}

// New returns a feed that is off.
func New() *Feed {
	return &Feed{
		known:   make(map[string]heldAt),
		backlog: make(map[string]*topicBacklog),
		wake:    make(chan struct{}, 1),
		out:     make(chan Event),
	}
}

// Out is the channel Pump hands the events to.
func (f *Feed) Out() <-chan Event { return f.out }

// Open returns Out, and on its first call starts the feed (Start) with
// the topics holdings gives it: holdings runs its function while no
// change of the holdings can be made or announced
// (lease.Agent.Holdings; the topics loaded from the store are announced
// before the node is shared), so each change reaches the feed once: held
// now, or announced after.
func (f *Feed) Open(holdings func(fn func(held map[string]ownership.Topic))) <-chan Event {
	f.once.Do(func() { holdings(f.Start) })
	return f.out
}

// Announce turns durable ownership changes into events; why is the reason
// of the drops among them. owned, when not nil, is told each change
// after the feed: the epoch now held (0: unchanged, or no longer held)
// and the floor (0: unchanged).
func (f *Feed) Announce(changes []ownership.Change, why Reason, owned func(topic string, held, floor uint64)) {
	for _, c := range changes {
		switch {
		case c.Put:
			f.Held(c.Topic, c.Held.Epoch, c.Held.Partitions)
		case c.Drop:
			f.Dropped(c.Topic, why)
		}
		if owned != nil {
			var held uint64
			if c.Put {
				held = c.Held.Epoch
			}
			owned(c.Topic, held, c.Floor)
		}
	}
}

// Start turns the feed on with an Acquired for every topic in held, in
// topic order. The caller makes sure no change of the holdings is made
// or announced meanwhile (lease.Agent.Holdings), so each change reaches
// the feed once: held now, or announced after.
func (f *Feed) Start(held map[string]ownership.Topic) {
	f.on.Store(true)
	for _, topic := range slices.Sorted(maps.Keys(held)) {
		t := held[topic]
		f.Held(topic, t.Epoch, t.Partitions)
	}
}

// Held records that topic is held at epoch with partitions, pushing the
// events that take the consumer there.
func (f *Feed) Held(topic string, epoch uint64, partitions uint32) {
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
		f.pushLocked(Event{Kind: Released, Topic: topic, Epoch: cur.epoch, Reason: ReasonSuperseded}, cur)
		cur = heldAt{}
	}
	f.pushLocked(Event{Kind: Acquired, Topic: topic, Epoch: epoch, Partitions: partitions}, cur)
}

// Dropped records that topic is no longer held, for why.
func (f *Feed) Dropped(topic string, why Reason) {
	if !f.on.Load() {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.known[topic]
	if !ok {
		return
	}
	f.pushLocked(Event{Kind: Released, Topic: topic, Epoch: cur.epoch, Reason: why}, cur)
}

// pushLocked queues ev, which changes the holding from prev.
func (f *Feed) pushLocked(ev Event, prev heldAt) {
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
func (f *Feed) foldLocked(topic string, b *topicBacklog) {
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
		b.events = append(b.events, Event{Kind: Released, Topic: topic, Epoch: b.before.epoch, Reason: why})
	}
	if now.epoch != 0 && now != b.before {
		b.events = append(b.events, Event{Kind: Acquired, Topic: topic, Epoch: now.epoch, Partitions: now.partitions})
	}
	f.folded -= uint64(len(b.events))
}

// next takes the next event to hand out: the first of the topic whose turn
// it is.
func (f *Feed) next() (Event, bool) {
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
	return Event{}, false
}

// Folded is how many events folding has saved.
func (f *Feed) Folded() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.folded
}

// Kept is how many entries the feed keeps: holdings known, backlogs and
// turns.
func (f *Feed) Kept() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.known) + len(f.backlog) + len(f.order)
}

// Pump hands the queued events to the reader of Out until stop is
// closed, then closes Out.
func (f *Feed) Pump(stop <-chan struct{}) {
	defer close(f.out)
	for {
		ev, ok := f.next()
		if !ok {
			select {
			case <-stop:
				return
			case <-f.wake:
			}
			continue
		}
		select {
		case <-stop:
			return
		case f.out <- ev:
		}
	}
}
