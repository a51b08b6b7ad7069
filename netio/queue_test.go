package netio

import (
	"bytes"
	"testing"

	"github.com/shoalmq/shoal/wire"
)

// TestSendQueueTakeInSteps queues more than one step of frames of varied
// sizes (straddling chunks), takes them in steps of at most about limit
// bytes and checks that the concatenation is the frames in order, that the
// frame counts add up and that chunks are reused.
func TestSendQueueTakeInSteps(t *testing.T) {
	c := &Conn{}
	q := &sendQueue{capBytes: 64 << 20, retain: 4 << 20, conn: c}
	var want []byte
	frames := 0
	for i := range 3000 {
		f := testFrame(wire.KindRaftBatch, uint64(i), bytes.Repeat([]byte{byte(i)}, (i*37)%3000))
		q.mu.Lock()
		q.push(f)
		q.mu.Unlock()
		want = append(want, f...)
		frames++
	}
	const limit = 256 << 10
	var got []byte
	var spare [][]byte
	gotFrames, steps := 0, 0
	for {
		chunks, n, more := q.take(c, spare, limit)
		if chunks == nil {
			break
		}
		steps++
		size := 0
		for _, ch := range chunks {
			got = append(got, ch...)
			size += len(ch)
		}
		if more && size < limit {
			t.Fatalf("step %d took %d bytes with more left, limit %d", steps, size, limit)
		}
		if size > limit+maxChunk {
			t.Fatalf("step %d took %d bytes, limit %d", steps, size, limit)
		}
		gotFrames += n
		q.recycle(chunks)
		spare = chunks[:0]
		if !more {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("took %d bytes, not the %d queued in order", len(got), len(want))
	}
	if gotFrames != frames || steps < len(want)/limit {
		t.Fatalf("%d frames in %d steps, want %d frames in at least %d", gotFrames, steps, frames, len(want)/limit)
	}
	if q.bytes != 0 || q.frames != 0 || len(q.chunks) != 0 {
		t.Fatalf("queue left with %d bytes, %d frames, %d chunks", q.bytes, q.frames, len(q.chunks))
	}
	if q.freeCap == 0 || q.freeCap > q.retain {
		t.Fatalf("%d bytes of chunks kept for reuse, retain %d", q.freeCap, q.retain)
	}
	// A reused chunk starts empty: new frames come out alone.
	f := testFrame(wire.KindKeepalive, 0, nil)
	q.mu.Lock()
	q.push(f)
	q.mu.Unlock()
	chunks, n, more := q.take(c, nil, limit)
	if n != 1 || more || len(chunks) != 1 || !bytes.Equal(chunks[0], f) {
		t.Fatalf("after reuse took %d frames (more %v): %q", n, more, chunks)
	}
	// Another connection never drains the queue.
	if ch, _, _ := q.take(&Conn{}, nil, limit); ch != nil {
		t.Fatal("a connection not draining the queue took from it")
	}
}

// TestSendQueueTakeOfEverythingEndsTheFlush: whichever way a take empties
// the queue (all of it within the limit, or a step over the limit that
// happens to hold every chunk), the queue is no longer marked as due, so
// the next writer wakes the loop; a step that leaves chunks keeps it due.
func TestSendQueueTakeOfEverythingEndsTheFlush(t *testing.T) {
	const limit = 64 << 10
	frame := testFrame(wire.KindRaftBatch, 0, make([]byte, 1000))
	for name, queued := range map[string]int{
		"within the limit":        limit / 2,
		"one step of every chunk": limit, // the step's end is in the last chunk
		"several steps":           5 * limit,
	} {
		t.Run(name, func(t *testing.T) {
			c := &Conn{}
			q := &sendQueue{capBytes: 64 << 20, retain: 4 << 20, conn: c}
			q.mu.Lock()
			for q.bytes <= queued {
				q.push(frame)
			}
			lastStart := q.bytes - len(q.chunks[len(q.chunks)-1])
			q.mu.Unlock()
			if queued == limit && lastStart >= limit {
				t.Fatalf("%d bytes queued, the last chunk from byte %d: the step's end is not in it", q.bytes, lastStart)
			}
			q.markFlushing(c) // the loop's pass begins
			for step := 1; ; step++ {
				chunks, _, more := q.take(c, nil, limit)
				if chunks == nil {
					t.Fatalf("step %d took nothing", step)
				}
				q.mu.Lock()
				due, left := q.woken, q.bytes
				q.mu.Unlock()
				if more != (left > 0) || due != more {
					t.Fatalf("step %d: more %v with %d bytes left, still due %v", step, more, left, due)
				}
				if !more {
					if queued == limit && step != 1 {
						t.Fatalf("emptied in %d steps, want one", step)
					}
					break
				}
			}
		})
	}
}
