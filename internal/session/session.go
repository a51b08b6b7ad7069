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

// Window is how many sequence numbers a windowed Writer's session hands
// out from its oldest write in flight: past it, a write takes the next
// session with room, or a new one. A shard keeps at most
// meta.MaxSessionAnswers (64) answers of a session above the floor the
// session last told it, dropping the oldest for room, and it cannot tell
// a dropped number from one never seen: so without a window, one write
// held up on its way (a retry after a split, a slow forward) while its
// session's later writes fill the shard would be refused on arrival as
// if its answer were gone. Half the shard's bound leaves room for a floor
// the shard learned late.
const Window = 32

// Writer numbers writes in one session, or, windowed, in as many
// sessions as its writes in flight need (Window each): a random nonzero
// ID for each and the sequence numbers of its writes. Each write takes
// its number once (Begin) and carries it in every attempt (Stamp); Finish
// marks it answered or given up. Stamp's floor is every number of the
// write's session below the oldest of its writes still in flight, which
// the cluster may forget. Safe for concurrent use.
type Writer struct {
	window uint64 // 0: one session, unbounded

	mu    sync.Mutex
	lanes []*lane // the sessions, the first with the Writer's ID
}

// lane is one session of a Writer.
type lane struct {
	id   uint64
	next uint64          // the next number to hand out
	low  uint64          // every number below low is finished
	done map[uint64]bool // finished ones above low
}

// Ticket is one write's place: its session and sequence number.
type Ticket struct {
	l   *lane
	seq uint64
}

// Seq is the ticket's sequence number in its session.
func (t Ticket) Seq() uint64 { return t.seq }

// ID is the ID of the ticket's session (0 for the zero Ticket).
func (t Ticket) ID() uint64 {
	if t.l == nil {
		return 0
	}
	return t.l.id
}

// New returns a Writer of one session with a fresh random ID.
func New() *Writer { return WithID(randomID()) }

// NewWindowed returns a windowed Writer (Window) whose first session has
// a fresh random ID.
func NewWindowed() *Writer {
	w := WithID(randomID())
	w.window = Window
	return w
}

// WithID returns a Writer of one session with the given ID (nonzero), for
// a writer that must draw it from a seed. A session's ID must never be
// used again once its writer is gone: its numbers would start again at 1.
func WithID(id uint64) *Writer {
	return &Writer{lanes: []*lane{newLane(id)}}
}

// WithIDWindowed is WithID windowed; the IDs of the sessions after the
// first are drawn from id.
func WithIDWindowed(id uint64) *Writer {
	w := WithID(id)
	w.window = Window
	return w
}

func newLane(id uint64) *lane {
	return &lane{id: id, next: 1, low: 1, done: make(map[uint64]bool)}
}

func randomID() uint64 {
	var b [8]byte
	var id uint64
	for id == 0 {
		_, _ = rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	return id
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

// ID returns the ID of the Writer's first session.
func (w *Writer) ID() uint64 { return w.lanes[0].id }

// Sessions returns how many sessions the Writer has used.
func (w *Writer) Sessions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.lanes)
}

// Begin takes the next sequence number for a write: in the first session
// with room in its window, or in a new one.
func (w *Writer) Begin() Ticket {
	w.mu.Lock()
	defer w.mu.Unlock()
	var l *lane
	for _, c := range w.lanes {
		if w.window == 0 || c.next-c.low < w.window {
			l = c
			break
		}
	}
	if l == nil {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[0:], w.lanes[0].id)
		binary.LittleEndian.PutUint64(b[8:], uint64(len(w.lanes)))
		l = newLane(xxh3.HashSeed(b[:], 0x1a4e) | 1)
		w.lanes = append(w.lanes, l)
	}
	t := Ticket{l: l, seq: l.next}
	l.next++
	return t
}

// Finish marks t's write answered or given up: it is never sent again.
func (w *Writer) Finish(t Ticket) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := t.l
	if t.seq != l.low {
		l.done[t.seq] = true
		return
	}
	l.low++
	for l.done[l.low] {
		delete(l.done, l.low)
		l.low++
	}
}

// Stamp returns the wire session of an attempt of t's write. The floor is
// read at each attempt, so a retry lets go of what finished meanwhile.
func (w *Writer) Stamp(t Ticket) wire.Session {
	w.mu.Lock()
	floor := t.l.low - 1
	w.mu.Unlock()
	return wire.Session{ID: t.l.id, Seq: t.seq, Floor: floor}
}
