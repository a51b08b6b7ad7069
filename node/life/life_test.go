package life

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// A life begins once and never after it closed.
func TestBeginOnce(t *testing.T) {
	c := New()
	if c.Running() {
		t.Fatal("running before Begin")
	}
	if err := c.Begin(nil, nil); err != nil {
		t.Fatal(err)
	}
	if !c.Running() || c.Stopped() {
		t.Fatal("not running after Begin")
	}
	if err := c.Begin(nil, nil); !errors.Is(err, ErrStarted) {
		t.Fatalf("second Begin: %v", err)
	}
	if !c.Close() || c.Running() {
		t.Fatal("Close of a begun life")
	}
	c.Cancel()
	c.Wait()
	if !c.Stopped() {
		t.Fatal("not stopped after Cancel")
	}
	closed := New()
	if closed.Close() {
		t.Fatal("Close reports a life that never began")
	}
	if err := closed.Begin(nil, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("Begin after Close: %v", err)
	}
}

// A driven node's work goes to its caller: spawned work to Go, the rest
// of a piece of work to Yield (to Go without one), and at once once the
// node is closing; nothing is spawned then.
func TestDriven(t *testing.T) {
	var gone, yielded []func()
	c := New()
	if err := c.Begin(func(f func()) { gone = append(gone, f) }, func(f func()) { yielded = append(yielded, f) }); err != nil {
		t.Fatal(err)
	}
	ran := 0
	if !c.Spawn(func() { ran++ }) || len(gone) != 1 || ran != 0 {
		t.Fatalf("spawned: %d handed, %d ran", len(gone), ran)
	}
	c.Resume(func() { ran++ })
	if len(yielded) != 1 || ran != 0 {
		t.Fatalf("resumed: %d yielded, %d ran", len(yielded), ran)
	}
	c.Close()
	if c.Spawn(func() { ran++ }) || len(gone) != 1 {
		t.Fatal("spawned while closing")
	}
	c.Resume(func() { ran++ })
	if ran != 1 || len(yielded) != 1 {
		t.Fatalf("resumed while closing: %d ran, %d yielded", ran, len(yielded))
	}

	gone = nil
	d := New()
	_ = d.Begin(func(f func()) { gone = append(gone, f) }, nil)
	d.Resume(func() {})
	if len(gone) != 1 {
		t.Fatal("a driven node without Yield resumes through Go")
	}
}

// A started node's spawned work runs on workers, which Wait waits for
// once cancelled; its rest runs at once; Close waits for Enter's Exit.
func TestStarted(t *testing.T) {
	c := New()
	if err := c.Begin(nil, nil); err != nil {
		t.Fatal(err)
	}
	var ran atomic.Int32
	done := make(chan struct{})
	for range 3 {
		if !c.Spawn(func() {
			if ran.Add(1) == 3 {
				close(done)
			}
		}) {
			t.Fatal("not spawned")
		}
	}
	<-done
	resumed := false
	c.Resume(func() { resumed = true })
	if !resumed {
		t.Fatal("a started node resumes at once")
	}
	if !c.Enter() {
		t.Fatal("Enter refused before Close")
	}
	closed := make(chan bool)
	go func() { closed <- c.Close() }()
	select {
	case <-closed:
		t.Fatal("Close did not wait for Exit")
	case <-time.After(20 * time.Millisecond):
	}
	c.Exit()
	if !<-closed {
		t.Fatal("Close of a begun life")
	}
	if c.Enter() {
		t.Fatal("Enter once closing")
	}
	var pumped atomic.Bool
	c.Go(func() { <-c.Done(); pumped.Store(true) })
	c.Cancel()
	c.Wait() // the idle workers end at Cancel, not after WorkerIdle
	if !pumped.Load() {
		t.Fatal("Wait returned before Go's function")
	}
}
