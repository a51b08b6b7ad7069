// Package status is what a node reports of itself: Status, what
// `shoalctl status` shows, and Stats, the counters that metrics read (each
// field through the table of cmd/shoal/metrics.go). Package node forwards
// both names (node.Status, node.Stats).
//
// A node gathers what its rooms, raft host, transport and SWIM driver
// counted into Parts, each part as its owner reports it; Parts.Stats lays
// them out as the fields its users know: a few are sums (the lease frames
// dropped and those that did not decode; the leaderships transferred by
// the reconcile room and by operators or a leaving node), the security
// counters come from the request admission, the token checks and the
// transport's handshakes, and a part the node does not run (the transport
// and SWIM of a driven node) leaves its fields zero.
//
// It touches nothing of the node and holds no state: it takes values and
// returns values.
package status
