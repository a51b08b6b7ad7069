package records

import (
	"slices"
	"testing"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
	"github.com/shoalmq/shoal/wire"
)

// inline runs spawned work at once, as a started node's goroutine would
// eventually.
func inline(f func()) bool { f(); return true }

func TestGateAwaitRunsAtOnceWhenNoProduceIsInside(t *testing.T) {
	var g topicGate
	ran := false
	g.await(func() { ran = true })
	if !ran {
		t.Fatal("await with no produce inside did not run")
	}
}

func TestGateAwaitWaitsOnlyForProducesThatEnteredBefore(t *testing.T) {
	var g topicGate
	var order []string
	leave1 := g.enter(inline)
	leave2 := g.enter(inline)
	g.await(func() { order = append(order, "pull") })
	leave3 := g.enter(inline) // after the wait: not waited for
	leave1()
	if len(order) != 0 {
		t.Fatalf("ran with a produce that entered before still inside: %v", order)
	}
	g.await(func() { order = append(order, "delete") })
	leave2()
	if !slices.Equal(order, []string{"pull"}) {
		t.Fatalf("after the produces ahead left: %v, want [pull]", order)
	}
	leave3()
	if !slices.Equal(order, []string{"pull", "delete"}) {
		t.Fatalf("after the last left: %v, want [pull delete]", order)
	}
	if g.inside() != 0 || len(g.waits) != 0 {
		t.Fatalf("gate not empty: %d inside, %d waits", g.inside(), len(g.waits))
	}
}

func TestOnceLockCopiesTakeTurnsWithoutBlocking(t *testing.T) {
	var l onceLocks
	s := wire.Session{ID: 7, Seq: 3}
	var order []string
	var unlock1 func()
	l.lock([]byte("t"), s, inline, func(u func()) { order = append(order, "first"); unlock1 = u })
	l.lock([]byte("t"), s, inline, func(u func()) { order = append(order, "copy"); u() })
	// Another produce of the same session goes beside them.
	l.lock([]byte("t"), wire.Session{ID: 7, Seq: 4}, inline, func(u func()) { order = append(order, "next"); u() })
	if !slices.Equal(order, []string{"first", "next"}) {
		t.Fatalf("before the first unlocked: %v, want [first next]", order)
	}
	unlock1()
	unlock1() // a second unlock does nothing
	if !slices.Equal(order, []string{"first", "next", "copy"}) {
		t.Fatalf("after: %v, want [first next copy]", order)
	}
	if len(l.m) != 0 {
		t.Fatalf("%d locks left", len(l.m))
	}
}

func TestAProduceLeavingTheGateTwiceBreaksAnInvariant(t *testing.T) {
	if !invariants.Enabled {
		// The check under test is compiled in only with -tags invariants
		// or -race; make test runs the package both ways, so it runs there.
		t.Skip("a build without invariants checks none") // the check is compiled in only with -tags invariants or -race (make test runs both)
	}
	var g topicGate
	leave := g.enter(inline)
	leave()
	invariantstest.MustViolate(t, "left twice", leave)
}

func TestTheGatesAndPullsChecksFindWhatIsOutOfOrder(t *testing.T) {
	g := topicGate{gen: 3, in: []genCount{{gen: 2, n: 1}, {gen: 1, n: 1}}}
	if g.check() == nil {
		t.Error("generations inside out of order: no error")
	}
	g = topicGate{gen: 3, in: []genCount{{gen: 1, n: 0}}}
	if g.check() == nil {
		t.Error("an empty generation inside: no error")
	}
	g = topicGate{gen: 3, waits: []gateWait{{upTo: 3}}}
	if g.check() == nil {
		t.Error("a wait not below the generation entering: no error")
	}
	g = topicGate{gen: 3, in: []genCount{{gen: 1, n: 2}, {gen: 3, n: 1}}, waits: []gateWait{{upTo: 0}, {upTo: 2}}}
	if err := g.check(); err != nil {
		t.Errorf("a gate in order: %v", err)
	}
	var h handoffs
	h.init()
	h.running, h.queue = 1, []*pull{{}}
	if h.check() == nil {
		t.Error("a pull in line while fewer than maxHandoffs run: no error")
	}
	h.queue = nil
	h.active["t"] = 2
	if h.check() == nil {
		t.Error("a marked topic not counted: no error")
	}
	h.n.Add(1)
	if err := h.check(); err != nil {
		t.Errorf("pulls in order: %v", err)
	}
}
