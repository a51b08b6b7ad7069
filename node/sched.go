package node

import (
	"time"

	"github.com/shoalmq/shoal/node/sched"
)

// The node's own work runs on one schedule, whoever runs the node: timers
// (Node.after), one-off work (Node.spawn) and the tasks built from the two
// (node/sched): the events, the reconcile pass, the ownership messages
// due, the lease rounds with the rounds peers send, the replies to this
// node's rounds, and the raft frames from peers.

// schedEnv is what the node's tasks run on.
type schedEnv struct{ n *Node }

func (e schedEnv) Now() time.Time                              { return e.n.clock() }
func (e schedEnv) After(d time.Duration, f func()) func() bool { return e.n.after(d, f) }
func (e schedEnv) Spawn(f func()) bool                         { return e.n.spawn(f) }

func newTask(n *Node, run func(time.Time) time.Time) *sched.Task {
	return sched.NewTask(schedEnv{n}, run)
}

// startDuties starts the node's tasks (Start and NewDriven): each runs
// once now, then whenever it is kicked or next due.
func (n *Node) startDuties() {
	for _, t := range []*sched.Task{n.eventsTask, n.reconcileTask, n.dutyTask, n.leaseTask, n.leaseReplyTask, n.raftInTask} {
		t.Start()
	}
}
