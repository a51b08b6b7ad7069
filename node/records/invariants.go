package records

import (
	"fmt"

	"github.com/shoalmq/shoal/internal/invariants"
)

// The invariants of a gate and of the pulls' bookkeeping. Builds with
// invariants (the invariants tag, or -race) check them after every change
// under the lock that guards them, and panic with an invariants.Violation
// when one breaks; other builds compile none of it.
//
// A gate: the generations of the produces inside ascend, each with at
// least one produce, none above the generation entering now; the waits
// ascend, each below it; and a produce leaves once.
//
// The pulls: at most maxHandoffs run, and pulls wait in line only while
// that many do; the count read without the lock is the number of topics
// marked; every request waiting for an answer names the node it asked.

// checkLocked checks g; the caller holds g.mu.
func (g *topicGate) checkLocked() {
	if !invariants.Enabled {
		return
	}
	if err := g.check(); err != nil {
		invariants.Failf("records: gate: %w", err)
	}
}

func (g *topicGate) check() error {
	for i, c := range g.in {
		if c.n == 0 || c.gen > g.gen || (i > 0 && c.gen <= g.in[i-1].gen) {
			return fmt.Errorf("produces inside %v out of order or empty (entering %d)", g.in, g.gen)
		}
	}
	for i, w := range g.waits {
		if w.upTo >= g.gen || (i > 0 && w.upTo <= g.waits[i-1].upTo) {
			return fmt.Errorf("wait %d up to %d out of order (entering %d)", i, w.upTo, g.gen)
		}
	}
	return nil
}

// checkLocked checks h; the caller holds h.mu.
func (h *handoffs) checkLocked() {
	if !invariants.Enabled {
		return
	}
	if err := h.check(); err != nil {
		invariants.Failf("records: pulls: %w", err)
	}
}

func (h *handoffs) check() error {
	switch {
	case h.running < 0 || h.running > maxHandoffs:
		return fmt.Errorf("%d pulls running, at most %d", h.running, maxHandoffs)
	case len(h.queue) > 0 && h.running < maxHandoffs:
		return fmt.Errorf("%d pulls in line while %d run", len(h.queue), h.running)
	case int(h.n.Load()) != len(h.active):
		return fmt.Errorf("%d topics counted marked, %d marked", h.n.Load(), len(h.active))
	case len(h.waiting) != len(h.from):
		return fmt.Errorf("%d pulls waiting, %d asked nodes", len(h.waiting), len(h.from))
	}
	return nil
}
