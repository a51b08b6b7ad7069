package serve

import (
	"strings"
	"time"
	"unicode"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/wire"
)

// Request ops and outcomes the request histograms are kept for: the client
// request kinds from wire.KindAssign on (room for the ones numbered after
// KindStatus), and the answer codes, "OK" first.
const (
	requestOps   = 16
	requestCodes = int(wire.CodeSessionExpired) + 2 // OK, each wire code, then any other
)

// Latency holds the histograms of client requests, from arrival to
// answer, by op and outcome: each costs two atomic adds
// (internal/histogram).
type Latency struct {
	requests [requestOps][requestCodes]histogram.Histogram
}

// Request records a client request of kind answered with a, d after it
// arrived. An error answer counts under its code, or under "other" when
// it has none this build knows (an error from another node that did not
// decode).
func (l *Latency) Request(kind wire.Kind, a Answer, d time.Duration) {
	op := int(kind) - int(wire.KindAssign)
	if op < 0 || op >= requestOps {
		return
	}
	code := 0
	if a.Kind == wire.KindError {
		code = requestCodes - 1
		if a.Err != nil && a.Err.Code.Known() {
			code = int(a.Err.Code)
		}
	}
	l.requests[op][code].Observe(d)
}

// Refused records a client request answered with code before it was
// served (overloaded, unauthorized).
func (l *Latency) Refused(kind wire.Kind, code wire.ErrorCode, d time.Duration) {
	op := int(kind) - int(wire.KindAssign)
	if op < 0 || op >= requestOps {
		return
	}
	l.requests[op][code].Observe(d)
}

// Each calls fn with the histogram of every op and outcome seen so far:
// the op in snake case (assign, update_partition, ...), the outcome "OK",
// a wire error code's name (NotLeader, Unavailable, ...) or "Other".
func (l *Latency) Each(fn func(op, code string, h histogram.Snapshot)) {
	for op := range requestOps {
		kind := wire.KindAssign + wire.Kind(op)
		if !kind.Known() {
			continue
		}
		for code := range requestCodes {
			s := l.requests[op][code].Snapshot()
			if s.Count == 0 {
				continue
			}
			fn(snake(kind.String()), codeLabel(code), s)
		}
	}
}

// RequestOps are the values of the op label: every client request kind
// this build knows.
func RequestOps() []string {
	var ops []string
	for op := range requestOps {
		if kind := wire.KindAssign + wire.Kind(op); kind.Known() {
			ops = append(ops, snake(kind.String()))
		}
	}
	return ops
}

func codeLabel(code int) string {
	switch {
	case code == 0:
		return "OK"
	case code == requestCodes-1:
		return "Other"
	}
	return wire.ErrorCode(code).String()
}

// snake turns a kind's name (UpdatePartition) into a label value
// (update_partition).
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if unicode.IsUpper(r) {
			if i > 0 {
				b.WriteByte('_')
			}
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}
