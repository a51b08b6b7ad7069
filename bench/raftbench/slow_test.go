package main

import (
	"testing"
	"time"
)

func TestSlowSpreadGroups(t *testing.T) {
	s := newSlowSpread(20*time.Millisecond, 4, 2)
	ms := time.Millisecond
	// Shard 0 (worker 0) led by host 1: one slow of two.
	s.record(0, 1, 5*ms)
	s.record(0, 1, 30*ms)
	// Shard 1 (worker 1) led by host 2: none slow.
	s.record(1, 2, 20*ms) // at the threshold: not slow
	// Shard 2 (worker 0) led by host 1: all slow.
	s.record(2, 1, 21*ms)
	s.record(2, 1, 40*ms)
	// Shard 3: never measured, in no group.
	all, groups := s.report()
	if all != 60 {
		t.Errorf("overall %v%%, want 60%%", all)
	}
	want := map[string]float64{"h1/w0": 75, "h2/w1": 0}
	if len(groups) != len(want) {
		t.Fatalf("groups %v, want %v", groups, want)
	}
	for k, v := range want {
		if groups[k] != v {
			t.Errorf("group %s = %v%%, want %v%%", k, groups[k], v)
		}
	}
}
