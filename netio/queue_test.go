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
