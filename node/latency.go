package node

import (
	"strings"
	"time"
	"unicode"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/wire"
)

// Latency histograms: each request, forward, proposal and lease round
// costs two atomic adds (internal/histogram); the metrics server reads
// them at each scrape.

// Request ops and outcomes the request histograms are kept for: the client
// request kinds from wire.KindAssign on (room for the ones numbered after
// KindStatus), and the answer codes, "OK" first.
const (
	requestOps   = 16
	requestCodes = int(wire.CodeSessionExpired) + 2 // OK, each wire code, then any other
)

// latencyHists are the node's histograms.
type latencyHists struct {
	requests   [requestOps][requestCodes]histogram.Histogram
	forward    histogram.Histogram
	raftCommit histogram.Histogram
	leaseRound histogram.Histogram
}

// request records a client request of kind answered with a, d after it
// arrived. An error answer counts under its code, or under "other" when
// it has none this build knows (an error from another node that did not
// decode).
func (l *latencyHists) request(kind wire.Kind, a answer, d time.Duration) {
	op := int(kind) - int(wire.KindAssign)
	if op < 0 || op >= requestOps {
		return
	}
	code := 0
	if a.kind == wire.KindError {
		code = requestCodes - 1
		if a.err != nil && a.err.Code.Known() {
			code = int(a.err.Code)
		}
	}
	l.requests[op][code].Observe(d)
}

// requestRefused records a client request answered with code before it
// was served (overloaded, unauthorized).
func (l *latencyHists) requestRefused(kind wire.Kind, code wire.ErrorCode, d time.Duration) {
	op := int(kind) - int(wire.KindAssign)
	if op < 0 || op >= requestOps {
		return
	}
	l.requests[op][code].Observe(d)
}

// RequestLatency is the histogram of one op and outcome.
type RequestLatency struct {
	Op   string // the request kind in snake case: assign, lookup, update_partition, ...
	Code string // "OK" or the wire error code's name (NotLeader, Unavailable, ...)
	Hist histogram.Snapshot
}

// Latencies are the node's latency histograms as read now.
type Latencies struct {
	// Requests: client requests from arrival to answer, by op and
	// outcome; only the pairs seen so far.
	Requests []RequestLatency
	// Forward: a request this node forwarded, from sending it to a shard
	// leader until the answer came back (not when none came).
	Forward histogram.Snapshot
	// RaftCommit: a metadata command, from its proposal to its apply on
	// this node, the shard's leader.
	RaftCommit histogram.Snapshot
	// StorageSync: a raft round's synced storage commit (the write, the
	// WAL's fsync and the wait for it).
	StorageSync histogram.Snapshot
	// LeaseRound: a lease round sent to a peer until its reply was taken.
	LeaseRound histogram.Snapshot
	// SnapshotSend, SnapshotReceive: a raft snapshot streamed to a peer,
	// from its first chunk to the end of the stream; one received, from
	// its first chunk to its last, checked.
	SnapshotSend, SnapshotReceive histogram.Snapshot
}

// Latencies reads the node's latency histograms.
func (n *Node) Latencies() Latencies {
	var out Latencies
	for op := range requestOps {
		kind := wire.KindAssign + wire.Kind(op)
		if !kind.Known() {
			continue
		}
		for code := range requestCodes {
			s := n.lat.requests[op][code].Snapshot()
			if s.Count == 0 {
				continue
			}
			out.Requests = append(out.Requests, RequestLatency{Op: snake(kind.String()), Code: codeLabel(code), Hist: s})
		}
	}
	out.Forward = n.lat.forward.Snapshot()
	out.RaftCommit = n.lat.raftCommit.Snapshot()
	out.LeaseRound = n.lat.leaseRound.Snapshot()
	if n.rs != nil {
		out.StorageSync = n.rs.SyncLatency().Snapshot()
	}
	if n.host != nil {
		send, recv := n.host.SnapshotLatencies()
		out.SnapshotSend, out.SnapshotReceive = send.Snapshot(), recv.Snapshot()
	}
	return out
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
