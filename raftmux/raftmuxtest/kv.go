package raftmuxtest

import (
	"slices"
	"sync"

	"github.com/shoalmq/shoal/raftmux"
)

// KV is a StateMachine for tests: each command sets key = its first 8 bytes
// (the whole command if shorter) to the command, in the store, and the
// result is the entry's index. With Record it keeps, per shard, every
// (index, command) it applied, to compare replicas.
type KV struct {
	Store  *MemStore
	Record bool

	mu      sync.Mutex
	applied map[uint64][]Applied
	base    map[uint64]uint64
}

// Applied is one command a KV applied.
type Applied struct {
	Index uint64
	Data  string
}

// NewKV returns a KV over store.
func NewKV(store *MemStore, record bool) *KV {
	return &KV{Store: store, Record: record, applied: make(map[uint64][]Applied), base: make(map[uint64]uint64)}
}

// Apply implements raftmux.StateMachine.
func (k *KV) Apply(shard uint64, cmds []raftmux.Command, b raftmux.Batch) error {
	for i := range cmds {
		c := &cmds[i]
		key := c.Data
		if len(key) > 8 {
			key = key[:8]
		}
		b.Put(shard, key, c.Data)
		c.Result = c.Index
	}
	if k.Record {
		k.mu.Lock()
		for _, c := range cmds {
			k.applied[shard] = append(k.applied[shard], Applied{Index: c.Index, Data: string(c.Data)})
		}
		k.mu.Unlock()
	}
	return nil
}

// Restore implements raftmux.StateMachine: the record restarts after the
// snapshot's index (the data itself lives in the store).
func (k *KV) Restore(shard, index uint64) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.applied[shard] = nil
	k.base[shard] = index
	return nil
}

// Remove implements raftmux.StateMachine.
func (k *KV) Remove(shard uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.applied, shard)
	delete(k.base, shard)
}

// Log returns what shard applied since its last snapshot, and that
// snapshot's index.
func (k *KV) Log(shard uint64) (base uint64, log []Applied) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.base[shard], slices.Clone(k.applied[shard])
}
