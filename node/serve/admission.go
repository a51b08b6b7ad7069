package serve

import (
	"sync"
	"sync/atomic"

	"github.com/shoalmq/shoal/wire"
)

// Admission bounds what the requests being served hold: a slot each
// while its handler runs (the node's MaxRequests), and its bytes until it
// is answered (MaxRequestBytes), which may be long after, while raft or
// another node answers it.
type Admission struct {
	slots   chan struct{}
	max     int64
	used    atomic.Int64
	refused atomic.Uint64
}

// NewAdmission is an Admission of slots requests and maxBytes bytes.
func NewAdmission(slots int, maxBytes int64) *Admission {
	return &Admission{slots: make(chan struct{}, slots), max: maxBytes}
}

// Admit takes a slot and the bytes of the request frame (header h), or
// reports false when either is spent (the request is then refused as the
// node being overloaded). Leave gives the slot back; release gives the
// bytes back, once, however often it is called.
func (a *Admission) Admit(h wire.Header, frame []byte) (release func(), ok bool) {
	select {
	case a.slots <- struct{}{}:
	default:
		return nil, false
	}
	cost := RequestCost(h, frame)
	if !a.take(cost) {
		<-a.slots
		return nil, false
	}
	return sync.OnceFunc(func() { a.used.Add(-cost) }), true
}

// Leave gives back the slot of an admitted request, once its handler
// returned.
func (a *Admission) Leave() { <-a.slots }

// Active is the number of requests holding a slot.
func (a *Admission) Active() int { return len(a.slots) }

// Bytes are the bytes held by the requests not yet answered.
func (a *Admission) Bytes() int64 { return a.used.Load() }

// Refused counts the requests refused for want of bytes.
func (a *Admission) Refused() uint64 { return a.refused.Load() }

// take reserves n bytes, or reports false (and counts it) when that would
// pass the bound.
func (a *Admission) take(n int64) bool {
	for {
		u := a.used.Load()
		if u+n > a.max {
			a.refused.Add(1)
			return false
		}
		if a.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// RequestCost is what serving the request frame (header h) holds: its
// copy, and its decompressed payload if compressed. A compressed payload
// that does not say its size costs only its copy (the handler refuses
// it).
func RequestCost(h wire.Header, frame []byte) int64 {
	cost := int64(len(frame))
	if h.Flags&wire.FlagCompressed != 0 {
		if d, err := wire.DecompressedLen(frame[wire.HeaderSize:]); err == nil {
			cost += int64(d)
		}
	}
	return cost
}
