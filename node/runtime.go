package node

import (
	"time"

	"github.com/shoalmq/shoal/node/dispatch"
	"github.com/shoalmq/shoal/raftmux"
)

// What a node needs of the world, as interfaces, is node/world's: Start
// wires the real parts (netio, a SWIM driver, the clock and goroutines),
// NewDriven a caller's (a simulation's network, membership and virtual
// clock; world.Runtime).

// Conn is the connection a frame arrived on (netio.Conn): the answer goes
// back on it (dispatch.Conn).
type Conn = dispatch.Conn

// parts are what most rooms' Envs ask of the node alike: its clock,
// timers and spawned work, its peers, the members' names, its raft host's
// reads and ops, and its birth. Each room's Env embeds them. They read
// the node's network and raft host when called: those are set after New.
type parts struct{ n *Node }

func (p parts) Now() time.Time                                  { return p.n.clock() }
func (p parts) After(d time.Duration, f func()) func() bool     { return p.n.after(d, f) }
func (p parts) Spawn(f func()) bool                             { return p.n.spawn(f) }
func (p parts) Send(peer string, frame []byte) error            { return p.n.net.Send(peer, frame) }
func (p parts) NameOf(id uint64) (string, bool)                 { return p.n.nameOf(id) }
func (p parts) Born() bool                                      { return p.n.birth.Born() }
func (p parts) Submit(op raftmux.Op, done func(raftmux.Result)) { p.n.host.Submit(op, done) }

func (p parts) ReadIndex(shard uint64, done func(error)) {
	p.n.host.Submit(raftmux.Op{Kind: raftmux.OpReadIndex, Shard: shard}, func(r raftmux.Result) { done(r.Err) })
}

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
