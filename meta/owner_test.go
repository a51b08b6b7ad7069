package meta

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
)

func nodes(n int, load uint64) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{ID: fmt.Sprintf("n%d", i+1), Load: load}
	}
	return out
}

func topicName(i int) []byte { return fmt.Appendf(nil, "topic-%06d", i) }

func TestChooseOwnerIgnoresTheOrderOfLiveNodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	live := nodes(7, 0)
	for i := range live {
		live[i].Load = uint64(rng.IntN(5))
	}
	for i := range 500 {
		topic := topicName(i)
		want := ChooseOwner(topic, live)
		shuffled := append([]Node(nil), live...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if got := ChooseOwner(topic, shuffled); got != want {
			t.Fatalf("%s: %s with one order, %s with another", topic, want, got)
		}
	}
}

func TestChooseOwnerIsBalancedWithEqualLoads(t *testing.T) {
	const topics, n = 10000, 10
	live := nodes(n, 0)
	count := map[string]int{}
	for i := range topics {
		count[ChooseOwner(topicName(i), live)]++
	}
	if len(count) != n {
		t.Fatalf("%d of %d nodes got topics", len(count), n)
	}
	t.Logf("topics per node: %v", count)
	// A fair split gives 1,000 ± 30 (one standard deviation); allow 15%.
	for id, c := range count {
		if c < 850 || c > 1150 {
			t.Errorf("%s got %d of %d topics", id, c, topics)
		}
	}
}

func TestChooseOwnerWithLoadFeedbackEvensOut(t *testing.T) {
	// The leader raises a node's load for every topic it gives it, as
	// PlanReassign does: the split becomes much tighter than by hash alone.
	const topics = 10000
	live := nodes(10, 0)
	for i := range topics {
		id := ChooseOwner(topicName(i), live)
		for j := range live {
			if live[j].ID == id {
				live[j].Load++
			}
		}
	}
	lo, hi := uint64(topics), uint64(0)
	for _, n := range live {
		lo, hi = min(lo, n.Load), max(hi, n.Load)
	}
	t.Logf("loads from %d to %d", lo, hi)
	if hi-lo > 50 {
		t.Fatalf("loads spread from %d to %d", lo, hi)
	}
}

func TestChooseOwnerFavoursAnUnloadedNode(t *testing.T) {
	live := nodes(4, 1000)
	live = append(live, Node{ID: "new", Load: 0})
	won := 0
	for i := range 1000 {
		if ChooseOwner(topicName(i), live) == "new" {
			won++
		}
	}
	t.Logf("the empty node won %d of 1000", won)
	if won < 900 {
		t.Fatalf("the empty node won %d of 1000 new topics", won)
	}
}

func TestChooseOwnerKeepsOwnersWhenAnotherNodeLeaves(t *testing.T) {
	live := nodes(10, 0)
	without := append(append([]Node(nil), live[:3]...), live[4:]...) // n4 leaves
	moved := 0
	for i := range 2000 {
		topic := topicName(i)
		before, after := ChooseOwner(topic, live), ChooseOwner(topic, without)
		if before != after {
			if before != "n4" {
				t.Fatalf("%s moved from %s to %s though only n4 left", topic, before, after)
			}
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("n4 owned nothing")
	}
}

func TestChooseOwnerEdgeCases(t *testing.T) {
	if got := ChooseOwner([]byte("t"), nil); got != "" {
		t.Fatalf("no candidates chose %q", got)
	}
	bad := []Node{{ID: ""}, {ID: string(make([]byte, MaxNodeIDLen+1))}}
	if got := ChooseOwner([]byte("t"), bad); got != "" {
		t.Fatalf("only invalid ids chose %q", got)
	}
	if got := ChooseOwner([]byte("t"), append(bad, Node{ID: "n1"})); got != "n1" {
		t.Fatalf("chose %q, want the only valid node", got)
	}
	// The largest load does not divide by zero.
	if got := ChooseOwner([]byte("t"), []Node{{ID: "n1", Load: ^uint64(0)}}); got != "n1" {
		t.Fatalf("chose %q", got)
	}
}

func TestPlanReassignSpreadsADeadNodesTopics(t *testing.T) {
	s := New()
	for i := range 300 {
		mustApply(t, s, assign(string(topicName(i)), "dead", 0))
	}
	mustApply(t, s, assign("other", "n2", 0))
	live := []Node{{"n2", 0}, {"n3", 0}, {"n4", 0}, {"n5", 0}, {"dead", 0}}
	c, err := s.PlanReassign("dead", live, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Moves) != 300 {
		t.Fatalf("%d moves, want 300", len(c.Moves))
	}
	res := mustApply(t, s, c)
	if res.Moved != 300 || res.Skipped != 0 || len(res.Effects) != 600 {
		t.Fatalf("moved %d skipped %d effects %d", res.Moved, res.Skipped, len(res.Effects))
	}
	if n := len(s.TopicsOwnedBy("dead")); n != 0 {
		t.Fatalf("dead still owns %d topics", n)
	}
	for _, id := range []string{"n2", "n3", "n4", "n5"} {
		got := s.Load(id)
		if id == "n2" {
			got-- // "other"
		}
		if got < 60 || got > 90 {
			t.Errorf("%s got %d of 300 topics, want about 75", id, got)
		}
	}
	for a := range s.Topics() {
		if a.Topic != "other" && a.Epoch != 2 {
			t.Fatalf("%s at epoch %d after the move, want 2", a.Topic, a.Epoch)
		}
	}
	// Planning again finds nothing to do.
	if c, err := s.PlanReassign("dead", live, 0); err != nil || len(c.Moves) != 0 {
		t.Fatalf("second plan: %d moves, %v", len(c.Moves), err)
	}
}

func TestPlanReassignInBatches(t *testing.T) {
	s := New()
	for i := range 25 {
		mustApply(t, s, assign(string(topicName(i)), "dead", 0))
	}
	live := nodes(3, 0)
	rounds := 0
	for s.Load("dead") > 0 {
		c, err := s.PlanReassign("dead", live, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Moves) > 10 {
			t.Fatalf("plan of %d moves over the limit of 10", len(c.Moves))
		}
		mustApply(t, s, c)
		rounds++
	}
	if rounds != 3 {
		t.Fatalf("%d rounds, want 3", rounds)
	}
}

func TestPlanReassignErrors(t *testing.T) {
	s := New()
	mustApply(t, s, assign("t", "dead", 0))
	if _, err := s.PlanReassign("dead", []Node{{ID: "dead"}}, 0); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("only the dead node alive: %v", err)
	}
	if _, err := s.PlanReassign("", nodes(2, 0), 0); !errors.Is(err, ErrBadNodeID) {
		t.Fatalf("no dead node: %v", err)
	}
	if c, err := s.PlanReassign("n7", nil, 0); err != nil || len(c.Moves) != 0 {
		t.Fatalf("node owning nothing: %v, %d moves", err, len(c.Moves))
	}
}

func TestPrepareAssign(t *testing.T) {
	s := New()
	live := nodes(5, 0)
	c, err := s.PrepareAssign([]byte("t"), "", 0, live)
	if err != nil {
		t.Fatal(err)
	}
	if want := ChooseOwner([]byte("t"), live); c.Owner != want || c.Op != OpAssign {
		t.Fatalf("prepared %+v, want owner %s", c, want)
	}
	mustApply(t, s, c)
	// An active topic keeps its owner: the command names none.
	if c, err := s.PrepareAssign([]byte("t"), "", 0, live); err != nil || c.Owner != "" {
		t.Fatalf("prepared %+v, %v", c, err)
	}
	// An explicit owner is kept as asked.
	if c, err := s.PrepareAssign([]byte("t"), "n9", 0, live); err != nil || c.Owner != "n9" {
		t.Fatalf("prepared %+v, %v", c, err)
	}
	if _, err := s.PrepareAssign([]byte("t"), "", 4, live); !errors.Is(err, ErrPartitionsConflict) {
		t.Fatalf("conflicting partitions: %v", err)
	}
	if _, err := s.PrepareAssign([]byte("u"), "", 0, nil); !errors.Is(err, ErrNoOwner) {
		t.Fatalf("no live node: %v", err)
	}
	if _, err := s.PrepareAssign(nil, "", 0, live); !errors.Is(err, ErrEmptyTopic) {
		t.Fatalf("empty topic: %v", err)
	}
}
