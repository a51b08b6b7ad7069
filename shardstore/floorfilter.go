package shardstore

import (
	"sync"

	"github.com/zeebo/xxh3"
)

// floorFilter is a Bloom filter of the topics that have an epoch floor in
// the node slot. An owner reads its topic's floor at every OpenTopic, and
// most topics never had one: the filter answers those without a read of
// the store (a seek in a memtable full of raft entries, 10–20 µs).
// Every floor written passes through Batch.PutTopicFloor, which adds the
// topic before the batch commits, so a topic the filter does not know has
// no floor; a topic it may know is read. It is built at Open from the
// floors in the store.
//
// The filter grows in layers: a layer that reached its capacity stays as
// it is, and a new one, twice as large, takes the topics after it, so no
// topic needs to be hashed again and no key read again.
type floorFilter struct {
	mu     sync.Mutex
	layers []bloomLayer
}

// The first layer's capacity in topics, the bits per topic (with
// floorFilterProbes probes, about 1% of the topics without a floor are
// read anyway), and the probes per topic.
const (
	floorFilterFirst      = 1 << 14
	floorFilterBitsPerKey = 10
	floorFilterProbes     = 7
)

type bloomLayer struct {
	bits     []uint64
	n, limit int
}

func newBloomLayer(limit int) bloomLayer {
	words := (limit*floorFilterBitsPerKey + 63) / 64
	return bloomLayer{bits: make([]uint64, words), limit: limit}
}

// probe calls fn with the bit of each probe of hash h in l.
func (l *bloomLayer) probe(h uint64, fn func(word int, mask uint64) bool) bool {
	m := uint64(len(l.bits)) * 64
	h1, h2 := h, h>>32|h<<32|1
	for i := range uint64(floorFilterProbes) {
		b := (h1 + i*h2) % m
		if !fn(int(b/64), 1<<(b%64)) {
			return false
		}
	}
	return true
}

// add records topic.
func (f *floorFilter) add(topic []byte) {
	h := xxh3.Hash(topic)
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.layers) == 0 || f.layers[len(f.layers)-1].n >= f.layers[len(f.layers)-1].limit {
		limit := floorFilterFirst
		if len(f.layers) > 0 {
			limit = 2 * f.layers[len(f.layers)-1].limit
		}
		f.layers = append(f.layers, newBloomLayer(limit))
	}
	l := &f.layers[len(f.layers)-1]
	l.probe(h, func(w int, mask uint64) bool { l.bits[w] |= mask; return true })
	l.n++
}

// mayHave reports whether topic may have been added: false only when it
// was not.
func (f *floorFilter) mayHave(topic []byte) bool {
	h := xxh3.Hash(topic)
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.layers {
		l := &f.layers[i]
		if l.probe(h, func(w int, mask uint64) bool { return l.bits[w]&mask != 0 }) {
			return true
		}
	}
	return false
}
