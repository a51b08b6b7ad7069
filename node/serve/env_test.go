package serve

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// fakeEnv is a node with a manual clock and timers, whose peers are
// frames captured in sent.
type fakeEnv struct {
	now     time.Time
	timers  []*fakeTimer
	sent    []sentFrame
	sendErr error
	addrs   map[string]string
	alive   map[string]bool
	led     map[uint32]bool
	names   map[uint64]string
	term    uint64 // the term LeadsAt names
	states  map[uint64]*meta.State
}

type sentFrame struct {
	to    string
	h     wire.Header
	frame []byte
}

type fakeTimer struct {
	at      time.Time
	f       func()
	stopped bool
	fired   bool
}

func newFakeEnv() *fakeEnv {
	return &fakeEnv{now: time.Unix(1000, 0), addrs: map[string]string{}, alive: map[string]bool{},
		led: map[uint32]bool{}, names: map[uint64]string{}, term: 1, states: map[uint64]*meta.State{}}
}

// advance moves the clock by d and fires the timers due.
func (e *fakeEnv) advance(d time.Duration) {
	e.now = e.now.Add(d)
	for _, t := range slices.Clone(e.timers) {
		if !t.stopped && !t.fired && !t.at.After(e.now) {
			t.fired = true
			t.f()
		}
	}
}

// pending counts the timers neither stopped nor fired.
func (e *fakeEnv) pending() int {
	n := 0
	for _, t := range e.timers {
		if !t.stopped && !t.fired {
			n++
		}
	}
	return n
}

func (e *fakeEnv) Send(peer string, frame []byte) error {
	if e.sendErr != nil {
		return e.sendErr
	}
	var h wire.Header
	if err := wire.DecodeHeader(frame, &h); err != nil {
		panic(err)
	}
	e.sent = append(e.sent, sentFrame{to: peer, h: h, frame: append([]byte(nil), frame...)})
	return nil
}

func (e *fakeEnv) Now() time.Time { return e.now }

func (e *fakeEnv) After(d time.Duration, f func()) func() bool {
	t := &fakeTimer{at: e.now.Add(d), f: f}
	e.timers = append(e.timers, t)
	return func() bool {
		was := !t.stopped && !t.fired
		t.stopped = true
		return was
	}
}

func (e *fakeEnv) ClientAddr(id string) string         { return e.addrs[id] }
func (e *fakeEnv) Members() Members                    { return fakeMembers{e} }
func (e *fakeEnv) NameOf(id uint64) (string, bool)     { n, ok := e.names[id]; return n, ok }
func (e *fakeEnv) Leads(shard uint64) bool             { return e.led[uint32(shard)] }
func (e *fakeEnv) Deposed(shard uint64)                { e.led[uint32(shard)] = false }
func (e *fakeEnv) AnswersLocally(uint64) bool          { return false }
func (e *fakeEnv) LeadsAt(shard uint64) (uint64, bool) { return e.term, e.led[uint32(shard)] }
func (e *fakeEnv) Proof(uint64, uint64, time.Time)     {}

func (e *fakeEnv) WhenSettled(_ uint64, _ []byte, _ uint64, _ bool, done func(bool)) { done(true) }

func (e *fakeEnv) With(shard uint64, fn func(*meta.State)) error {
	if st := e.states[shard]; st != nil {
		fn(st)
		return nil
	}
	return errors.New("no state here")
}

func (e *fakeEnv) Hosted(shard uint64, fn func(*meta.State)) bool { return e.With(shard, fn) == nil }
func (e *fakeEnv) ReadIndex(_ uint64, done func(error))           { done(errors.New("no raft here")) }

func (e *fakeEnv) Propose(_ uint64, _ []byte, done func(*shardsm.Result, error)) {
	done(nil, errors.New("no raft here"))
}

type fakeMembers struct{ e *fakeEnv }

func (m fakeMembers) Alive(id string) bool               { return m.e.alive[id] }
func (m fakeMembers) Drained(string) bool                { return false }
func (m fakeMembers) Candidates(*meta.State) []meta.Node { return nil }

// newTestServer is a Server of node n1 over 8 shards, with a request
// timeout of 4s.
func newTestServer(t *testing.T) (*Server, *fakeEnv) {
	t.Helper()
	env := newFakeEnv()
	routes, err := router.NewCache(router.CacheConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Self: "n1", Timeout: 4 * time.Second, FirstForward: 100,
		Leaders: router.NewLeaderTable(8), Routes: routes, Session: session.WithID(7),
		Events: env, Lease: env, Machine: env, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return s, env
}
