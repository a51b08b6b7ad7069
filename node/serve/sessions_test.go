package serve

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// A write that names no session takes the next number of the node's own;
// the floor lets go of the numbers below the oldest write not answered.
func TestOwnSession(t *testing.T) {
	s, _ := newTestServer(t)
	var got []Answer
	done := func(a Answer) { got = append(got, a) }
	s1, d1 := s.ownSession(done)
	s2, d2 := s.ownSession(done)
	if s1 != (wire.Session{ID: 7, Seq: 1, Floor: 0}) || s2 != (wire.Session{ID: 7, Seq: 2, Floor: 0}) {
		t.Fatalf("sessions %+v %+v", s1, s2)
	}
	d2(NewAnswer(wire.KindAssignment, nil))
	if s3, _ := s.ownSession(done); s3 != (wire.Session{ID: 7, Seq: 3, Floor: 0}) {
		t.Fatalf("with write 1 in flight: %+v", s3)
	}
	d1(NewAnswer(wire.KindRevoked, nil))
	if s4, _ := s.ownSession(done); s4 != (wire.Session{ID: 7, Seq: 4, Floor: 2}) {
		t.Fatalf("with writes 1 and 2 answered: %+v", s4)
	}
	if len(got) != 2 || got[0].Kind != wire.KindAssignment || got[1].Kind != wire.KindRevoked {
		t.Fatalf("answers handed on: %+v", got)
	}
}

// A leader's stamps count the time since it took office on its clock,
// from where its state stood then; a new term starts again from the
// state, and a clock behind the start of office counts no time.
func TestStamps(t *testing.T) {
	s, env := newTestServer(t)
	if st := s.stamp(3); st != 0 {
		t.Fatalf("first stamp %d", st)
	}
	env.advance(5 * time.Millisecond)
	if st := s.stamp(3); st != uint64(5*time.Millisecond) {
		t.Fatalf("after 5ms: %d", st)
	}
	if st := s.stamp(4); st != 0 {
		t.Fatalf("another shard's first stamp %d", st)
	}
	env.now = env.now.Add(-time.Second)
	if st := s.stamp(3); st != 0 {
		t.Fatalf("clock set back: %d", st)
	}
	env.now = env.now.Add(time.Second + 7*time.Millisecond)
	env.term = 2
	if st := s.stamp(3); st != 0 {
		t.Fatalf("new term: %d", st)
	}
	env.advance(time.Millisecond)
	if st := s.stamp(3); st != uint64(time.Millisecond) {
		t.Fatalf("new term, 1ms later: %d", st)
	}
}
