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

type tenure struct {
	node        string
	epoch       uint64
	first, last time.Time
}

// checkOwners returns a violation for every two tenures of one topic that
// overlap or run against epoch order.
func checkOwners(acks []writeAck) []string {
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
				out = append(out, fmt.Sprintf("two owners: %s acknowledged writes to %s at epoch %d from %.6fs to %.6fs, %s at epoch %d from %.6fs",
					prev.node, topic, prev.epoch, secs(prev.first), secs(prev.last), cur.node, cur.epoch, secs(cur.first)))
			case cur.epoch < prev.epoch:
				out = append(out, fmt.Sprintf("epoch went backwards: %s acknowledged writes to %s at epoch %d from %.6fs, after %s did at epoch %d",
					cur.node, topic, cur.epoch, secs(cur.first), prev.node, prev.epoch))
			}
		}
	}
	return out
}

func secs(t time.Time) float64 { return t.Sub(epoch).Seconds() }
