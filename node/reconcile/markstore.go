package reconcile

import (
	"fmt"

	"github.com/shoalmq/shoal/shardstore"
)

// LoadMarks reads this node's marks from the store's node slot, and
// returns them bound to it: every change is written back there. A store
// without an origin gets gen, this life's generation, when it is new
// (never born, and hosting no shard: hosted says), else 1: a store older
// than the origin is as old as can be.
func LoadMarks(self string, store *shardstore.Store, gen uint64, hosted func() bool) (*Marks, error) {
	drained, err := store.Drained()
	if err != nil {
		return nil, fmt.Errorf("node: read drain mark: %w", err)
	}
	origin, ok, err := store.Origin()
	if err != nil {
		return nil, fmt.Errorf("node: read origin: %w", err)
	}
	if !ok {
		origin = 1
		if born, _ := store.Born(); !born {
			if !hosted() {
				origin = gen
			}
		}
		b := store.NewBatch()
		b.PutOrigin(origin)
		if err := b.Commit(true); err != nil {
			return nil, fmt.Errorf("node: write origin: %w", err)
		}
	}
	removed := make(map[string]uint64)
	if err := store.Removed(func(id string, at uint64) { removed[id] = at }); err != nil {
		return nil, err
	}
	return NewMarks(self, markStore{store}, drained, origin, removed), nil
}

// markStore writes the marks to the store's node slot.
type markStore struct{ s *shardstore.Store }

func (m markStore) SaveDrained(drained bool) error {
	b := m.s.NewBatch()
	b.PutDrained(drained)
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("node: write drain mark: %w", err)
	}
	return nil
}

func (m markStore) SaveRemovals(rs []Removal) error {
	b := m.s.NewBatch()
	for _, r := range rs {
		b.PutRemoved(r.Node, r.At)
	}
	if err := b.Commit(true); err != nil {
		return fmt.Errorf("node: write removals: %w", err)
	}
	return nil
}
