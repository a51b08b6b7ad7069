package birth

import (
	"errors"
	"log/slog"
	"testing"
	"time"
)

type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func newState(born bool) (*State, *clock, *int) {
	c := &clock{now: time.Unix(1000, 0)}
	persisted := new(int)
	s := New(Config{Born: born, Clock: c.Now, Logger: slog.New(slog.DiscardHandler),
		Persist: func() error { *persisted++; return nil }})
	return s, c, persisted
}

func TestBornOnceAndPersistedOnce(t *testing.T) {
	s, c, persisted := newState(false)
	if s.Born() {
		t.Fatal("born before MarkBorn")
	}
	s.MarkBorn()
	c.now = c.now.Add(time.Second)
	s.MarkBorn()
	if !s.Born() || *persisted != 1 {
		t.Fatalf("born %v, marker written %d times", s.Born(), *persisted)
	}
	// A node found born writes no marker again.
	s, _, persisted = newState(true)
	s.MarkBorn()
	if !s.Born() || *persisted != 0 {
		t.Fatalf("found born: born %v, marker written %d times", s.Born(), *persisted)
	}
	// A failed write is logged; the node is born all the same.
	s = New(Config{Clock: time.Now, Logger: slog.New(slog.DiscardHandler), Persist: func() error { return errors.New("disk") }})
	s.MarkBorn()
	if !s.Born() {
		t.Fatal("not born after a failed write of the marker")
	}
}

func TestReadyOnlyWhenBornAndAskedWithTheBirthTime(t *testing.T) {
	s, c, _ := newState(false)
	s.Check(func(time.Time) bool { t.Fatal("an unborn node checked"); return true })
	t0 := c.now
	s.MarkBorn()
	c.now = c.now.Add(time.Second)
	var asked time.Time
	s.Check(func(bornAt time.Time) bool { asked = bornAt; return false })
	if !asked.Equal(t0) || s.IsReady() || !s.ReadyAt().IsZero() {
		t.Fatalf("asked with %v (want %v); ready %v at %v", asked, t0, s.IsReady(), s.ReadyAt())
	}
	select {
	case <-s.Ready():
		t.Fatal("Ready closed before the node is ready")
	default:
	}
	s.Check(func(time.Time) bool { return true })
	if !s.IsReady() || !s.ReadyAt().Equal(c.now) {
		t.Fatalf("ready %v at %v, want at %v", s.IsReady(), s.ReadyAt(), c.now)
	}
	<-s.Ready()
	// Ready once: no more checks, MarkReady again changes nothing.
	c.now = c.now.Add(time.Second)
	s.Check(func(time.Time) bool { t.Fatal("a ready node checked"); return true })
	s.MarkReady()
	if !s.ReadyAt().Equal(c.now.Add(-time.Second)) {
		t.Fatalf("ready at %v after a second MarkReady", s.ReadyAt())
	}
}

func TestBornInAnEarlierLifeCountsFromTheFirstCheck(t *testing.T) {
	s, c, _ := newState(true)
	c.now = c.now.Add(time.Minute)
	first := c.now
	s.Check(func(bornAt time.Time) bool {
		if !bornAt.Equal(first) {
			t.Fatalf("born at %v, want the first check's %v", bornAt, first)
		}
		return false
	})
	c.now = c.now.Add(time.Second)
	s.Check(func(bornAt time.Time) bool {
		if !bornAt.Equal(first) {
			t.Fatalf("second check: born at %v, want %v", bornAt, first)
		}
		return true
	})
	if !s.IsReady() {
		t.Fatal("not ready")
	}
}
