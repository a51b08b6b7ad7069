package session

import "testing"

// The floor stays below the oldest write in flight, whatever order writes
// finish in.
func TestFloorFollowsOldestInFlight(t *testing.T) {
	w := New()
	if w.ID() == 0 {
		t.Fatal("zero id")
	}
	a, b, c := w.Begin(), w.Begin(), w.Begin()
	if s := w.Stamp(c); s.Seq != c || s.Floor != 0 {
		t.Fatalf("stamp %+v", s)
	}
	w.Finish(b)
	if f := w.Stamp(c).Floor; f != 0 {
		t.Fatalf("floor %d with %d in flight", f, a)
	}
	w.Finish(a)
	if f := w.Stamp(c).Floor; f != b {
		t.Fatalf("floor %d, want %d", f, b)
	}
	w.Finish(c)
	d := w.Begin()
	if s := w.Stamp(d); s.Floor != c || s.Seq != d {
		t.Fatalf("stamp %+v", s)
	}
}
