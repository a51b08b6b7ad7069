package netio

import (
	"sync"
	"sync/atomic"
	"time"
)

// sendQueue holds whole frames waiting for one connection's event loop.
// Writers append under mu and wake the loop at most once per flush; the
// loop swaps the buffer out and writes it in one call. A client connection
// owns its queue; a peer's queue outlives its connections, so frames sent
// while the peer is unreachable go out on the next connection.
type sendQueue struct {
	mu       sync.Mutex
	buf      []byte
	frames   int   // whole frames in buf
	conn     *Conn // connection whose loop drains buf; nil when none
	woken    bool  // a flush of conn is already due
	closed   bool
	capBytes int

	lastFlush atomic.Int64 // unix nanos of the last write handed to the socket
}

// take swaps the queued bytes out for c's loop, or returns nil when c is
// not (or no longer) the connection draining the queue.
func (q *sendQueue) take(c *Conn, spare []byte) ([]byte, int) {
	q.mu.Lock()
	if q.conn != c || len(q.buf) == 0 {
		q.woken = false
		q.mu.Unlock()
		return nil, 0
	}
	buf, n := q.buf, q.frames
	q.buf, q.frames, q.woken = spare[:0], 0, false
	q.mu.Unlock()
	return buf, n
}

// markFlushing records that c's loop will flush before it returns, so
// writers arriving meanwhile need not wake it.
func (q *sendQueue) markFlushing(c *Conn) {
	q.mu.Lock()
	if q.conn == c {
		q.woken = true
	}
	q.mu.Unlock()
}

func nowNanos() int64 { return time.Now().UnixNano() }
