package node

import (
	"fmt"
	"slices"
	"sync"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
)

// stateKey is the shard data key holding the shard's encoded meta.State.
// The whole state is rewritten once per applied run of commands, in the
// same batch as the applied index, so a restart and a raft snapshot both
// find exactly the state of the applied index.
var stateKey = []byte("meta")

// applyResult is what a proposer gets back from Host.Propose.
type applyResult struct {
	a       meta.Assignment
	changed bool
	moved   int
	err     error
}

type shardState struct {
	mu sync.Mutex
	st *meta.State
}

// stateMachine is the raftmux.StateMachine of every shard on the node: one
// meta.State per hosted shard, owned by the shard's raftmux worker for
// writes and read under the shard's lock by request handlers.
type stateMachine struct {
	store *shardstore.Store
	// effects is told, after a run of commands applied, which RPCs they
	// owe topic owners; it decides whether this node must send them.
	effects func(shard uint64, effs []meta.Effect)

	mu     sync.Mutex
	shards map[uint64]*shardState
}

var _ raftmux.StateMachine = (*stateMachine)(nil)

func (m *stateMachine) load(shard uint64) (*meta.State, error) {
	b, err := m.store.Get(shard, stateKey)
	if err != nil {
		return nil, fmt.Errorf("node: shard %d: load state: %w", shard, err)
	}
	if b == nil {
		return meta.New(), nil
	}
	st, err := meta.DecodeSnapshot(b)
	if err != nil {
		return nil, fmt.Errorf("node: shard %d: decode state: %w", shard, err)
	}
	return st, nil
}

// shard returns the state of a shard, loading it from the store on first use.
func (m *stateMachine) shard(shard uint64) (*shardState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.shards[shard]; s != nil {
		return s, nil
	}
	st, err := m.load(shard)
	if err != nil {
		return nil, err
	}
	s := &shardState{st: st}
	m.shards[shard] = s
	return s, nil
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

func (m *stateMachine) Apply(shard uint64, cmds []raftmux.Command, b raftmux.Batch) error {
	s, err := m.shard(shard)
	if err != nil {
		return err
	}
	var effs []meta.Effect
	changed := false
	var res meta.Result
	s.mu.Lock()
	for i := range cmds {
		err := s.st.ApplyEntry(cmds[i].Data, &res)
		cmds[i].Result = &applyResult{a: res.Assignment, changed: res.Changed, moved: res.Moved, err: err}
		if err == nil && res.Changed {
			changed = true
			effs = append(effs, res.Effects...)
		}
	}
	if changed {
		b.Put(shard, stateKey, s.st.AppendSnapshot(nil))
	}
	s.mu.Unlock()
	if len(effs) > 0 && m.effects != nil {
		m.effects(shard, slices.Clone(effs))
	}
	return nil
}

func (m *stateMachine) Restore(shard, _ uint64) error {
	st, err := m.load(shard)
	if err != nil {
		return err
	}
	m.mu.Lock()
	s := m.shards[shard]
	if s == nil {
		m.shards[shard] = &shardState{st: st}
		m.mu.Unlock()
		return nil
	}
	m.mu.Unlock()
	s.mu.Lock()
	s.st = st
	s.mu.Unlock()
	return nil
}

func (m *stateMachine) Remove(shard uint64) {
	m.mu.Lock()
	delete(m.shards, shard)
	m.mu.Unlock()
}
