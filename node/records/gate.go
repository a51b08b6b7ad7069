package records

import (
	"sync"

	"github.com/shoalmq/shoal/internal/invariants"
)

// A topicGate is a topic's produce gate. A produce is inside it from its
// first lease check to its answer, its append and the second check
// between. What must not overlap a produce of the topic that may still
// append or answer (a new owner's pull reading the log, a revoked topic's
// deletion) waits at the gate for every produce that entered before it;
// those that enter after it find the topic given up at their first check
// (the holder changed first) and append nothing.
//
// Nobody blocks at the gate: a wait is a function run once the produces
// ahead have left, on whatever leaves last. So the gate holds across the
// pieces a produce is cut into (Env.Resume), on a started node and on a
// driven one alike, where a blocked piece would stop its caller's loop.
type topicGate struct {
	mu  sync.Mutex
	gen uint64 // the generation produces enter now
	// in counts the produces inside by the generation they entered,
	// oldest first.
	in []genCount
	// waits run, in order, once no produce of a generation up to theirs
	// is inside.
	waits []gateWait
}

type genCount struct{ gen, n uint64 }

type gateWait struct {
	upTo uint64
	f    func()
}

// enter lets a produce in; leave, called once, lets it out, and runs the
// waits it was the last one ahead of (on spawn).
func (g *topicGate) enter(spawn func(func()) bool) (leave func()) {
	g.mu.Lock()
	gen := g.gen
	if k := len(g.in); k > 0 && g.in[k-1].gen == gen {
		g.in[k-1].n++
	} else {
		g.in = append(g.in, genCount{gen: gen, n: 1})
	}
	g.checkLocked()
	g.mu.Unlock()
	left := false
	return func() {
		g.mu.Lock()
		if invariants.Enabled && left {
			invariants.Failf("records: gate: a produce of generation %d left twice", gen)
		}
		left = true
		for i := range g.in {
			if g.in[i].gen == gen {
				if g.in[i].n--; g.in[i].n == 0 {
					g.in = append(g.in[:i], g.in[i+1:]...)
				}
				break
			}
		}
		ready := g.readyLocked()
		g.checkLocked()
		g.mu.Unlock()
		for _, f := range ready {
			if !spawn(f) {
				f()
			}
		}
	}
}

// await runs f once every produce inside now has left: at once if none
// is, else on the last of them to leave.
func (g *topicGate) await(f func()) {
	g.mu.Lock()
	upTo := g.gen
	g.gen++
	if len(g.in) == 0 || g.in[0].gen > upTo {
		g.mu.Unlock()
		f()
		return
	}
	g.waits = append(g.waits, gateWait{upTo: upTo, f: f})
	g.checkLocked()
	g.mu.Unlock()
}

// readyLocked takes the waits no produce inside is ahead of any more.
func (g *topicGate) readyLocked() []func() {
	var ready []func()
	for len(g.waits) > 0 && (len(g.in) == 0 || g.in[0].gen > g.waits[0].upTo) {
		ready = append(ready, g.waits[0].f)
		g.waits = g.waits[1:]
	}
	if len(g.waits) == 0 {
		g.waits = nil
	}
	return ready
}

// inside reports how many produces are inside (tests).
func (g *topicGate) inside() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for _, c := range g.in {
		n += int(c.n)
	}
	return n
}
