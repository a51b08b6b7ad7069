package metasync

import (
	"testing"
	"time"
)

func TestTrackerPullsNewerAtOnceAndOnlyOnce(t *testing.T) {
	now := time.Unix(100, 0)
	tr := newTracker(time.Second, time.Hour)
	tr.lastFull = now
	if tr.announce(kMembers, "n2", 3, 5, now) {
		t.Fatal("pulled an older version")
	}
	if !tr.announce(kMembers, "n2", 7, 5, now) {
		t.Fatal("did not pull a newer version")
	}
	if tr.announce(kMembers, "n3", 8, 5, now.Add(time.Millisecond)) {
		t.Fatal("second pull while one is in flight")
	}
	tr.merged(kMembers, 8)
	if p := tr.pulls[kMembers]; p.peer != "" {
		t.Fatalf("pull still pending after merge: %+v", p)
	}
}

func TestTrackerFallsBackToAnotherPeerAfterTimeout(t *testing.T) {
	now := time.Unix(100, 0)
	tr := newTracker(time.Second, time.Hour)
	for k := range numKinds {
		tr.synced[k] = true
	}
	tr.lastFull = now
	peers := []string{"n2", "n3", "n4"}
	first := func(int) int { return 0 }
	tr.announce(kRing, "n3", 9, 1, now)
	tr.announce(kRing, "n4", 9, 1, now)
	if r := tr.due(now.Add(500*time.Millisecond), Versions{Ring: 1}, peers, first); len(r) != 0 {
		t.Fatalf("pulls before the timeout: %+v", r)
	}
	// n3 did not answer: ask n4, which announced the version too, rather
	// than n2, which did not.
	r := tr.due(now.Add(1100*time.Millisecond), Versions{Ring: 1}, peers, first)
	if len(r) != 1 || r[0] != (pull{kind: kRing, peer: "n4", announced: true}) {
		t.Fatalf("fallback %+v, want n4", r)
	}
	// n4 is silent as well: any peer not yet asked.
	r = tr.due(now.Add(2200*time.Millisecond), Versions{Ring: 1}, peers, first)
	if len(r) != 1 || r[0].peer != "n2" {
		t.Fatalf("second fallback %+v, want n2", r)
	}
	// Reaching the version ends the pull.
	tr.merged(kRing, 9)
	if r := tr.due(now.Add(5*time.Second), Versions{Ring: 9}, peers, first); len(r) != 0 {
		t.Fatalf("pulls after the sync: %+v", r)
	}
}

func TestTrackerBoundsStalenessWithoutAnnouncements(t *testing.T) {
	now := time.Unix(100, 0)
	tr := newTracker(time.Second, 10*time.Second)
	peers := []string{"n2"}
	any := func(int) int { return 0 }
	// Before the first full sync every kind is pulled.
	if r := tr.due(now, Versions{}, peers, any); len(r) != int(numKinds) {
		t.Fatalf("initial pulls %+v", r)
	}
	for k := range numKinds {
		tr.merged(k, 0)
	}
	if !tr.fullySynced() {
		t.Fatal("not synced after merging every kind")
	}
	if r := tr.due(now.Add(5*time.Second), Versions{}, peers, any); len(r) != 0 {
		t.Fatalf("pulls inside the interval: %+v", r)
	}
	if r := tr.due(now.Add(10*time.Second), Versions{}, peers, any); len(r) != int(numKinds) {
		t.Fatalf("periodic pulls %+v, want every kind", r)
	}
	if r := tr.due(now, Versions{}, nil, any); len(r) != 0 {
		t.Fatalf("pulls with no peer: %+v", r)
	}
}
