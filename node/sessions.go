package node

import (
	"sync"
	"time"

	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// Writes are exactly-once by session (meta/session.go): a client's own,
// or, for a client that names none, the node's, taken where the request
// enters the cluster, so the node's own re-sends of it (a forward retried
// at a new leader after the old one lost track of it) apply once.

// writeSessions is a node's session for the writes of clients that name
// none, and the stamps it puts on the writes it proposes as a leader.
type writeSessions struct {
	own *session.Writer

	mu     sync.Mutex
	stamps map[uint64]stampBase
}

// stampBase is where a shard leader's stamps start: the newest stamp its
// state had applied when it took office in term, at its clock's at.
type stampBase struct {
	term, base uint64
	at         time.Time
}

// ownSession takes the next number of the node's own session for a write
// that arrived without one; the returned done finishes it, then calls
// done.
func (n *Node) ownSession(done answerFunc) (wire.Session, answerFunc) {
	w := n.sessions.own
	seq := w.Begin()
	return w.Stamp(seq), func(a answer) {
		w.Finish(seq)
		done(a)
	}
}

// stamp returns the stamp of a write this node proposes now on shard as
// its leader: the newest stamp its state held when it took office, plus
// the time since on its monotonic clock. Stamps so never run ahead of the
// time that passed (a leader's term lost between offices only slows them),
// and a clock set forward or back moves nothing.
func (n *Node) stamp(shard uint64) uint64 {
	term, _ := n.leadsAt(shard)
	now := n.clock()
	s := &n.sessions
	s.mu.Lock()
	b, ok := s.stamps[shard]
	s.mu.Unlock()
	if !ok || b.term != term {
		var base uint64
		_ = n.sm.with(shard, func(st *meta.State) { base = st.Clock() })
		b = stampBase{term: term, base: base, at: now}
		s.mu.Lock()
		if s.stamps == nil {
			s.stamps = make(map[uint64]stampBase)
		}
		s.stamps[shard] = b
		s.mu.Unlock()
	}
	return b.base + uint64(max(now.Sub(b.at), 0))
}

// onceLocks is held by a produce of a producer session from its append to
// its answer, one lock per (topic, session, sequence), so that copies of
// one produce take turns (a copy that finds the first one's answer must
// not acknowledge records the first one's lease check may still remove)
// while every other produce of the topic, of the same session included,
// goes on beside them and shares the log's syncs. A copy that finds the
// lock held does not block: its turn is a function, run once the lock is
// passed to it (on spawn), as at the topic's gate.
type onceLocks struct {
	mu sync.Mutex
	m  map[onceKey]*onceLock
}

type onceKey struct {
	topic   string
	id, seq uint64
}

// onceLock is one produce's lock: held, with the turns of its copies
// waiting in order.
type onceLock struct {
	waiting []func(unlock func())
}

// lock runs f with the lock of topic's produce s held: at once if it is
// free, else once every copy ahead of it unlocked. f must call unlock
// once.
func (l *onceLocks) lock(topic []byte, s wire.Session, spawn func(func()) bool, f func(unlock func())) {
	k := onceKey{topic: string(topic), id: s.ID, seq: s.Seq}
	l.mu.Lock()
	if l.m == nil {
		l.m = make(map[onceKey]*onceLock)
	}
	if e := l.m[k]; e != nil {
		e.waiting = append(e.waiting, f)
		l.mu.Unlock()
		return
	}
	l.m[k] = &onceLock{}
	l.mu.Unlock()
	f(l.unlocker(k, spawn))
}

// unlocker returns the unlock of k's lock: it passes the lock to the
// next copy waiting, or frees it.
func (l *onceLocks) unlocker(k onceKey, spawn func(func()) bool) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			e := l.m[k]
			if len(e.waiting) == 0 {
				delete(l.m, k)
				l.mu.Unlock()
				return
			}
			next := e.waiting[0]
			e.waiting = e.waiting[1:]
			l.mu.Unlock()
			run := func() { next(l.unlocker(k, spawn)) }
			if !spawn(run) {
				run()
			}
		})
	}
}
