package serve

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/wire"
)

// An error answer carries its error typed, built with its payload: the
// payload decodes to the same error, so what the node decides from the
// typed error (forward again, count the outcome) is what the payload says.
func TestErrorAnswersCarryTheirError(t *testing.T) {
	s, env := newTestServer(t)
	env.addrs["n2"] = "10.0.0.2:7000"
	for _, a := range []Answer{
		ErrAnswer(wire.CodeNotFound, "topic \"x\" is not assigned"),
		Unavailable("request timed out"),
		MetaError(wire.ErrMalformed),
		s.NotLeader(4, "n2"),
		s.NotLeader(4, ""),
		s.NotLeader(4, "n1"),
		ErrorAnswer(&wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Epoch: 3, NodeID: "n3", Addr: "a:1"}),
	} {
		if a.Kind != wire.KindError || a.Err == nil {
			t.Fatalf("%+v: not a typed error answer", a)
		}
		got, err := wire.DecodeErrorResponse(a.Payload)
		if err != nil {
			t.Fatalf("%v: payload does not decode: %v", a.Err, err)
		}
		if *got != *a.Err {
			t.Fatalf("payload says %+v, typed error %+v", got, a.Err)
		}
		if r := Relayed(a.Kind, a.Payload); r.Err == nil || *r.Err != *a.Err {
			t.Fatalf("relayed: %+v, want %+v", r.Err, a.Err)
		}
	}
	if a := s.NotLeader(4, "n2"); !a.Is(wire.CodeNotLeader) || a.Err.Addr != "10.0.0.2:7000" {
		t.Fatalf("NotLeader answer: %+v", a.Err)
	}
	for _, l := range []string{"", "n1"} {
		if a := s.NotLeader(4, l); a.Is(wire.CodeNotLeader) || !a.Is(wire.CodeUnavailable) || a.Err.NodeID != "" {
			t.Fatalf("no other leader known (%q): %+v", l, a.Err)
		}
	}
	if a := NewAnswer(wire.KindAssignment, []byte{1}); a.Err != nil || a.Is(wire.CodeNotLeader) {
		t.Fatalf("plain answer: %+v", a)
	}
}

// Another node's answer is decoded once, where it comes back: an error
// that does not decode has no typed error, and counts as "Other".
func TestRelayedAnswers(t *testing.T) {
	if a := Relayed(wire.KindAssignment, []byte{6, 0}); a.Err != nil {
		t.Fatalf("an assignment decoded as an error: %+v", a.Err)
	}
	bad := []byte{byte(wire.CodeNotLeader), 0} // a NotLeader code, then nothing
	a := Relayed(wire.KindError, bad)
	if a.Err != nil || a.Is(wire.CodeNotLeader) {
		t.Fatalf("a truncated error decoded: %+v", a.Err)
	}
	var l Latency
	l.Request(wire.KindLookup, a, time.Millisecond)
	l.Request(wire.KindLookup, Relayed(wire.KindError, wire.AppendErrorResponse(nil, &wire.ErrorResponse{Code: wire.CodeNotLeader})), time.Millisecond)
	l.Request(wire.KindLookup, NewAnswer(wire.KindAssignment, nil), time.Millisecond)
	l.Refused(wire.KindAssign, wire.CodeUnauthorized, time.Millisecond)
	l.Request(wire.KindError, NewAnswer(wire.KindAssignment, nil), time.Millisecond) // not a request: not counted
	got := map[[2]string]uint64{}
	l.Each(func(op, code string, h histogram.Snapshot) { got[[2]string{op, code}] = h.Count })
	want := map[[2]string]uint64{{"lookup", "Other"}: 1, {"lookup", "NotLeader"}: 1, {"lookup", "OK"}: 1, {"assign", "Unauthorized"}: 1}
	if len(got) != len(want) {
		t.Fatalf("counted %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("counted %v, want %v", got, want)
		}
	}
}

// A frame too large for the wire is answered TooLarge.
func TestFrameTooLarge(t *testing.T) {
	f := Frame(5, wire.KindAssignment, make([]byte, wire.MaxFrame+1))
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil || h.Kind != wire.KindError || h.RequestID != 5 {
		t.Fatalf("header %+v, %v", h, err)
	}
	e, err := wire.DecodeErrorResponse(f[wire.HeaderSize:])
	if err != nil || e.Code != wire.CodeTooLarge {
		t.Fatalf("%+v, %v", e, err)
	}
}

// A request is decoded once, and a write given a session carries it in
// its payload too, as a forward sends it.
func TestRequestDecodeAndSession(t *testing.T) {
	payload := wire.AppendAssign(nil, &wire.Assign{Topic: []byte("t"), Owner: []byte("n2"), Partitions: 4})
	r, err := DecodeRequest(wire.KindAssign, payload)
	if err != nil || string(r.Topic) != "t" || string(r.Owner) != "n2" || r.Partitions != 4 || !r.Write() || !r.Session.IsZero() {
		t.Fatalf("%+v, %v", r, err)
	}
	s := wire.Session{ID: 9, Seq: 3, Floor: 1}
	r.SetSession(s)
	var m wire.Assign
	if err := wire.DecodeAssign(r.Payload, &m); err != nil || m.Session != s || string(m.Topic) != "t" || m.Partitions != 4 {
		t.Fatalf("payload after SetSession: %+v, %v", m, err)
	}
	l, err := DecodeRequest(wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("t"), Linearizable: true}))
	if err != nil || l.Write() || !l.Linearizable {
		t.Fatalf("%+v, %v", l, err)
	}
	if _, err := DecodeRequest(wire.KindProduce, nil); err == nil {
		t.Fatal("a produce decoded as a metadata request")
	}
	if _, err := DecodeRequest(wire.KindRevoke, []byte{0xff}); err == nil {
		t.Fatal("a bad revoke decoded")
	}
}

// Admission gives a slot and the request's bytes, refuses past either
// bound, and gives the bytes back once however often release is called.
func TestAdmission(t *testing.T) {
	a := NewAdmission(2, 100)
	frame := make([]byte, 60)
	h := wire.Header{Kind: wire.KindAssign}
	r1, ok := a.Admit(h, frame)
	if !ok || a.Active() != 1 || a.Bytes() != 60 {
		t.Fatalf("first: %v, %d active, %d bytes", ok, a.Active(), a.Bytes())
	}
	if _, ok := a.Admit(h, frame); ok || a.Active() != 1 || a.Refused() != 1 {
		t.Fatalf("past the bytes: %v, %d active, %d refused", ok, a.Active(), a.Refused())
	}
	r1()
	r1()
	if a.Bytes() != 0 {
		t.Fatalf("%d bytes held after release", a.Bytes())
	}
	r2, ok := a.Admit(h, frame)
	if !ok || a.Active() != 2 {
		t.Fatal("second slot refused")
	}
	if _, ok := a.Admit(h, frame[:1]); ok || a.Refused() != 1 {
		t.Fatal("a third slot given, or counted as bytes refused")
	}
	a.Leave()
	a.Leave()
	r2()
	if a.Active() != 0 || a.Bytes() != 0 {
		t.Fatalf("%d active, %d bytes", a.Active(), a.Bytes())
	}
}
