package node

import (
	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/status"
)

// The node's latency histograms (status.Latencies says what each times):
// requests by op and outcome in serve.Latency, forwards by the serve
// room itself, proposals and lease rounds here, raft's storage syncs and
// snapshots by the raft host.

// latencyHists are the node's histograms.
type latencyHists struct {
	requests   serve.Latency
	raftCommit histogram.Histogram
	leaseRound histogram.Histogram
}

// Latencies reads the node's latency histograms.
func (n *Node) Latencies() status.Latencies {
	out := status.Latencies{
		Requests:   status.Requests(&n.lat.requests),
		Forward:    n.srv.ForwardLatency(),
		RaftCommit: n.lat.raftCommit.Snapshot(),
		LeaseRound: n.lat.leaseRound.Snapshot(),
	}
	if n.rs != nil {
		out.StorageSync = n.rs.SyncLatency().Snapshot()
	}
	if n.host != nil {
		send, recv := n.host.SnapshotLatencies()
		out.SnapshotSend, out.SnapshotReceive = send.Snapshot(), recv.Snapshot()
	}
	return out
}
