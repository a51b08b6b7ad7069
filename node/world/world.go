// Package world is what a node needs of the world around it, as
// interfaces, and the world of a node either way it runs: a started node
// is given the real parts (the wall clock and goroutines, and a Started:
// its netio transport and SWIM driver, bound with the node's credentials,
// started, and closed together), a driven one a caller's (a simulation's
// network, membership, filesystem and virtual clock) through a Runtime,
// and its raft host is ticked and stepped by Drive.
package world

import (
	"errors"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/swim"
)

// PeerNet carries frames to other nodes (netio.Transport).
type PeerNet interface {
	// Send queues frame for node; an error means it was not sent.
	Send(node string, frame []byte) error
	// SetPeerAddr records where node listens for peers.
	SetPeerAddr(node, addr string)
	// RemovePeer forgets node.
	RemovePeer(node string)
}

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

// ErrRuntime: a Runtime misses a part.
var ErrRuntime = errors.New("node: incomplete runtime")

// Check reports ErrRuntime unless rt has every part a node needs: a clock,
// timers, spawned work, peers, a membership, a filesystem and a
// generation.
func (rt *Runtime) Check() error {
	if rt.Now == nil || rt.After == nil || rt.Go == nil || rt.Peers == nil || rt.Swim == nil || rt.FS == nil || rt.Generation == 0 {
		return ErrRuntime
	}
	return nil
}

// Host is the manual raft host a driven node's caller runs (raftmux.Host).
type Host interface {
	Tick()
	Step() bool
	NextDue() time.Time
}

// Drive is when a driven node's raft host next ticks.
type Drive struct {
	nextTick time.Time
}

// Run runs host at now: its tick when due (every tick of the raft clock),
// and every raft round that frames, proposals and applies make necessary.
// It returns when the host is next due.
func (d *Drive) Run(host Host, now time.Time, tick time.Duration) time.Time {
	if !now.Before(d.nextTick) {
		host.Tick()
		d.nextTick = now.Add(tick)
	}
	for host.Step() {
	}
	if t := host.NextDue(); !t.IsZero() && t.Before(d.nextTick) {
		return t // a round held back for acks (raftmux Config.AckWait)
	}
	return d.nextTick
}
