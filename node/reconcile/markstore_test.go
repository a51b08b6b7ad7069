package reconcile

import (
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/shardstore"
)

// The marks are read back from the store they were written to; a new
// store's origin is this life's generation, an old one's (born, or
// hosting shards) 1.
func TestMarksAreLoadedFromTheStoreTheyWereWrittenTo(t *testing.T) {
	fs := vfs.NewMem()
	open := func() *shardstore.Store {
		s, err := shardstore.Open("store", shardstore.Config{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	m, err := LoadMarks("n1", s, 42, func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if m.Origin() != 42 || m.Drained() || m.Removals() != 0 {
		t.Fatalf("a new store's marks: origin %d, drained %v, removals %d", m.Origin(), m.Drained(), m.Removals())
	}
	if _, err := m.SetDrained(true); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AddRemovals(map[string]uint64{"n9": 5}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	m, err = LoadMarks("n1", s, 77, func() bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	if m.Origin() != 42 || !m.Drained() || m.Removals() != 1 {
		t.Fatalf("marks read back: origin %d, drained %v, removals %d", m.Origin(), m.Drained(), m.Removals())
	}
	_ = s.Close()

	old, err := shardstore.Open("old", shardstore.Config{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if m, err := LoadMarks("n1", old, 42, func() bool { return true }); err != nil || m.Origin() != 1 {
		t.Fatalf("a store hosting shards without an origin: %v, %v", m, err)
	}
}
