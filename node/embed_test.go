package node

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// drainFeed takes every event the feed holds.
func drainFeed(f *ownershipFeed) []OwnershipEvent {
	var out []OwnershipEvent
	for {
		ev, ok := f.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

func eventString(evs []OwnershipEvent) string {
	var parts []string
	for _, e := range evs {
		switch e.Kind {
		case Acquired:
			parts = append(parts, fmt.Sprintf("%s+%d/%d", e.Topic, e.Epoch, e.Partitions))
		default:
			parts = append(parts, fmt.Sprintf("%s-%d(%s)", e.Topic, e.Epoch, e.Reason))
		}
	}
	return strings.Join(parts, " ")
}

func TestOwnershipEventsOfATopicKeepTheirOrder(t *testing.T) {
	f := newOwnershipFeed()
	f.on.Store(true)
	f.held("a", 1, 1)
	f.held("b", 4, 2)
	f.held("a", 1, 3) // more partitions at the same epoch
	f.held("a", 1, 2) // fewer: nothing new
	f.dropped("b", ReasonClosed)
	f.dropped("b", ReasonClosed) // not held: nothing
	// Topics take turns; a topic's own events keep their order.
	if got, want := eventString(drainFeed(f)), "a+1/1 b+4/2 a+1/3 b-4(closed)"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	f.held("a", 5, 1) // a later epoch first releases the one held
	if got, want := eventString(drainFeed(f)), "a-1(superseded) a+5/1"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	f.held("a", 3, 1) // an epoch once over never comes back
	if got := drainFeed(f); len(got) != 0 {
		t.Fatalf("an older epoch gave events: %s", eventString(got))
	}
}

func TestAnUnreadBacklogFoldsIntoTheNetChange(t *testing.T) {
	f := newOwnershipFeed()
	f.on.Store(true)
	f.held("a", 1, 1)
	if ev, ok := f.next(); !ok || ev.Kind != Acquired || ev.Epoch != 1 {
		t.Fatalf("first event %+v %v", ev, ok)
	}
	// The reader stops reading; a moves away and back many times.
	for e := uint64(2); e < 1000; e += 2 {
		f.dropped("a", ReasonClosed)
		f.held("a", e, 1)
		if n := len(f.backlog["a"].events); n > maxPendingPerTopic {
			t.Fatalf("backlog of %d events", n)
		}
	}
	f.held("z", 7, 1)
	// What the reader was told (a at 1) is released first, then the
	// holding now; of a topic that came and went three times unread,
	// the last holding is told.
	f.held("gone", 3, 1)
	f.dropped("gone", ReasonClosed)
	f.held("gone", 4, 1)
	f.dropped("gone", ReasonSuperseded)
	got := eventString(drainFeed(f))
	if want := "a-1(closed) z+7/1 gone+4/1 a+998/1 gone-4(superseded)"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if f.foldedCount() == 0 {
		t.Fatal("folds not counted")
	}
	if len(f.backlog) != 0 || len(f.order) != 0 {
		t.Fatalf("feed keeps %d backlogs, %d turns after a drain", len(f.backlog), len(f.order))
	}
}

// A node nobody asked for its events keeps none; the first call begins
// with an Acquired for every topic held then, and later changes follow.
func TestOwnershipEventsAreKeptFromTheFirstCall(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 1)
	n := c.node("n1")
	cl := clientOf(t, n)
	early := []string{"early-b", "early-a"}
	epochs := map[string]uint64{}
	for _, topic := range early {
		epochs[topic] = assignTo(t, cl, topic, "n1").Epoch
	}
	waitUntil(t, 10*time.Second, "n1 holds the early topics", func() bool { return n.lease.Owned() == len(early) })
	n.ownFeed.mu.Lock()
	kept := len(n.ownFeed.known) + len(n.ownFeed.backlog) + len(n.ownFeed.order)
	n.ownFeed.mu.Unlock()
	if kept != 0 {
		t.Fatalf("the feed keeps %d entries before anyone asked", kept)
	}
	l := watchEvents(n)
	for _, topic := range early {
		want := fmt.Sprintf("%s+%d/1", topic, epochs[topic])
		waitUntil(t, 10*time.Second, "the Acquired of "+topic, func() bool { return l.of(topic) == want })
	}
	late := assignTo(t, cl, "late", "n1")
	want := fmt.Sprintf("late+%d/1", late.Epoch)
	waitUntil(t, 10*time.Second, "the Acquired of late", func() bool { return l.of("late") == want })
	l.mu.Lock()
	first := append([]OwnershipEvent(nil), l.events[:2]...)
	l.mu.Unlock()
	if got := eventString(first); got != fmt.Sprintf("early-a+%d/1 early-b+%d/1", epochs["early-a"], epochs["early-b"]) {
		t.Fatalf("first events %q: the topics held at the first call, in topic order", got)
	}
}
