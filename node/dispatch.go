package node

import (
	"time"

	"github.com/shoalmq/shoal/node/dispatch"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// The frames a node receives are handed to their rooms by the dispatch
// room (node/dispatch): authorization, the peers' frames, the fast
// lookups, the admission of requests and each request to the room that
// serves it. Here the room is given the node's parts, and netio's frames
// reach it, through a test's faults when it sets them.

// newDispatch builds the node's dispatch room.
func (n *Node) newDispatch() (*dispatch.Dispatcher, error) {
	return dispatch.New(dispatch.Config{
		Self:        n.cfg.ID,
		Leaders:     n.leaders,
		Routes:      n.cache,
		Machine:     n.sm,
		Lease:       n.lease,
		Server:      n.srv,
		Admission:   n.adm,
		Latency:     &n.lat.requests,
		Records:     n.records,
		Watch:       n.watch,
		Sync:        n.msync,
		Admin:       n.admin,
		Clients:     &n.sec,
		BeforeServe: n.hooks.beforeServe,
		PeerIn:      n.peerIn(),
		Env:         dispatchEnv{parts{n}},
	})
}

// peerIn is the dispatch room's PeerIn: a test's faults, when it sets
// them (deliverUnderFaults).
func (n *Node) peerIn() func(c Conn, h wire.Header, frame []byte) bool {
	if n.hooks.peerIn == nil {
		return nil
	}
	return n.deliverUnderFaults
}

// dispatchEnv is what the dispatch room touches of the node. It reads the
// node's raft host, SWIM and view when called: they are set after New.
type dispatchEnv struct{ parts }

func (e dispatchEnv) Ready() bool                      { return e.n.birth.IsReady() }
func (e dispatchEnv) RemovedSelf() bool                { return e.n.marks.Out() }
func (e dispatchEnv) AnswersLocally(shard uint64) bool { return e.n.events.AnswersLocally(shard) }
func (e dispatchEnv) ClientAddr(id string) string      { return e.n.clientAddrOf(id) }
func (e dispatchEnv) Members() dispatch.Members        { return e.n.view.Load() }
func (e dispatchEnv) SwimMembers() []swim.Member       { return e.n.swim.Members() }

func (e dispatchEnv) OfferRaft(from string, h wire.Header, frame []byte) bool {
	if !e.n.in.Offer(from, h, frame) {
		return false
	}
	e.n.raftInTask.Kick()
	return true
}

// Admit takes a request slot and its bytes (serve.Admission), unless the
// node is closing or either runs out. The request's bytes are held until
// it is answered, which may be after the frame was served: release gives
// them back.
func (e dispatchEnv) Admit(h wire.Header, frame []byte) (release func(), ok bool) {
	n := e.n
	if !n.life.Enter() {
		return nil, false
	}
	defer n.life.Exit()
	return n.adm.Admit(h, frame)
}

func (e dispatchEnv) Status() wire.StatusInfo {
	st := e.n.Status()
	return wire.StatusInfo{Node: []byte(st.Node), Generation: st.Generation,
		MembersAlive: uint32(st.MembersAlive), ShardsHosted: uint32(st.ShardsHosted), ShardsLed: uint32(st.ShardsLed),
		TopicsOwned: uint64(st.TopicsOwned), Ready: st.Ready}
}

// deliverUnderFaults delivers a peer frame as a test's faults decide:
// dropped, delayed, duplicated, or held while a node is paused.
func (n *Node) deliverUnderFaults(c Conn, h wire.Header, frame []byte) bool {
	fate := n.hooks.peerIn(c.Node(), h.Kind)
	if fate.hold == nil && len(fate.delays) == 1 && fate.delays[0] == 0 {
		return n.disp.Frame(c, h, frame, time.Time{})
	}
	cp := append([]byte(nil), frame...)
	if fate.hold != nil {
		go func() {
			select {
			case <-fate.hold:
				n.deliverUnderFaults(c, h, cp)
			case <-n.life.Done():
			}
		}()
		return true
	}
	for _, d := range fate.delays {
		time.AfterFunc(d, func() {
			if !n.life.Stopped() {
				n.disp.Frame(c, h, cp, time.Time{})
			}
		})
	}
	return true
}

// takeRaftFrames is the raft frames' task: it decodes the frames peers
// sent and hands them to the raft host.
func (n *Node) takeRaftFrames(time.Time) time.Time {
	n.in.Drain()
	return time.Time{}
}

func (n *Node) clientAddrOf(id string) string {
	if id == n.cfg.ID {
		return n.clientAddr
	}
	return n.view.Load().Members[id].ClientAddr
}
