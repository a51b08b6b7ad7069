package shardstore

import (
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Every topic added is reported, across the growth to new layers, and
// few of the others are.
func TestFloorFilterNeverForgets(t *testing.T) {
	var f floorFilter
	const added = 3*floorFilterFirst + 100 // three layers
	for i := range added {
		f.add(fmt.Appendf(nil, "floor-%d", i))
	}
	// 16Ki topics in the first layer, 32Ki in the second, the rest in
	// the third.
	if len(f.layers) != 3 || f.layers[2].n != 100 {
		t.Fatalf("%d layers, want 3", len(f.layers))
	}
	for i := range added {
		if !f.mayHave(fmt.Appendf(nil, "floor-%d", i)) {
			t.Fatalf("floor-%d added but not reported", i)
		}
	}
	const others = 20000
	fp := 0
	for i := range others {
		if f.mayHave(fmt.Appendf(nil, "none-%d", i)) {
			fp++
		}
	}
	// About 1% per layer, each at its capacity or below.
	if fp > others/25 {
		t.Fatalf("%d of %d topics never added reported", fp, others)
	}
}

// TopicFloor finds every floor written, before and after a reopen (the
// filter is built again from the store), and answers 0 for the others.
func TestTopicFloorsThroughTheFilter(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	if f, err := s.TopicFloor("never"); err != nil || f != 0 {
		t.Fatalf("fresh store: floor %d %v", f, err)
	}
	b := s.NewBatch()
	for i := range 100 {
		b.PutTopicFloor(fmt.Sprintf("closed-%d", i), uint64(i+1))
	}
	commit(t, b, true)
	check := func(s *Store) {
		t.Helper()
		for i := range 100 {
			if f, err := s.TopicFloor(fmt.Sprintf("closed-%d", i)); err != nil || f != uint64(i+1) {
				t.Fatalf("closed-%d: floor %d %v, want %d", i, f, err, i+1)
			}
			if f, err := s.TopicFloor(fmt.Sprintf("open-%d", i)); err != nil || f != 0 {
				t.Fatalf("open-%d: floor %d %v, want 0", i, f, err)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TopicFloor("closed-1"); err == nil {
		t.Fatal("TopicFloor on a closed store did not fail")
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	check(s)
}
