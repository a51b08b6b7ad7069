package records

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/wire"
)

// moved is a world where topic "t" moved from n1, which wrote at epoch 1,
// to n2 at epoch 2: n2 marked the pull and holds the topic, and n1 holds
// it no more.
func moved(t *testing.T, cfg Config, values ...string) (w *world, n1, n2 *host) {
	w = newWorld(t)
	n1, n2 = w.addHost("n1", cfg), w.addHost("n2", cfg)
	n1.alive["n2"], n2.alive["n1"] = true, true
	n1.held["t"] = 1
	for _, v := range values {
		n1.mustProduce("t", 1, wire.Session{ID: 5, Seq: uint64(len(v))}, v)
	}
	delete(n1.held, "t")
	if !n2.k.MarkPull("t", 2) {
		t.Fatal("MarkPull marked nothing")
	}
	n2.held["t"] = 2
	return w, n1, n2
}

func TestAPullCopiesThePreviousOwnersRecordsAndSessionsChunkByChunk(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullChunkBytes: 1}, "a", "bb", "ccc")
	n2.k.StartPull("t", 2, "n1", false)
	w.run()
	if got := n2.log("t"); got != n1.log("t") || got != "[0:a@1 1:bb@1 2:ccc@1]" {
		t.Fatalf("n2 holds %s, n1 %s", got, n1.log("t"))
	}
	// One chunk per record, each asked from where the last ended.
	var froms []uint64
	for _, p := range n2.pulls {
		froms = append(froms, p.From)
	}
	if !slices.Equal(froms, []uint64{0, 1, 2}) {
		t.Fatalf("pulls asked from %v", froms)
	}
	if !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=true"}) {
		t.Fatalf("handoffs %v", n2.handoffs)
	}
	if s := n2.k.Stats(); s.PullsStarted != 1 || s.PulledRecords != 3 || s.PullsCut != 0 {
		t.Fatalf("stats %+v", s)
	}
	// The sessions came with the last chunk: a retry at n2 gets n1's
	// answer; and n2 writes above n1's offsets.
	retry := n2.produce("t", 2, wire.Session{ID: 5, Seq: 2}, "bb")
	w.run()
	if ack, err := retry(); err != nil || ack.Offset != 1 || ack.Epoch != 1 {
		t.Fatalf("retry at the new owner: %+v, %v", ack, err)
	}
	if got := n2.mustProduce("t", 2, wire.Session{}, "d"); got != off(2, 0) {
		t.Fatalf("n2 wrote at %d, want %d", got, off(2, 0))
	}
}

func TestAPullWaitsWhileThePreviousOwnerStillServesBelowTheAskersEpoch(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullWait: time.Second}, "a")
	n1.held["t"] = 1 // its Close has not come, and its lease runs
	n2.k.StartPull("t", 2, "n1", false)
	w.run()
	w.advance(2 * time.Second)
	if len(n2.pulls) < 3 || n2.log("t") != "[]" || len(n2.handoffs) != 0 {
		t.Fatalf("after 2s of 'not closed': %d pulls, log %s, handoffs %v", len(n2.pulls), n2.log("t"), n2.handoffs)
	}
	// Asked again every half wait.
	asked := len(n2.pulls)
	w.advance(500 * time.Millisecond)
	if len(n2.pulls) != asked+1 {
		t.Fatalf("%d pulls half a wait later, want %d", len(n2.pulls), asked+1)
	}
	// Its lease lapses: its hold is over as surely as a Close would end
	// it, and it answers.
	n1.lease["t"] = ownership.NoLease
	w.advance(500 * time.Millisecond)
	if got := n2.log("t"); got != "[0:a@1]" || !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=true"}) {
		t.Fatalf("after n1's lease lapsed: log %s, handoffs %v", got, n2.handoffs)
	}
}

func TestAPullIsAnsweredOnlyOnceTheProducesInsideLeft(t *testing.T) {
	w, n1, _ := moved(t, Config{}, "a")
	n1.held["t"] = 1
	late := n1.produce("t", 1, wire.Session{}, "late") // past its first check, appended
	n1.lease["t"] = ownership.NoLease                  // and its hold ended since
	c := &chunks{t: t}
	n1.k.AnswerPull(c, 1, &wire.RecordsPull{Topic: []byte("t"), Epoch: 2, MaxBytes: MaxChunkBytes})
	if len(c.got) != 0 {
		t.Fatalf("answered with a produce inside the gate: %+v", c.got)
	}
	// The produce's answer refuses and removes it; then the pull is
	// answered, without it.
	w.run()
	if _, err := late(); !errors.As(err, new(*NotServedError)) {
		t.Fatalf("the late produce: %v", err)
	}
	if len(c.got) != 1 || len(c.got[0].Records) != 1 || string(c.got[0].Records[0].Value) != "a" {
		t.Fatalf("answered %+v, want the one record a", c.got)
	}
}

func TestAPullOfASilentOwnerNotAliveHereEndsAtOnce(t *testing.T) {
	w, _, n2 := moved(t, Config{}, "a")
	n2.alive["n1"] = false // suspect, dead or unknown here
	n2.k.StartPull("t", 2, "n1", true)
	w.run()
	if len(n2.pulls) != 0 || !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=false"}) {
		t.Fatalf("%d pulls, handoffs %v", len(n2.pulls), n2.handoffs)
	}
	if s := n2.k.Stats(); s.PullsSilent != 1 || s.PullsCut != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := n2.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 2}); err != nil {
		t.Fatalf("fetch after the cut pull: %v", err)
	}
}

func TestASilentOwnerGetsOneShortPull(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullWait: time.Second}, "a")
	n1.k.cfg.AnswerPull = func(string) bool { return false } // silent indeed
	n2.k.StartPull("t", 2, "n1", true)
	w.advance(499 * time.Millisecond)
	if len(n2.pulls) != 1 || len(n2.handoffs) != 0 {
		t.Fatalf("before half a wait: %d pulls, handoffs %v", len(n2.pulls), n2.handoffs)
	}
	w.advance(time.Millisecond)
	if len(n2.pulls) != 1 || !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=false"}) {
		t.Fatalf("after half a wait: %d pulls, handoffs %v", len(n2.pulls), n2.handoffs)
	}
}

func TestASilentOwnerThatAnswersIsPulledAsAnyOther(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullWait: time.Second}, "a")
	n1.held["t"] = 1 // answers "not closed"
	n2.k.StartPull("t", 2, "n1", true)
	w.advance(3 * time.Second)
	if len(n2.handoffs) != 0 {
		t.Fatalf("a silent owner that answered was given up: %v", n2.handoffs)
	}
	delete(n1.held, "t")
	w.advance(time.Second)
	if !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=true"}) {
		t.Fatalf("handoffs %v", n2.handoffs)
	}
}

func TestAPullGivesUpOnAnOwnerThatLeavesItUnanswered(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullWait: time.Second}, "a")
	n1.k.cfg.AnswerPull = func(string) bool { return false }
	n2.k.StartPull("t", 2, "n1", false)
	// Three pulls, a wait each and half of one between two.
	w.advance(3*time.Second + time.Second - time.Millisecond)
	if len(n2.pulls) != maxUnanswered || len(n2.handoffs) != 0 {
		t.Fatalf("%d pulls, handoffs %v", len(n2.pulls), n2.handoffs)
	}
	w.advance(time.Millisecond)
	if len(n2.pulls) != maxUnanswered || !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=false"}) {
		t.Fatalf("%d pulls, handoffs %v", len(n2.pulls), n2.handoffs)
	}
	if lines := n2.logs.lines(); len(lines) != 1 || !strings.Contains(lines[0], "stopped answering") {
		t.Fatalf("logged %q", lines)
	}
}

func TestAPullEndsWhenThePreviousOwnerDiesOrTheTopicMovesOn(t *testing.T) {
	for _, c := range []struct {
		name  string
		event func(n2 *host)
	}{
		{"dead", func(n2 *host) { n2.dead["n1"] = true }},
		{"moved on", func(n2 *host) { n2.held["t"] = 3 }},
		{"closing", func(n2 *host) { n2.stopped = true }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, n1, n2 := moved(t, Config{PullWait: time.Second}, "a")
			n1.held["t"] = 1
			n2.k.StartPull("t", 2, "n1", false)
			w.run()
			c.event(n2)
			w.advance(time.Second)
			if !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=false"}) {
				t.Fatalf("handoffs %v", n2.handoffs)
			}
			asked := len(n2.pulls)
			w.advance(10 * time.Second)
			if len(n2.pulls) != asked {
				t.Fatalf("asked %d more times after the pull ended", len(n2.pulls)-asked)
			}
		})
	}
}

func TestAPullTimesOut(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullWait: time.Second, HandoffTimeout: 5 * time.Second}, "a")
	n1.held["t"] = 1
	n2.k.StartPull("t", 2, "n1", false)
	w.advance(4900 * time.Millisecond)
	if len(n2.handoffs) != 0 {
		t.Fatalf("ended early: %v", n2.handoffs)
	}
	w.advance(time.Second)
	if !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=false"}) {
		t.Fatalf("handoffs %v", n2.handoffs)
	}
}

func TestAPullThatCannotBeSentIsTriedAgain(t *testing.T) {
	w, _, n2 := moved(t, Config{PullWait: time.Second}, "a")
	n2.sendErr = errors.New("no route")
	n2.k.StartPull("t", 2, "n1", false)
	w.run()
	w.advance(500 * time.Millisecond)
	n2.sendErr = nil
	w.advance(500 * time.Millisecond)
	if !slices.Equal(n2.handoffs, []string{"t@2 from n1 complete=true"}) || n2.log("t") != "[0:a@1]" {
		t.Fatalf("handoffs %v, log %s", n2.handoffs, n2.log("t"))
	}
}

func TestAtMostMaxHandoffsPullsRunAtOnce(t *testing.T) {
	w := newWorld(t)
	n1, n2 := w.addHost("n1", Config{}), w.addHost("n2", Config{PullWait: time.Second})
	n1.k.cfg.AnswerPull = func(string) bool { return false }
	for i := range maxHandoffs + 2 {
		topic := fmt.Sprintf("t%02d", i)
		n2.k.MarkPull(topic, 2)
		n2.held[topic] = 2
		n2.k.StartPull(topic, 2, "n1", false)
	}
	w.run()
	if len(n2.pulls) != maxHandoffs {
		t.Fatalf("%d pulls asked at once, want %d", len(n2.pulls), maxHandoffs)
	}
	// One ends (its next step finds it moved on): the next in line
	// starts, and only that one.
	delete(n2.held, "t00")
	w.advance(2 * time.Second)
	var topics []string
	for _, p := range n2.pulls {
		topics = append(topics, string(p.Topic))
	}
	if !slices.Contains(topics, "t16") || slices.Contains(topics, "t17") {
		t.Fatalf("after one ended, asked for %v", topics)
	}
	if s := n2.k.Stats(); s.PullsStarted != maxHandoffs+2 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAChunkNobodyAskedForIsDropped(t *testing.T) {
	w, n1, n2 := moved(t, Config{PullWait: time.Second}, "a")
	n1.k.cfg.AnswerPull = func(string) bool { return false }
	n2.k.StartPull("t", 2, "n1", false)
	w.run()
	id := uint64(1) // the pull's request id
	chunk := &wire.RecordsChunk{Topic: []byte("t"), Records: []wire.Record{{Offset: 7, Epoch: 1, Value: []byte("forged")}}, Next: 8, End: 8}
	n2.k.TakeChunk("n3", id, chunk) // from a node not asked
	n2.k.TakeChunk("n1", id+1, chunk)
	w.run()
	if got := n2.log("t"); got != "[]" || len(n2.handoffs) != 0 {
		t.Fatalf("took a chunk not asked for: log %s, handoffs %v", got, n2.handoffs)
	}
	n2.k.TakeChunk("n1", id, chunk)
	w.run()
	if got := n2.log("t"); got != "[7:forged@1]" {
		t.Fatalf("the chunk asked for: log %s", got)
	}
	// The time-out lost the race for it: nothing is asked again.
	asked := len(n2.pulls)
	w.advance(5 * time.Second)
	if len(n2.pulls) != asked {
		t.Fatalf("asked again after the answer: %d pulls, %d before", len(n2.pulls), asked)
	}
}

func TestCutHandoffsAreLoggedAtMostOnceASecond(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n2", Config{})
	for i := range 5 {
		topic := fmt.Sprintf("t%d", i)
		h.k.MarkPull(topic, 2)
		h.held[topic] = 2
		h.k.StartPull(topic, 2, "n1", true) // n1 not alive here: cut at once
	}
	w.run()
	if lines := h.logs.lines(); len(lines) != 1 {
		t.Fatalf("logged %d lines for 5 cuts within a second, want 1: %q", len(lines), lines)
	}
	w.advance(handoffWarnEvery)
	h.k.MarkPull("t9", 2)
	h.held["t9"] = 2
	h.k.StartPull("t9", 2, "n1", true)
	w.run()
	lines := h.logs.lines()
	if len(lines) != 2 || !strings.Contains(lines[1], "more_not_logged=4") {
		t.Fatalf("logged %q, want a second line counting the 4 not logged", lines)
	}
	if s := h.k.Stats(); s.PullsCut != 6 {
		t.Fatalf("stats %+v", s)
	}
}
