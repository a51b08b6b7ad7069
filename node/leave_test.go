package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
)

func TestLeaveHandsOffLeadershipsAndTopics(t *testing.T) {
	t.Parallel()
	// n3's warnings: it must not give up waiting for its topics' next
	// owners to pull their records.
	var warned syncBuffer
	c := startClusterWith(t, 3, func(cfg *Config) {
		if cfg.ID == "n3" {
			cfg.Logger = slog.New(slog.NewTextHandler(&warned, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	for i := range 30 {
		if _, err := cl.Assign(ctx, fmt.Sprintf("leaving-%02d", i), client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
	}
	n3 := c.node("n3")
	if n3.Status().ShardsLed == 0 {
		t.Fatal("n3 leads nothing to hand off")
	}
	events := watchEvents(n3)
	s := &seen{t: t, recs: map[string]client.Record{}}
	a, _ := cl.Lookup(ctx, "leaving-00", true)
	waitUntil(t, 10*time.Second, "n3 serves leaving-00", func() bool { return n3.Guard("leaving-00", a.Epoch).Check() == nil })
	for i := range 3 {
		s.produce(ctx, cl, "leaving-00", fmt.Sprintf("r%d", i), a.Epoch)
	}
	start := time.Now()
	if err := n3.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if led := n3.events.Led(); led != 0 {
		t.Errorf("n3 still led %d shards when it closed", led)
	}
	if strings.Contains(warned.String(), "left before every topic's records were pulled") {
		t.Errorf("n3 left before its topics' records were pulled:\n%s", warned.String())
	}
	waitUntil(t, 20*time.Second, "n3's topics moved", func() bool {
		for i := range 30 {
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			a, err := cl.Lookup(lctx, fmt.Sprintf("leaving-%02d", i), true)
			lcancel()
			if err != nil || a.Owner == "n3" {
				return false
			}
		}
		return true
	})
	t.Logf("leave and move of 30 topics took %v", time.Since(start).Round(time.Millisecond))
	// The records went with the topic, and the new owner writes above them.
	b, err := cl.Lookup(ctx, "leaving-00", true)
	if err != nil {
		t.Fatal(err)
	}
	s.produce(ctx, cl, "leaving-00", "after", b.Epoch)
	if got := s.fetchAll(ctx, cl, "leaving-00"); fmt.Sprint(got) != "[r0 r1 r2 after]" {
		t.Fatalf("%s after the leave of n3 serves %v", b.Owner, got)
	}
	<-events.done
	if got, want := events.of("leaving-00"), fmt.Sprintf("leaving-00+%[1]d/1 leaving-00-%[1]d(leaving)", a.Epoch); got != want {
		t.Fatalf("n3's events: %q, want %q", got, want)
	}
}
