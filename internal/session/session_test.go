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

func TestDrawIDDiffersByLifeAndName(t *testing.T) {
	a := DrawID(1, "n1", 1)
	if a == 0 || a != DrawID(1, "n1", 1) {
		t.Fatalf("DrawID(1, n1, 1) = %d, then %d: want one nonzero ID", a, DrawID(1, "n1", 1))
	}
	for _, b := range []uint64{DrawID(1, "n1", 2), DrawID(1, "n2", 1), DrawID(2, "n1", 1)} {
		if b == a || b == 0 {
			t.Fatalf("another life, name or seed drew %d (first %d)", b, a)
		}
	}
}
