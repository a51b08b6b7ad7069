package shardsm

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/shardstore"
)

// A shard's meta.State is stored one record per topic (keys in
// shardstore/metakeys.go). An applied run of commands writes only the
// records it changed, into the raft round's batch that also holds the
// applied index, so a restart and a raft snapshot (which streams every data
// key of the shard) both find exactly the state of the applied index.

// Config is what a Machine is given.
type Config struct {
	// Store holds the shards' records and change logs.
	Store *shardstore.Store
	// ChangeLogLen is how many changes each shard's change log keeps (at
	// least 1; the node's Config.ChangeLogLen).
	ChangeLogLen int
	// Effects is told, after a run of commands applied, which RPCs they
	// owe topic owners, with the last grant computed here for every owner
	// a Close names; it decides whether this node must send them. May be
	// nil.
	Effects func(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time)
	// Logged is told, after a run of commands applied or a snapshot
	// restored, that the shard's change log grew (watchers wait for it).
	// May be nil.
	Logged func(shard uint64)
	// Space is the cluster's shard id space (its base shard count): a
	// split gives each topic to the child whose range holds it. Zero
	// refuses every split.
	Space router.ShardSpace
	// Answered, if set, is told of each client write this replica
	// answers for the first time (meta.Result.Session), with the answer
	// (node.Config.OnWriteApplied). It runs on the raft worker and must
	// not block.
	Answered func(shard, index uint64, w AnsweredWrite)
}

// AnsweredWrite is a client write a replica answered for the first time:
// its session, and the answer every retry gets from then on.
type AnsweredWrite struct {
	Session    meta.SessionRef
	Assignment meta.Assignment
	Err        error
}

// Result is what a proposer gets back from the apply of its command (the
// raftmux.Command's Result).
type Result struct {
	Assignment meta.Assignment
	Changed    bool
	// Replayed: a client's write applied before; Assignment and Err are
	// its first answer.
	Replayed bool
	Moved    int
	Err      error
}

// Machine is the raftmux.StateMachine of every shard on the node: one
// meta.State per hosted shard, owned by the shard's raftmux worker for
// writes and read under the shard's lock by request handlers.
type Machine struct {
	store *shardstore.Store
	// effects, logged and changeLogLen are Config's.
	effects      func(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time)
	logged       func(shard uint64)
	answered     func(shard, index uint64, w AnsweredWrite)
	changeLogLen int
	space        router.ShardSpace

	mu     sync.Mutex
	shards map[uint64]*Shard
	// halted: shards whose replica here halted (Halted): their state is
	// no longer kept current, so it is neither served nor loaded again.
	halted map[uint64]bool
	// loads: the shards being loaded from the store, each by the first
	// caller that wanted it, outside mu, so that the other shards are
	// applied and read meanwhile; a caller that wants the same shard
	// waits for that load. gen counts the Restores, Removes and Halts: a
	// load that straddles one is not kept.
	loads map[uint64]chan struct{} // closed when the load ends
	gen   uint64
	// splits counts the splits applied here.
	splits atomic.Uint64
	// ended: whether each shard asked about applied its split here (true),
	// or had not when asked (false); an apply of a split and a restore set
	// it, a removal drops it (Ended). Under endedMu alone, taken after mu
	// when both are: the lease rounds ask it for every shard they vouch
	// for, and must not wait on the shards' map.
	endedMu sync.Mutex
	ended   map[uint64]bool

	// grantMu orders grants answered from a cached summary against
	// applies: version counts the applies that changed a state, restores
	// and removals; summaryGrant holds, per owner, when this node last
	// granted it leases on a summary without reading each shard. An apply
	// that closes an owner's topic takes the later of it and the shard's
	// LastGrant as the owner's last grant.
	grantMu      sync.Mutex
	version      uint64
	summaryGrant map[string]time.Time
}

var (
	_ raftmux.StateMachine = (*Machine)(nil)
	_ raftmux.HaltObserver = (*Machine)(nil)
	_ raftmux.EndObserver  = (*Machine)(nil)
)

// New returns a Machine over cfg.Store, with no shard loaded yet.
func New(cfg Config) *Machine {
	return &Machine{
		store:        cfg.Store,
		answered:     cfg.Answered,
		effects:      cfg.Effects,
		logged:       cfg.Logged,
		changeLogLen: cfg.ChangeLogLen,
		space:        cfg.Space,
		shards:       make(map[uint64]*Shard),
	}
}

func (m *Machine) load(shard uint64) (st *meta.State, legacy bool, err error) {
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
	if b, err := m.store.Get(shard, shardstore.SplitMarkKey); err != nil {
		return nil, false, fmt.Errorf("node: shard %d: load split mark: %w", shard, err)
	} else if b != nil {
		l.SetSplit()
	}
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

// shard returns the state of a shard, loading it from the store on first
// use. The load runs outside mu: a node that starts with many topics
// loads each shard when it is first applied or read, and the others go
// on meanwhile.
func (m *Machine) shard(shard uint64) (*Shard, error) {
	for {
		m.mu.Lock()
		if s := m.shards[shard]; s != nil {
			m.mu.Unlock()
			return s, nil
		}
		if m.halted[shard] {
			m.mu.Unlock()
			return nil, fmt.Errorf("node: shard %d: %w", shard, raftmux.ErrHalted)
		}
		if done := m.loads[shard]; done != nil {
			m.mu.Unlock()
			<-done
			continue
		}
		done := make(chan struct{})
		if m.loads == nil {
			m.loads = make(map[uint64]chan struct{})
		}
		m.loads[shard] = done
		gen := m.gen
		m.mu.Unlock()

		s, err := m.loadShard(shard)
		m.mu.Lock()
		delete(m.loads, shard)
		close(done)
		if err != nil {
			m.mu.Unlock()
			return nil, err
		}
		if m.gen != gen || m.shards[shard] != nil {
			// Restored, removed or halted meanwhile: look again.
			m.mu.Unlock()
			continue
		}
		m.shards[shard] = s
		m.mu.Unlock()
		return s, nil
	}
}

// loadShard reads shard's state and change log from the store.
func (m *Machine) loadShard(shard uint64) (*Shard, error) {
	st, legacy, err := m.load(shard)
	if err != nil {
		return nil, err
	}
	log, err := m.loadLog(shard, st)
	if err != nil {
		return nil, err
	}
	return &Shard{State: st, Log: log, legacy: legacy}, nil
}

func (m *Machine) loadLog(shard uint64, st *meta.State) (*watch.Log, error) {
	return watch.LoadLog(m.store, shard, m.changeLogLen, st)
}

// With runs fn on shard's state under its lock, loading the shard from
// the store on first use. It fails for a shard whose replica halted
// (raftmux.ErrHalted) or that does not load.
func (m *Machine) With(shard uint64, fn func(st *meta.State)) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s.State)
	return nil
}

// WithShard runs fn on shard's state and lease bookkeeping under its lock,
// as With does.
func (m *Machine) WithShard(shard uint64, fn func(s *Shard)) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
	return nil
}

// loaded returns shard if its state is loaded here, without loading it.
func (m *Machine) loaded(shard uint64) *Shard {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.shards[shard]
}

// WithLoadedShard runs fn on shard's state and lease bookkeeping under its
// lock, as WithShard does, if the shard's state is loaded here; it reports
// whether it was. It never loads the shard (see Grant).
func (m *Machine) WithLoadedShard(shard uint64, fn func(s *Shard)) bool {
	s := m.loaded(shard)
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
	return true
}

// Hosted runs fn on shard's state if the shard is loaded here (a replica
// that applied or restored since the node started) and reports whether it
// was.
func (m *Machine) Hosted(shard uint64, fn func(st *meta.State)) bool {
	return m.WithLoadedShard(shard, func(s *Shard) { fn(s.State) })
}

// TryHosted is Hosted for a caller that must not wait (an event loop):
// busy reports that a lock was held, and then fn did not run.
func (m *Machine) TryHosted(shard uint64, fn func(st *meta.State)) (hosted, busy bool) {
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
	fn(s.State)
	return true, false
}

// Apply implements raftmux.StateMachine: it applies a run of committed
// commands to shard's state, sets each command's Result (a *Result),
// writes the records they changed and their change log into b, and then
// tells Config.Effects and Config.Logged.
func (m *Machine) Apply(shard uint64, cmds []raftmux.Command, b raftmux.Batch) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	var effs []meta.Effect
	var res meta.Result
	var lastGrant map[string]time.Time
	changed, logged := false, false
	s.mu.Lock()
	s.Applied += uint64(len(cmds))
	for i := range cmds {
		var seeded []uint64
		err := m.seedSplit(shard, s.State, &cmds[i], b, &seeded)
		applied := err == nil
		if applied {
			err = s.State.ApplyEntry(cmds[i].Data, &res)
		} else if !errors.Is(err, errSplitRefused) {
			s.mu.Unlock()
			return err
		}
		if err == nil && res.Split {
			s.Log.End(cmds[i].Index)
			m.fillChildren(shard, s, seeded, b)
			m.splits.Add(1)
			m.setEnded(shard, true)
		}
		if mutant.On(mutant.ApplyError) {
			err = nil
		}
		cmds[i].Result = &Result{Assignment: res.Assignment, Changed: res.Changed, Replayed: res.Replayed, Moved: res.Moved, Err: err}
		if m.answered != nil && applied && res.Session.ID != 0 {
			m.answered(shard, cmds[i].Index, AnsweredWrite{Session: res.Session, Assignment: res.Assignment, Err: err})
		}
		changes := res.Changes
		if err != nil {
			changes = nil
		}
		if s.Log.Apply(cmds[i].Index, changes) {
			logged = true
		}
		if err == nil && res.Changed {
			changed = true
			effs = append(effs, res.Effects...)
			for _, e := range res.Effects {
				if e.Kind == meta.EffectOpen {
					s.noteOpen(e.Node, e.Topic, e.Epoch)
				}
				if g, ok := s.LastGrant[e.Node]; ok && e.Kind == meta.EffectClose {
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

// Restore implements raftmux.StateMachine: shard's records were replaced
// by a raft snapshot at index, and its state is loaded from them again.
func (m *Machine) Restore(shard, index uint64) error {
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
	m.gen++
	m.setEnded(shard, st.Split())
	s := m.shards[shard]
	if s == nil {
		m.shards[shard] = &Shard{State: st, Log: log, legacy: legacy}
		m.mu.Unlock()
	} else {
		m.mu.Unlock()
		s.mu.Lock()
		s.State, s.legacy, s.Log, s.opened = st, legacy, log, nil
		s.mu.Unlock()
	}
	if m.logged != nil {
		m.logged(shard)
	}
	return nil
}

// Remove implements raftmux.StateMachine: shard's replica here is gone.
func (m *Machine) Remove(shard uint64) {
	m.mu.Lock()
	m.gen++
	m.endedMu.Lock()
	delete(m.ended, shard)
	m.endedMu.Unlock()
	delete(m.shards, shard)
	delete(m.halted, shard) // a replica made again later starts afresh
	m.mu.Unlock()
	m.changed(nil, nil)
}

// Halted implements raftmux.HaltObserver: shard's replica here stopped
// applying, so its state falls behind for good. It is dropped from memory
// and not loaded again: a lookup here forwards to the shard's leader
// instead of answering from it.
func (m *Machine) Halted(shard uint64) {
	m.mu.Lock()
	m.gen++
	delete(m.shards, shard)
	if m.halted == nil {
		m.halted = make(map[uint64]bool)
	}
	m.halted[shard] = true
	m.mu.Unlock()
	m.changed(nil, nil)
}

// Ended reports whether this node's replica of shard applied its split
// (meta.State.Split): it then vouches for no leader of the shard and
// confirms no reads, so that no leader of the parent is confirmed once
// the children, whose quorums meet every parent quorum in such a replica,
// may have elected theirs (docs/shards.md). A shard not loaded is read
// from the store once.
func (m *Machine) Ended(shard uint64) bool {
	m.endedMu.Lock()
	e, known := m.ended[shard]
	m.endedMu.Unlock()
	if known {
		return e
	}
	v, err := m.store.Get(shard, shardstore.SplitMarkKey)
	if err != nil {
		return false // asked again next time
	}
	m.endedMu.Lock()
	defer m.endedMu.Unlock()
	if e, known := m.ended[shard]; known {
		return e // an apply or restore said since
	}
	if m.ended == nil {
		m.ended = make(map[uint64]bool)
	}
	m.ended[shard] = v != nil
	return v != nil
}

// Splits returns how many splits this node's replicas applied.
func (m *Machine) Splits() uint64 { return m.splits.Load() }

// setEnded records whether shard ended.
func (m *Machine) setEnded(shard uint64, ended bool) {
	m.endedMu.Lock()
	defer m.endedMu.Unlock()
	if m.ended == nil {
		m.ended = make(map[uint64]bool)
	}
	m.ended[shard] = ended
}
