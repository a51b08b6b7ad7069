package feed

import (
	"fmt"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/node/ownership"
)

// drainFeed takes every event the feed holds.
func drainFeed(f *Feed) []Event {
	var out []Event
	for {
		ev, ok := f.next()
		if !ok {
			return out
		}
		out = append(out, ev)
	}
}

func eventString(evs []Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = e.String()
	}
	return strings.Join(parts, " ")
}

func TestOwnershipEventsOfATopicKeepTheirOrder(t *testing.T) {
	f := New()
	f.on.Store(true)
	f.Held("a", 1, 1)
	f.Held("b", 4, 2)
	f.Held("a", 1, 3) // more partitions at the same epoch
	f.Held("a", 1, 2) // fewer: nothing new
	f.Dropped("b", ReasonClosed)
	f.Dropped("b", ReasonClosed) // not held: nothing
	// Topics take turns; a topic's own events keep their order.
	if got, want := eventString(drainFeed(f)), "a+1/1 b+4/2 a+1/3 b-4(closed)"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	f.Held("a", 5, 1) // a later epoch first releases the one held
	if got, want := eventString(drainFeed(f)), "a-1(superseded) a+5/1"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	f.Held("a", 3, 1) // an epoch once over never comes back
	if got := drainFeed(f); len(got) != 0 {
		t.Fatalf("an older epoch gave events: %s", eventString(got))
	}
}

func TestAnUnreadBacklogFoldsIntoTheNetChange(t *testing.T) {
	f := New()
	f.on.Store(true)
	f.Held("a", 1, 1)
	if ev, ok := f.next(); !ok || ev.Kind != Acquired || ev.Epoch != 1 {
		t.Fatalf("first event %+v %v", ev, ok)
	}
	// The reader stops reading; a moves away and back many times.
	for e := uint64(2); e < 1000; e += 2 {
		f.Dropped("a", ReasonClosed)
		f.Held("a", e, 1)
		if n := len(f.backlog["a"].events); n > maxPendingPerTopic {
			t.Fatalf("backlog of %d events", n)
		}
	}
	f.Held("z", 7, 1)
	// What the reader was told (a at 1) is released first, then the
	// holding now; of a topic that came and went three times unread,
	// the last holding is told.
	f.Held("gone", 3, 1)
	f.Dropped("gone", ReasonClosed)
	f.Held("gone", 4, 1)
	f.Dropped("gone", ReasonSuperseded)
	got := eventString(drainFeed(f))
	if want := "a-1(closed) z+7/1 gone+4/1 a+998/1 gone-4(superseded)"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if f.Folded() == 0 {
		t.Fatal("folds not counted")
	}
	if len(f.backlog) != 0 || len(f.order) != 0 {
		t.Fatalf("feed keeps %d backlogs, %d turns after a drain", len(f.backlog), len(f.order))
	}
}

func TestAnnounceTellsTheFeedThenTheOwnedHook(t *testing.T) {
	f := New()
	var told []string
	owned := func(topic string, held, floor uint64) {
		told = append(told, fmt.Sprintf("%s:%d:%d", topic, held, floor))
	}
	// Off until opened: the hook is told all the same.
	f.Announce([]ownership.Change{{Topic: "a", Put: true, Held: ownership.Topic{Epoch: 1, Partitions: 1}}}, ReasonClosed, owned)
	if evs := drainFeed(f); len(evs) != 0 {
		t.Fatalf("events of a feed that is off: %v", evs)
	}
	f.Open(func(fn func(map[string]ownership.Topic)) {
		fn(map[string]ownership.Topic{"a": {Epoch: 1, Partitions: 1}})
	})
	f.Open(func(func(map[string]ownership.Topic)) { t.Fatal("opened twice") })
	f.Announce([]ownership.Change{
		{Topic: "b", Put: true, Held: ownership.Topic{Epoch: 2, Partitions: 3}},
		{Topic: "a", Drop: true, Floor: 1},
		{Topic: "c", Floor: 4},
	}, ReasonClosed, owned)
	f.Announce([]ownership.Change{{Topic: "b", Drop: true}}, ReasonSuperseded, nil)
	if got, want := eventString(drainFeed(f)), "a+1/1 b+2/3 a-1(closed) b-2(superseded)"; got != want {
		t.Fatalf("events %q, want %q", got, want)
	}
	if got, want := strings.Join(told, " "), "a:1:0 b:2:0 a:0:1 c:0:4"; got != want {
		t.Fatalf("owned hook told %q, want %q", got, want)
	}
}
