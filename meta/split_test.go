package meta

import (
	"errors"
	"testing"
)

// A split ends the shard: it applies, then every later command, a
// session's write, a marker and a repeated split included, is refused
// alike by Check and Apply and changes nothing; the mark round-trips the
// log and a loader.
func TestSplitEndsTheShard(t *testing.T) {
	s := New()
	s.TrackChanges()
	mustApply(t, s, assign("t1", "n1", 0))
	c := Command{Op: OpSplit, Shard: 12}
	b, err := AppendCommand(nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	var d Command
	if err := DecodeCommand(b, &d); err != nil || d.Op != OpSplit || d.Shard != 12 {
		t.Fatalf("decoded %+v, %v", d, err)
	}
	var res Result
	if err := s.ApplyEntry(b, &res); err != nil || !res.Split || !res.Changed || len(res.Effects) != 0 {
		t.Fatalf("split: %+v, %v", res, err)
	}
	if !s.Split() || !s.DrainSplit() || s.DrainSplit() {
		t.Fatal("the split mark is not reported once")
	}
	before := snapshot(s)
	w := assign("t2", "n1", 0)
	w.Session = SessionRef{ID: 9, Seq: 1}
	for _, c := range []Command{assign("t2", "n1", 0), w, marker(3), {Op: OpSplit, Shard: 12}, compactCmd()} {
		if err := s.Check(&c); !errors.Is(err, ErrShardSplit) {
			t.Fatalf("Check %s after the split: %v", c.Op, err)
		}
		if err := s.Apply(&c, &res); !errors.Is(err, ErrShardSplit) {
			t.Fatalf("Apply %s after the split: %v", c.Op, err)
		}
	}
	if string(snapshot(s)) != string(before) || s.Sessions() != 0 {
		t.Fatal("a command refused after the split changed the state")
	}
	if a, ok := s.Get([]byte("t1")); !ok || a.Owner != "n1" {
		t.Fatalf("the split state lost its topic: %+v", a)
	}
	l := NewLoader()
	l.SetSplit()
	ls, err := l.State()
	if err != nil || !ls.Split() {
		t.Fatalf("loaded state split %v, %v", ls.Split(), err)
	}
}
