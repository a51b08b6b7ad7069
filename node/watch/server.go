package watch

import (
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Watch and ListTopics are answered by the node they reach, from its own
// replicas, whatever their role: every replica keeps its shard's change
// log, and a watcher's position is a raft index, the same on every
// replica. A replica behind the watcher's position gives nothing for its
// shard until it catches up; one ahead gives the changes in between. A
// shard this node hosts no replica of is named in the answer, and the
// client asks a replica of it. A watch with nothing to give is held, as a
// callback and no goroutine, until a change is applied to one of its
// shards or its wait ends; the node holds at most Config.MaxWatchers of
// them and answers the others at once.

// Limits of the answers.
const (
	// maxEventsPerAnswer: a watch answer stops taking changes past this
	// many, once the raft index it is at is complete, so that an answer
	// stays far below wire.MaxWatchEvents and a frame's size.
	maxEventsPerAnswer = 4096
	// listReadAhead: a listing reads this many shards at a time (one raft
	// read index each, in parallel), so that a page over many small shards
	// waits for one round trip per listReadAhead shards, not per shard.
	listReadAhead = 16
	// hostedFresh is how long the list of shards this node hosts is used:
	// reading the store's shards costs about 0.3 ms at 1,024 shards, and
	// every watch and listing needs them. A replica added since is reported
	// not hosted for that long (the client asks another), one removed is
	// found empty (no change given).
	hostedFresh = time.Second
)

// Errors a request is refused with. A refusal wraps one of them, and its
// Error is the message to answer with.
var (
	// ErrBadRequest: the request names a shard the cluster does not have,
	// or asks for nothing (a watch of no shard, a page of no topic; the
	// wire decoders let neither through).
	ErrBadRequest = errors.New("watch: bad request")
	// ErrFull: the node holds Config.MaxWatchers watches already, so a
	// watch with nothing to give is answered at once.
	ErrFull = errors.New("watch: too many watches held")
	// ErrUnreadable: the first shard of a listing could not be read (its
	// raft read index failed), so the page has nothing; the cause is
	// wrapped too.
	ErrUnreadable = errors.New("watch: shard unreadable")
)

// refusal is a refused request: its message, and what it wraps.
type refusal struct {
	msg  string
	errs []error
}

func (r *refusal) Error() string   { return r.msg }
func (r *refusal) Unwrap() []error { return r.errs }

func refuse(kind error, msg string, cause ...error) error {
	return &refusal{msg: msg, errs: append([]error{kind}, cause...)}
}

// Replicas is what a Server reads of the node: its replicas of the
// shards, their logs and states, and raft's read index.
type Replicas interface {
	// Hosted lists the shards this node holds a replica of, as its store
	// says.
	Hosted() ([]uint64, error)
	// Read runs fn with shard's change log and its state's active topics
	// from a key on (meta.State.TopicsFrom), under the shard's lock (the
	// one its Log's writer takes), loading them first if need be; an
	// error says they did not load, and fn did not run. fn reads and
	// returns; it keeps neither.
	Read(shard uint64, fn func(l *Log, topicsFrom func(from []byte) iter.Seq[meta.Assignment])) error
	// ReadIndex calls done once this node's replica of shard has applied
	// everything its leader had committed when asked, or with why not. It
	// may call done on a raft worker: done does not wait.
	ReadIndex(shard uint64, done func(err error))
}

// Config configures a Server. Every field is required.
type Config struct {
	// Map returns the cluster's shard map as this node knows it: a request
	// naming a shard at or past its IDLimit is refused (ErrBadRequest), and
	// a listing walks its live shards (a shard that split holds nothing
	// its children do not).
	Map func() *router.ShardMap
	// MaxWatchers bounds the watches held at once while nothing changes
	// (node.Config.MaxWatchers); one more is answered at once (ErrFull).
	MaxWatchers int
	// MaxWait bounds how long a watch is held, whatever it asks: the node
	// gives half its request timeout, so that a held watch is answered
	// before the request times out.
	MaxWait time.Duration
	// Replicas is the node's replicas.
	Replicas Replicas
	// OwnerAddr is the client address of a node, as this node knows it
	// ("" if unknown), given with every owner in an answer. It is called
	// under a shard's lock: it does not wait.
	OwnerAddr func(node string) string
	// Clock is the node's clock: the shards it hosts are read again once
	// the list is a second old.
	Clock func() time.Time
	// After runs f after d on the node's clock; stop cancels it and reports
	// whether it did. It ends a held watch's wait.
	After func(d time.Duration, f func()) (stop func() bool)
	// Spawn runs fn soon, off the caller's goroutine (a raft worker that
	// applied a change or answered a read index), unless the node is
	// closing; it reports whether fn will run. A wake-up or a listing's
	// next shards run in it.
	Spawn func(fn func()) bool
	// Logger takes what a Server cannot answer with (a shard that does not
	// load for a watch).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	switch {
	case c.Map == nil:
		return fmt.Errorf("watch: Map required")
	case c.MaxWatchers < 1:
		return fmt.Errorf("watch: MaxWatchers %d below 1", c.MaxWatchers)
	case c.MaxWait < 0:
		return fmt.Errorf("watch: MaxWait %v negative", c.MaxWait)
	case c.Replicas == nil, c.OwnerAddr == nil, c.Clock == nil, c.After == nil, c.Spawn == nil, c.Logger == nil:
		return fmt.Errorf("watch: Replicas, OwnerAddr, Clock, After, Spawn and Logger required")
	}
	return nil
}

// Server answers a node's Watch and ListTopics requests, and holds the
// watches waiting for a change. It is safe for concurrent use: its lock
// guards the set of held watches, and each held watch has its own, which
// lets one answer through.
type Server struct {
	cfg Config

	mu      sync.Mutex
	waiting map[*waiter]struct{}

	hosted atomic.Pointer[hostedSet]
	stats  struct {
		watches, events, compacted, refused atomic.Uint64
	}
}

// New returns a Server of cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, waiting: make(map[*waiter]struct{})}, nil
}

// Stats counts what a Server did.
type Stats struct {
	Watches   uint64 // Watch requests taken (neither bad nor failed on the store)
	Events    uint64 // changes given to watchers
	Compacted uint64 // watches answered that a position is older than a log keeps
	Refused   uint64 // watches answered at once because MaxWatchers were held (ErrFull)
	Waiting   int    // watches held now
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	waiting := len(s.waiting)
	s.mu.Unlock()
	return Stats{Watches: s.stats.watches.Load(), Events: s.stats.events.Load(), Compacted: s.stats.compacted.Load(),
		Refused: s.stats.refused.Load(), Waiting: waiting}
}

// waiter is one held watch: the shards it waits on, as a bit set, and
// what to do when one of them changes.
type waiter struct {
	shards []uint64
	wake   func()
}

func (w *waiter) has(shard uint64) bool {
	i := shard / 64
	return i < uint64(len(w.shards)) && w.shards[i]&(1<<(shard%64)) != 0
}

// hold holds w unless max watches are held already.
func (s *Server) hold(w *waiter, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.waiting[w]; !ok && len(s.waiting) >= max {
		return false
	}
	s.waiting[w] = struct{}{}
	return true
}

func (s *Server) release(w *waiter) {
	s.mu.Lock()
	delete(s.waiting, w)
	s.mu.Unlock()
}

// Changed wakes, once, every watch waiting on shard: its log grew, or was
// replaced by a snapshot's. The state machine calls it after an apply, on
// the raft worker; the watches look again in work of their own (Spawn).
func (s *Server) Changed(shard uint64) {
	s.mu.Lock()
	var woken []*waiter
	for w := range s.waiting {
		if w.has(shard) {
			woken = append(woken, w)
			delete(s.waiting, w)
		}
	}
	s.mu.Unlock()
	for _, w := range woken {
		w.wake()
	}
}

// hostedSet is which shards this node held a replica of at a time.
type hostedSet struct {
	at     time.Time
	hosted []bool
}

// isHosted reports whether hosted (hostedShards) holds shard.
func isHosted(hosted []bool, shard uint64) bool {
	return shard < uint64(len(hosted)) && hosted[shard]
}

// hostedShards returns which shards this node holds a replica of, as the
// store said at most hostedFresh ago. The slice is shared: read only.
func (s *Server) hostedShards() ([]bool, error) {
	now := s.cfg.Clock()
	if h := s.hosted.Load(); h != nil && now.Sub(h.at) < hostedFresh && now.Sub(h.at) >= 0 {
		return h.hosted, nil
	}
	ids, err := s.cfg.Replicas.Hosted()
	if err != nil {
		return nil, err
	}
	var hosted []bool
	if len(ids) > 0 {
		hosted = make([]bool, slices.Max(ids)+1)
	}
	for _, id := range ids {
		hosted[id] = true
	}
	s.hosted.Store(&hostedSet{at: now, hosted: hosted})
	return hosted, nil
}

// Watch answers m through done, called once: at once when there are
// changes to give (or shards to send elsewhere, or compacted positions),
// else once one is applied or the wait, at most Config.MaxWait, ends. A
// refused watch gets an error: ErrBadRequest, ErrFull, or the store's
// when the hosted shards cannot be read. m, and the bytes it holds, stay
// the caller's and unchanged until done.
func (s *Server) Watch(m *wire.Watch, done func(ev *wire.WatchEvents, err error)) {
	if len(m.Positions) == 0 {
		done(nil, refuse(ErrBadRequest, "a watch names no shard"))
		return
	}
	var last uint64
	for _, p := range m.Positions {
		last = max(last, p.Shard)
	}
	if sm := s.cfg.Map(); last >= uint64(sm.IDLimit()) {
		done(nil, refuse(ErrBadRequest, fmt.Sprintf("shard %d out of range: the cluster has %d shards", last, sm.Len())))
		return
	}
	hosted, err := s.hostedShards()
	if err != nil {
		done(nil, err)
		return
	}
	s.stats.watches.Add(1)
	wait := min(time.Duration(m.WaitMillis)*time.Millisecond, s.cfg.MaxWait)
	for _, p := range m.Positions {
		if p.Index == wire.NowIndex {
			wait = 0 // a watch from now wants its positions at once
		}
	}
	collect := func() (wire.WatchEvents, bool) {
		ev := s.collect(m, hosted)
		return ev, len(ev.Events) > 0 || len(ev.NotHosted) > 0 || len(ev.Compacted) > 0 || len(ev.Splits) > 0
	}
	answer := func(ev wire.WatchEvents) {
		s.stats.events.Add(uint64(len(ev.Events)))
		if len(ev.Compacted) > 0 {
			s.stats.compacted.Add(1)
		}
		done(&ev, nil)
	}
	ev, some := collect()
	if some || wait <= 0 {
		answer(ev)
		return
	}
	// Held: woken by a change to one of its shards, answered by the first
	// wake that finds something or by the end of the wait.
	w := &waiter{shards: make([]uint64, (last+64)/64)}
	for _, p := range m.Positions {
		if isHosted(hosted, p.Shard) {
			w.shards[p.Shard/64] |= 1 << (p.Shard % 64)
		}
	}
	var mu sync.Mutex
	answered := false
	var stop func() bool
	finish := func(ev wire.WatchEvents) {
		mu.Lock()
		if answered {
			mu.Unlock()
			return
		}
		answered = true
		st := stop
		mu.Unlock()
		if st != nil {
			st()
		}
		s.release(w)
		answer(ev)
	}
	check := func() {
		mu.Lock()
		over := answered
		mu.Unlock()
		if over {
			return
		}
		// Held again before looking, so that a change applied in between
		// wakes it.
		s.hold(w, s.cfg.MaxWatchers+1)
		if ev, some := collect(); some {
			finish(ev)
		}
		mu.Lock()
		over = answered
		mu.Unlock()
		if over {
			s.release(w) // answered meanwhile, by the end of the wait
		}
	}
	w.wake = func() { s.cfg.Spawn(check) } // off the raft worker that applied the change
	if !s.hold(w, s.cfg.MaxWatchers) {
		s.stats.refused.Add(1)
		done(nil, refuse(ErrFull, fmt.Sprintf("node holds %d watches already", s.cfg.MaxWatchers)))
		return
	}
	if ev, some := collect(); some {
		finish(ev)
		return
	}
	st := s.cfg.After(wait, func() {
		ev, _ := collect()
		finish(ev)
	})
	mu.Lock()
	stop = st
	mu.Unlock()
}

// collect gathers the changes after m's positions that match it, in the
// shards this node hosts, up to about maxEventsPerAnswer of them, and the
// splits of the shards whose every change up to their split it gave.
func (s *Server) collect(m *wire.Watch, hosted []bool) wire.WatchEvents {
	var out wire.WatchEvents
	space := s.cfg.Map().Space()
	budget := maxEventsPerAnswer
	for _, p := range m.Positions {
		if !isHosted(hosted, p.Shard) {
			out.NotHosted = append(out.NotHosted, p.Shard)
			continue
		}
		if budget <= 0 {
			out.Positions = append(out.Positions, p)
			continue
		}
		err := s.cfg.Replicas.Read(p.Shard, func(l *Log, _ func([]byte) iter.Seq[meta.Assignment]) {
			if p.Index == wire.NowIndex {
				out.Positions = append(out.Positions, wire.ShardPosition{Shard: p.Shard, Index: l.applied})
				return
			}
			if p.Index < l.trimmed {
				out.Compacted = append(out.Compacted, wire.ShardPosition{Shard: p.Shard, Index: l.trimmed})
				return
			}
			pos := max(p.Index, l.applied)
			var last uint64
			l.since(p.Index, func(e *change) bool {
				if budget <= 0 && e.index != last {
					pos = last // the rest next time
					return false
				}
				last = e.index
				if e.index == p.Index+1 && e.seq < p.Skip {
					return true // seen already
				}
				if topic := e.c.Topic; (m.Exact && topic == string(m.Match)) || (!m.Exact && len(topic) >= len(m.Match) && topic[:len(m.Match)] == string(m.Match)) {
					out.Events = append(out.Events, wire.WatchEvent{
						Shard: p.Shard, Index: e.index, Seq: e.seq, Change: wire.ChangeKind(e.c.Kind),
						Topic: []byte(topic), Owner: []byte(e.c.Owner), OwnerAddr: []byte(s.cfg.OwnerAddr(e.c.Owner)),
						Epoch: e.c.Epoch, Partitions: e.c.Partitions,
					})
					budget--
				}
				return true
			})
			out.Positions = append(out.Positions, wire.ShardPosition{Shard: p.Shard, Index: pos})
			if l.ended > 0 && pos >= l.ended {
				if low, high, err := space.Children(uint32(p.Shard)); err == nil {
					out.Splits = append(out.Splits, wire.ShardSplit{Shard: p.Shard, Index: l.ended, Low: uint64(low), High: uint64(high)})
				}
			}
		})
		if err != nil {
			s.cfg.Logger.Warn("watch: load shard", "shard", p.Shard, "err", err)
			out.NotHosted = append(out.NotHosted, p.Shard)
		}
	}
	return out
}
