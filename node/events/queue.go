package events

import (
	"sync"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/swim"
)

// maxQueuedEvents bounds the queue; SWIM events past it are dropped (the
// view is rebuilt from SWIM's full member list on the next event or tick,
// so nothing is lost but latency).
const maxQueuedEvents = 1 << 16

// queue hands SWIM events and raft leader changes, produced on goroutines
// that must not block, to the events task.
type queue struct {
	mu     sync.Mutex
	swim   []swim.Event
	lead   []raftmux.LeaderChange
	wake   func() // kicks the events task
	closed bool
	drops  uint64
}

func (q *queue) push(e swim.Event) {
	q.mu.Lock()
	if q.closed || len(q.swim) >= maxQueuedEvents {
		q.drops++
		q.mu.Unlock()
		return
	}
	q.swim = append(q.swim, e)
	q.mu.Unlock()
	q.wake()
}

func (q *queue) pushLeader(c raftmux.LeaderChange) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.lead = append(q.lead, c)
	q.mu.Unlock()
	q.wake()
}

func (q *queue) take() ([]swim.Event, []raftmux.LeaderChange) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, l := q.swim, q.lead
	q.swim, q.lead = nil, nil
	return s, l
}

func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.swim) + len(q.lead)
}
