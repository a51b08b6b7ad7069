package records

import (
	"sync"

	"github.com/shoalmq/shoal/wire"
)

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
