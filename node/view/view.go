package view

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// ErrIDCollision: two member ids map to the same raft id.
var ErrIDCollision = errors.New("node: raft id collision")

// View is the membership as the node last built it, and the ring's
// placement for it, as the reconcile room reads it (the embedded
// reconcile.View) and as the other rooms ask about it (Alive, Drained,
// Removed, Member, Placement, Candidates). Replaced whole on every
// change, never changed after.
type View struct {
	reconcile.View
	members []swim.Member   // every known member, sorted by id
	ringOf  []router.Member // the members ring and placement were built of
	noLead  []string        // drained, sorted: the placement's input besides ringOf
	smap    *router.ShardMap
}

// Empty returns the view of a node that has not read SWIM yet.
func Empty() *View {
	return &View{View: reconcile.View{Members: map[string]swim.Member{}, Dead: map[string]bool{}}}
}

// Rec is the view as the reconcile room reads it.
func (v *View) Rec() *reconcile.View { return &v.View }

// Member is the SWIM record of id, if the view knows it.
func (v *View) Member(id string) (swim.Member, bool) { m, ok := v.Members[id]; return m, ok }

// Drained reports whether id is drained.
func (v *View) Drained(id string) bool { return v.View.Drained[id] }

// Removed reports whether id was removed for good.
func (v *View) Removed(id string) bool { return v.View.Removed[id] }

// Placement is the ring's placement of the view (nil before the node
// first read SWIM's members).
func (v *View) Placement() *router.Placement { return v.View.Placement }

// sameMember reports whether two SWIM records are identical.
func sameMember(a, b swim.Member) bool {
	return a.ID == b.ID && a.Generation == b.Generation && a.Incarnation == b.Incarnation && a.State == b.State &&
		a.SwimAddr == b.SwimAddr && a.ClientAddr == b.ClientAddr && a.PeerAddr == b.PeerAddr && a.Rack == b.Rack &&
		bytes.Equal(a.Meta, b.Meta)
}

// Env is what a Builder tells the node of the members it reads. Its
// methods are called without the Builder's lock held.
type Env interface {
	// Marks merges the removals the members' records name into the
	// node's, and returns the drained members and the removed ones
	// (reconcile.Marks.Judge).
	Marks(ms []swim.Member) (drained, removed map[string]bool)
	// NodeDead tells raft that a removed member is gone; NodeAlive that
	// a member removed before is back as a new node.
	NodeDead(raftID uint64)
	NodeAlive(raftID uint64)
	// SetPeerAddr records where a member listens for peers.
	SetPeerAddr(id, addr string)
	// Now is the node's clock.
	Now() time.Time
}

// Config configures a Builder.
type Config struct {
	// Self is this node's id; RaftID maps a node id to its raft id.
	Self   string
	RaftID func(id string) uint64
	// Shards and Replicas shape the placement.
	Shards   uint32
	Replicas int
	Logger   *slog.Logger
	Env      Env
}

// Builder builds a node's views from SWIM's members and keeps the raft
// ids of the members it has read.
type Builder struct {
	cfg Config

	mu    sync.RWMutex
	names map[uint64]string // raft id → node id
}

// New returns a Builder that knows only this node's name.
func New(cfg Config) (*Builder, error) {
	if cfg.Self == "" || cfg.RaftID == nil || cfg.Shards == 0 || cfg.Replicas <= 0 || cfg.Logger == nil || cfg.Env == nil {
		return nil, errors.New("view: incomplete config")
	}
	return &Builder{cfg: cfg, names: map[uint64]string{cfg.RaftID(cfg.Self): cfg.Self}}, nil
}

// NameOf returns the node id of a raft id, if a member of that id was
// read (this node's always).
func (b *Builder) NameOf(id uint64) (string, bool) {
	b.mu.RLock()
	s, ok := b.names[id]
	b.mu.RUnlock()
	return s, ok
}

// Rebuild returns the view that follows old once SWIM knows the members
// ms and the cluster's shards are those of sm (the placement places its
// live shards), or old itself when nothing it is built of changed (dirty
// says the marks may have). On the way it learns the members' raft ids (a member
// whose raft id is another's is ignored), tells raft of the removed
// members and of those back, and records the peers' addresses. One caller
// at a time (the event loop, or the node's start).
func (b *Builder) Rebuild(old *View, ms []swim.Member, dirty bool, sm *router.ShardMap) *View {
	if !dirty && old.Ring != nil && sm == old.smap && slices.EqualFunc(ms, old.members, sameMember) {
		return old // nothing SWIM knows changed, nor the shards
	}
	env, self := b.cfg.Env, b.cfg.Self
	drained, removed := env.Marks(ms)
	v := &View{members: ms, View: reconcile.View{Members: make(map[string]swim.Member, len(ms)), Dead: make(map[string]bool),
		Drained: drained, Removed: removed}}
	for id, d := range old.Dead {
		v.Dead[id] = d
	}
	v.Changed = old.Changed
	var rm []router.Member
	for _, m := range ms {
		v.Members[m.ID] = m
		rid := b.cfg.RaftID(m.ID)
		if prev, ok := b.learn(rid, m.ID); !ok {
			b.cfg.Logger.Error("node: member ignored", "member", m.ID, "err", fmt.Errorf("%w: %s and %s", ErrIDCollision, prev, m.ID))
			continue
		}
		if removed[m.ID] {
			v.Dead[m.ID] = true
			if !old.View.Removed[m.ID] && m.ID != self {
				env.NodeDead(rid)
			}
			continue
		}
		if old.View.Removed[m.ID] && m.ID != self && (m.State == swim.StateAlive || m.State == swim.StateSuspect) {
			env.NodeAlive(rid) // back as a new node: its events were ignored while it was out
		}
		if m.State == swim.StateSuspect {
			v.Suspects++
		}
		switch m.State {
		case swim.StateAlive, swim.StateSuspect:
			v.Live = append(v.Live, m.ID)
			delete(v.Dead, m.ID)
			rm = append(rm, router.Member{ID: m.ID, Rack: m.Rack})
		case swim.StateDead, swim.StateLeft:
			v.Dead[m.ID] = true
		}
		if m.ID != self && m.PeerAddr != "" {
			env.SetPeerAddr(m.ID, m.PeerAddr)
		}
	}
	slices.Sort(v.Live)
	if !slices.Equal(v.Live, old.Live) {
		v.Changed = env.Now()
	}
	v.ringOf = rm
	for _, id := range v.Live {
		if drained[id] {
			v.noLead = append(v.noLead, id)
		}
	}
	v.smap = sm
	sameRing := old.Ring != nil && slices.Equal(rm, old.ringOf)
	switch {
	case sameRing && slices.Equal(v.noLead, old.noLead) && sm == old.smap:
		// The same live members and shards: the same ring and placement
		// (placing every shard costs a rendezvous walk each).
		v.Ring, v.View.Placement = old.Ring, old.View.Placement
	case sameRing:
		v.Ring = old.Ring
		v.View.Placement = b.placement(v.Ring, v.noLead, sm)
	default:
		ring, err := router.NewRing(rm, router.RingConfig{})
		if err != nil {
			b.cfg.Logger.Error("node: ring", "err", err)
			ring, _ = router.NewRing(nil, router.RingConfig{})
		}
		v.Ring = ring
		v.View.Placement = b.placement(ring, v.noLead, sm)
	}
	return v
}

// placement places the live shards of sm (nil: the base shards) on ring.
func (b *Builder) placement(ring *router.Ring, noLead []string, sm *router.ShardMap) *router.Placement {
	if sm == nil || sm.Base() != b.cfg.Shards {
		return ring.PlacementExcept(b.cfg.Shards, b.cfg.Replicas, noLead)
	}
	return ring.PlacementOf(sm, b.cfg.Replicas, noLead)
}

// learn records that raft id rid is member id, unless another member
// holds it (prev, false).
func (b *Builder) learn(rid uint64, id string) (prev string, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if prev, known := b.names[rid]; known && prev != id {
		return prev, false
	}
	b.names[rid] = id
	return id, true
}

// Accepts is the node's raftmux.Config.AcceptReplica, against the view v
// it holds now: a leader's message or snapshot creates a replica here only
// for a shard of the table that the ring, as this node sees it, places on
// this node, on the word of a member this node knows. A leader whose view
// is ahead (it added this node as a learner before this node saw the
// change that places the shard here) is refused until this node's view
// catches up; it retries with its next heartbeat. Without the check, any
// peer could make the node hold a replica, with its raft state and
// snapshot buffers, for every shard id it names.
func (b *Builder) Accepts(v *View, shard, from uint64) bool {
	if !router.ShardSpace(b.cfg.Shards).Valid(shard) {
		return false
	}
	if _, known := b.NameOf(from); !known {
		return false
	}
	if v == nil || v.Placement() == nil {
		return false
	}
	var buf [wire.MaxReplicas]string
	return slices.Contains(v.Placement().Replicas(uint32(shard), buf[:0]), b.cfg.Self)
}
