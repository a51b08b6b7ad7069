package node

import (
	"sync"
	"time"
)

// The node's own work runs on one schedule, whoever runs the node: timers
// (Node.after), one-off work (Node.spawn) and tasks built from the two. A
// started node's timers are the wall clock's and its work runs on
// goroutines; a driven node's are its caller's (a simulation), which
// chooses when each piece runs and so how they interleave. Nothing in the
// node's logic asks which of the two runs it.

// A task is a duty the node runs whenever it is kicked or its time comes,
// never twice at once: the membership events, the reconcile pass, the
// ownership messages due, the lease rounds, and the queues of frames that
// wait for a worker. run does the work and says when it is next due (zero:
// only when kicked). A kick while it runs makes it run once more after.
type task struct {
	n   *Node
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

func newTask(n *Node, run func(time.Time) time.Time) *task {
	return &task{n: n, run: run}
}

// kick runs the task soon (on its own goroutine on a started node).
func (t *task) kick() {
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
	if !t.n.spawn(t.do) {
		t.mu.Lock()
		t.queued = false
		t.mu.Unlock()
	}
}

// start runs the task for the first time, soon.
func (t *task) start() {
	t.mu.Lock()
	t.on = true
	t.mu.Unlock()
	t.kick()
}

// startDuties starts the node's tasks (Start and NewDriven): each runs
// once now, then whenever it is kicked or next due.
func (n *Node) startDuties() {
	for _, t := range []*task{n.eventsTask, n.reconcileTask, n.dutyTask, n.leaseTask, n.leaseReplyTask, n.raftInTask} {
		t.start()
	}
}

func (t *task) do() {
	t.mu.Lock()
	t.queued, t.running, t.again = false, true, false
	t.mu.Unlock()
	for {
		now := t.n.clock()
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
func (t *task) arm(now, next time.Time) {
	if next.IsZero() || (t.stop != nil && !t.timerAt.After(next)) {
		return
	}
	if t.stop != nil {
		t.stop()
	}
	t.timerN++
	id := t.timerN
	t.timerAt = next
	t.stop = t.n.after(next.Sub(now), func() {
		t.mu.Lock()
		if t.timerN == id {
			t.stop, t.timerAt = nil, time.Time{}
		}
		t.mu.Unlock()
		t.kick()
	})
}
