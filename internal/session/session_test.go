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
	if s := w.Stamp(c); s.Seq != c.Seq() || s.Floor != 0 {
		t.Fatalf("stamp %+v", s)
	}
	w.Finish(b)
	if f := w.Stamp(c).Floor; f != 0 {
		t.Fatalf("floor %d with %d in flight", f, a.Seq())
	}
	w.Finish(a)
	if f := w.Stamp(c).Floor; f != b.Seq() {
		t.Fatalf("floor %d, want %d", f, b.Seq())
	}
	w.Finish(c)
	d := w.Begin()
	if s := w.Stamp(d); s.Floor != c.Seq() || s.Seq != d.Seq() {
		t.Fatalf("stamp %+v", s)
	}
}

// A windowed Writer hands out at most Window numbers of a session from
// its oldest write in flight: one write held up sends the next ones to a
// second session, and a session whose writes all finished takes writes
// again.
func TestAWindowedWriterOpensSessionsForWritesHeldUp(t *testing.T) {
	w := WithIDWindowed(7)
	stuck := w.Begin()
	for range Window - 1 {
		w.Finish(w.Begin())
	}
	next := w.Begin()
	if s := w.Stamp(next); s.ID == 7 || s.ID == 0 || s.Seq != 1 || w.Sessions() != 2 {
		t.Fatalf("a write past the window: %+v in %d sessions, want the first of a second session", s, w.Sessions())
	}
	if s := w.Stamp(stuck); s.ID != 7 || s.Seq != 1 || s.Floor != 0 {
		t.Fatalf("the write held up: %+v", s)
	}
	w.Finish(stuck)
	w.Finish(next)
	if s := w.Stamp(w.Begin()); s.ID != 7 || s.Seq != Window+1 || s.Floor != Window {
		t.Fatalf("after the first session emptied: %+v", s)
	}
	// Drawn alike from the same ID: a sim's node draws its own.
	w2 := WithIDWindowed(7)
	for range Window {
		w2.Begin()
	}
	if a, b := w2.Stamp(w2.Begin()).ID, w.Stamp(next).ID; a != b {
		t.Fatalf("second sessions %d and %d from one ID", a, b)
	}
	// Unwindowed, one session takes everything.
	one := New()
	for range 3 * Window {
		one.Begin()
	}
	if one.Sessions() != 1 {
		t.Fatalf("%d sessions unwindowed", one.Sessions())
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
