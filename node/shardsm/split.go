package shardsm

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/shardstore"
)

// A split (meta.OpSplit) ends a shard at a raft index: its two children,
// the halves of its hash range (router.ShardSpace.Children), are born on
// the same replicas at that index (raftmux.Splitter), each with the
// parent's records of the topics in its range, its epoch floor and all of
// its write sessions (a retry then finds its first answer in the child
// its topic went to), written in the same batch as the parent's applied
// index. The parent keeps its state, marked split, and refuses every
// later command (meta.ErrShardSplit). The children's change logs start
// empty at the split's index.

// errSplitRefused wraps a split that every replica refuses alike: it names
// another shard, the space has no room for children, or the parent's
// configuration is joint. The command is answered with it and changes
// nothing.
var errSplitRefused = errors.New("split refused")

// seedSplit seeds the children of shard when cmd is a split that st would
// apply, appending the children seeded here to seeded (a replica outside
// the configuration, or one whose child is here already, seeds none).
func (m *Machine) seedSplit(shard uint64, st *meta.State, cmd *raftmux.Command, b raftmux.Batch, seeded *[]uint64) error {
	if !isSplit(cmd.Data) {
		return nil
	}
	var c meta.Command
	if err := meta.DecodeCommand(cmd.Data, &c); err != nil {
		return nil // ApplyEntry refuses it
	}
	if st.Split() {
		return nil // ApplyEntry refuses it
	}
	if c.Shard != shard {
		return fmt.Errorf("%w: shard %d applies the split of shard %d", errSplitRefused, shard, c.Shard)
	}
	if m.space == 0 || shard > uint64(^uint32(0)) {
		return fmt.Errorf("%w: shard %d: no shard space", errSplitRefused, shard)
	}
	low, high, err := m.space.Children(uint32(shard))
	if err != nil {
		return fmt.Errorf("%w: %w", errSplitRefused, err)
	}
	sp, ok := b.(raftmux.Splitter)
	if !ok {
		return fmt.Errorf("node: shard %d: split applied through a batch that cannot seed", shard)
	}
	for _, child := range []uint32{low, high} {
		ok, err := sp.SeedChild(uint64(child), cmd.Index, cmd.Term)
		if errors.Is(err, raftmux.ErrSplitJoint) {
			return fmt.Errorf("%w: %w", errSplitRefused, err)
		}
		if err != nil {
			return fmt.Errorf("node: shard %d: seed shard %d: %w", shard, child, err)
		}
		if ok {
			*seeded = append(*seeded, uint64(child))
		}
	}
	return nil
}

// isSplit reports whether an entry's command is a split, without decoding
// the rest of it: its op byte follows the version byte.
func isSplit(data []byte) bool { return len(data) >= 2 && meta.Op(data[1]) == meta.OpSplit }

// fillChildren writes, for each seeded child, the records of the parent's
// topics in the child's range, its floor and its sessions.
func (m *Machine) fillChildren(parent uint64, s *Shard, seeded []uint64, b raftmux.Batch) {
	if len(seeded) == 0 {
		return
	}
	st := s.State
	if mutant.On(mutant.SplitStaleChild) {
		// The parent as the store last held it: without this run's
		// changes before the split.
		if stored, _, err := m.load(parent); err == nil {
			st = stored
		}
	}
	for _, child := range seeded {
		var key, val []byte
		id := uint32(child)
		for a := range st.All() {
			if !m.space.Holds(id, router.KeyHashString(a.Topic)) {
				continue
			}
			var ok bool
			if val, ok = st.AppendRecord(val[:0], a.Topic); ok {
				key = shardstore.TopicRecordKey(key[:0], a.Topic)
				b.Put(child, key, val)
			}
		}
		if f := st.Floor(); f > 0 {
			b.Put(child, shardstore.EpochFloorKey, shardstore.AppendEpochFloor(val[:0], f))
		}
		for _, sid := range st.SessionIDs() {
			if v, ok := st.AppendSession(val[:0], sid); ok {
				b.Put(child, shardstore.SessionKey(key[:0], sid), v)
			}
		}
	}
}
