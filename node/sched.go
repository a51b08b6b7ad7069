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

// newTask builds a task of the node's that runs run, on the node's
// clock, timers and spawned work.
func newTask(n *Node, run func(time.Time) time.Time) *sched.Task {
	return sched.NewTask(parts{n}, run)
}

// startDuties starts the node's tasks (Start and NewDriven): each runs
// once now, then whenever it is kicked or next due.
func (n *Node) startDuties() {
	for _, t := range []*sched.Task{n.eventsTask, n.reconcileTask, n.dutyTask, n.leaseTask, n.leaseReplyTask, n.raftInTask} {
		t.Start()
	}
}
