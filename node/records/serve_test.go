package records

import (
	"errors"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/wire"
)

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	full := h.k.cfg
	for name, edit := range map[string]func(*Config){
		"no store":        func(c *Config) { c.Store = nil },
		"no env":          func(c *Config) { c.Env = nil },
		"no logger":       func(c *Config) { c.Logger = nil },
		"no timeout":      func(c *Config) { c.HandoffTimeout = 0 },
		"no pull wait":    func(c *Config) { c.PullWait = 0 },
		"no fetch budget": func(c *Config) { c.MaxFetchBytes = 0 },
	} {
		c := full
		edit(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := full
	c.PullChunkBytes = 0
	k, err := New(c)
	if err != nil || k.cfg.PullChunkBytes != MaxChunkBytes {
		t.Fatalf("PullChunkBytes 0: %v, chunk %d, want %d", err, k.cfg.PullChunkBytes, MaxChunkBytes)
	}
}

func TestOffsetsStartAtTheEpochsBase(t *testing.T) {
	for _, c := range []struct {
		epoch uint64
		base  uint64
		ok    bool
	}{
		{0, 0, false},
		{1, 0, true},
		{2, 1 << 40, true},
		{MaxOffsetEpoch, (MaxOffsetEpoch - 1) << 40, true},
		{MaxOffsetEpoch + 1, 0, false},
	} {
		base, err := OffsetBase(c.epoch)
		if c.ok != (err == nil) || base != c.base {
			t.Errorf("OffsetBase(%d) = %d, %v; want %d, ok %v", c.epoch, base, err, c.base, c.ok)
		}
		if !c.ok && !errors.Is(err, ErrOffsetSpace) {
			t.Errorf("OffsetBase(%d): %v does not wrap ErrOffsetSpace", c.epoch, err)
		}
	}
}

func TestAProduceIsAcknowledgedOnlyAfterItsSecondLeaseCheck(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 3
	answer := h.produce("t", 3, wire.Session{}, "a", "b")
	if len(w.work) != 1 {
		t.Fatalf("the produce queued %d pieces after its append, want 1 (its answer)", len(w.work))
	}
	if h.log("t") != "[2199023255552:a@3 2199023255553:b@3]" {
		t.Fatalf("after the append: %s", h.log("t"))
	}
	w.run()
	ack, err := answer()
	if err != nil || ack.Epoch != 3 || ack.Offset != off(3, 0) || string(ack.Topic) != "t" {
		t.Fatalf("ack %+v, %v; want epoch 3 offset %d", ack, err, off(3, 0))
	}
	if got := h.mustProduce("t", 3, wire.Session{}, "c"); got != off(3, 2) {
		t.Fatalf("next produce at %d, want %d", got, off(3, 2))
	}
	if s := h.k.Stats(); s.Produced != 3 || s.ProducesRemoved != 0 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAProduceTheLeaseNoLongerCoversAfterItsAppendIsRemoved(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 2
	h.mustProduce("t", 2, wire.Session{}, "kept")
	answer := h.produce("t", 2, wire.Session{}, "refused")
	h.lease["t"] = ownership.NoLease // lapsed between the append and the answer
	w.run()
	_, err := answer()
	var ns *NotServedError
	if !errors.As(err, &ns) || ns.Held != 2 || ns.Why != ownership.NoLease || string(ns.Topic) != "t" {
		t.Fatalf("answer %v, want NotServed at held 2 for NoLease", err)
	}
	if got := h.log("t"); got != "[1099511627776:kept@2]" {
		t.Fatalf("log after the refusal: %s", got)
	}
	if s := h.k.Stats(); s.ProducesRemoved != 1 || s.Produced != 1 {
		t.Fatalf("stats %+v", s)
	}
}

func TestAProduceOrFetchRefusedAtItsFirstCheckTouchesNothing(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 4
	for _, epoch := range []uint64{3, 5} {
		answer := h.produce("t", epoch, wire.Session{}, "x")
		w.run()
		var ns *NotServedError
		if _, err := answer(); !errors.As(err, &ns) || ns.Held != 4 || ns.Why != ownership.OtherEpoch {
			t.Fatalf("produce at %d: %v", epoch, err)
		}
		if _, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: epoch}); !errors.As(err, &ns) || ns.Why != ownership.OtherEpoch {
			t.Fatalf("fetch at %d: %v", epoch, err)
		}
	}
	if got := h.log("t"); got != "[]" {
		t.Fatalf("log: %s", got)
	}
	if g := h.k.ho.gate([]byte("t")); g.inside() != 0 {
		t.Fatalf("%d produces left inside the gate", g.inside())
	}
}

func TestAProduceOrFetchOfATopicBeingPulledIsRefusedUntilThePullEnds(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 2
	if !h.k.MarkPull("t", 2) {
		t.Fatal("MarkPull on an enabled keeper marked nothing")
	}
	answer := h.produce("t", 2, wire.Session{}, "early")
	w.run()
	want := `records of "t" are being handed over from its previous owner`
	if _, err := answer(); !errors.Is(err, ErrHandingOver) || err.Error() != want {
		t.Fatalf("produce while pulling: %v", err)
	}
	if _, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 2}); !errors.Is(err, ErrHandingOver) || err.Error() != want {
		t.Fatalf("fetch while pulling: %v", err)
	}
	h.k.UnmarkPull("t", 1) // another epoch's: leaves the mark
	if _, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 2}); !errors.Is(err, ErrHandingOver) {
		t.Fatalf("fetch after another epoch's unmark: %v", err)
	}
	h.k.UnmarkPull("t", 2)
	h.mustProduce("t", 2, wire.Session{}, "late")
	if got := h.log("t"); got != "[1099511627776:late@2]" {
		t.Fatalf("log: %s", got)
	}
}

func TestAKeeperNotEnabledMarksNoPull(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	k, err := New(h.k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if k.MarkPull("t", 2) {
		t.Fatal("a keeper not enabled marked a pull")
	}
	k.Enable()
	if !k.MarkPull("t", 2) {
		t.Fatal("an enabled keeper marked no pull")
	}
}

func TestARetriedProduceOfASessionGetsItsFirstAnswer(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 1
	s := wire.Session{ID: 7, Seq: 1}
	first := h.mustProduce("t", 1, s, "a", "b")
	h.held["t"] = 2 // moved on and back: the retry's answer keeps its epoch
	again := h.produce("t", 2, s, "a", "b")
	w.run()
	ack, err := again()
	if err != nil || ack.Offset != first || ack.Epoch != 1 {
		t.Fatalf("retry: %+v, %v; want the first answer, offset %d at epoch 1", ack, err, first)
	}
	if got := h.log("t"); got != "[0:a@1 1:b@1]" {
		t.Fatalf("log: %s", got)
	}
	// A retry the lease no longer covers is refused, though answered
	// before.
	h.lease["t"] = ownership.NoLease
	again = h.produce("t", 2, s, "a", "b")
	w.run()
	if _, err := again(); !errors.As(err, new(*NotServedError)) {
		t.Fatalf("retry without a lease: %v", err)
	}
	// A produce below the session's floor is refused: it may have been
	// appended, and its answer is gone.
	delete(h.lease, "t")
	h.mustProduce("t", 2, wire.Session{ID: 7, Seq: 3, Floor: 2}, "c")
	old := h.produce("t", 2, wire.Session{ID: 7, Seq: 2, Floor: 1}, "lost")
	w.run()
	if _, err := old(); !errors.Is(err, ErrSessionExpired) || !strings.HasPrefix(err.Error(), "producer session expired: produce 2 of session 7") {
		t.Fatalf("produce below the floor: %v", err)
	}
	bad := h.produce("t", 2, wire.Session{ID: 7, Seq: 4, Floor: 4}, "x")
	w.run()
	if _, err := bad(); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("produce of an invalid session: %v", err)
	}
}

func TestCopiesOfAProduceTakeTurnsFromAppendToAnswer(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 1
	s := wire.Session{ID: 9, Seq: 1}
	first := h.produce("t", 1, s, "v")
	second := h.produce("t", 1, s, "v") // waits for the first's turn
	if len(w.work) != 1 {
		t.Fatalf("%d pieces queued, want the first's answer only", len(w.work))
	}
	// The first is refused after its append: its records go, and the
	// copy, whose turn comes after, appends them again.
	h.lease["t"] = ownership.NoLease
	w.work[0]()
	w.work = w.work[1:]
	delete(h.lease, "t")
	w.run()
	if _, err := first(); !errors.As(err, new(*NotServedError)) {
		t.Fatalf("first: %v", err)
	}
	ack, err := second()
	if err != nil || ack.Offset != 1 {
		t.Fatalf("copy: %+v, %v; want an append at offset 1", ack, err)
	}
	if got := h.log("t"); got != "[1:v@1]" {
		t.Fatalf("log: %s", got)
	}
}

func TestAFetchReadsUpToTheCapAndNamesWhatComesNext(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{MaxFetchBytes: 2})
	h.held["t"] = 1
	h.mustProduce("t", 1, wire.Session{}, "a", "b", "c")
	for _, asked := range []uint32{0, 100} {
		res, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 1, MaxBytes: asked})
		if err != nil || len(res.Records) != 2 || res.Next != 2 || res.HighWatermark != 3 {
			t.Fatalf("fetch asking %d: %+v, %v; want 2 records, next 2, high watermark 3", asked, res, err)
		}
	}
	res, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 1, From: 2, MaxBytes: 1})
	if err != nil || len(res.Records) != 1 || string(res.Records[0].Value) != "c" || res.Next != 3 {
		t.Fatalf("fetch from 2: %+v, %v", res, err)
	}
	if _, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 1, From: 9}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("fetch beyond the high watermark: %v", err)
	}
	if s := h.k.Stats(); s.Fetched != 5 {
		t.Fatalf("fetched %d records, want 5", s.Fetched)
	}
}

func TestAFetchTheLeaseNoLongerCoversAfterItsReadIsRefused(t *testing.T) {
	w := newWorld(t)
	h := w.addHost("n1", Config{})
	h.held["t"] = 1
	h.mustProduce("t", 1, wire.Session{}, "a")
	// The lease lapses during the read: the store's callback is inside
	// it.
	h.k.store = lapsing{Store: h.store, h: h, topic: "t"}
	if _, err := h.k.Fetch(&wire.Fetch{Topic: []byte("t"), Epoch: 1}); !errors.As(err, new(*NotServedError)) {
		t.Fatalf("fetch whose lease lapsed: %v", err)
	}
	if s := h.k.Stats(); s.Fetched != 0 {
		t.Fatalf("fetched %d records", s.Fetched)
	}
}

// lapsing is a store whose reads end topic's lease on h.
type lapsing struct {
	Store
	h     *host
	topic string
}

func (l lapsing) ReadRecords(topic []byte, from uint64, maxBytes int, fn func(offset, epoch uint64, value []byte) bool) (uint64, error) {
	l.h.lease[l.topic] = ownership.NoLease
	return l.Store.ReadRecords(topic, from, maxBytes, fn)
}
