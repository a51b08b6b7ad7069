// Package sched is the node's schedule of its own work: tasks, duties
// the node runs whenever they are kicked or their time comes, never twice
// at once (the membership events, the reconcile pass, the ownership
// messages due, the lease rounds, and the queues of frames that wait for
// a worker).
//
// # What it may touch
//
// A Task reaches the node only through its Env: the node's clock, its
// timers and its spawned work. A started node's timers are the wall
// clock's and its work runs on goroutines; a driven node's are its
// caller's (a simulation), which chooses when each piece runs and so how
// they interleave. Nothing here asks which of the two runs it. One lock
// per Task guards its state; no Env method but After is called under it,
// and After's function never runs before After returns.
package sched

import (
	"sync"
	"time"
)

// Env is what a Task runs on.
type Env interface {
	// Now is the node's clock.
	Now() time.Time
	// After runs f once d has passed; stop cancels it.
	After(d time.Duration, f func()) (stop func() bool)
	// Spawn runs f soon, on its own, unless the node is closing; it
	// reports whether f will run.
	Spawn(f func()) bool
}

// A Task is a duty the node runs whenever it is kicked or its time comes,
// never twice at once. run does the work and says when it is next due
// (zero: only when kicked). A kick while it runs makes it run once more
// after.
type Task struct {
	env Env
	run func(now time.Time) (next time.Time)

	mu      sync.Mutex
	on      bool // started: kicks before count for nothing
	queued  bool // spawned, not yet running
	running bool
	again   bool // kicked while running
	timerAt time.Time
	stop    func() bool
	timerN  uint64 // which armed timer is current
}

// NewTask returns a task that runs run on env; it does nothing until
// Start.
func NewTask(env Env, run func(now time.Time) (next time.Time)) *Task {
	return &Task{env: env, run: run}
}

// Kick runs the task soon (on its own goroutine on a started node).
func (t *Task) Kick() {
	t.mu.Lock()
	switch {
	case !t.on:
		t.mu.Unlock()
		return
	case t.running:
		t.again = true
		t.mu.Unlock()
		return
	case t.queued:
		t.mu.Unlock()
		return
	}
	t.queued = true
	t.mu.Unlock()
	if !t.env.Spawn(t.do) {
		t.mu.Lock()
		t.queued = false
		t.mu.Unlock()
	}
}

// Start runs the task for the first time, soon.
func (t *Task) Start() {
	t.mu.Lock()
	t.on = true
	t.mu.Unlock()
	t.Kick()
}

func (t *Task) do() {
	t.mu.Lock()
	t.queued, t.running, t.again = false, true, false
	t.mu.Unlock()
	for {
		now := t.env.Now()
		next := t.run(now)
		t.mu.Lock()
		if t.again {
			t.again = false
			t.mu.Unlock()
			continue
		}
		t.running = false
		t.arm(now, next)
		t.mu.Unlock()
		return
	}
}

// arm sets the task's timer for next, unless an earlier one is set (its
// run says when it is next due). The caller holds t.mu.
func (t *Task) arm(now, next time.Time) {
	if next.IsZero() || (t.stop != nil && !t.timerAt.After(next)) {
		return
	}
	if t.stop != nil {
		t.stop()
	}
	t.timerN++
	id := t.timerN
	t.timerAt = next
	t.stop = t.env.After(next.Sub(now), func() {
		t.mu.Lock()
		if t.timerN == id {
			t.stop, t.timerAt = nil, time.Time{}
		}
		t.mu.Unlock()
		t.Kick()
	})
}
