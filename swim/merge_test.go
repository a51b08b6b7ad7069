package swim

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

var t0 = time.Unix(1_000_000, 0)

func testNode(t testing.TB, id string) *Node {
	t.Helper()
	c := LANConfig()
	c.NodeID, c.SwimAddr, c.Generation, c.Seed = id, id+":1", 1, 1
	n, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func ev(kind wire.SwimEventKind, id string, gen, inc uint64) *wire.SwimEvent {
	e := &wire.SwimEvent{Kind: kind, Node: []byte(id), Generation: gen, Incarnation: inc, From: []byte("judge")}
	if kind == wire.SwimAlive {
		e.SwimAddr = []byte(id + ":1")
	}
	return e
}

// expectMerge is the rule table written out: what a member in state prior
// (0 for unknown) at generation 5, incarnation 5 becomes after kind at
// (gen, inc).
func expectMerge(prior State, kind wire.SwimEventKind, gen, inc uint64) (State, uint64, uint64) {
	stay := func() (State, uint64, uint64) { return prior, 5, 5 }
	as := map[wire.SwimEventKind]State{wire.SwimAlive: StateAlive, wire.SwimSuspect: StateSuspect, wire.SwimDead: StateDead, wire.SwimLeave: StateLeft}[kind]
	if prior == 0 {
		if kind == wire.SwimSuspect {
			return 0, 0, 0 // nothing to probe an unknown suspect at
		}
		return as, gen, inc // Alive joins; Dead and Leave leave a tombstone
	}
	switch {
	case gen < 5:
		return stay() // an older life
	case gen > 5:
		return as, gen, inc // a newer life supersedes everything
	case prior.final():
		return stay() // final for this generation
	case kind == wire.SwimDead || kind == wire.SwimLeave:
		return as, 5, max(5, inc) // whatever the incarnation
	case inc > 5:
		return as, 5, inc
	case inc == 5 && kind == wire.SwimSuspect && prior == StateAlive:
		return StateSuspect, 5, 5
	}
	return stay()
}

func TestMergeRulesTable(t *testing.T) {
	priors := []State{0, StateAlive, StateSuspect, StateDead, StateLeft}
	kinds := []wire.SwimEventKind{wire.SwimAlive, wire.SwimSuspect, wire.SwimDead, wire.SwimLeave}
	rows := 0
	for _, prior := range priors {
		for _, kind := range kinds {
			for _, gen := range []uint64{4, 5, 6} {
				for _, inc := range []uint64{4, 5, 6} {
					name := fmt.Sprintf("%v/%v/gen%d/inc%d", prior, kind, gen, inc)
					n := testNode(t, "me")
					if prior != 0 {
						n.apply(t0, ev(wire.SwimAlive, "x", 5, 5))
						switch prior {
						case StateSuspect:
							n.apply(t0, ev(wire.SwimSuspect, "x", 5, 5))
						case StateDead:
							n.apply(t0, ev(wire.SwimDead, "x", 5, 5))
						case StateLeft:
							n.apply(t0, ev(wire.SwimLeave, "x", 5, 5))
						}
						if m, _ := n.Member("x"); m.State != prior {
							t.Fatalf("%s: setup gave %v", name, m.State)
						}
					}
					n.apply(t0, ev(kind, "x", gen, inc))
					wantS, wantG, wantI := expectMerge(prior, kind, gen, inc)
					m, ok := n.Member("x")
					if wantS == 0 {
						if ok {
							t.Errorf("%s: member known as %+v, want unknown", name, m)
						}
						continue
					}
					if !ok || m.State != wantS || m.Generation != wantG || m.Incarnation != wantI {
						t.Errorf("%s: got %v gen %d inc %d, want %v gen %d inc %d", name, m.State, m.Generation, m.Incarnation, wantS, wantG, wantI)
					}
					if prior != 0 {
						as := map[wire.SwimEventKind]State{wire.SwimAlive: StateAlive, wire.SwimSuspect: StateSuspect, wire.SwimDead: StateDead, wire.SwimLeave: StateLeft}[kind]
						changed := m.State != prior || m.Generation != 5 || m.Incarnation != 5
						if got := Supersedes(gen, inc, as, 5, 5, prior); got != changed {
							t.Errorf("%s: Supersedes says %v, the merge changed the member: %v", name, got, changed)
						}
					}
					rows++
				}
			}
		}
	}
	if rows < 150 {
		t.Fatalf("only %d rows checked", rows)
	}
}

// The seed discussion's case: a delayed Alive with a higher incarnation
// arrives after Dead; the member stays dead.
func TestDelayedAliveDoesNotResurrect(t *testing.T) {
	n := testNode(t, "me")
	n.apply(t0, ev(wire.SwimAlive, "b", 1, 4))
	n.apply(t0, ev(wire.SwimDead, "b", 1, 4))
	n.apply(t0, ev(wire.SwimAlive, "b", 1, 5))
	if m, _ := n.Member("b"); m.State != StateDead {
		t.Fatalf("state %v, want dead", m.State)
	}
	// Its next life does come back.
	n.apply(t0, ev(wire.SwimAlive, "b", 2, 0))
	m, _ := n.Member("b")
	if m.State != StateAlive || m.Generation != 2 {
		t.Fatalf("got %+v", m)
	}
	evs := n.Ready().Events
	if last := evs[len(evs)-1]; last.Kind != EventAliveAgain || last.Prev != StateDead {
		t.Fatalf("last event %+v", last)
	}
}

func TestRefuteSuspicionOfSelf(t *testing.T) {
	n := testNode(t, "me")
	n.apply(t0, ev(wire.SwimSuspect, "me", 1, 0))
	if s := n.Self(); s.Incarnation != 1 || s.State != StateAlive {
		t.Fatalf("self %+v, want incarnation 1 alive", s)
	}
	if n.Health() != 1 || n.Stats().Refutations != 1 {
		t.Fatalf("health %d refutations %d", n.Health(), n.Stats().Refutations)
	}
	// The refutation is queued: an Alive about self at incarnation 1.
	e := n.queue.byKey[qkey{kind: qMember, id: "me"}]
	var d wire.SwimDatagram
	d.Events = make([]wire.SwimEvent, 0, 4)
	b, _ := wire.AppendSwimHeader(nil, &wire.SwimHeader{Sender: []byte("q")})
	b = wire.AppendSwimMessage(b, &wire.SwimMessage{})
	b = append(b, 1)
	b = append(b, e.enc...)
	if err := wire.DecodeSwimDatagram(b, &d); err != nil {
		t.Fatal(err)
	}
	if got := d.Events[0]; got.Kind != wire.SwimAlive || got.Incarnation != 1 {
		t.Fatalf("queued %+v", got)
	}
	// A suspicion of an older incarnation is ignored; of an older
	// generation too.
	n.apply(t0, ev(wire.SwimSuspect, "me", 1, 0))
	n.apply(t0, ev(wire.SwimSuspect, "me", 0, 7))
	if s := n.Self(); s.Incarnation != 1 {
		t.Fatalf("incarnation %d after stale suspicions", s.Incarnation)
	}
}

func TestRejoinAfterDeclaredDead(t *testing.T) {
	n := testNode(t, "me")
	n.apply(t0, ev(wire.SwimDead, "me", 1, 3))
	s := n.Self()
	if s.Generation != 2 || s.Incarnation != 0 || s.State != StateAlive {
		t.Fatalf("self %+v, want generation 2 incarnation 0", s)
	}
	evs := n.Ready().Events
	if len(evs) != 1 || evs[0].Kind != EventRejoined {
		t.Fatalf("events %+v", evs)
	}
	// The old generation's death no longer concerns it.
	n.apply(t0, ev(wire.SwimDead, "me", 1, 9))
	if n.Self().Generation != 2 {
		t.Fatal("rejoined twice for one death")
	}
}

func TestShardLeaderHighestTermWins(t *testing.T) {
	n := testNode(t, "me")
	n.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: 7, Node: []byte("a"), Term: 3})
	n.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: 7, Node: []byte("b"), Term: 2})
	n.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: 7, Node: []byte("c"), Term: 3})
	if l, term, _ := n.ShardLeader(7); l != "a" || term != 3 {
		t.Fatalf("leader %s term %d, want a 3", l, term)
	}
	n.apply(t0, &wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: 7, Node: []byte("d"), Term: 4})
	if l, term, _ := n.ShardLeader(7); l != "d" || term != 4 {
		t.Fatalf("leader %s term %d, want d 4", l, term)
	}
	n.apply(t0, &wire.SwimEvent{Kind: wire.SwimMetadataVersion, Node: []byte("a"), MetaKind: 1, Version: 5})
	n.apply(t0, &wire.SwimEvent{Kind: wire.SwimMetadataVersion, Node: []byte("a"), MetaKind: 1, Version: 4})
	var got []Event
	for _, e := range n.Ready().Events {
		if e.Kind == EventMetadataVersion || e.Kind == EventShardLeader {
			got = append(got, e)
		}
	}
	if len(got) != 3 || got[2].Version != 5 || got[2].Leader != "a" {
		t.Fatalf("events %+v", got)
	}
}

func TestSuspicionTimeoutShrinksWithConfirmations(t *testing.T) {
	s := &suspicion{min: 2 * time.Second, max: 6 * time.Second, k: 3, mine: true}
	s.confirm("a")
	prev := s.timeout()
	if prev != s.max {
		t.Fatalf("no confirmation: %v, want max", prev)
	}
	for _, f := range []string{"b", "c", "d"} {
		if !s.confirm(f) {
			t.Fatalf("%s not new", f)
		}
		if cur := s.timeout(); cur >= prev {
			t.Fatalf("timeout %v did not fall below %v", cur, prev)
		} else {
			prev = cur
		}
	}
	if prev != s.min {
		t.Fatalf("after k confirmations: %v, want min", prev)
	}
	if s.confirm("b") {
		t.Fatal("a repeated confirmation counted")
	}
}

// Dead stays final after the member is reaped: an Alive of the same
// generation arriving later (from the member itself, cut off since) does
// not bring it back, and the death is spread again so that it learns; its
// next generation does come back.
func TestAliveAfterTheReapDoesNotResurrect(t *testing.T) {
	n := testNode(t, "me")
	n.apply(t0, ev(wire.SwimAlive, "b", 1, 4))
	n.apply(t0, ev(wire.SwimDead, "b", 1, 4))
	n.reap(t0.Add(n.cfg.DeadReapTimeout))
	if _, ok := n.Member("b"); ok {
		t.Fatal("dead member not reaped")
	}
	n.Ready() // drain the events so far
	queued := n.queue.Len()
	n.apply(t0.Add(n.cfg.DeadReapTimeout), ev(wire.SwimAlive, "b", 1, 9))
	if m, ok := n.Member("b"); ok {
		t.Fatalf("reaped dead member back: %+v", m)
	}
	for _, e := range n.Ready().Events {
		if e.Kind == EventJoined && e.Member.Incarnation == 9 {
			t.Fatalf("joined again in its dead generation: %+v", e)
		}
	}
	if n.queue.Len() <= queued && queued == 0 {
		t.Fatal("the death was not spread again")
	}
	n.apply(t0.Add(n.cfg.DeadReapTimeout), ev(wire.SwimAlive, "b", 2, 0))
	if m, ok := n.Member("b"); !ok || m.State != StateAlive || m.Generation != 2 {
		t.Fatalf("next generation: %+v, %v", m, ok)
	}
}
