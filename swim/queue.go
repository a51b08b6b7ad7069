package swim

import "github.com/shoalmq/shoal/wire"

// qkey names the subject of a queued event: a newer event about the same
// subject replaces the older one.
type qkey struct {
	kind uint8 // qMember, qShard, qVersion
	id   string
	num  uint64
}

const (
	qMember  uint8 = 1
	qShard   uint8 = 2
	qVersion uint8 = 3
)

type qentry struct {
	key      qkey
	enc      []byte
	tx       int // times sent
	pos      int // index in buckets[tx]
	lastFill uint64
}

// broadcastQueue is the transmit-limited queue of events to piggyback.
// Entries live in buckets by the number of times they were sent, so the
// least-sent come first without sorting; it is bounded in entries and
// bytes, dropping the most-sent entries when full.
type broadcastQueue struct {
	byKey      map[qkey]*qentry
	buckets    [][]*qentry
	count      int
	bytes      int
	maxEntries int
	maxBytes   int
	fills      uint64
	dropped    uint64
}

func newBroadcastQueue(maxEntries, maxBytes int) *broadcastQueue {
	return &broadcastQueue{byKey: make(map[qkey]*qentry), maxEntries: maxEntries, maxBytes: maxBytes}
}

// Len reports the number of queued events.
func (q *broadcastQueue) Len() int { return q.count }

func (q *broadcastQueue) remove(e *qentry) {
	b := q.buckets[e.tx]
	last := len(b) - 1
	b[e.pos] = b[last]
	b[e.pos].pos = e.pos
	b[last] = nil
	q.buckets[e.tx] = b[:last]
	delete(q.byKey, e.key)
	q.count--
	q.bytes -= len(e.enc)
}

func (q *broadcastQueue) place(e *qentry, tx int) {
	for len(q.buckets) <= tx {
		q.buckets = append(q.buckets, nil)
	}
	e.tx = tx
	e.pos = len(q.buckets[tx])
	q.buckets[tx] = append(q.buckets[tx], e)
}

// push queues enc about key, replacing an older event about the same key.
func (q *broadcastQueue) push(key qkey, enc []byte) {
	if old := q.byKey[key]; old != nil {
		q.remove(old)
	}
	e := &qentry{key: key, enc: enc}
	q.place(e, 0)
	q.byKey[key] = e
	q.count++
	q.bytes += len(enc)
	for q.count > q.maxEntries || q.bytes > q.maxBytes {
		q.evictOne()
	}
}

// evictOne drops the oldest of the most-sent entries.
func (q *broadcastQueue) evictOne() {
	for tx := len(q.buckets) - 1; tx >= 0; tx-- {
		if b := q.buckets[tx]; len(b) > 0 {
			q.remove(b[0])
			q.dropped++
			return
		}
	}
}

// fill appends queued events to the datagram dst (whose event count is at
// countOff) until budget, the least-sent first and within a send count the
// newest first; an event sent limit times leaves the queue.
func (q *broadcastQueue) fill(dst []byte, countOff, budget, limit int) []byte {
	if q.count == 0 {
		return dst
	}
	q.fills++
	for tx := 0; tx < len(q.buckets); tx++ {
		for i := len(q.buckets[tx]) - 1; i >= 0; i-- {
			if budget-len(dst) < wire.SwimMinEventSize || wire.SwimEventCount(dst, countOff) >= wire.MaxEventsPerDatagram {
				return dst
			}
			b := q.buckets[tx]
			if i >= len(b) {
				continue
			}
			e := b[i]
			if e.lastFill == q.fills {
				continue
			}
			var ok bool
			dst, ok = wire.AppendSwimEventWithin(dst, countOff, e.enc, budget)
			if !ok {
				continue
			}
			e.lastFill = q.fills
			q.remove(e)
			if e.tx+1 < limit {
				q.byKey[e.key] = e
				q.count++
				q.bytes += len(e.enc)
				q.place(e, e.tx+1)
			}
		}
	}
	return dst
}
