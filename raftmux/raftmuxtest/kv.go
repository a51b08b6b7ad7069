package raftmuxtest

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"sync"

	"github.com/shoalmq/shoal/raftmux"
)

// KV is a StateMachine for tests: each command sets key = its first 8 bytes
// (the whole command if shorter) to the command, in the store, and the
// result is the entry's index. With Record it keeps, per shard, every
// (index, command) it applied, to compare replicas.
//
// A command made by SplitCommand(child) splits the shard instead: the
// child is seeded (raftmux.Splitter) and given a copy of every key of the
// shard whose first byte is odd, read through Iterate (required then) and
// from the commands applied before it in the same run; the result is the
// entry's index, or SeedChild's error.
type KV struct {
	Store  *MemStore
	Record bool
	// Iterate reads a shard's stored keys, for splits.
	Iterate func(shard uint64, fn func(key, value []byte) bool) error

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
	var run map[string][]byte // this run's writes, for a split among them
	for i := range cmds {
		c := &cmds[i]
		if child, ok := splitChild(c.Data); ok {
			c.Result = c.Index
			if err := k.split(shard, child, c, run, b); err != nil {
				c.Result = err
			}
			continue
		}
		key := c.Data
		if len(key) > 8 {
			key = key[:8]
		}
		b.Put(shard, key, c.Data)
		if run == nil {
			run = make(map[string][]byte)
		}
		run[string(key)] = c.Data
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

const splitPrefix = "\x00split"

// SplitCommand is the KV command that splits its shard into child.
func SplitCommand(child uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte(splitPrefix), child)
}

func splitChild(data []byte) (uint64, bool) {
	if len(data) != len(splitPrefix)+8 || string(data[:len(splitPrefix)]) != splitPrefix {
		return 0, false
	}
	return binary.BigEndian.Uint64(data[len(splitPrefix):]), true
}

// split seeds child from c and copies the shard's odd keys into it.
func (k *KV) split(shard, child uint64, c *raftmux.Command, run map[string][]byte, b raftmux.Batch) error {
	sp, ok := b.(raftmux.Splitter)
	if !ok || k.Iterate == nil {
		return errors.New("raftmuxtest: split without a Splitter batch or Iterate")
	}
	seeded, err := sp.SeedChild(child, c.Index, c.Term)
	if err != nil || !seeded {
		return err
	}
	odd := func(key string) bool { return len(key) > 0 && key[0]&1 == 1 }
	if err := k.Iterate(shard, func(key, value []byte) bool {
		if _, over := run[string(key)]; !over && odd(string(key)) {
			b.Put(child, key, value)
		}
		return true
	}); err != nil {
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(run)) {
		if odd(key) {
			b.Put(child, []byte(key), run[key])
		}
	}
	return nil
}
