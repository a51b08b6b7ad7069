package records

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/wire"
)

// chunks is a connection that keeps the RecordsChunks written on it.
type chunks struct {
	t   *testing.T
	got []wire.RecordsChunk
}

func (c *chunks) Write(frame []byte) error {
	var hd wire.Header
	if err := wire.DecodeHeader(frame, &hd); err != nil || hd.Kind != wire.KindRecordsChunk {
		c.t.Fatalf("wrote a %v frame (%v)", hd.Kind, err)
	}
	payload, _, err := wire.FramePayload(&hd, frame[wire.HeaderSize:], nil)
	if err != nil {
		c.t.Fatal(err)
	}
	var m wire.RecordsChunk
	if err := wire.DecodeRecordsChunk(append([]byte(nil), payload...), &m); err != nil {
		c.t.Fatal(err)
	}
	c.got = append(c.got, m)
	return nil
}

func TestAPullIsAnsweredNotClosedUntilTheHoldBelowTheAskersEpochEnds(t *testing.T) {
	for _, c := range []struct {
		name     string
		held     uint64
		lease    ownership.Refusal
		released bool
		want     wire.HandoffStatus
	}{
		{"held below, leased", 1, ownership.Servable, false, wire.HandoffNotClosed},
		{"held below, lease lapsed", 1, ownership.NoLease, false, wire.HandoffOK},
		{"held below, leaving", 1, ownership.Servable, true, wire.HandoffOK},
		{"closed", 0, ownership.Servable, false, wire.HandoffOK},
		{"held above", 3, ownership.Servable, false, wire.HandoffOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t)
			h := w.addHost("n1", Config{})
			h.held["t"] = 1
			h.mustProduce("t", 1, wire.Session{ID: 3, Seq: 1}, "a")
			delete(h.held, "t")
			if c.held != 0 {
				h.held["t"] = c.held
			}
			h.lease["t"], h.released = c.lease, c.released
			conn := &chunks{t: t}
			h.k.AnswerPull(conn, 9, &wire.RecordsPull{Topic: []byte("t"), Epoch: 2, MaxBytes: 1 << 10})
			if len(conn.got) != 1 || conn.got[0].Status != c.want {
				t.Fatalf("answered %+v, want one chunk of status %v", conn.got, c.want)
			}
			got := conn.got[0]
			if c.want == wire.HandoffNotClosed {
				if len(got.Records) != 0 || len(got.Producers) != 0 {
					t.Fatalf("'not closed' carried %+v", got)
				}
				return
			}
			if len(got.Records) != 1 || got.Next != 1 || got.End != 1 || len(got.Producers) != 1 || got.Producers[0].ID != 3 {
				t.Fatalf("chunk %+v, want the record, next and end 1, and the session", got)
			}
		})
	}
}

func TestAPullAtEpochZeroOrRefusedByTheHookIsNotAnswered(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	conn := &chunks{t: t}
	h.k.AnswerPull(conn, 1, &wire.RecordsPull{Topic: []byte("t")})
	h.k.cfg.AnswerPull = func(topic string) bool { return topic != "t" }
	h.k.AnswerPull(conn, 2, &wire.RecordsPull{Topic: []byte("t"), Epoch: 2})
	if len(conn.got) != 0 {
		t.Fatalf("answered %+v", conn.got)
	}
	h.k.AnswerPull(conn, 3, &wire.RecordsPull{Topic: []byte("u"), Epoch: 2})
	if len(conn.got) != 1 {
		t.Fatalf("a pull the hook lets through: %d answers", len(conn.got))
	}
}

func TestAPullFromBeyondTheLogIsAnsweredWithItsEnd(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 1
	h.mustProduce("t", 1, wire.Session{}, "a", "b")
	delete(h.held, "t")
	conn := &chunks{t: t}
	h.k.AnswerPull(conn, 1, &wire.RecordsPull{Topic: []byte("t"), Epoch: 2, From: 5, MaxBytes: 1})
	if len(conn.got) != 1 || len(conn.got[0].Records) != 0 || conn.got[0].Next != 5 || conn.got[0].End != 2 {
		t.Fatalf("answered %+v, want no record, next 5 and end 2", conn.got)
	}
}

func TestALeavingNodeWaitsUntilItsTopicsArePulledToTheEnd(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["a"], h.held["b"] = 4, 4
	h.mustProduce("a", 4, wire.Session{}, "x")
	h.released = true
	h.k.ExpectHandoffs(map[string]uint64{"a": 4, "b": 4})
	done := make(chan struct{})
	go func() {
		h.k.AwaitHandoffs(context.Background())
		close(done)
	}()
	conn := &chunks{t: t}
	// A pull at an epoch not above the one held counts for nothing; one
	// above does, once it reached the end.
	h.k.AnswerPull(conn, 1, &wire.RecordsPull{Topic: []byte("b"), Epoch: 4, MaxBytes: 1})
	h.k.AnswerPull(conn, 2, &wire.RecordsPull{Topic: []byte("b"), Epoch: 5, MaxBytes: 1})
	select {
	case <-done:
		t.Fatal("left with a's records not pulled")
	case <-time.After(20 * time.Millisecond):
	}
	h.k.AnswerPull(conn, 3, &wire.RecordsPull{Topic: []byte("a"), Epoch: 5, MaxBytes: 1})
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting once every topic was pulled")
	}
	if lines := h.logs.lines(); len(lines) != 0 {
		t.Fatalf("logged %q", lines)
	}
}

func TestALeavingNodeGivesUpWaitingAfterTheHandoffTimeout(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{HandoffTimeout: time.Second})
	h.k.ExpectHandoffs(map[string]uint64{"a": 4})
	fired := make(chan func(), 1)
	timed := timedHost{host: h, fired: fired}
	h.k.env = timed
	done := make(chan struct{})
	go func() {
		h.k.AwaitHandoffs(context.Background())
		close(done)
	}()
	(<-fired)()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("still waiting after the timeout")
	}
	if lines := h.logs.lines(); len(lines) != 1 || !strings.Contains(lines[0], "left before every topic's records were pulled") || !strings.Contains(lines[0], "topics=1") {
		t.Fatalf("logged %q", lines)
	}
	// A node that expects nothing does not wait.
	k, err := New(h.k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	k.ExpectHandoffs(nil)
	k.AwaitHandoffs(context.Background())
}

// timedHost hands the timer AwaitHandoffs arms to the test, on another
// goroutine than the world's.
type timedHost struct {
	*host
	fired chan func()
}

func (h timedHost) After(d time.Duration, f func()) func() bool {
	if d != h.k.cfg.HandoffTimeout {
		panic("an unexpected timer")
	}
	h.fired <- f
	return func() bool { return false }
}

func TestARevokedTopicsRecordsAreDeletedOnceTheProducesInsideLeft(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 2
	h.mustProduce("t", 2, wire.Session{}, "a")
	late := h.produce("t", 2, wire.Session{}, "late") // inside, answer to come
	delete(h.held, "t")                               // revoked at 2
	deleted := 0
	h.k.DeleteRevoked([]byte("t"), 2, func(ok bool) {
		if !ok {
			t.Error("deletion failed")
		}
		deleted++
	})
	if deleted != 0 || h.log("t") == "[]" {
		t.Fatalf("deleted with a produce inside the gate")
	}
	w.run()
	if _, err := late(); err == nil {
		t.Fatal("the late produce was acknowledged")
	}
	if deleted != 1 || h.log("t") != "[]" {
		t.Fatalf("after the produce left: deleted %d, log %s", deleted, h.log("t"))
	}
	if s := h.k.Stats(); s.TopicsDeleted != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestARevokedTopicHeldAnewKeepsItsRecords(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 2
	h.mustProduce("t", 2, wire.Session{}, "a")
	h.held["t"] = 3 // opened again above the revoke
	var got []bool
	h.k.DeleteRevoked([]byte("t"), 2, func(ok bool) { got = append(got, ok) })
	if len(got) != 1 || !got[0] || h.log("t") != "[1099511627776:a@2]" {
		t.Fatalf("done %v, log %s", got, h.log("t"))
	}
	if s := h.k.Stats(); s.TopicsDeleted != 0 {
		t.Fatalf("stats %+v", s)
	}
	h.held["t"] = 2 // not above the revoke: deleted
	h.k.DeleteRevoked([]byte("t"), 2, func(ok bool) { got = append(got, ok) })
	if len(got) != 2 || !got[1] || h.log("t") != "[]" {
		t.Fatalf("done %v, log %s", got, h.log("t"))
	}
}

// A revoke's close that reaches a node late, after it held the topic at a
// later epoch and gave it up again, deletes only the records of the
// epochs up to the revoked one: those it acknowledged later stay.
func TestALateRevokeKeepsTheRecordsOfLaterEpochs(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 2
	h.mustProduce("t", 2, wire.Session{}, "a")
	h.held["t"] = 3
	h.mustProduce("t", 3, wire.Session{}, "b")
	delete(h.held, "t") // moved away at 4; the close of the revoke at 2 comes now
	var got []bool
	h.k.DeleteRevoked([]byte("t"), 2, func(ok bool) { got = append(got, ok) })
	if len(got) != 1 || !got[0] || h.log("t") != "[2199023255552:b@3]" {
		t.Fatalf("done %v, log %s", got, h.log("t"))
	}
}
