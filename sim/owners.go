package sim

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// One owner at a time, checked where it happens: every acknowledged write
// is recorded at the virtual instant its node sent the acknowledgement.
// Per topic, the acknowledgements of each (node, epoch) span an interval
// from its first to its last; no two such intervals may overlap, and they
// must follow one another in epoch order. (history.Check sees the same
// writes through the clients, whose answers arrive later.)
//
// A tenure begins, if earlier than its first acknowledgement, when its
// node durably took the topic at that epoch (world.Runtime.Owned): the
// topic's leader opens a new owner only once every earlier owner's lease
// has run out, so no earlier owner acknowledges a write from then on,
// whether or not the new owner has acknowledged one yet. (A node that
// takes a topic and never acknowledges a write there, as one a stale
// OpenTopic reached late, makes no tenure.)

type writeAck struct {
	topic string
	node  string
	epoch uint64
	at    time.Time
}

// noteAnswer records a node's answer to a client request if it
// acknowledges a write.
func (w *World) noteAnswer(node, topic string, frame []byte) {
	var h wire.Header
	if wire.DecodeHeader(frame, &h) != nil || h.Kind != wire.KindProduceAck {
		return
	}
	var a wire.ProduceAck
	if wire.DecodeProduceAck(frame[wire.HeaderSize:], &a) != nil {
		return
	}
	w.acks = append(w.acks, writeAck{topic: topic, node: node, epoch: a.Epoch, at: w.now})
}

// noteOwned records a durable ownership change of h's (world.Runtime.Owned):
// the instant it took topic at epoch held, and the floor below which it
// closed the topic for good. An epoch a node closed never comes back to
// it: a late or duplicated OpenTopic it took anyway would announce to
// its embedder, as acquired, a topic it was told was released.
func (w *World) noteOwned(h *host, topic string, held, floor uint64) {
	k := h.id + "/" + topic
	if held != 0 {
		w.holds = append(w.holds, writeAck{topic: topic, node: h.id, epoch: held, at: w.now})
		if f := w.floors[k]; held <= f {
			w.reopened = append(w.reopened, fmt.Sprintf("epoch came back: %s took %s at epoch %d at %.6fs, after it closed every epoch up to %d",
				h.id, topic, held, secs(w.now), f))
		}
	}
	if floor > w.floors[k] {
		w.floors[k] = floor
	}
}

type tenure struct {
	node        string
	epoch       uint64
	first, last time.Time
	// held: first is when the node took the topic, not an acknowledgement.
	held bool
}

// checkOwners returns a violation for every two tenures of one topic that
// overlap or run against epoch order; holds are when nodes took topics at
// epochs (writeAck.at: when the node's store had it).
func checkOwners(acks, holds []writeAck) []string {
	byTopic := make(map[string]map[string]*tenure)
	for _, a := range acks {
		m := byTopic[a.topic]
		if m == nil {
			m = make(map[string]*tenure)
			byTopic[a.topic] = m
		}
		k := fmt.Sprintf("%s@%d", a.node, a.epoch)
		if t := m[k]; t != nil {
			t.last = a.at
		} else {
			m[k] = &tenure{node: a.node, epoch: a.epoch, first: a.at, last: a.at}
		}
	}
	for _, h := range holds {
		if t := byTopic[h.topic][fmt.Sprintf("%s@%d", h.node, h.epoch)]; t != nil && h.at.Before(t.first) {
			t.first, t.held = h.at, true
		}
	}
	var out []string
	for _, topic := range slices.Sorted(maps.Keys(byTopic)) {
		var ts []*tenure
		for _, t := range byTopic[topic] {
			ts = append(ts, t)
		}
		slices.SortFunc(ts, func(a, b *tenure) int {
			if c := a.first.Compare(b.first); c != 0 {
				return c
			}
			return cmp.Compare(a.epoch, b.epoch)
		})
		// prev: the tenure that ends last among those before cur.
		for i := 1; i < len(ts); i++ {
			prev, cur := ts[0], ts[i]
			for _, t := range ts[:i] {
				if t.last.After(prev.last) {
					prev = t
				}
			}
			switch {
			case !cur.first.After(prev.last):
				out = append(out, fmt.Sprintf("two owners: %s acknowledged writes to %s at epoch %d from %.6fs to %.6fs, %s at epoch %d from %.6fs%s",
					prev.node, topic, prev.epoch, secs(prev.first), secs(prev.last), cur.node, cur.epoch, secs(cur.first), cur.since()))
			case cur.epoch < prev.epoch:
				out = append(out, fmt.Sprintf("epoch went backwards: %s acknowledged writes to %s at epoch %d from %.6fs, after %s did at epoch %d",
					cur.node, topic, cur.epoch, secs(cur.first), prev.node, prev.epoch))
			}
		}
	}
	return out
}

// since says what the tenure's first instant is, when it is not an
// acknowledgement.
func (t *tenure) since() string {
	if t.held {
		return " (when it took the topic)"
	}
	return ""
}

func secs(t time.Time) float64 { return t.Sub(epoch).Seconds() }
