package node

import (
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"go.etcd.io/raft/v3/raftpb"
)

// maxQueuedEvents bounds the event queue; SWIM events past it are dropped
// (the view is rebuilt from SWIM's full member list on the next event or
// reconcile tick, so nothing is lost but latency).
const maxQueuedEvents = 1 << 16

// eventQueue hands SWIM events and raft leader changes, produced on
// goroutines that must not block, to the event loop.
type eventQueue struct {
	mu     sync.Mutex
	swim   []swim.Event
	lead   []raftmux.LeaderChange
	wake   func() // kicks the events task
	closed bool
	drops  uint64
}

func (q *eventQueue) push(e swim.Event) {
	q.mu.Lock()
	if q.closed || len(q.swim) >= maxQueuedEvents {
		q.drops++
		q.mu.Unlock()
		return
	}
	q.swim = append(q.swim, e)
	q.mu.Unlock()
	q.kick()
}

func (q *eventQueue) pushLeader(c raftmux.LeaderChange) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.lead = append(q.lead, c)
	q.mu.Unlock()
	q.kick()
}

func (q *eventQueue) kick() {
	if q.wake != nil {
		q.wake()
	}
}

func (q *eventQueue) take() ([]swim.Event, []raftmux.LeaderChange) {
	q.mu.Lock()
	defer q.mu.Unlock()
	s, l := q.swim, q.lead
	q.swim, q.lead = nil, nil
	return s, l
}

func (q *eventQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

func (q *eventQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.swim) + len(q.lead)
}

// onLeaderChange runs on a raftmux worker: record, then hand over. The
// replica's leader and term are recorded before raft sends anything of
// the round that changed them (a vote above all), which is what makes a
// vouch for a leader at a term safe (docs/leases.md).
func (n *Node) onLeaderChange(c raftmux.LeaderChange) {
	if c.Shard >= uint64(n.cfg.Shards) {
		return
	}
	n.leadMu.Lock()
	n.replicaLead[c.Shard] = raftLead{lead: c.Leader, term: c.Term}
	n.leadMu.Unlock()
	n.led[c.Shard].Store(c.Leader == n.self)
	n.dutyMu.Lock()
	if c.Leader == n.self {
		n.duty.Won(n.clock(), c.Shard, c.Term)
	} else {
		n.duty.Lost(c.Shard)
		delete(n.leaderDue, c.Shard)
	}
	n.dutyMu.Unlock()
	// Counted after the change: whoever read the count before looking at
	// leaderships sees this change, or a count that differs next time.
	n.shardEvents.Add(1)
	if c.Leader != n.self {
		n.recheckSettling()
	}
	if name, ok := n.nameOf(c.Leader); ok && c.Leader != 0 {
		_, _ = n.leaders.Update(uint32(c.Shard), name, c.Term)
	}
	n.events.pushLeader(c)
}

// onConfState runs on a raftmux worker: a hosted replica's configuration,
// whose voters vouch for its leader.
func (n *Node) onConfState(shard uint64, cs raftpb.ConfState) {
	if shard >= uint64(n.cfg.Shards) {
		return
	}
	n.dutyMu.Lock()
	n.duty.SetVoters(shard, slices.Clone(cs.Voters), slices.Clone(cs.VotersOutgoing))
	n.dutyMu.Unlock()
	if len(cs.Voters) == 0 {
		n.leadMu.Lock()
		delete(n.replicaLead, shard)
		n.leadMu.Unlock()
	}
	n.shardEvents.Add(1)
}

// eventsDuty is the events task: it applies membership events to the view
// and raft, spreads this node's leaderships through SWIM, and births the
// cluster; it runs on each event and every reconcile interval.
func (n *Node) eventsDuty(now time.Time) time.Time {
	n.handleEvents()
	return now.Add(n.cfg.ReconcileInterval)
}

// viewRefreshTicks: quiet event-loop ticks between two reads of SWIM's
// members without an event (5 s "lan", 2 s "fast").
const viewRefreshTicks = 10

// handleEvents is one pass of the event loop.
func (n *Node) handleEvents() {
	evs, leads := n.events.take()
	membership := false
	var versions []swim.Event
	for _, e := range evs {
		switch e.Kind {
		case swim.EventShardLeader:
			if e.Shard < uint64(n.cfg.Shards) && e.Leader != "" {
				_, _ = n.leaders.Update(uint32(e.Shard), e.Leader, e.Term)
			}
		case swim.EventMetadataVersion:
			versions = append(versions, e)
		default:
			membership = true
			n.liveness(e)
		}
	}
	for _, c := range leads {
		if c.Leader == n.self {
			n.swim.AnnounceShardLeader(c.Shard, n.cfg.ID, c.Term)
			n.dutyMu.Lock()
			if t, ok := n.duty.Leads(c.Shard); ok && t == c.Term {
				n.leaderDue[c.Shard] = true
			}
			n.dutyMu.Unlock()
		}
	}
	if !membership && len(evs) == 0 {
		// A quiet tick: SWIM's events carry every change, so the view is
		// read again only now and then, in case one was missed (reading
		// it copies and sorts every member).
		n.quietTicks++
		membership = n.quietTicks%viewRefreshTicks == 0
	}
	if membership {
		n.rebuildView()
	}
	// After the view is rebuilt, so that a change this node learned by
	// SWIM in the same round counts before comparing versions.
	for _, e := range versions {
		n.msync.Announced(e.MetaKind, e.Leader, e.Version)
	}
	v := n.view.Load()
	n.msync.Tick(v.live, v.dead)
	n.rotateCache()
	n.maybeBirth()
	n.maybeReady()
}

func (n *Node) liveness(e swim.Event) {
	if e.Member.ID == n.cfg.ID {
		// Declared dead meanwhile (EventRejoined), this node's topics may
		// have moved: the leases say which it still owns.
		return
	}
	rid := RaftID(e.Member.ID)
	if n.view.Load().removed[e.Member.ID] {
		return // out for good, whatever SWIM says (marks.go)
	}
	switch e.Kind {
	case swim.EventSuspect:
		n.host.NodeSuspect(rid)
	case swim.EventDead, swim.EventLeft:
		n.host.NodeDead(rid)
		n.net.RemovePeer(e.Member.ID)
		n.log.Info("member gone", "member", e.Member.ID, "state", e.Member.State.String())
	case swim.EventJoined, swim.EventAliveAgain, swim.EventUpdated:
		n.host.NodeAlive(rid)
	}
}

// birthWaitLogInterval: while a fresh node waits for BootstrapExpect
// members, it says how many it sees this often, at info level.
const birthWaitLogInterval = 5 * time.Second

// maybeBirth creates this node's groups once SWIM shows BootstrapExpect
// members and no shard has a leader anywhere (a cluster already born
// announces its leaders, and a joining node then only joins it).
func (n *Node) maybeBirth() {
	if n.born.Load() {
		return
	}
	var rows []router.ShardLeader
	rows, _ = n.leaders.Snapshot(rows[:0])
	v := n.view.Load()
	if len(v.live) < n.cfg.BootstrapExpect {
		n.birthSeen = time.Time{}
		if now := n.clock(); n.birthWaitLogged.IsZero() || now.Sub(n.birthWaitLogged) >= birthWaitLogInterval {
			n.birthWaitLogged = now
			n.log.Info("waiting for members to create the cluster", "seen", len(v.live), "expect", n.cfg.BootstrapExpect,
				"members", v.live, "join", n.cfg.Join)
		}
		return
	}
	initial := v.live[:n.cfg.BootstrapExpect]
	if len(rows) > 0 && (len(v.live) > n.cfg.BootstrapExpect || !slices.Contains(initial, n.cfg.ID)) {
		n.log.Info("joined a born cluster")
		n.markBorn()
		return
	}
	if !slices.Contains(initial, n.cfg.ID) {
		return
	}
	// With no leader known anywhere, the condition must hold for
	// birthSettle: long enough for a node joining a born cluster to hear
	// of its leaders (by gossip or by its first metadata pull). Leaders
	// already known are those of peers that were born from this same member
	// set just before this node, and it bootstraps at once.
	if len(rows) == 0 {
		if n.birthSeen.IsZero() {
			n.birthSeen = n.clock()
		}
		if n.clock().Sub(n.birthSeen) < birthSettle {
			return
		}
	}
	var rm []router.Member
	for _, id := range initial {
		rm = append(rm, router.Member{ID: id, Rack: v.byID[id].Rack})
	}
	ring, err := router.NewRing(rm, router.RingConfig{})
	if err != nil {
		n.log.Error("node: birth ring", "err", err)
		return
	}
	pl := ring.Placement(n.cfg.Shards, n.cfg.Replicas)
	var reps []string
	for _, r := range rows {
		if reps = pl.Replicas(r.Shard, reps[:0]); !slices.Contains(reps, r.Leader) {
			// Leaders this placement cannot have: a cluster born from
			// another member set. Join it instead.
			n.log.Info("joined a born cluster")
			n.markBorn()
			return
		}
	}
	if !n.birthing.CompareAndSwap(false, true) {
		return // under way
	}
	n.log.Info("birth", "members", v.live[:n.cfg.BootstrapExpect], "shards", n.cfg.Shards)
	var mine []uint32
	for s := range n.cfg.Shards {
		if reps = pl.Replicas(s, reps[:0]); slices.Contains(reps, n.cfg.ID) {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 {
		n.markBorn()
		return
	}
	var mu sync.Mutex
	left := len(mine)
	finish := func() {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if last {
			n.markBorn()
		}
	}
	for _, s := range mine {
		reps = pl.Replicas(s, reps[:0])
		voters := make([]uint64, len(reps))
		for i, r := range reps {
			voters[i] = RaftID(r)
		}
		shard, lead := uint64(s), pl.Leader(s) == n.cfg.ID
		n.host.Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: shard, Voters: voters}, func(r raftmux.Result) {
			if r.Err != nil {
				n.log.Warn("node: bootstrap", "shard", shard, "err", r.Err)
				finish()
				return
			}
			if !lead {
				finish()
				return
			}
			n.host.Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: shard}, func(raftmux.Result) { finish() })
		})
	}
}

// birthSettle: how long the birth condition must hold before a node acts.
const birthSettle = 500 * time.Millisecond

// birthGrace: a born node is ready at the latest this long after birth,
// even if some shard's leader is still unknown to it (it answers
// Unavailable for those).
const birthGrace = 5 * time.Second

func (n *Node) maybeReady() {
	if n.isReady() || !n.born.Load() {
		return
	}
	if at := n.bornAt.Load(); at == 0 {
		n.bornAt.Store(n.clock().UnixNano())
	}
	var rows []router.ShardLeader
	rows, _ = n.leaders.Snapshot(rows)
	if !n.metadataSynced() {
		return
	}
	if len(rows) == int(n.cfg.Shards) || n.clock().Sub(time.Unix(0, n.bornAt.Load())) > birthGrace {
		vs := n.MetadataVersions()
		n.log.Info("ready", "leaders_known", len(rows), "membership_version", vs.Membership, "ring_version", vs.Ring, "leader_version", vs.ShardLeaders)
		n.markReady()
	}
}

// liveNodes returns the live members that are not drained as owner
// candidates with their load in st (the shard's own count).
func liveNodes(v *clusterView, st *meta.State) []meta.Node {
	out := make([]meta.Node, 0, len(v.live))
	for _, id := range v.live {
		if v.drained[id] {
			continue
		}
		out = append(out, meta.Node{ID: id, Load: uint64(st.Load(id))})
	}
	return out
}
