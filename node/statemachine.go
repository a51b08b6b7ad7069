package node

import (
	"bytes"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// A shard's meta.State is stored one record per topic (keys in
// shardstore/metakeys.go). An applied run of commands writes only the
// records it changed, into the raft round's batch that also holds the
// applied index, so a restart and a raft snapshot (which streams every data
// key of the shard) both find exactly the state of the applied index.

// applyResult is what a proposer gets back from Host.Propose.
type applyResult struct {
	a       meta.Assignment
	changed bool
	// replayed: a client's write applied before; a and err are its first
	// answer.
	replayed bool
	moved    int
	err      error
}

type shardState struct {
	mu sync.Mutex
	st *meta.State
	// legacy: loaded from shardstore.LegacyMetaKey; the next apply writes every
	// record and deletes it.
	legacy bool
	// key and val are Apply's encoding buffers (raftmux worker only).
	key, val []byte
	// lastGrant: when this node last computed a lease grant on the shard
	// for each owner (see grant). Under mu, so that a grant computed before
	// an apply is always seen by that apply.
	lastGrant map[string]time.Time
	// lastAsk: when each owner last asked for a lease on the shard here,
	// granted or not (see reassignDead).
	lastAsk map[string]time.Time
	// log is the shard's change log, for watchers (node/watch).
	log *watch.Log
	// opened holds each owner's newest opens applied here (see grant).
	opened map[string]*recentOpens
}

// recentOpensLen is how many of an owner's newest opens a shard keeps.
const recentOpensLen = 16

// recentOpens is one owner's newest opens in a shard, in apply order: the
// OpenTopics an owner has not received yet when it builds a lease round
// are, while topics stream in, the newest ones.
type recentOpens struct {
	n    int // opens noted so far; the next goes to ents[n%recentOpensLen]
	ents [recentOpensLen]struct {
		topic string
		epoch uint64
	}
}

func (s *shardState) noteOpen(owner, topic string, epoch uint64) {
	if s.opened == nil {
		s.opened = make(map[string]*recentOpens)
	}
	r := s.opened[owner]
	if r == nil {
		r = &recentOpens{}
		s.opened[owner] = r
	}
	e := &r.ents[r.n%recentOpensLen]
	e.topic, e.epoch = topic, epoch
	r.n++
}

// holdsAllBut reports whether digest, an owner's digest of what it holds,
// is the digest d of what the state gives it here with some of its newest
// opens taken out: walking back from the newest, each open the state still
// gives the owner at its epoch is taken out of d, and each step is a
// candidate. Every candidate is a subset of what the state gives the owner
// (an open met twice is taken out and put back), so a match grants only
// topics the state gives it at those epochs. The same collision
// assumption as the digests themselves, over up to recentOpensLen
// candidates instead of one.
func (s *shardState) holdsAllBut(owner string, d, digest uint64) bool {
	r := s.opened[owner]
	if r == nil {
		return false
	}
	for i := 1; i <= min(r.n, recentOpensLen); i++ {
		e := &r.ents[(r.n-i)%recentOpensLen]
		if !s.st.OwnsAt(owner, e.topic, e.epoch) && !mutant.On(mutant.GrantUnchecked) {
			continue
		}
		if d ^= meta.TopicDigest(e.topic, e.epoch); d == digest {
			return true
		}
	}
	return false
}

// stateMachine is the raftmux.StateMachine of every shard on the node: one
// meta.State per hosted shard, owned by the shard's raftmux worker for
// writes and read under the shard's lock by request handlers.
type stateMachine struct {
	store *shardstore.Store
	// effects is told, after a run of commands applied, which RPCs they
	// owe topic owners, with the last grant computed here for every owner
	// a Close names; it decides whether this node must send them.
	effects func(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time)
	// logged is told, after a run of commands applied, that the shard's
	// change log grew (watchers wait for it). May be nil.
	logged func(shard uint64)
	// changeLogLen is Config.ChangeLogLen (0: DefaultChangeLogLen).
	changeLogLen int

	mu     sync.Mutex
	shards map[uint64]*shardState
	// halted: shards whose replica here halted (Halted): their state is
	// no longer kept current, so it is neither served nor loaded again.
	halted map[uint64]bool

	// grantMu orders grants answered from a cached summary (answerHeld)
	// against applies: version counts the applies that changed a state,
	// restores and removals; summaryGrant holds, per owner, when this node
	// last granted it leases on a summary without reading each shard. An
	// apply that closes an owner's topic takes the later of it and the
	// shard's lastGrant as the owner's last grant.
	grantMu      sync.Mutex
	version      uint64
	summaryGrant map[string]time.Time
}

// stateVersion returns the count of state changes so far (see grantMu).
func (m *stateMachine) stateVersion() uint64 {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	return m.version
}

// grantIfUnchanged records a grant to owner at now and reports true if no
// state changed since stateVersion returned version; else it records
// nothing.
func (m *stateMachine) grantIfUnchanged(owner string, version uint64, now time.Time) bool {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	if m.version != version {
		return false
	}
	if m.summaryGrant == nil {
		m.summaryGrant = make(map[string]time.Time)
	}
	m.summaryGrant[owner] = now
	return true
}

// changed counts a state change; closes lists the owners an apply closed
// topics of, whose last grants it fills in lastGrant (may be nil).
func (m *stateMachine) changed(closes []meta.Effect, lastGrant map[string]time.Time) map[string]time.Time {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	m.version++
	for _, e := range closes {
		if e.Kind != meta.EffectClose {
			continue
		}
		if g, ok := m.summaryGrant[e.Node]; ok && g.After(lastGrant[e.Node]) {
			if lastGrant == nil {
				lastGrant = make(map[string]time.Time)
			}
			lastGrant[e.Node] = g
		}
	}
	return lastGrant
}

var (
	_ raftmux.StateMachine = (*stateMachine)(nil)
	_ raftmux.HaltObserver = (*stateMachine)(nil)
)

func (m *stateMachine) load(shard uint64) (st *meta.State, legacy bool, err error) {
	defer func() {
		if err == nil {
			st.TrackChanges()
		}
	}()
	if b, err := m.store.Get(shard, shardstore.LegacyMetaKey); err != nil {
		return nil, false, fmt.Errorf("node: shard %d: load state: %w", shard, err)
	} else if b != nil {
		st, err := meta.DecodeSnapshot(b)
		if err != nil {
			return nil, false, fmt.Errorf("node: shard %d: decode state: %w", shard, err)
		}
		return st, true, nil
	}
	l := meta.NewLoader()
	if b, err := m.store.Get(shard, shardstore.EpochFloorKey); err != nil {
		return nil, false, fmt.Errorf("node: shard %d: load floor: %w", shard, err)
	} else if b != nil {
		f, err := shardstore.DecodeEpochFloor(b)
		if err != nil {
			return nil, false, fmt.Errorf("node: shard %d: %w: floor %x", shard, meta.ErrBadSnapshot, b)
		}
		l.SetFloor(f)
	}
	var addErr error
	if err := m.store.Iterate(shard, shardstore.TopicRecordPrefix, func(key, value []byte) bool {
		addErr = l.Add(key[len(shardstore.TopicRecordPrefix):], value)
		return addErr == nil
	}); err != nil {
		return nil, false, fmt.Errorf("node: shard %d: load records: %w", shard, err)
	}
	if err := m.store.Iterate(shard, shardstore.SessionPrefix, func(key, value []byte) bool {
		var id uint64
		if id, addErr = shardstore.ParseSessionKey(key); addErr == nil {
			addErr = l.AddSession(id, value)
		}
		return addErr == nil
	}); err != nil {
		return nil, false, fmt.Errorf("node: shard %d: load sessions: %w", shard, err)
	}
	if st, err = l.State(); err != nil {
		return nil, false, fmt.Errorf("node: shard %d: load records: %w", shard, err)
	}
	if addErr != nil {
		return nil, false, fmt.Errorf("node: shard %d: load sessions: %w", shard, addErr)
	}
	return st, false, nil
}

// shard returns the state of a shard, loading it from the store on first use.
func (m *stateMachine) shard(shard uint64) (*shardState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.shards[shard]; s != nil {
		return s, nil
	}
	if m.halted[shard] {
		return nil, fmt.Errorf("node: shard %d: %w", shard, raftmux.ErrHalted)
	}
	st, legacy, err := m.load(shard)
	if err != nil {
		return nil, err
	}
	log, err := m.loadLog(shard, st)
	if err != nil {
		return nil, err
	}
	s := &shardState{st: st, legacy: legacy, log: log}
	m.shards[shard] = s
	return s, nil
}

func (m *stateMachine) loadLog(shard uint64, st *meta.State) (*watch.Log, error) {
	n := m.changeLogLen
	if n == 0 {
		n = DefaultChangeLogLen
	}
	return watch.LoadLog(m.store, shard, n, st)
}

// with runs fn on shard's state under its lock.
func (m *stateMachine) with(shard uint64, fn func(st *meta.State)) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.st)
	return nil
}

// withShard runs fn on shard's state and lease bookkeeping under its lock.
func (m *stateMachine) withShard(shard uint64, fn func(s *shardState)) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
	return nil
}

// hosted runs fn on shard's state if the shard is loaded here (a replica
// that applied or restored since the node started) and reports whether it
// was.
func (m *stateMachine) hosted(shard uint64, fn func(st *meta.State)) bool {
	m.mu.Lock()
	s := m.shards[shard]
	m.mu.Unlock()
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.st)
	return true
}

// tryHosted is hosted for a caller that must not wait (an event loop):
// busy reports that a lock was held, and then fn did not run.
func (m *stateMachine) tryHosted(shard uint64, fn func(st *meta.State)) (hosted, busy bool) {
	if !m.mu.TryLock() {
		return false, true
	}
	s := m.shards[shard]
	m.mu.Unlock()
	if s == nil {
		return false, false
	}
	if !s.mu.TryLock() {
		return true, true
	}
	defer s.mu.Unlock()
	fn(s.st)
	return true, false
}

func (m *stateMachine) Apply(shard uint64, cmds []raftmux.Command, b raftmux.Batch) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	var effs []meta.Effect
	var res meta.Result
	var lastGrant map[string]time.Time
	changed, logged := false, false
	s.mu.Lock()
	for i := range cmds {
		err := s.st.ApplyEntry(cmds[i].Data, &res)
		if mutant.On(mutant.ApplyError) {
			err = nil
		}
		cmds[i].Result = &applyResult{a: res.Assignment, changed: res.Changed, replayed: res.Replayed, moved: res.Moved, err: err}
		changes := res.Changes
		if err != nil {
			changes = nil
		}
		if s.log.Apply(cmds[i].Index, changes) {
			logged = true
		}
		if err == nil && res.Changed {
			changed = true
			effs = append(effs, res.Effects...)
			for _, e := range res.Effects {
				if e.Kind == meta.EffectOpen {
					s.noteOpen(e.Node, e.Topic, e.Epoch)
				}
				if g, ok := s.lastGrant[e.Node]; ok && e.Kind == meta.EffectClose {
					if lastGrant == nil {
						lastGrant = make(map[string]time.Time)
					}
					lastGrant[e.Node] = g
				}
			}
		}
	}
	if changed {
		// Under the shard's lock: a grant from a cached summary either
		// comes before (and is counted here) or sees the new version.
		lastGrant = m.changed(effs, lastGrant)
	}
	s.persist(shard, b)
	s.mu.Unlock()
	if len(effs) > 0 && m.effects != nil {
		m.effects(shard, slices.Clone(effs), lastGrant)
	}
	if logged && m.logged != nil {
		m.logged(shard)
	}
	return nil
}

// grant computes a lease grant on shard for owner, whose topics there
// digest to digest, under the shard's lock so that it is ordered against
// every apply: may is asked, at the time the grant is computed, whether
// and at which term this node may grant. The grant covers all the owner
// holds if its digest is the state's, or the state's with some of the
// owner's newest opens still on their way to it (holdsAllBut); else it
// lists what this replica's state says the owner owns. ok is false when no
// grant may be given.
func (m *stateMachine) grant(shard uint64, owner string, digest uint64, clock func() time.Time, may func(now time.Time) (uint64, bool)) (wire.LeaseGrant, bool) {
	s, err := m.shard(shard)
	if err != nil {
		return wire.LeaseGrant{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clock()
	if s.lastAsk == nil {
		s.lastAsk = make(map[string]time.Time)
	}
	s.lastAsk[owner] = now
	term, ok := may(now)
	if !ok {
		return wire.LeaseGrant{}, false
	}
	g := wire.LeaseGrant{Shard: shard, Term: term}
	if d := s.st.OwnerDigest(owner); d != digest && !s.holdsAllBut(owner, d, digest) {
		g.Listed = true
		s.st.EachOwnedBy(owner, func(topic string, epoch uint64) {
			g.Topics = append(g.Topics, wire.TopicEpoch{Topic: []byte(topic), Epoch: epoch})
		})
		// In a stable order, so that a run is replayed byte for byte.
		slices.SortFunc(g.Topics, func(a, b wire.TopicEpoch) int { return bytes.Compare(a.Topic, b.Topic) })
	}
	if s.lastGrant == nil {
		s.lastGrant = make(map[string]time.Time)
	}
	s.lastGrant[owner] = now
	return g, true
}

// persist writes the records the applied commands changed into b (the
// round's batch, committed with the applied index). Under s.mu.
func (s *shardState) persist(shard uint64, b raftmux.Batch) {
	s.log.Persist(b)
	if s.legacy {
		s.legacy = false
		for a := range s.st.All() {
			s.putRecord(shard, a.Topic, b)
		}
		s.putFloor(shard, b)
		b.Delete(shard, shardstore.LegacyMetaKey)
		s.st.DrainChanges(func(string) {})
		s.st.DrainSessions(func(id uint64) { s.putSession(shard, id, b) })
		return
	}
	if s.st.DrainChanges(func(topic string) { s.putRecord(shard, topic, b) }) {
		s.putFloor(shard, b)
	}
	s.st.DrainSessions(func(id uint64) { s.putSession(shard, id, b) })
}

func (s *shardState) putSession(shard, id uint64, b raftmux.Batch) {
	s.key = shardstore.SessionKey(s.key[:0], id)
	var ok bool
	if s.val, ok = s.st.AppendSession(s.val[:0], id); ok {
		b.Put(shard, s.key, s.val)
	} else {
		b.Delete(shard, s.key)
	}
}

func (s *shardState) putRecord(shard uint64, topic string, b raftmux.Batch) {
	s.key = shardstore.TopicRecordKey(s.key[:0], topic)
	var ok bool
	if s.val, ok = s.st.AppendRecord(s.val[:0], topic); ok {
		b.Put(shard, s.key, s.val)
	} else {
		b.Delete(shard, s.key)
	}
}

func (s *shardState) putFloor(shard uint64, b raftmux.Batch) {
	s.val = shardstore.AppendEpochFloor(s.val[:0], s.st.Floor())
	b.Put(shard, shardstore.EpochFloorKey, s.val)
}

func (m *stateMachine) Restore(shard, index uint64) error {
	st, legacy, err := m.load(shard)
	if err != nil {
		return err
	}
	log, err := m.loadLog(shard, st)
	if err != nil {
		return err
	}
	log.Apply(index, nil)
	// Counted before and after the state is replaced, so that no summary
	// read in between outlives it.
	m.changed(nil, nil)
	defer m.changed(nil, nil)
	m.mu.Lock()
	s := m.shards[shard]
	if s == nil {
		m.shards[shard] = &shardState{st: st, legacy: legacy, log: log}
		m.mu.Unlock()
	} else {
		m.mu.Unlock()
		s.mu.Lock()
		s.st, s.legacy, s.log, s.opened = st, legacy, log, nil
		s.mu.Unlock()
	}
	if m.logged != nil {
		m.logged(shard)
	}
	return nil
}

func (m *stateMachine) Remove(shard uint64) {
	m.mu.Lock()
	delete(m.shards, shard)
	delete(m.halted, shard) // a replica made again later starts afresh
	m.mu.Unlock()
	m.changed(nil, nil)
}

// Halted implements raftmux.HaltObserver: shard's replica here stopped
// applying, so its state falls behind for good. It is dropped from memory
// and not loaded again: a lookup here forwards to the shard's leader
// instead of answering from it.
func (m *stateMachine) Halted(shard uint64) {
	m.mu.Lock()
	delete(m.shards, shard)
	if m.halted == nil {
		m.halted = make(map[uint64]bool)
	}
	m.halted[shard] = true
	m.mu.Unlock()
	m.changed(nil, nil)
}
