package node

import (
	"testing"
	"time"
)

// A duplicated forward is served once within the window; the same id from
// another node, or after the window, is a new request; memory stays
// bounded.
func TestForwardDedupServesACopyOnce(t *testing.T) {
	var d forwardDedup
	t0 := time.Unix(100, 0)
	const window = time.Second
	if !d.first("n1", 7, t0, window) {
		t.Fatal("first copy refused")
	}
	if d.first("n1", 7, t0.Add(500*time.Millisecond), window) {
		t.Fatal("duplicate within the window taken")
	}
	if !d.first("n2", 7, t0.Add(500*time.Millisecond), window) {
		t.Fatal("same id from another node refused")
	}
	if !d.first("n1", 7, t0.Add(2*time.Second), window) {
		t.Fatal("id taken again after the window refused")
	}
	for i := range uint64(3 * maxForwardsSeen) {
		d.first("n3", 1000+i, t0.Add(2*time.Second), window)
	}
	if len(d.seen) > maxForwardsSeen || d.n > maxForwardsSeen || len(d.ring) > maxForwardsSeen {
		t.Fatalf("remembers %d/%d forwards in a ring of %d, bound %d", len(d.seen), d.n, len(d.ring), maxForwardsSeen)
	}
	// The latest are remembered, the oldest forgotten.
	last := 1000 + uint64(3*maxForwardsSeen) - 1
	if d.first("n3", last, t0.Add(2*time.Second), window) || !d.first("n3", 1000, t0.Add(2*time.Second), window) {
		t.Fatal("the ring kept the wrong forwards")
	}
}
