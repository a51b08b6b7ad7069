package faultnet

import (
	"testing"
	"time"
)

func delivered(v Verdict) int { return len(v.Delays) }

func TestCutsAreOneWayAndByKind(t *testing.T) {
	n := New(1)
	n.Cut("a", "b")
	if !n.Decide("a", "b", 5).Dropped() || n.Decide("b", "a", 5).Dropped() {
		t.Fatal("a one-way cut a→b")
	}
	n.Heal()
	n.Cut("*", "c", 53)
	if !n.Decide("a", "c", 53).Dropped() || n.Decide("a", "c", 51).Dropped() || n.Decide("c", "a", 53).Dropped() {
		t.Fatal("a cut of one kind to c")
	}
	n.Heal()
	n.Isolate("d")
	if !n.Decide("d", "a", KindSwim).Dropped() || !n.Decide("a", "d", 50).Dropped() || n.Decide("a", "b", 50).Dropped() {
		t.Fatal("an isolated node")
	}
	if n.Dropped("d", "a") != 1 || n.Dropped("a", "d") != 1 {
		t.Fatal("drop counts")
	}
	n.HealLink("d", "*")
	if n.Decide("d", "a", 50).Dropped() || !n.Decide("a", "d", 50).Dropped() {
		t.Fatal("healing one direction")
	}
}

func TestPausedNodesHoldTheirMessages(t *testing.T) {
	n := New(1)
	n.Pause("b")
	v := n.Decide("a", "b", 50)
	if !v.Hold || v.Paused != "b" || v.Dropped() {
		t.Fatalf("to a paused node: %+v", v)
	}
	if v := n.Decide("b", "c", 50); !v.Hold {
		t.Fatalf("from a paused node: %+v", v)
	}
	ch := n.Resumed("b")
	select {
	case <-ch:
		t.Fatal("resumed before Resume")
	default:
	}
	n.Resume("b")
	<-ch
	if v := n.Decide("a", "b", 50); v.Hold || delivered(v) != 1 {
		t.Fatalf("after resume: %+v", v)
	}
}

func TestLinksLoseDelayAndDuplicateAsConfigured(t *testing.T) {
	n := New(7)
	n.SetDefault(Link{Loss: 0.2, Dup: 0.1, DelayMin: time.Millisecond, DelayMax: 5 * time.Millisecond})
	n.SetLink("a", "z", Link{})
	const trials = 20000
	lost, dups := 0, 0
	for range trials {
		v := n.Decide("a", "b", 50)
		switch delivered(v) {
		case 0:
			lost++
		case 2:
			dups++
		}
		for _, d := range v.Delays {
			if d < time.Millisecond || d > 5*time.Millisecond {
				t.Fatalf("delay %v out of bounds", d)
			}
		}
	}
	if lost < trials*17/100 || lost > trials*23/100 {
		t.Fatalf("lost %d of %d, want about 20%%", lost, trials)
	}
	if dups < (trials-lost)*7/100 || dups > (trials-lost)*13/100 {
		t.Fatalf("duplicated %d of %d delivered, want about 10%%", dups, trials-lost)
	}
	if v := n.Decide("a", "z", 50); delivered(v) != 1 || v.Delays[0] != 0 {
		t.Fatalf("a link of its own: %+v", v)
	}
}

func TestTheSameSeedGivesTheSameVerdicts(t *testing.T) {
	run := func() []Verdict {
		n := New(42)
		n.SetDefault(Link{Loss: 0.3, Dup: 0.3, DelayMax: time.Second})
		var out []Verdict
		for range 100 {
			out = append(out, n.Decide("a", "b", 50))
		}
		return out
	}
	a, b := run(), run()
	for i := range a {
		if len(a[i].Delays) != len(b[i].Delays) {
			t.Fatalf("verdict %d differs", i)
		}
		for j := range a[i].Delays {
			if a[i].Delays[j] != b[i].Delays[j] {
				t.Fatalf("verdict %d differs", i)
			}
		}
	}
}
