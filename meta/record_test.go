package meta

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// kv is a sorted key-value store as a replica persists records into.
type kv struct {
	recs  map[string][]byte
	floor uint64
}

func (k *kv) drain(s *State) {
	if s.DrainChanges(func(topic string) {
		if v, ok := s.AppendRecord(nil, topic); ok {
			k.recs[topic] = v
		} else {
			delete(k.recs, topic)
		}
	}) {
		k.floor = s.Floor()
	}
}

func (k *kv) load(t *testing.T) *State {
	t.Helper()
	l := NewLoader()
	l.SetFloor(k.floor)
	keys := make([]string, 0, len(k.recs))
	for t := range k.recs {
		keys = append(keys, t)
	}
	slices.Sort(keys)
	for _, topic := range keys {
		if err := l.Add([]byte(topic), k.recs[topic]); err != nil {
			t.Fatal(err)
		}
	}
	s, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Persisting only the records each Apply changed, then loading them back,
// gives exactly the applied state, whatever the commands (compactions
// included).
func TestRecordsPersistedIncrementallyReloadToTheSameState(t *testing.T) {
	for seed := range uint64(20) {
		g := newGen(seed)
		s := New()
		s.TrackChanges()
		store := &kv{recs: map[string][]byte{}}
		for i := range 300 {
			c := g.command(s)
			if i%37 == 36 {
				c = compactCmd()
			}
			_ = s.Apply(&c, nil)
			if g.rng.IntN(3) == 0 { // drain after runs of commands, as a batch does
				store.drain(s)
			}
		}
		store.drain(s)
		got := store.load(t)
		if want := s.AppendSnapshot(nil); !bytes.Equal(got.AppendSnapshot(nil), want) {
			t.Fatalf("seed %d: reloaded state differs", seed)
		}
		if err := got.checkInvariants(); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

func TestUntrackedStateRemembersNoChanges(t *testing.T) {
	s := New()
	c := assign("t", "n1", 0)
	_ = s.Apply(&c, nil)
	n := 0
	s.DrainChanges(func(string) { n++ })
	if n != 0 || len(s.changed) != 0 {
		t.Fatalf("untracked state listed %d changes", n)
	}
}

func TestLoaderRejectsBadRecords(t *testing.T) {
	s := New()
	c := assign("b", "n1", 4)
	_ = s.Apply(&c, nil)
	good, _ := s.AppendRecord(nil, "b")
	for name, tc := range map[string]struct {
		topic, value []byte
	}{
		"empty topic":  {nil, good},
		"long topic":   {bytes.Repeat([]byte("x"), MaxTopicLen+1), good},
		"truncated":    {[]byte("c"), good[:len(good)-1]},
		"trailing":     {[]byte("c"), append(slices.Clone(good), 0)},
		"bad state":    {[]byte("c"), append([]byte{9}, good[1:]...)},
		"epoch zero":   {[]byte("c"), []byte{byte(Revoked), 0, 0}},
		"out of order": {[]byte("a"), good},
	} {
		l := NewLoader()
		if err := l.Add([]byte("b"), good); err != nil {
			t.Fatal(err)
		}
		if err := l.Add(tc.topic, tc.value); !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := l.State(); err == nil {
			t.Errorf("%s: loader still hands out a state", name)
		}
	}
}
