package netio

import (
	"sync"
	"sync/atomic"
	"time"
)

// Chunk sizes of a send queue: a queue starts with a small chunk and each
// new chunk is as large as what is already queued, up to maxChunk, so a
// client's few answers fit one small chunk while a flood towards a peer
// is held in few large ones (one iovec each).
const (
	minChunk = 4 << 10
	maxChunk = 64 << 10
)

// maxIovecs is the most chunks handed to one writev (Linux's IOV_MAX).
const maxIovecs = 1024

// sendQueue holds whole frames waiting for one connection's event loop.
// Writers copy frames into chunks under mu and wake the loop at most once
// per flush; the loop takes every chunk and writes them with one writev,
// then gives the emptied chunks back for reuse, so that neither side
// copies a growing buffer. A client connection owns its queue; a peer's
// queue outlives its connections, so frames sent while the peer is
// unreachable go out on the next connection.
type sendQueue struct {
	mu       sync.Mutex
	chunks   [][]byte // queued bytes in order; only the last one has room
	ends     []int    // ends[i]: frames whose last byte is in chunks[i]
	bytes    int      // bytes in chunks
	frames   int      // whole frames in chunks
	conn     *Conn    // connection whose loop drains the queue; nil when none
	woken    bool     // a flush of conn is already due (the take that empties the queue ends it)
	closed   bool
	capBytes int
	retain   int      // bytes of emptied chunks kept for reuse
	free     [][]byte // emptied chunks, ready for reuse
	freeCap  int      // total capacity of free

	lastFlush atomic.Int64 // unix nanos of the last write handed to the socket
}

// push copies frame to the end of the queue. The caller holds mu.
func (q *sendQueue) push(frame []byte) {
	q.bytes += len(frame)
	q.frames++
	for len(frame) > 0 {
		last := len(q.chunks) - 1
		if last >= 0 {
			tail := q.chunks[last]
			if room := cap(tail) - len(tail); room > 0 {
				k := min(room, len(frame))
				q.chunks[last] = append(tail, frame[:k]...)
				frame = frame[k:]
				continue
			}
		}
		q.chunks = append(q.chunks, q.chunk())
		q.ends = append(q.ends, 0)
	}
	if n := len(q.ends); n > 0 {
		q.ends[n-1]++
	} // else an empty frame, which checkFrame never lets through
}

// chunk returns an empty chunk: a reused one, or a new one as large as
// what is queued (within [minChunk, maxChunk]). The caller holds mu.
func (q *sendQueue) chunk() []byte {
	want := min(max(q.bytes, minChunk), maxChunk)
	for n := len(q.free); n > 0; n = len(q.free) {
		ch := q.free[n-1]
		q.free[n-1] = nil
		q.free = q.free[:n-1]
		q.freeCap -= cap(ch)
		if cap(ch) >= want/2 {
			return ch
		}
		// Too small for the backlog being built: let it go.
	}
	return make([]byte, 0, want)
}

// drop empties the queue and reports how many frames it held. The caller
// holds mu.
func (q *sendQueue) drop() int {
	n := q.frames
	clear(q.chunks)
	q.chunks, q.ends, q.bytes, q.frames = q.chunks[:0], q.ends[:0], 0, 0
	clear(q.free)
	q.free, q.freeCap = nil, 0
	return n
}

// take hands c's loop the queued chunks, leaving spare (emptied) in their
// place: all of them, or when more than limit bytes are queued, the oldest
// ones holding at least limit bytes (more reports that some are left, and
// the queue stays marked as due). A take that leaves the queue empty ends
// the due flush, however it got there: a step over limit may well hold
// every chunk, and a queue still marked as due with nothing queued would
// keep the next writer from waking the loop. It returns nil when c is not
// (or no longer) the connection draining the queue.
func (q *sendQueue) take(c *Conn, spare [][]byte, limit int) (chunks [][]byte, frames int, more bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.conn != c || q.bytes == 0 {
		q.woken = false
		return nil, 0, false
	}
	if q.bytes <= limit {
		chunks, frames = q.chunks, q.frames
		q.chunks, q.bytes, q.frames, q.woken = spare[:0], 0, 0, false
		q.ends = q.ends[:0]
		return chunks, frames, false
	}
	var k, nb int
	for k < len(q.chunks) && nb < limit {
		nb += len(q.chunks[k])
		frames += q.ends[k]
		k++
	}
	chunks = append(spare[:0], q.chunks[:k]...)
	rest := copy(q.chunks, q.chunks[k:])
	clear(q.chunks[rest:])
	q.chunks = q.chunks[:rest]
	q.ends = q.ends[:copy(q.ends, q.ends[k:])]
	q.bytes -= nb
	q.frames -= frames
	more = len(q.chunks) > 0
	q.woken = more
	return chunks, frames, more
}

// recycle gives written chunks back, keeping up to retain bytes of them.
func (q *sendQueue) recycle(chunks [][]byte) {
	q.mu.Lock()
	if !q.closed {
		for _, ch := range chunks {
			if q.freeCap+cap(ch) > q.retain {
				break
			}
			q.free = append(q.free, ch[:0])
			q.freeCap += cap(ch)
		}
	}
	q.mu.Unlock()
	clear(chunks)
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
