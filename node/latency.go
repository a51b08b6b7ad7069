package node

import (
	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/node/serve"
)

// Latency histograms: each request, forward, proposal and lease round
// costs two atomic adds (internal/histogram); the metrics server reads
// them at each scrape. Requests are timed by op and outcome in
// serve.Latency, forwards by the serve room itself.

// latencyHists are the node's histograms.
type latencyHists struct {
	requests   serve.Latency
	raftCommit histogram.Histogram
	leaseRound histogram.Histogram
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
	n.lat.requests.Each(func(op, code string, h histogram.Snapshot) {
		out.Requests = append(out.Requests, RequestLatency{Op: op, Code: code, Hist: h})
	})
	out.Forward = n.srv.ForwardLatency()
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
func RequestOps() []string { return serve.RequestOps() }
