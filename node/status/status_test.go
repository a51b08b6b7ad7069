package status

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/wire"
)

// The parts land in their fields; the sums add up; the security counters
// gather the admission's, the token checks' and the handshakes'.
func TestPartsStats(t *testing.T) {
	var net netio.Counters
	net.FramesIn.Add(11)
	net.FramesOut.Add(12)
	net.HandshakeBadToken.Add(3)
	net.HandshakeTLS.Add(4)
	p := Parts{
		Lease:          lease.Stats{FramesDropped: 2, FramesBad: 5, Grants: 7},
		Reconcile:      reconcile.DriverStats{LeaderTransfers: 6, StraysDropped: 1},
		Storage:        raftio.StorageStats{Commits: 9, Fsyncs: 8},
		Transport:      &raftio.TransportStats{FramesOut: 13, SendErrors: 2},
		Net:            &net,
		Transfers:      4,
		Drained:        true,
		RequestBytes:   100,
		Unauthorized:   2,
		TopicsOwned:    3,
		LeadersKnown:   64,
		MembersRemoved: 1,
	}
	p.Inbound.Len, p.Inbound.Bad = 5, 1
	s := p.Stats()
	if s.LeaseFramesDropped != 7 || s.LeaseGrants != 7 || s.LeaderTransfers != 10 || s.StraysDropped != 1 {
		t.Fatalf("lease and reconcile: %+v", s)
	}
	if s.RaftCommits != 9 || s.RaftFsyncs != 8 || s.RaftFramesOut != 13 || s.RaftSendErrors != 2 || s.RaftInboundQLen != 5 || s.RaftBadFrames != 1 {
		t.Fatalf("raft: %+v", s)
	}
	if s.FramesIn != 11 || s.FramesOut != 12 || s.Drained != 1 || s.MembersRemoved != 1 || s.TopicsOwned != 3 || s.LeadersKnown != 64 {
		t.Fatalf("transport, marks, holdings: %+v", s)
	}
	if sec := s.Security; sec.Unauthorized != 2 || sec.RequestBytes != 100 || sec.TokensRefused != 3 || sec.TLSHandshakesFailed != 4 {
		t.Fatalf("security: %+v", sec)
	}
}

// A driven node runs no transport of its own: those fields stay zero.
func TestPartsWithoutTransport(t *testing.T) {
	p := Parts{RequestBytesRefused: 3}
	s := p.Stats()
	if s.FramesIn != 0 || s.RaftFramesOut != 0 || s.Drained != 0 || s.Security.TokensRefused != 0 || s.Security.RequestBytesRefused != 3 {
		t.Fatalf("%+v", s)
	}
}

// The requests' histograms are read by op and outcome, only the pairs
// seen.
func TestRequestsByOpAndOutcome(t *testing.T) {
	var lat serve.Latency
	if got := Requests(&lat); len(got) != 0 {
		t.Fatalf("nothing timed: %v", got)
	}
	lat.Refused(wire.KindAssign, wire.CodeUnavailable, time.Millisecond)
	lat.Refused(wire.KindAssign, wire.CodeUnavailable, 2*time.Millisecond)
	lat.Refused(wire.KindLookup, wire.CodeNotFound, time.Millisecond)
	counts := map[[2]string]uint64{}
	for _, r := range Requests(&lat) {
		counts[[2]string{r.Op, r.Code}] = r.Hist.Count
	}
	if len(counts) != 2 || counts[[2]string{"assign", "Unavailable"}] != 2 || counts[[2]string{"lookup", "NotFound"}] != 1 {
		t.Fatalf("counted %v", counts)
	}
}
