// Package faultnet decides the fate of the messages between the nodes of a
// test cluster: cuts (both ways or one way, of every message or of some
// kinds), loss, delay, reordering, duplication, and paused nodes.
//
// It is a policy with no I/O and no clock. The in-process cluster tests
// apply it to real peer connections and SWIM sockets, and the simulator to
// its virtual network; each asks Decide about every message, with a
// random source of its own (a seeded one makes a run repeatable).
//
// Nodes are named by their ids. A message's kind is the wire kind of a
// peer frame, or KindSwim for a SWIM datagram or push-pull exchange.
package faultnet

import (
	"math/rand/v2"
	"sync"
	"time"
)

// KindSwim is the kind of SWIM traffic (datagrams and push-pull
// exchanges), which has no frame kind of its own.
const KindSwim uint8 = 0

// Link is how the messages of one direction between two nodes fare when
// they are not cut.
type Link struct {
	// Loss is the probability that a message is dropped.
	Loss float64
	// Dup is the probability that a delivered message is delivered twice.
	Dup float64
	// DelayMin and DelayMax bound a delivery's delay, drawn uniformly
	// between them; messages drawn different delays arrive out of order.
	DelayMin, DelayMax time.Duration
}

// Verdict is the fate of one message.
type Verdict struct {
	// Delays holds one delay per delivery: none when the message is
	// dropped, two when it is duplicated.
	Delays []time.Duration
	// Hold: the sender or the receiver is paused; deliver only after
	// Resumed(node) of the paused one is closed (then judge it again).
	Hold bool
	// Paused names the paused node when Hold is set.
	Paused string
}

// Dropped reports whether the message is not delivered at all.
func (v Verdict) Dropped() bool { return !v.Hold && len(v.Delays) == 0 }

type pair struct{ from, to string }

// block cuts the messages of one direction: of every kind when kinds is
// empty, else of those kinds.
type block struct {
	kinds map[uint8]bool
}

// Net is the fault state of a cluster. The zero value is not usable; call
// New. It is safe for concurrent use.
type Net struct {
	mu      sync.Mutex
	blocks  map[pair]block
	links   map[pair]Link
	def     Link
	paused  map[string]chan struct{}
	rng     *rand.Rand
	dropped map[pair]uint64
}

// New returns a Net that delivers everything at once; seed seeds Decide's
// random source.
func New(seed uint64) *Net {
	return &Net{
		blocks:  make(map[pair]block),
		links:   make(map[pair]Link),
		paused:  make(map[string]chan struct{}),
		rng:     rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		dropped: make(map[pair]uint64),
	}
}

// Cut drops every message from → to (one way), or only those of kinds.
// "*" as from or to matches every node.
func (n *Net) Cut(from, to string, kinds ...uint8) {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := block{}
	if len(kinds) > 0 {
		b.kinds = make(map[uint8]bool, len(kinds))
		if old, ok := n.blocks[pair{from, to}]; ok && old.kinds != nil {
			for k := range old.kinds {
				b.kinds[k] = true
			}
		}
		for _, k := range kinds {
			b.kinds[k] = true
		}
	}
	n.blocks[pair{from, to}] = b
}

// Isolate cuts node off from every other node, both ways. Its clients
// still reach it: only messages between nodes are judged.
func (n *Net) Isolate(node string) {
	n.Cut(node, "*")
	n.Cut("*", node)
}

// Partition cuts every node of a from every node of b, both ways.
func (n *Net) Partition(a, b []string) {
	for _, x := range a {
		for _, y := range b {
			n.Cut(x, y)
			n.Cut(y, x)
		}
	}
}

// Heal removes every cut.
func (n *Net) Heal() {
	n.mu.Lock()
	defer n.mu.Unlock()
	clear(n.blocks)
}

// HealLink removes the cut from → to (as given to Cut).
func (n *Net) HealLink(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.blocks, pair{from, to})
}

// SetDefault sets how every link without a link of its own fares.
func (n *Net) SetDefault(l Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.def = l
}

// SetLink sets how messages from → to fare.
func (n *Net) SetLink(from, to string, l Link) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.links[pair{from, to}] = l
}

// ClearLink makes messages from → to fare as the default link again.
func (n *Net) ClearLink(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.links, pair{from, to})
}

// Pause holds every message to or from node until Resume: to the others
// it falls silent, and it hears nothing, as a stopped process would.
func (n *Net) Pause(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.paused[node] == nil {
		n.paused[node] = make(chan struct{})
	}
}

// Resume releases a paused node and the messages held for it.
func (n *Net) Resume(node string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch := n.paused[node]; ch != nil {
		close(ch)
		delete(n.paused, node)
	}
}

// Resumed returns a channel closed once node is not paused (already
// closed if it is not).
func (n *Net) Resumed(node string) <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ch := n.paused[node]; ch != nil {
		return ch
	}
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Dropped returns how many messages from → to were dropped by cuts and
// loss.
func (n *Net) Dropped(from, to string) uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped[pair{from, to}]
}

func (n *Net) blocked(from, to string, kind uint8) bool {
	for _, p := range [...]pair{{from, to}, {from, "*"}, {"*", to}} {
		if b, ok := n.blocks[p]; ok && (b.kinds == nil || b.kinds[kind]) {
			return true
		}
	}
	return false
}

// Decide judges one message of kind from → to, drawing from Net's own
// random source.
func (n *Net) Decide(from, to string, kind uint8) Verdict {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.decide(n.rng, from, to, kind)
}

// DecideWith is Decide drawing from rng (the caller's, which it must not
// use concurrently).
func (n *Net) DecideWith(rng *rand.Rand, from, to string, kind uint8) Verdict {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.decide(rng, from, to, kind)
}

func (n *Net) decide(rng *rand.Rand, from, to string, kind uint8) Verdict {
	for _, p := range [...]string{from, to} {
		if n.paused[p] != nil {
			return Verdict{Hold: true, Paused: p}
		}
	}
	if n.blocked(from, to, kind) {
		n.dropped[pair{from, to}]++
		return Verdict{}
	}
	l, ok := n.links[pair{from, to}]
	if !ok {
		l = n.def
	}
	if l.Loss > 0 && rng.Float64() < l.Loss {
		n.dropped[pair{from, to}]++
		return Verdict{}
	}
	copies := 1
	if l.Dup > 0 && rng.Float64() < l.Dup {
		copies = 2
	}
	v := Verdict{Delays: make([]time.Duration, copies)}
	for i := range v.Delays {
		d := l.DelayMin
		if span := l.DelayMax - l.DelayMin; span > 0 {
			d += time.Duration(rng.Int64N(int64(span) + 1))
		}
		v.Delays[i] = d
	}
	return v
}
