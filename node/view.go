package node

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
)

// clusterView is the membership as the node last built it, and the ring's
// placement for it. Replaced whole on every membership change.
type clusterView struct {
	members   []swim.Member          // every known member, sorted by id
	byID      map[string]swim.Member // same
	live      []string               // alive or suspect, sorted
	dead      map[string]bool        // declared dead or left
	ring      *router.Ring
	placement *router.Placement
	ringOf    []router.Member // the members ring and placement were built of
	suspects  int             // members suspected now
	changed   time.Time       // when the live set last changed
	// drained: live members that take no topics or leaderships;
	// removed: members removed for good (marks.go), kept out of live.
	drained, removed map[string]bool
	noLead           []string // drained, sorted: the placement's input besides ringOf
	// rec is the view as the reconcile room reads it (reconcileView).
	rec *reconcile.View
}

func (v *clusterView) alive(id string) bool {
	m, ok := v.byID[id]
	return ok && (m.State == swim.StateAlive || m.State == swim.StateSuspect)
}

// sameMember reports whether two SWIM records are identical.
func sameMember(a, b swim.Member) bool {
	return a.ID == b.ID && a.Generation == b.Generation && a.Incarnation == b.Incarnation && a.State == b.State &&
		a.SwimAddr == b.SwimAddr && a.ClientAddr == b.ClientAddr && a.PeerAddr == b.PeerAddr && a.Rack == b.Rack &&
		bytes.Equal(a.Meta, b.Meta)
}

// rebuildView recomputes the membership view, the raft id map, the peer
// addresses and the ring from SWIM.
func (n *Node) rebuildView() {
	ms := n.swim.Members()
	old := n.view.Load()
	dirty := n.viewDirty.Swap(false)
	if !dirty && old.ring != nil && slices.EqualFunc(ms, old.members, sameMember) {
		return // nothing SWIM knows changed
	}
	drained, removed := n.applyMarks(ms)
	v := &clusterView{members: ms, byID: make(map[string]swim.Member, len(ms)), dead: make(map[string]bool),
		drained: drained, removed: removed}
	for id, d := range old.dead {
		v.dead[id] = d
	}
	v.changed = old.changed
	var rm []router.Member
	n.namesMu.Lock()
	for _, m := range ms {
		v.byID[m.ID] = m
		rid := RaftID(m.ID)
		if prev, ok := n.names[rid]; ok && prev != m.ID {
			n.log.Error("node: member ignored", "member", m.ID, "err", fmt.Errorf("%w: %s and %s", ErrIDCollision, prev, m.ID))
			continue
		}
		n.names[rid] = m.ID
		if removed[m.ID] {
			v.dead[m.ID] = true
			if !old.removed[m.ID] && m.ID != n.cfg.ID {
				n.host.NodeDead(rid)
			}
			continue
		}
		if old.removed[m.ID] && m.ID != n.cfg.ID && (m.State == swim.StateAlive || m.State == swim.StateSuspect) {
			n.host.NodeAlive(rid) // back as a new node: its events were ignored while it was out
		}
		if m.State == swim.StateSuspect {
			v.suspects++
		}
		switch m.State {
		case swim.StateAlive, swim.StateSuspect:
			v.live = append(v.live, m.ID)
			delete(v.dead, m.ID)
			rm = append(rm, router.Member{ID: m.ID, Rack: m.Rack})
		case swim.StateDead, swim.StateLeft:
			v.dead[m.ID] = true
		}
		if m.ID != n.cfg.ID && m.PeerAddr != "" {
			n.net.SetPeerAddr(m.ID, m.PeerAddr)
		}
	}
	n.namesMu.Unlock()
	slices.Sort(v.live)
	if !slices.Equal(v.live, old.live) {
		v.changed = n.clock()
	}
	v.ringOf = rm
	for _, id := range v.live {
		if drained[id] {
			v.noLead = append(v.noLead, id)
		}
	}
	if old.ring != nil && slices.Equal(rm, old.ringOf) && slices.Equal(v.noLead, old.noLead) {
		// The same live members: the same ring and placement (placing
		// every shard costs a rendezvous walk each).
		v.ring, v.placement = old.ring, old.placement
	} else {
		ring, err := router.NewRing(rm, router.RingConfig{})
		if err != nil {
			n.log.Error("node: ring", "err", err)
			ring, _ = router.NewRing(nil, router.RingConfig{})
		}
		v.ring = ring
		v.placement = ring.PlacementExcept(n.cfg.Shards, n.cfg.Replicas, v.noLead)
	}
	v.rec = reconcileView(v)
	n.view.Store(v)
	n.msync.Observe(ms)
}
