package main

import (
	"sync"

	"github.com/shoalmq/shoal/raftmux"
)

// memSM is the state machine of -sm memory: like the Dragonboat harness's
// in-memory KV, each command sets key = its first 8 bytes to the command in
// a map per shard, and nothing of it goes to storage (raftmux still writes
// each shard's applied index into the round's batch). The data would be
// lost on a restart, which this benchmark never does.
type memSM struct {
	mu     sync.Mutex
	shards map[uint64]map[string][]byte
}

func newMemSM() *memSM { return &memSM{shards: make(map[uint64]map[string][]byte)} }

// Apply implements raftmux.StateMachine.
func (m *memSM) Apply(shard uint64, cmds []raftmux.Command, _ raftmux.Batch) error {
	m.mu.Lock()
	kv := m.shards[shard]
	if kv == nil {
		kv = make(map[string][]byte)
		m.shards[shard] = kv
	}
	for i := range cmds {
		c := &cmds[i]
		key := c.Data
		if len(key) > 8 {
			key = key[:8]
		}
		kv[string(key)] = append(kv[string(key)][:0], c.Data...)
		c.Result = c.Index
	}
	m.mu.Unlock()
	return nil
}

// Restore implements raftmux.StateMachine: the map has nothing to reload
// from, so the shard starts empty at the snapshot (no run of this benchmark
// sends one).
func (m *memSM) Restore(shard, _ uint64) error {
	m.mu.Lock()
	delete(m.shards, shard)
	m.mu.Unlock()
	return nil
}

// Remove implements raftmux.StateMachine.
func (m *memSM) Remove(shard uint64) {
	m.mu.Lock()
	delete(m.shards, shard)
	m.mu.Unlock()
}
