package status

import (
	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/node/serve"
)

// Latency histograms: each request, forward, proposal and lease round
// costs two atomic adds (internal/histogram); the metrics server reads
// them at each scrape. Requests are timed by op and outcome in
// serve.Latency, forwards by the serve room itself.

// RequestLatency is the histogram of one op and outcome.
type RequestLatency struct {
	Op   string // the request kind in snake case: assign, lookup, update_partition, ...
	Code string // "OK" or the wire error code's name (NotLeader, Unavailable, ...)
	Hist histogram.Snapshot
}

// Latencies are a node's latency histograms as read now (node.Latencies).
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

// Requests reads the requests' histograms of lat: only the pairs of op
// and outcome seen so far.
func Requests(lat *serve.Latency) []RequestLatency {
	var out []RequestLatency
	lat.Each(func(op, code string, h histogram.Snapshot) {
		out = append(out, RequestLatency{Op: op, Code: code, Hist: h})
	})
	return out
}
