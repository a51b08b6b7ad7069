package node

import (
	"time"

	"github.com/shoalmq/shoal/node/dispatch"
)

// What a node needs of the world, as interfaces, is node/world's: Start
// wires the real parts (netio, a SWIM driver, the clock and goroutines),
// NewDriven a caller's (a simulation's network, membership and virtual
// clock; world.Runtime).

// Conn is the connection a frame arrived on (netio.Conn): the answer goes
// back on it (dispatch.Conn).
type Conn = dispatch.Conn

// after runs f after d on the node's clock; stop cancels it and reports
// whether it did.
func (n *Node) after(d time.Duration, f func()) (stop func() bool) {
	return n.afterFunc(d, f)
}

// spawn runs fn soon, on its own, unless the node is closing; it reports
// whether fn will run (life.Cycle.Spawn).
func (n *Node) spawn(fn func()) bool { return n.life.Spawn(fn) }

// resume runs fn, the rest of a piece of work: at once on a started node,
// as its caller chooses on a driven one (Runtime.Yield; life.Cycle.Resume).
func (n *Node) resume(fn func()) { n.life.Resume(fn) }

// realAfter is time.AfterFunc.
func realAfter(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// randIntN draws a number in [0, k) from the node's random source.
func (n *Node) randIntN(k int) int {
	n.randMu.Lock()
	defer n.randMu.Unlock()
	return n.randSrc.IntN(k)
}
