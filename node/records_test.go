package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node/feed"
	"github.com/shoalmq/shoal/node/records"
)

// eventLog records a node's ownership events as they arrive.
type eventLog struct {
	mu     sync.Mutex
	events []feed.Event
	done   chan struct{}
}

func watchEvents(n *Node) *eventLog {
	l := &eventLog{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ev := range n.OwnershipEvents() {
			l.mu.Lock()
			l.events = append(l.events, ev)
			l.mu.Unlock()
		}
	}()
	return l
}

// of returns the events of topic so far, as eventString writes them.
func (l *eventLog) of(topic string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var evs []feed.Event
	for _, e := range l.events {
		if e.Topic == topic {
			evs = append(evs, e)
		}
	}
	return eventString(evs)
}

// seen remembers every offset of a topic a client was told of, with its
// value and epoch, and fails on an offset that names two different
// records.
type seen struct {
	t    *testing.T
	recs map[string]client.Record // by topic/offset
}

func (s *seen) add(where, topic string, r client.Record) {
	s.t.Helper()
	k := fmt.Sprintf("%s/%d", topic, r.Offset)
	if old, ok := s.recs[k]; ok && (string(old.Value) != string(r.Value) || old.Epoch != r.Epoch) {
		s.t.Fatalf("%s: %s names %q@%d and %q@%d", where, k, old.Value, old.Epoch, r.Value, r.Epoch)
	}
	s.recs[k] = r
}

func (s *seen) produce(ctx context.Context, cl *client.Client, topic, value string, wantEpoch uint64) uint64 {
	s.t.Helper()
	p, err := cl.Produce(ctx, topic, [][]byte{[]byte(value)})
	if err != nil {
		s.t.Fatalf("produce %q: %v", value, err)
	}
	if p.Epoch != wantEpoch {
		s.t.Fatalf("produce %q acknowledged at epoch %d, want %d", value, p.Epoch, wantEpoch)
	}
	base, _ := records.OffsetBase(p.Epoch)
	if p.Offset < base {
		s.t.Fatalf("produce %q at epoch %d got offset %d, below the epoch's base %d", value, p.Epoch, p.Offset, base)
	}
	s.add("produce", topic, client.Record{Offset: p.Offset, Epoch: p.Epoch, Value: []byte(value)})
	return p.Offset
}

// fetchAll reads topic from offset 0 at its owner and checks every record
// against what was seen; it returns the values in order.
func (s *seen) fetchAll(ctx context.Context, cl *client.Client, topic string) []string {
	s.t.Helper()
	var vals []string
	for from := uint64(0); ; {
		f, err := cl.Fetch(ctx, topic, from, 0)
		if err != nil {
			s.t.Fatalf("fetch %s from %d: %v", topic, from, err)
		}
		for _, r := range f.Records {
			s.add("fetch", topic, r)
			vals = append(vals, string(r.Value))
		}
		if f.Next >= f.HighWatermark || len(f.Records) == 0 {
			return vals
		}
		from = f.Next
	}
}

func TestRecordsAndEventsAcrossMovesAndACrash(t *testing.T) {
	t.Parallel()
	// A produce of the topic "refused" on n2 is held after its append
	// until the topic moved away, so that its lease check fails.
	// n2 answers only the first pull of the topic "cut", as if it died
	// in the middle of its handoff; pulls take one record at a time.
	var refuseOnce, cutOnce atomic.Bool
	var moveAway atomic.Pointer[func()]
	c := startClusterHooked(t, 3, func(cfg *Config, h *testHooks) {
		h.handoffChunkBytes = 1
		if cfg.ID != "n2" {
			return
		}
		h.afterAppend = func(topic string) {
			if topic == "refused" && refuseOnce.CompareAndSwap(false, true) {
				(*moveAway.Load())()
			}
		}
		h.answerPull = func(topic string) bool {
			return topic != "cut" || cutOnce.CompareAndSwap(false, true)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n1, n2 := c.node("n1"), c.node("n2")
	logs := map[string]*eventLog{}
	for _, n := range c.nodes {
		logs[n.ID()] = watchEvents(n)
	}
	cl := clientOf(t, n1)
	s := &seen{t: t, recs: map[string]client.Record{}}
	const topic = "moving"

	// n2 → n1 → n2: every owner writes at its own epoch, above the
	// offsets of every earlier one.
	a1 := assignTo(t, cl, topic, "n2")
	waitUntil(t, 10*time.Second, "n2's guard at the first epoch", func() bool { return n2.Guard(topic, a1.Epoch).Check() == nil })
	for i := range 3 {
		s.produce(ctx, cl, topic, fmt.Sprintf("a%d", i), a1.Epoch)
	}
	// The move hands n2's records to n1 before n1 serves.
	a2 := assignTo(t, cl, topic, "n1")
	s.produce(ctx, cl, topic, "b0", a2.Epoch)
	if got := s.fetchAll(ctx, cl, topic); fmt.Sprint(got) != "[a0 a1 a2 b0]" {
		t.Fatalf("n1 after n2→n1 serves %v", got)
	}
	if err := n2.Guard(topic, a1.Epoch).Check(); !errors.Is(err, feed.ErrNotServing) {
		t.Fatalf("n2's guard after the move: %v", err)
	}
	a3 := assignTo(t, cl, topic, "n2")
	s.produce(ctx, cl, topic, "c0", a3.Epoch)
	if got := s.fetchAll(ctx, cl, topic); fmt.Sprint(got) != "[a0 a1 a2 b0 c0]" {
		t.Fatalf("n2 after n2→n1→n2 serves %v", got)
	}

	// A produce refused after its append leaves nothing behind.
	ar := assignTo(t, cl, "refused", "n2")
	move := func() {
		if _, err := cl.Assign(ctx, "refused", client.AssignOptions{Owner: "n3"}); err != nil {
			t.Errorf("move refused to n3: %v", err)
			return
		}
		for _, ok := held(n2, "refused"); ok && ctx.Err() == nil; _, ok = held(n2, "refused") {
			time.Sleep(10 * time.Millisecond)
		}
	}
	moveAway.Store(&move)
	waitUntil(t, 10*time.Second, "n2's guard on refused", func() bool { return n2.Guard("refused", ar.Epoch).Check() == nil })
	off := s.produce(ctx, cl, "refused", "retried", ar.Epoch+1) // refused at n2, taken by n3
	if n2.Stats().ProducesRemoved != 1 {
		t.Fatalf("produces removed on n2: %d", n2.Stats().ProducesRemoved)
	}
	left := 0
	if _, err := n2.store.ReadRecords([]byte("refused"), 0, 1<<20, func(uint64, uint64, []byte) bool { left++; return true }); err != nil || left != 0 {
		t.Fatalf("n2 keeps %d records of the refused produce (%v)", left, err)
	}
	if base, _ := records.OffsetBase(ar.Epoch + 1); off != base {
		t.Fatalf("the retried produce got offset %d, want %d", off, base)
	}

	// A revoked topic's records are deleted; assigned again, it starts
	// above its old offsets, empty.
	ag := assignTo(t, cl, "gone", "n1")
	waitUntil(t, 10*time.Second, "n1's guard on gone", func() bool { return n1.Guard("gone", ag.Epoch).Check() == nil })
	s.produce(ctx, cl, "gone", "old", ag.Epoch)
	if _, err := cl.Revoke(ctx, "gone"); err != nil {
		t.Fatalf("revoke: %v", err)
	}
	waitUntil(t, 10*time.Second, "n1 deleted gone", func() bool { return n1.Stats().TopicsDeleted == 1 })
	if hw, err := n1.store.HighWatermark([]byte("gone")); hw != 0 || err != nil {
		t.Fatalf("n1 keeps the log of a revoked topic: high watermark %d, %v", hw, err)
	}
	ag = assignTo(t, cl, "gone", "n1")
	s.produce(ctx, cl, "gone", "new", ag.Epoch)
	if got := s.fetchAll(ctx, cl, "gone"); fmt.Sprint(got) != "[new]" {
		t.Fatalf("gone assigned again serves %v", got)
	}

	// The previous owner dies in the middle of a handoff: the new owner
	// serves what it copied, and writes above it.
	ac := assignTo(t, cl, "cut", "n2")
	waitUntil(t, 10*time.Second, "n2's guard on cut", func() bool { return n2.Guard("cut", ac.Epoch).Check() == nil })
	for i := range 3 {
		s.produce(ctx, cl, "cut", fmt.Sprintf("x%d", i), ac.Epoch)
	}
	ac = assignTo(t, cl, "cut", "n3")
	n3 := c.node("n3")
	waitUntil(t, 10*time.Second, "n3 pulling cut", func() bool { return n3.Stats().HandoffRecords >= 1 })

	// A crash of the owner: the next one writes above everything before.
	if err := n2.Close(); err != nil {
		t.Fatalf("crash n2: %v", err)
	}
	waitUntil(t, 30*time.Second, "n3 gave up the pull", func() bool { return n3.Stats().HandoffsCut >= 1 })
	s.produce(ctx, cl, "cut", "y0", ac.Epoch)
	if got := s.fetchAll(ctx, cl, "cut"); fmt.Sprint(got) != "[x0 y0]" {
		t.Fatalf("n3 after its previous owner died mid-handoff serves %v", got)
	}
	var a4 client.Assignment
	waitUntil(t, 30*time.Second, "the topic moved off the crashed owner", func() bool {
		lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
		defer lcancel()
		var err error
		a4, err = cl.Lookup(lctx, topic, true)
		return err == nil && a4.Owner != "n2"
	})
	s.produce(ctx, cl, topic, "d0", a4.Epoch)
	// The dead owner's records are lost to the new one, but for those it
	// held itself from before; no offset is reused.
	wantAfterCrash := "[d0]"
	if a4.Owner == "n1" {
		wantAfterCrash = "[a0 a1 a2 b0 d0]"
	}
	if got := s.fetchAll(ctx, cl, topic); fmt.Sprint(got) != wantAfterCrash {
		t.Fatalf("%s after the crash of n2 serves %v, want %s", a4.Owner, got, wantAfterCrash)
	}

	// The events: every holding of the topic, in order, on every node.
	<-logs["n2"].done
	// n2 restarted tells again what its disk says it holds, then that it
	// holds it no more.
	_, _, seed := n1.Addrs()
	r2, err := New(nodeConfig("n2", c.dirs[1], []string{seed}, 3))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[1] = r2
	restarted := watchEvents(r2)
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	held3 := fmt.Sprintf("%s+%d/1 %s-%d(", topic, a3.Epoch, topic, a3.Epoch)
	waitUntil(t, 20*time.Second, "restarted n2 releases "+topic, func() bool { return strings.HasPrefix(restarted.of(topic), held3) })
	want := map[string]string{
		"n2": fmt.Sprintf("%[1]s+%[2]d/1 %[1]s-%[2]d(closed) %[1]s+%[3]d/1", topic, a1.Epoch, a3.Epoch),
		"n1": fmt.Sprintf("%[1]s+%[2]d/1 %[1]s-%[2]d(closed)", topic, a2.Epoch),
		"n3": "",
	}
	want[a4.Owner] += fmt.Sprintf(" %s+%d/1", topic, a4.Epoch)
	for id, w := range want {
		w = strings.TrimSpace(w)
		if id == a4.Owner {
			waitUntil(t, 5*time.Second, "the last owner's event", func() bool { return logs[id].of(topic) == w })
		}
		if got := logs[id].of(topic); got != w {
			t.Errorf("%s's events: %q, want %q", id, got, w)
		}
	}
	if got, w := logs["n2"].of("refused"), fmt.Sprintf("refused+%[1]d/1 refused-%[1]d(closed)", ar.Epoch); got != w {
		t.Errorf("n2's events of refused: %q, want %q", got, w)
	}
}
