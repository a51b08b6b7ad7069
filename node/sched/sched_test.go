package sched

import (
	"testing"
	"time"
)

// world runs spawned work and timers when the test says.
type world struct {
	now     time.Time
	spawned []func()
	timers  []*timer
	closing bool
}

type timer struct {
	at      time.Time
	f       func()
	stopped bool
}

func (w *world) Now() time.Time { return w.now }
func (w *world) After(d time.Duration, f func()) func() bool {
	tm := &timer{at: w.now.Add(d), f: f}
	w.timers = append(w.timers, tm)
	return func() bool { was := !tm.stopped; tm.stopped = true; return was }
}
func (w *world) Spawn(f func()) bool {
	if w.closing {
		return false
	}
	w.spawned = append(w.spawned, f)
	return true
}

// runSpawned runs the work spawned so far, and what it spawns.
func (w *world) runSpawned() {
	for len(w.spawned) > 0 {
		f := w.spawned[0]
		w.spawned = w.spawned[1:]
		f()
	}
}

// live are the timers not stopped.
func (w *world) live() []*timer {
	var out []*timer
	for _, tm := range w.timers {
		if !tm.stopped {
			out = append(out, tm)
		}
	}
	return out
}

func TestATaskRunsOnceStartedAndOncePerKicks(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	runs := 0
	task := NewTask(w, func(time.Time) time.Time { runs++; return time.Time{} })
	task.Kick()
	if len(w.spawned) != 0 {
		t.Fatal("a kick before Start spawned work")
	}
	task.Start()
	task.Kick() // queued already: no second piece of work
	if len(w.spawned) != 1 {
		t.Fatalf("%d pieces of work spawned, want 1", len(w.spawned))
	}
	w.runSpawned()
	if runs != 1 {
		t.Fatalf("ran %d times, want 1", runs)
	}
	task.Kick()
	w.runSpawned()
	if runs != 2 || len(w.timers) != 0 {
		t.Fatalf("ran %d times with %d timers, want 2 and none", runs, len(w.timers))
	}
	w.closing = true
	task.Kick()
	w.closing = false
	task.Kick() // the refused spawn left the task free to be kicked again
	w.runSpawned()
	if runs != 3 {
		t.Fatalf("ran %d times, want 3", runs)
	}
}

func TestAKickWhileRunningRunsTheTaskOnceMore(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	runs := 0
	var task *Task
	task = NewTask(w, func(time.Time) time.Time {
		runs++
		if runs == 1 {
			task.Kick()
			task.Kick()
		}
		return time.Time{}
	})
	task.Start()
	w.runSpawned()
	if runs != 2 {
		t.Fatalf("ran %d times, want 2: once, then once more for the kicks while it ran", runs)
	}
}

func TestATaskIsRunAgainWhenItSaysItIsDue(t *testing.T) {
	w := &world{now: time.Unix(100, 0)}
	var next []time.Time // what each run says
	runs := 0
	task := NewTask(w, func(time.Time) time.Time {
		runs++
		if len(next) == 0 {
			return time.Time{}
		}
		n := next[0]
		next = next[1:]
		return n
	})
	next = []time.Time{w.now.Add(time.Second)}
	task.Start()
	w.runSpawned()
	if l := w.live(); len(l) != 1 || !l[0].at.Equal(w.now.Add(time.Second)) {
		t.Fatalf("timers %v", l)
	}
	// A later due time keeps the earlier timer; an earlier one replaces it.
	next = []time.Time{w.now.Add(5 * time.Second), w.now.Add(300 * time.Millisecond)}
	task.Kick()
	w.runSpawned()
	if l := w.live(); len(l) != 1 || !l[0].at.Equal(w.now.Add(time.Second)) {
		t.Fatalf("a later due time changed the timer: %v", l)
	}
	task.Kick()
	w.runSpawned()
	l := w.live()
	if len(l) != 1 || !l[0].at.Equal(w.now.Add(300*time.Millisecond)) {
		t.Fatalf("an earlier due time did not replace the timer: %v", l)
	}
	before := runs
	w.now = l[0].at
	l[0].f()
	w.runSpawned()
	if runs != before+1 {
		t.Fatalf("the timer ran the task %d times, want once", runs-before)
	}
	if len(w.live()) != 1 {
		// The fired timer is not stopped, but the task forgot it.
		t.Fatalf("timers %v", w.live())
	}
	task.mu.Lock()
	forgot := task.stop == nil
	task.mu.Unlock()
	if !forgot {
		t.Fatal("the task still counts a timer that fired")
	}
}
