// Package birth holds a node's birth and readiness. A node is born once
// its cluster is: it made or joined the shard groups (node/reconcile
// decides when), and the store's birth marker says so from then on, in
// every later life. A born node becomes ready, once, when the node says
// it may serve clients (its metadata synced and its leaders known,
// reconcile.Controller.Ready); Ready is closed then.
package birth

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Config configures a State.
type Config struct {
	// Born: the store's birth marker was found (an earlier life was
	// born).
	Born bool
	// Persist writes the birth marker, synced.
	Persist func() error
	// Clock is the node's clock.
	Clock  func() time.Time
	Logger *slog.Logger
}

// State is a node's birth and readiness. Its methods may be called from
// any goroutine.
type State struct {
	born    atomic.Bool
	bornAt  atomic.Int64 // unix ns; 0 until born in this life or first checked
	ready   atomic.Bool
	readyAt atomic.Int64 // unix ns
	readyc  chan struct{}
	once    sync.Once
	persist func() error
	clock   func() time.Time
	log     *slog.Logger
}

// New returns the state of a node that is born when cfg.Born, and not
// ready.
func New(cfg Config) *State {
	s := &State{readyc: make(chan struct{}), persist: cfg.Persist, clock: cfg.Clock, log: cfg.Logger}
	s.born.Store(cfg.Born)
	return s
}

// Born reports whether the node's cluster is born.
func (s *State) Born() bool { return s.born.Load() }

// MarkBorn records that the node's cluster is born, and writes the birth
// marker the first time.
func (s *State) MarkBorn() {
	if s.born.Swap(true) {
		return
	}
	s.bornAt.Store(s.clock().UnixNano())
	if err := s.persist(); err != nil {
		s.log.Error("node: persist birth marker", "err", err)
	}
}

// Ready is closed once the node is ready.
func (s *State) Ready() <-chan struct{} { return s.readyc }

// IsReady reports whether the node is ready.
func (s *State) IsReady() bool { return s.ready.Load() }

// ReadyAt is when the node became ready; zero before.
func (s *State) ReadyAt() time.Time {
	var at time.Time
	if ns := s.readyAt.Load(); ns != 0 {
		at = time.Unix(0, ns)
	}
	return at
}

// MarkReady makes the node ready, once.
func (s *State) MarkReady() {
	s.once.Do(func() {
		s.readyAt.Store(s.clock().UnixNano())
		s.ready.Store(true)
		close(s.readyc)
	})
}

// Check makes a born node that is not ready yet ready when ready says so;
// ready is given when the node was born (for a node born in an earlier
// life, when it was first checked in this one).
func (s *State) Check(ready func(bornAt time.Time) bool) {
	if s.IsReady() || !s.Born() {
		return
	}
	if at := s.bornAt.Load(); at == 0 {
		s.bornAt.Store(s.clock().UnixNano())
	}
	if ready(time.Unix(0, s.bornAt.Load())) {
		s.MarkReady()
	}
}
