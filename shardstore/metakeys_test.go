package shardstore

import (
	"maps"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

func TestOperatorMarksSurviveReopen(t *testing.T) {
	fs := vfs.NewMem()
	s := openMem(t, fs, Config{})
	if d, err := s.Drained(); err != nil || d {
		t.Fatalf("fresh store drained=%v err=%v", d, err)
	}
	if _, ok, err := s.Origin(); err != nil || ok {
		t.Fatalf("fresh store has an origin (%v, %v)", ok, err)
	}
	b := s.NewBatch()
	b.PutDrained(true)
	b.PutOrigin(77)
	b.PutRemoved("n4", 1000)
	b.PutRemoved("n2", 2000)
	commit(t, b, true)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, fs, Config{})
	defer s.Close()
	if d, err := s.Drained(); err != nil || !d {
		t.Fatalf("after reopen drained=%v err=%v", d, err)
	}
	if g, ok, err := s.Origin(); err != nil || !ok || g != 77 {
		t.Fatalf("origin %d %v %v", g, ok, err)
	}
	got := map[string]uint64{}
	if err := s.Removed(func(id string, at uint64) { got[id] = at }); err != nil {
		t.Fatal(err)
	}
	if want := map[string]uint64{"n2": 2000, "n4": 1000}; !maps.Equal(got, want) {
		t.Fatalf("removed %v, want %v", got, want)
	}
	b = s.NewBatch()
	b.PutDrained(false)
	commit(t, b, true)
	if d, _ := s.Drained(); d {
		t.Fatal("still drained after PutDrained(false)")
	}
}

func TestOperatorMarksAreNotOwnedTopics(t *testing.T) {
	s := openMem(t, vfs.NewMem(), Config{})
	defer s.Close()
	b := s.NewBatch()
	b.PutDrained(true)
	b.PutOrigin(1)
	b.PutRemoved("n4", 1)
	b.PutOwnedTopic("t", OwnedTopic{Epoch: 1, Partitions: 1})
	b.PutTopicFloor("t", 1)
	commit(t, b, true)
	var topics []string
	if err := s.OwnedTopics(func(topic string, _ OwnedTopic) bool { topics = append(topics, topic); return true }); err != nil {
		t.Fatal(err)
	}
	if len(topics) != 1 || topics[0] != "t" {
		t.Fatalf("owned topics %q", topics)
	}
}
