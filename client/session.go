package client

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// RetryWindow bounds how long after its first attempt a write is retried:
// a write still unanswered then fails with its last error, its outcome
// unknown. The cluster keeps a session's answers for meta.SessionTTL
// (five minutes) after its last write, far longer, so every retry the
// client sends finds the first answer if the write was applied.
const RetryWindow = time.Minute

// session numbers the client's writes for exactly-once retries: each
// write (Assign, Revoke, UpdatePartitions, Produce) takes the next
// sequence number once and carries it in every attempt, so a shard that
// applied it answers a retry with its first answer instead of applying it
// again. Floor tells the cluster which answers the client no longer needs:
// every sequence number below the oldest write still in flight.
type session struct {
	id uint64

	mu   sync.Mutex
	next uint64          // the next sequence number to hand out
	low  uint64          // every sequence number below low is finished
	done map[uint64]bool // finished ones at or above low
}

func newSession() *session {
	var b [8]byte
	var id uint64
	for id == 0 {
		_, _ = rand.Read(b[:])
		id = binary.LittleEndian.Uint64(b[:])
	}
	return &session{id: id, next: 1, low: 1, done: make(map[uint64]bool)}
}

// begin takes the next sequence number for a write.
func (s *session) begin() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq := s.next
	s.next++
	return seq
}

// finish marks seq answered or given up: it is never sent again.
func (s *session) finish(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seq != s.low {
		s.done[seq] = true
		return
	}
	s.low++
	for s.done[s.low] {
		delete(s.done, s.low)
		s.low++
	}
}

// stamp returns the wire session of an attempt of write seq: the floor is
// read at each attempt, so a retry lets go of what finished meanwhile.
func (s *session) stamp(seq uint64) wire.Session {
	s.mu.Lock()
	floor := s.low - 1
	s.mu.Unlock()
	return wire.Session{ID: s.id, Seq: seq, Floor: floor}
}
