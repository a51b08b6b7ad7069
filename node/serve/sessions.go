package serve

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

// sessions is a node's session for the writes of clients that name none,
// and the stamps it puts on the writes it proposes as a leader.
type sessions struct {
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
func (s *Server) ownSession(done Done) (wire.Session, Done) {
	w := s.sessions.own
	seq := w.Begin()
	return w.Stamp(seq), func(a Answer) {
		w.Finish(seq)
		done(a)
	}
}

// stamp returns the stamp of a write this node proposes now on shard as
// its leader: the newest stamp its state held when it took office, plus
// the time since on its monotonic clock. Stamps so never run ahead of the
// time that passed (a leader's term lost between offices only slows them),
// and a clock set forward or back moves nothing.
func (s *Server) stamp(shard uint64) uint64 {
	term, _ := s.lease.LeadsAt(shard)
	now := s.env.Now()
	ss := &s.sessions
	ss.mu.Lock()
	b, ok := ss.stamps[shard]
	ss.mu.Unlock()
	if !ok || b.term != term {
		var base uint64
		_ = s.sm.With(shard, func(st *meta.State) { base = st.Clock() })
		b = stampBase{term: term, base: base, at: now}
		ss.mu.Lock()
		if ss.stamps == nil {
			ss.stamps = make(map[uint64]stampBase)
		}
		ss.stamps[shard] = b
		ss.mu.Unlock()
	}
	return b.base + uint64(max(now.Sub(b.at), 0))
}
