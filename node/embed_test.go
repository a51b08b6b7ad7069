package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/node/feed"
)

func eventString(evs []feed.Event) string {
	parts := make([]string, len(evs))
	for i, e := range evs {
		parts[i] = e.String()
	}
	return strings.Join(parts, " ")
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
	if kept := n.ownFeed.Kept(); kept != 0 {
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
	first := append([]feed.Event(nil), l.events[:2]...)
	l.mu.Unlock()
	if got := eventString(first); got != fmt.Sprintf("early-a+%d/1 early-b+%d/1", epochs["early-a"], epochs["early-b"]) {
		t.Fatalf("first events %q: the topics held at the first call, in topic order", got)
	}
}
