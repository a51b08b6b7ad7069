package node

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// An error answer carries its error typed, built with its payload: the
// payload decodes to the same error, so what the node decides from the
// typed error (forward again, count the outcome) is what the payload says.
func TestErrorAnswersCarryTheirError(t *testing.T) {
	n := &Node{cfg: Config{ID: "n1"}}
	n.view.Store(&clusterView{byID: nil})
	for _, a := range []answer{
		errAnswer(wire.CodeNotFound, "topic \"x\" is not assigned"),
		unavailable("request timed out"),
		metaError(wire.ErrMalformed),
		n.notLeader(4, "n2"),
		n.notLeader(4, ""),
		errorAnswer(&wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Epoch: 3, NodeID: "n3", Addr: "a:1"}),
	} {
		if a.kind != wire.KindError || a.err == nil {
			t.Fatalf("%+v: not a typed error answer", a)
		}
		got, err := wire.DecodeErrorResponse(a.payload)
		if err != nil {
			t.Fatalf("%v: payload does not decode: %v", a.err, err)
		}
		if *got != *a.err {
			t.Fatalf("payload says %+v, typed error %+v", got, a.err)
		}
		if r := relayed(a.kind, a.payload); r.err == nil || *r.err != *a.err {
			t.Fatalf("relayed: %+v, want %+v", r.err, a.err)
		}
	}
	if a := n.notLeader(4, "n2"); !a.is(wire.CodeNotLeader) {
		t.Fatal("NotLeader answer is not NotLeader")
	}
	if a := n.notLeader(4, ""); a.is(wire.CodeNotLeader) || !a.is(wire.CodeUnavailable) {
		t.Fatalf("no known leader: %v", a.err)
	}
	if a := newAnswer(wire.KindAssignment, []byte{1}); a.err != nil || a.is(wire.CodeNotLeader) {
		t.Fatalf("plain answer: %+v", a)
	}
}

// Another node's answer is decoded once, where it comes back: an error
// that does not decode has no typed error, and counts as "other".
func TestRelayedAnswers(t *testing.T) {
	if a := relayed(wire.KindAssignment, []byte{6, 0}); a.err != nil {
		t.Fatalf("an assignment decoded as an error: %+v", a.err)
	}
	bad := []byte{byte(wire.CodeNotLeader), 0} // a NotLeader code, then nothing
	a := relayed(wire.KindError, bad)
	if a.err != nil || a.is(wire.CodeNotLeader) {
		t.Fatalf("a truncated error decoded: %+v", a.err)
	}
	var l latencyHists
	l.request(wire.KindLookup, a, time.Millisecond)
	l.request(wire.KindLookup, relayed(wire.KindError, wire.AppendErrorResponse(nil, &wire.ErrorResponse{Code: wire.CodeNotLeader})), time.Millisecond)
	l.request(wire.KindLookup, newAnswer(wire.KindAssignment, nil), time.Millisecond)
	op := int(wire.KindLookup - wire.KindAssign)
	for code, want := range map[int]uint64{requestCodes - 1: 1, int(wire.CodeNotLeader): 1, 0: 1} {
		if got := l.requests[op][code].Snapshot().Count; got != want {
			t.Errorf("code %d counted %d, want %d", code, got, want)
		}
	}
}
