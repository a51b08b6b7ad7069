package status

import (
	"testing"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/raftmux/raftio"
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
