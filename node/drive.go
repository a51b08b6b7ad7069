package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Runtime is the world of a node that its caller runs instead of Start: a
// simulation's network, membership, filesystem and clock. Such a node
// opens no socket and starts no goroutine (its raft host is manual): the
// caller hands it frames and SWIM events and calls Drive when time has
// passed, all from one goroutine.
type Runtime struct {
	// Now is the node's clock. After runs f once d has passed on it, from
	// the caller's loop; stop cancels it.
	Now   func() time.Time
	After func(d time.Duration, f func()) (stop func() bool)
	// Go runs f soon, from the caller's loop: what a started node runs on
	// a goroutine of its own (a request, a queue's worker, a duty). When
	// it runs, and so how such work interleaves, is the caller's choice.
	Go func(f func())
	// Yield runs f, the rest of a piece of work the node began (a
	// produce's answer after its append), from the caller's loop: between
	// the two, the caller may let anything happen to the node (a pause, a
	// crash). A started node goes straight on. Nil: as Go.
	Yield func(f func())
	// Peers carries the node's frames to other nodes; their frames to it
	// come through DeliverFrame.
	Peers PeerNet
	// Swim is the node's membership; its events come through SwimEvents.
	Swim Membership
	// FS holds the node's store (e.g. vfs.NewCrashableMem).
	FS vfs.FS
	// SyncLag draws how long each fsync of the raft log takes on Now
	// (raftmux Config.SyncLag): what a started node's disk and Pebble's
	// WAL sync gap take, during which a crash may lose the round's
	// writes. Nil: none.
	SyncLag func() time.Duration
	// Generation is this life's generation; it must rise from one life of
	// the node to the next.
	Generation uint64
	// Seed seeds the node's random choices and its raft proposal ids
	// (which must differ from one life to the next).
	Seed uint64
	// ClientAddr and PeerAddr are what the node says of itself.
	ClientAddr, PeerAddr string
	// Owned, when set, is told each ownership change once it is durable,
	// before the node may act on it: held is the epoch the node now holds
	// topic at (0: unchanged, or no longer held), floor the epoch up to
	// which topic is closed here for good (0: unchanged). The simulator
	// checks with it that no earlier owner acknowledges a write once a
	// later one holds the topic, and that no epoch a node closed comes
	// back.
	Owned func(topic string, held, floor uint64)
}

// driveState is when a driven node's raft host next ticks.
type driveState struct {
	nextTick time.Time
}

// ErrRuntime: a Runtime misses a part.
var ErrRuntime = errors.New("node: incomplete runtime")

// NewDriven builds a node run by its caller through rt (see Runtime),
// with its store on rt.FS under cfg.DataDir, and starts it: its raft
// groups are loaded; nothing more happens until the caller delivers
// frames and events and calls Drive.
func NewDriven(cfg Config, rt Runtime) (*Node, error) {
	if rt.Now == nil || rt.After == nil || rt.Go == nil || rt.Peers == nil || rt.Swim == nil || rt.FS == nil || rt.Generation == 0 {
		return nil, ErrRuntime
	}
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	n, err := newNode(cfg, rt.FS, rt.Generation, rt.Now, rt.After, rt.Seed)
	if err != nil {
		return nil, err
	}
	n.ownedFn = rt.Owned
	if err := n.life.Begin(rt.Go, rt.Yield); err != nil {
		_ = n.store.Close()
		return nil, err
	}
	n.records.Enable()
	n.net, n.swim = rt.Peers, rt.Swim
	if meta := n.marks.Meta(); meta != nil {
		if err := n.swim.SetMeta(meta); err != nil {
			_ = n.store.Close()
			return nil, fmt.Errorf("node: swim metadata: %w", err)
		}
	}
	n.clientAddr, n.peerAddr = rt.ClientAddr, rt.PeerAddr
	if err := n.openRaft(rt.Peers, func(hc *raftmux.Config) {
		hc.Manual, hc.Seed, hc.SyncLag = true, rt.Seed<<20|1, rt.SyncLag
	}); err != nil {
		_ = n.store.Close()
		return nil, err
	}
	n.open()
	return n, nil
}

// DeliverFrame hands a driven node one frame (header and payload) that
// arrived on c, from a peer or a client.
func (n *Node) DeliverFrame(c Conn, frame []byte) {
	var h wire.Header
	if wire.DecodeHeader(frame, &h) != nil || len(frame) != wire.HeaderSize+int(h.Length) {
		return
	}
	n.disp.Frame(c, h, frame, n.clock())
}

// PeerDown tells a driven node that its connection to node broke:
// requests forwarded there fail at once, and raft hears it is unreachable.
func (n *Node) PeerDown(node string) {
	n.host.Unreachable(RaftID(node))
	n.srv.PeerDown(node)
}

// SwimEvents hands a driven node its membership's events.
func (n *Node) SwimEvents(evs ...swim.Event) {
	for _, e := range evs {
		n.events.Push(e)
	}
}

// Drive runs a driven node's raft host: its tick when due, and every raft
// round that frames, proposals and applies make necessary. It returns when
// it is next due (it is also due after any frame, event, timer or work the
// node spawned). The node's other duties run as its own work
// (Runtime.After and Runtime.Go), as on a started node.
func (n *Node) Drive() time.Time {
	d := &n.drive
	now := n.clock()
	if !now.Before(d.nextTick) {
		n.host.Tick()
		d.nextTick = now.Add(n.cfg.RaftTickInterval)
	}
	for n.host.Step() {
	}
	if t := n.host.NextDue(); !t.IsZero() && t.Before(d.nextTick) {
		return t // a round held back for acks (raftmux Config.AckWait)
	}
	return d.nextTick
}
