// Package session numbers a writer's writes for exactly-once retries (see
// wire.Session and meta's sessions): the client library's writes, and the
// ones a node sends on behalf of a client that named no session.
package session

import (
	"crypto/rand"
	"encoding/binary"
	"sync"

	"github.com/shoalmq/shoal/wire"
	"github.com/zeebo/xxh3"
)

// Writer is one session: a random nonzero ID and the sequence numbers of
// its writes. Each write takes its number once (Begin) and carries it in
// every attempt (Stamp); Finish marks it answered or given up. Stamp's
// floor is every number below the oldest write still in flight, which the
// cluster may forget. Safe for concurrent use.
type Writer struct {
	id uint64

	mu   sync.Mutex
	next uint64          // the next number to hand out
	low  uint64          // every number below low is finished
	done map[uint64]bool // finished ones above low
}

// New returns a session with a fresh random ID.
func New() *Writer {
	var b [8]byte
	var id uint64
	for id == 0 {
		_, _ = rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	return WithID(id)
}

// WithID returns a session with the given ID (nonzero), for a writer that
// must draw it from a seed. A session's ID must never be used again once
// its writer is gone: its numbers would start again at 1.
func WithID(id uint64) *Writer {
	return &Writer{id: id, next: 1, low: 1, done: make(map[uint64]bool)}
}

// DrawID draws a session ID from a seed, a writer's name and the life of
// it (a generation that rises at every start): a new one for every life,
// since a life's numbers start again at 1.
func DrawID(seed uint64, name string, life uint64) uint64 {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], seed)
	binary.LittleEndian.PutUint64(b[8:], life)
	return xxh3.HashSeed(append(b[:], name...), 0x5e55) | 1
}

// ID returns the session's ID.
func (w *Writer) ID() uint64 { return w.id }

// Begin takes the next sequence number for a write.
func (w *Writer) Begin() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	seq := w.next
	w.next++
	return seq
}

// Finish marks seq answered or given up: it is never sent again.
func (w *Writer) Finish(seq uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq != w.low {
		w.done[seq] = true
		return
	}
	w.low++
	for w.done[w.low] {
		delete(w.done, w.low)
		w.low++
	}
}

// Stamp returns the wire session of an attempt of write seq. The floor is
// read at each attempt, so a retry lets go of what finished meanwhile.
func (w *Writer) Stamp(seq uint64) wire.Session {
	w.mu.Lock()
	floor := w.low - 1
	w.mu.Unlock()
	return wire.Session{ID: w.id, Seq: seq, Floor: floor}
}
