package node

import (
	"fmt"
	"time"

	"github.com/shoalmq/shoal/node/world"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/swim"
)

// NewDriven builds a node run by its caller through rt (world.Runtime),
// with its store on rt.FS under cfg.DataDir, and starts it: its raft
// groups are loaded; nothing more happens until the caller delivers
// frames and events and calls Drive.
func NewDriven(cfg Config, rt world.Runtime) (*Node, error) {
	if err := rt.Check(); err != nil {
		return nil, err
	}
	if err := cfg.Fill(); err != nil {
		return nil, err
	}
	n, err := newNode(cfg, testHooks{}, rt.FS, rt.Generation, rt.Now, rt.After, rt.Seed)
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
func (n *Node) DeliverFrame(c Conn, frame []byte) { n.disp.DeliverFrame(c, frame) }

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
	return n.drive.Run(n.host, n.clock(), n.cfg.RaftTickInterval)
}
