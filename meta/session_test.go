package meta

import (
	"errors"
	"fmt"
	"testing"
	"time"

	writer "github.com/shoalmq/shoal/internal/session"
)

func withSession(c Command, id, seq, floor uint64, clock time.Duration) Command {
	c.Session = SessionRef{ID: id, Seq: seq, Floor: floor}
	c.Clock = uint64(clock)
	return c
}

// applyEnc applies c through its encoding, as a replica does.
func applyEnc(t *testing.T, s *State, c Command) (Result, error) {
	t.Helper()
	b, err := AppendCommand(nil, &c)
	if err != nil {
		t.Fatalf("encode %+v: %v", c, err)
	}
	var res Result
	err = s.ApplyEntry(b, &res)
	if ierr := s.checkInvariants(); ierr != nil {
		t.Fatal(ierr)
	}
	return res, err
}

// A revoke committed twice (retried after its answer was lost) takes effect
// once: the second gets the first's answer even though the topic was
// assigned again in between. Without sessions it revokes the new
// assignment.
func TestSessionRetriedRevokeAppliesOnce(t *testing.T) {
	s := New()
	mustApply(t, s, assign("t", "n1", 4))
	first, err := applyEnc(t, s, withSession(revoke("t"), 7, 1, 0, time.Second))
	if err != nil || first.Assignment.Epoch != 2 || first.Replayed {
		t.Fatalf("revoke: %+v %v", first, err)
	}
	if _, err := applyEnc(t, s, withSession(assign("t", "n2", 2), 8, 1, 0, 2*time.Second)); err != nil {
		t.Fatal(err)
	}
	again, err := applyEnc(t, s, withSession(revoke("t"), 7, 1, 0, 3*time.Second))
	if err != nil || !again.Replayed || again.Changed || again.Assignment.Epoch != 2 || len(again.Effects) != 0 {
		t.Fatalf("retried revoke: %+v %v", again, err)
	}
	if a, _ := s.Get([]byte("t")); a.State != Active || a.Owner != "n2" || a.Epoch != 3 {
		t.Fatalf("the retry revoked the new assignment: %+v", a)
	}
}

// An assign with no owner named, retried after the topic was revoked,
// answers its first assignment instead of assigning the topic again.
func TestSessionRetriedAssignWithoutOwner(t *testing.T) {
	s := New()
	first, err := applyEnc(t, s, withSession(assign("t", "n1", 0), 7, 1, 0, time.Second))
	if err != nil || first.Assignment.Owner != "n1" || first.Assignment.Epoch != 1 {
		t.Fatalf("assign: %+v %v", first, err)
	}
	mustApply(t, s, revoke("t"))
	again, err := applyEnc(t, s, withSession(assign("t", "n3", 0), 7, 1, 0, 2*time.Second))
	if err != nil || !again.Replayed || again.Assignment != first.Assignment {
		t.Fatalf("retried assign: %+v %v, first %+v", again, err, first.Assignment)
	}
	if a, _ := s.Get([]byte("t")); a.State != Revoked {
		t.Fatalf("the retry assigned the revoked topic: %+v", a)
	}
}

// A refusal is an answer too: a retry of a refused write is refused again,
// even once the state would accept it.
func TestSessionReplaysRefusals(t *testing.T) {
	s := New()
	_, err := applyEnc(t, s, withSession(update("t", 3), 7, 1, 0, time.Second))
	if !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("update of an unknown topic: %v", err)
	}
	mustApply(t, s, assign("t", "n1", 1))
	res, err := applyEnc(t, s, withSession(update("t", 3), 7, 1, 0, 2*time.Second))
	if !errors.Is(err, ErrUnknownTopic) || !res.Replayed {
		t.Fatalf("retried update: %+v %v", res, err)
	}
	if a, _ := s.Get([]byte("t")); a.Partitions != 1 {
		t.Fatalf("the retry applied: %+v", a)
	}
}

// Answers at or below the client's floor are dropped, and a write naming
// one is refused as stale, never applied.
func TestSessionFloorDropsAnswers(t *testing.T) {
	s := New()
	if _, err := applyEnc(t, s, withSession(assign("a", "n1", 0), 7, 1, 0, time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := applyEnc(t, s, withSession(assign("b", "n1", 0), 7, 2, 1, time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := len(s.sessions[7].answers); n != 1 {
		t.Fatalf("%d answers kept above floor 1", n)
	}
	mustApply(t, s, revoke("a"))
	if _, err := applyEnc(t, s, withSession(assign("a", "n1", 0), 7, 1, 0, time.Second)); !errors.Is(err, ErrSessionStale) {
		t.Fatalf("write below the floor: %v", err)
	}
	if a, _ := s.Get([]byte("a")); a.State != Revoked {
		t.Fatalf("a stale write applied: %+v", a)
	}
}

// A session keeps MaxSessionAnswers answers; a retry of one dropped for
// room is refused.
func TestSessionAnswersBounded(t *testing.T) {
	s := New()
	for seq := uint64(1); seq <= MaxSessionAnswers+3; seq++ {
		if _, err := applyEnc(t, s, withSession(assign("t", "n1", 0), 9, seq, 0, time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(s.sessions[9].answers); n != MaxSessionAnswers {
		t.Fatalf("%d answers kept", n)
	}
	if _, err := applyEnc(t, s, withSession(assign("t", "n1", 0), 9, 2, 0, time.Second)); !errors.Is(err, ErrSessionStale) {
		t.Fatalf("retry of a dropped answer: %v", err)
	}
}

// Sessions expire SessionTTL after their last write; a full shard sweeps
// expired ones before refusing a new session, and refuses one when all are
// live.
func TestSessionExpiryAndBound(t *testing.T) {
	s := New()
	for id := uint64(1); id <= MaxSessions; id++ {
		if _, err := s.applyForTest(withSession(assign("t", "n1", 0), id, 1, 0, time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := s.applyForTest(withSession(assign("t", "n1", 0), MaxSessions+1, 1, 0, 2*time.Second))
	if !errors.Is(err, ErrTooManySessions) {
		t.Fatalf("a new session in a full shard: %v", err)
	}
	// Session 1 writes again and stays live; the others expire.
	later := time.Second + SessionTTL
	if _, err := s.applyForTest(withSession(assign("t", "n1", 0), 1, 2, 1, later)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.applyForTest(withSession(assign("t", "n1", 0), MaxSessions+1, 1, 0, later+time.Millisecond)); err != nil {
		t.Fatalf("a new session once the others expired: %v", err)
	}
	if n := s.Sessions(); n != 2 {
		t.Fatalf("%d sessions after the sweep, want 2", n)
	}
}

func (s *State) applyForTest(c Command) (Result, error) {
	var res Result
	err := s.Apply(&c, &res)
	return res, err
}

// Sessions survive a snapshot and a load from records, byte for byte.
func TestSessionSnapshotAndRecords(t *testing.T) {
	s := New()
	s.TrackChanges()
	mustApply(t, s, assign("x", "n1", 2))
	if _, err := applyEnc(t, s, withSession(revoke("x"), 5, 3, 1, time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := applyEnc(t, s, withSession(update("y", 2), 6, 1, 0, 2*time.Second)); !errors.Is(err, ErrUnknownTopic) {
		t.Fatal(err)
	}
	snap := s.AppendSnapshot(nil)
	d, err := DecodeSnapshot(snap)
	if err != nil {
		t.Fatal(err)
	}
	if got := d.AppendSnapshot(nil); string(got) != string(snap) {
		t.Fatal("snapshot with sessions does not re-encode to itself")
	}
	l := NewLoader()
	for a := range s.All() {
		v, _ := s.AppendRecord(nil, a.Topic)
		if err := l.Add([]byte(a.Topic), v); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	s.DrainSessions(func(id uint64) { seen[id] = true })
	if !seen[5] || !seen[6] {
		t.Fatalf("drained sessions %v", seen)
	}
	for id := range seen {
		v, ok := s.AppendSession(nil, id)
		if !ok {
			t.Fatalf("session %d has no record", id)
		}
		if err := l.AddSession(id, v); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	if got := loaded.AppendSnapshot(nil); string(got) != string(snap) {
		t.Fatal("state loaded from records differs from the snapshot")
	}
	if loaded.Clock() != uint64(2*time.Second) {
		t.Fatalf("loaded clock %d", loaded.Clock())
	}
	res, err := applyEnc(t, loaded, withSession(revoke("x"), 5, 3, 1, 3*time.Second))
	if err != nil || !res.Replayed || res.Assignment.Epoch != 2 {
		t.Fatalf("retry after load: %+v %v", res, err)
	}
}

// A session command decodes to itself; a version 3 entry without a
// session, or with a floor not below its sequence, is refused.
func TestSessionCommandEncoding(t *testing.T) {
	c := withSession(assign("t", "n1", 3), 1<<60, 9, 4, time.Hour)
	b, err := AppendCommand(nil, &c)
	if err != nil {
		t.Fatal(err)
	}
	var d Command
	if err := DecodeCommand(b, &d); err != nil || d.Session != c.Session || d.Clock != c.Clock || string(d.Topic) != "t" {
		t.Fatalf("decoded %+v %v", d, err)
	}
	bad := withSession(revoke("t"), 1, 4, 4, 0)
	if _, err := AppendCommand(nil, &bad); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("floor at seq: %v", err)
	}
	if err := DecodeCommand([]byte{3, byte(OpRevoke), 1, 't', 0, 0, 0, 0}, &d); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("version 3 without a session: %v", err)
	}
}

// A refusal the leader decided outside the state (an owner not live) goes
// through the log: a copy of the same write committed later, when the
// owner is live, gets the refusal too.
func TestSessionRefusalOutsideTheState(t *testing.T) {
	s := New()
	c := withSession(assign("t", "n9", 0), 7, 1, 0, time.Second)
	c.Refusal = RefuseOwnerNotLive
	if _, err := applyEnc(t, s, c); !errors.Is(err, ErrOwnerNotLive) {
		t.Fatalf("refused assign: %v", err)
	}
	copyLater := withSession(assign("t", "n9", 0), 7, 1, 0, 2*time.Second)
	res, err := applyEnc(t, s, copyLater)
	if !errors.Is(err, ErrOwnerNotLive) || !res.Replayed {
		t.Fatalf("a later copy: %+v %v", res, err)
	}
	if _, ok := s.Get([]byte("t")); ok {
		t.Fatal("the refused write assigned the topic")
	}
	bad := assign("t", "n9", 0)
	bad.Refusal = RefuseOwnerDrained
	if _, err := AppendCommand(nil, &bad); !errors.Is(err, ErrBadCommand) {
		t.Fatalf("a refusal without a session: %v", err)
	}
}

// A retry that raises its session's floor past older answers still gets
// its own first answer (the floor moves the answers kept).
func TestSessionReplayWhileTheFloorRises(t *testing.T) {
	s := New()
	for seq := uint64(1); seq <= 3; seq++ {
		if _, err := applyEnc(t, s, withSession(assign(fmt.Sprint("t", seq), "n1", uint32(seq)), 7, seq, 0, time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := applyEnc(t, s, withSession(assign("t3", "n1", 3), 7, 3, 2, 2*time.Second))
	if err != nil || !res.Replayed || res.Assignment.Epoch != 1 || res.Assignment.Owner != "n1" || res.Assignment.Partitions != 3 {
		t.Fatalf("retry of seq 3 with floor 2: %+v %v", res.Assignment, err)
	}
}

// A write held up on its way (a retry after a split, a slow forward)
// while its writer's later writes reach the same shard first: numbered by
// one unbounded session, the shard drops the oldest answers for room and
// then refuses the late write as stale, though it never applied it;
// numbered by a windowed writer (session.Window), the later writes go to
// other sessions and the late one applies.
func TestAWriteHeldUpAppliesUnderAWindowedWriter(t *testing.T) {
	for _, tc := range []struct {
		name  string
		w     *writer.Writer
		stale bool
	}{
		{"one session", writer.WithID(5), true},
		{"windowed", writer.WithIDWindowed(5), false},
	} {
		s := New()
		held := tc.w.Begin()
		for i := range 3 * MaxSessionAnswers {
			tk := tc.w.Begin()
			ref := tc.w.Stamp(tk)
			c := withSession(assign(fmt.Sprintf("t-%d", i), "n1", 0), ref.ID, ref.Seq, ref.Floor, time.Second)
			if _, err := applyEnc(t, s, c); err != nil {
				t.Fatalf("%s: write %d: %v", tc.name, i, err)
			}
			tc.w.Finish(tk)
		}
		ref := tc.w.Stamp(held)
		_, err := applyEnc(t, s, withSession(assign("late", "n1", 0), ref.ID, ref.Seq, ref.Floor, time.Second))
		if stale := errors.Is(err, ErrSessionStale); stale != tc.stale || (err != nil && !stale) {
			t.Fatalf("%s: the write held up: %v, want stale %v", tc.name, err, tc.stale)
		}
	}
	if 2*writer.Window > MaxSessionAnswers {
		t.Fatalf("the writers' window %d leaves no room under MaxSessionAnswers %d", writer.Window, MaxSessionAnswers)
	}
}
