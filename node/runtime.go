package node

import (
	"time"

	"github.com/shoalmq/shoal/node/dispatch"
	"github.com/shoalmq/shoal/swim"
)

// What a node needs of the world, as interfaces: Start wires the real
// parts (netio, a SWIM driver, the clock and goroutines), StartDriven a
// caller's (a simulation's network, membership and virtual clock).

// PeerNet carries frames to other nodes (netio.Transport).
type PeerNet interface {
	// Send queues frame for node; an error means it was not sent.
	Send(node string, frame []byte) error
	// SetPeerAddr records where node listens for peers.
	SetPeerAddr(node, addr string)
	// RemovePeer forgets node.
	RemovePeer(node string)
}

// Conn is the connection a frame arrived on (netio.Conn): the answer goes
// back on it (dispatch.Conn).
type Conn = dispatch.Conn

// Membership is the node's view of SWIM (swim.Driver).
type Membership interface {
	Members() []swim.Member
	Self() swim.Member
	AnnounceShardLeader(shard uint64, leader string, term uint64)
	SetMetadataVersion(kind, version uint64)
	// SetMeta replaces what this node says of itself (swim.Node.SetMeta).
	SetMeta(meta []byte) error
	Join(seeds []string)
}

// after runs f after d on the node's clock; stop cancels it and reports
// whether it did.
func (n *Node) after(d time.Duration, f func()) (stop func() bool) {
	return n.afterFunc(d, f)
}

// spawn runs fn soon, on its own (a goroutine of a started node, a piece
// of work its caller schedules on a driven one), unless the node is
// closing; it reports whether fn will run.
func (n *Node) spawn(fn func()) bool {
	n.lifeMu.RLock()
	defer n.lifeMu.RUnlock()
	if n.closing {
		return false
	}
	if n.goFn != nil {
		n.goFn(fn)
		return true
	}
	select {
	case n.work <- fn: // an idle worker took it
		return true
	default:
	}
	var stop <-chan struct{}
	if n.ctx != nil {
		stop = n.ctx.Done()
	}
	n.wg.Add(1)
	go n.worker(fn, stop)
	return true
}

// workerIdle is how long a started node's worker waits for more work
// before it ends.
const workerIdle = 5 * time.Second

// worker runs fn, then whatever spawn hands it while it is idle, until it
// has been idle workerIdle or the node stops. A worker keeps the stack
// its work grew (a request's path through the store is deep), which a
// goroutine for each piece of work would grow again every time.
func (n *Node) worker(fn func(), stop <-chan struct{}) {
	defer n.wg.Done()
	fn()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case fn := <-n.work:
			fn()
			idle.Reset(workerIdle)
		case <-idle.C:
			return
		case <-stop:
			return
		}
	}
}

// resume runs fn, the rest of a piece of work: at once on a started node,
// as its caller chooses on a driven one (Runtime.Yield), which may pause
// or crash the node in between. A closing driven node runs it at once.
func (n *Node) resume(fn func()) {
	n.lifeMu.RLock()
	y := n.yieldFn
	if n.closing {
		y = nil
	}
	n.lifeMu.RUnlock()
	if y == nil {
		fn()
		return
	}
	y(fn)
}

// realAfter is time.AfterFunc.
func realAfter(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }

// randIntN draws a number in [0, k) from the node's random source.
func (n *Node) randIntN(k int) int {
	n.randMu.Lock()
	defer n.randMu.Unlock()
	return n.randSrc.IntN(k)
}
