package reconcile

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
)

// The shard manager: each pass compares the raft configuration of every
// shard this node leads with the ring's desired replicas and makes at most
// one change per shard, at most Config.MaxConfChanges configuration
// changes and Config.MaxTransfers leadership transfers per pass. One pass
// runs at a time; the next starts once every change of this one has been
// answered.

// membershipSettle: reconcile intervals the live set must stay unchanged
// before the shard manager changes any raft configuration.
const membershipSettle = 5

// manageEvery: with nothing to do, the view unchanged and no replica's
// leadership or configuration changed, the shard manager looks at every
// replica once in this many reconcile intervals (5 s "lan", 2 s "fast"):
// a pass reads the state of every hosted replica, the largest part of an
// idle node's work otherwise.
const manageEvery = 10

// catchUpWake: how long after adding a replica on a node its groups are
// woken every pass.
const catchUpWake = 30 * time.Second

// learnerGiveUp: a learner the ring wants that has not caught up this
// long after the manager first saw it is removed, and its node is not
// given the shard again for learnerShun. A learner that never catches up
// (its node refuses the group's traffic: it hosts an ancestor of the
// shard that has not split there and never will, its group gone) would
// otherwise hold every other change of the shard back for good: the
// manager makes one change a shard at a time, learners first. A snapshot
// of a shard's records takes seconds.
const (
	learnerGiveUp = 2 * time.Minute
	learnerShun   = 2 * time.Minute
)

// shardNode names a replica: a shard and a node's raft id.
type shardNode struct{ shard, node uint64 }

// StepKind is what one change to a shard's group does.
type StepKind uint8

const (
	// Promote makes a learner the ring wants a voter (raftmux OpPromote).
	Promote StepKind = iota + 1
	// RemoveLearner drops a learner the ring no longer wants
	// (OpRemoveReplica).
	RemoveLearner
	// AddLearner adds a desired live member that is not in the group, as a
	// learner (OpAddLearner); it is promoted on a later pass.
	AddLearner
	// RemoveRemoved drops the voter of a node removed for good
	// (OpRemoveReplica), at once: it never comes back to count.
	RemoveRemoved
	// RemoveVoter drops a voter the ring does not want (OpRemoveReplica),
	// once the group has more voters than the replication factor.
	RemoveVoter
	// Transfer hands the shard's leadership to Node (OpTransferLeader):
	// away from this node when the ring no longer wants it there, or to
	// the preferred replica.
	Transfer
	// Replace promotes a learner the ring wants (Node) and removes a voter
	// it does not want (Out) in one joint change (OpReplace), when the
	// group has its full count of voters: promoted alone, the learner
	// would make a group of four whose quorum needs three, so that one
	// voter that does not answer (a paused node, or one whose replica is
	// still empty) and a crash of the new one, before it learned of its
	// promotion, would stop it for good.
	Replace
)

var stepNames = [...]string{Promote: "promote", RemoveLearner: "remove learner", AddLearner: "add learner",
	RemoveRemoved: "remove removed node", RemoveVoter: "remove voter", Transfer: "transfer to", Replace: "promote"}

func (k StepKind) String() string {
	if int(k) < len(stepNames) && stepNames[k] != "" {
		return stepNames[k]
	}
	return "step?"
}

// Step is one change to one shard's group.
type Step struct {
	Kind  StepKind
	Shard uint64
	// Node is the raft id of the replica changed, or of the next leader;
	// Name its node id ("" when the node knows none).
	Node uint64
	Name string
	// Out and OutName: the voter a Replace removes.
	Out     uint64
	OutName string
}

func (s Step) String() string {
	if s.Kind == Replace {
		return fmt.Sprintf("shard %d: promote %s, removing %s", s.Shard, s.Name, s.OutName)
	}
	return fmt.Sprintf("shard %d: %v %s", s.Shard, s.Kind, s.Name)
}

// Pass is what one pass of the shard manager asks of the node, in this
// order: the stray checks to send, the nodes given a replica lately whose
// groups to wake (raftmux Host.NodeAlive: a quiesced leader catches a new
// replica up only while awake), and the steps to start. The node reports
// each step's end through StepDone and each check's answer through Judge.
type Pass struct {
	Asks  []Ask
	Wake  []uint64
	Steps []Step
}

// idleMemo remembers the last pass that had nothing to do.
type idleMemo struct {
	view   *View
	events uint64
	skips  int
}

// ManageDue reports whether a pass of the shard manager is due at now
// over v; events counts the leadership and configuration changes of the
// hosted replicas, read before their infos. It is not on a view without
// a ring, nor on one not settled (with a member suspected, or the live
// set changed within membershipSettle intervals, the ring may be about to
// change again, and a change made now could remove a replica the next view
// wants back), nor when the last pass found nothing to do at this view and
// count of events (but once in manageEvery).
func (c *Controller) ManageDue(v *View, now time.Time, events uint64) bool {
	if v.Ring == nil || v.Ring.Len() == 0 {
		return false
	}
	if v.Suspects > 0 || now.Sub(v.Changed) < membershipSettle*c.cfg.Interval {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &c.idle
	if m.view != v || m.events != events || m.skips >= manageEvery-1 {
		return true
	}
	m.skips++
	return false
}

// BeginPass marks a pass in flight and reports whether none was. The pass
// ends when Manage returns no step, when every step it returned is done,
// or at EndPass.
func (c *Controller) BeginPass() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.passing {
		return false
	}
	c.passing = true
	return true
}

// EndPass ends the pass in flight (the node could not read its replicas).
func (c *Controller) EndPass() {
	c.mu.Lock()
	c.passing, c.stepsLeft = false, 0
	c.mu.Unlock()
}

// Manage is the pass BeginPass began, over v and the infos of every
// replica this node hosts; events is the count ManageDue was given. In
// each shard this node leads (and is a voter of), the one change it
// needs, by priority: a learner promoted if the ring wants it, else
// removed; a desired live
// member added as a learner; a voter of a removed node removed; a voter
// the ring does not want removed once the group has more voters than the
// replication factor (this node's own leadership handed to a desired live
// voter first); the leadership handed to the preferred replica, unless an
// operator moved it here under this placement (Pin) or this node is
// moving topics in the shard (holdsBack).
func (c *Controller) Manage(v *View, events uint64, infos []raftmux.Info, now time.Time) Pass {
	var p Pass
	c.mu.Lock()
	p.Asks = c.findStrays(v, infos, now)
	for _, id := range slices.Sorted(maps.Keys(c.catchingUp)) {
		if now.Sub(c.catchingUp[id]) > catchUpWake {
			delete(c.catchingUp, id)
			continue
		}
		p.Wake = append(p.Wake, id)
	}
	quiet := len(c.catchingUp) == 0 && len(c.strays) == 0
	c.mu.Unlock()
	deferred := false
	var desired []string
	changes, transfers := 0, 0
	for _, in := range infos {
		if changes == c.cfg.MaxConfChanges && transfers == c.cfg.MaxTransfers {
			break
		}
		if in.Leader != c.self || !router.ShardSpace(c.cfg.Shards).Valid(in.Shard) {
			continue
		}
		if in.Ended {
			// Split here: the group is inert, its halves were born on its
			// voters, and a voter it would lose here may be one a half
			// still counts on that had not seeded it (it lags, or took
			// the parent's state by snapshot and takes the half from
			// its leader: node acceptReplica).
			continue
		}
		if !slices.Contains(in.Voters, c.self) {
			// Removed from the group by an earlier leader, and elected
			// before it applied that: it steps down as it does, and the
			// group is no longer its to change.
			continue
		}
		desired = v.Placement.Replicas(uint32(in.Shard), desired[:0])
		if len(desired) == 0 {
			continue
		}
		s, ok := c.shardStep(v, in, desired, now, &deferred)
		switch {
		case !ok:
		case s.Kind == Transfer && transfers < c.cfg.MaxTransfers:
			transfers++
			p.Steps = append(p.Steps, s)
		case s.Kind != Transfer && changes < c.cfg.MaxConfChanges:
			changes++
			p.Steps = append(p.Steps, s)
		}
	}
	if invariants.Enabled {
		c.checkPass(v, infos, p.Steps)
	}
	c.mu.Lock()
	c.forgetLearners(infos, now)
	c.idle = idleMemo{}
	if quiet && !deferred && len(p.Steps) == 0 {
		c.idle = idleMemo{view: v, events: events}
	}
	c.stepsLeft = len(p.Steps)
	if len(p.Steps) == 0 {
		c.passing = false
	}
	c.mu.Unlock()
	return p
}

// StepDone reports that a step of the pass in flight ended, made (ok) or
// not, at now: a learner added is woken for catchUpWake from now.
func (c *Controller) StepDone(s Step, ok bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok && s.Kind == AddLearner {
		c.catchingUp[s.Node] = now
	}
	if c.stepsLeft > 0 {
		if c.stepsLeft--; c.stepsLeft == 0 {
			c.passing = false
		}
	}
}

// forgetLearners drops what it knows of learners no longer waiting in a
// shard this node leads, and the shunned nodes whose time is up; c.mu
// held.
func (c *Controller) forgetLearners(infos []raftmux.Info, now time.Time) {
	if len(c.learners) == 0 && len(c.shunned) == 0 {
		return
	}
	waiting := make(map[shardNode]bool)
	for _, in := range infos {
		if in.Leader == c.self {
			for _, l := range in.Learners {
				waiting[shardNode{in.Shard, l}] = true
			}
		}
	}
	for k := range c.learners {
		if !waiting[k] {
			delete(c.learners, k)
		}
	}
	for k, at := range c.shunned {
		if now.Sub(at) >= learnerShun {
			delete(c.shunned, k)
		}
	}
}

// learnerStuck reports whether learner l of shard has waited past
// learnerGiveUp since the manager first saw it, which it records.
func (c *Controller) learnerStuck(shard, l uint64, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := shardNode{shard, l}
	since, ok := c.learners[k]
	if !ok {
		c.learners[k] = now
		return false
	}
	if now.Sub(since) < learnerGiveUp {
		return false
	}
	delete(c.learners, k)
	c.shunned[k] = now
	return true
}

// isShunned reports whether node was removed as a learner of shard that
// never caught up less than learnerShun before now.
func (c *Controller) isShunned(shard, node uint64, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.shunned[shardNode{shard, node}]
	return ok && now.Sub(at) < learnerShun
}

// shardStep returns the one change the shard needs (ok false: none); it
// sets *deferred when it leaves a change for a later pass (holdsBack).
func (c *Controller) shardStep(v *View, in raftmux.Info, desired []string, now time.Time, deferred *bool) (Step, bool) {
	want := make(map[uint64]bool, len(desired))
	for _, d := range desired {
		want[c.cfg.RaftID(d)] = true
	}
	step := func(kind StepKind, node uint64, name string) (Step, bool) {
		return Step{Kind: kind, Shard: in.Shard, Node: node, Name: name}, true
	}
	if len(in.Learners) > 0 {
		l := in.Learners[0]
		name, _ := c.env.NameOf(l)
		if want[l] && !c.learnerStuck(in.Shard, l, now) {
			if out, outName, ok := c.replaced(v, in, want); ok {
				return Step{Kind: Replace, Shard: in.Shard, Node: l, Name: name, Out: out, OutName: outName}, true
			}
			return step(Promote, l, name)
		}
		return step(RemoveLearner, l, name)
	}
	for _, d := range desired {
		id := c.cfg.RaftID(d)
		if slices.Contains(in.Voters, id) || !v.Alive(d) || c.isShunned(in.Shard, id, now) {
			continue
		}
		return step(AddLearner, id, d)
	}
	for _, vo := range in.Voters {
		name, _ := c.env.NameOf(vo)
		if want[vo] || vo == c.self || !v.Removed[name] {
			continue
		}
		return step(RemoveRemoved, vo, name)
	}
	if len(in.Voters) > c.cfg.Replicas {
		// A voter SWIM does not count alive goes first: removing a live
		// one while another is down leaves a group that a single crash
		// more stops (a split's half, seeded with its parent's voters,
		// may hold a paused one).
		for _, vo := range in.Voters {
			if name, _ := c.env.NameOf(vo); !want[vo] && vo != c.self && !v.Alive(name) {
				return step(RemoveVoter, vo, name)
			}
		}
		for _, vo := range in.Voters {
			if want[vo] {
				continue
			}
			if vo == c.self {
				return c.handOver(v, in, desired)
			}
			name, _ := c.env.NameOf(vo)
			return step(RemoveVoter, vo, name)
		}
	}
	if c.Pinned(in.Shard, v) {
		return Step{}, false
	}
	if pref := v.Placement.Leader(uint32(in.Shard)); pref != "" && pref != c.cfg.Self && v.Alive(pref) && slices.Contains(in.Voters, c.cfg.RaftID(pref)) {
		if c.holdsBack(in.Shard) {
			*deferred = true
			return Step{}, false
		}
		return step(Transfer, c.cfg.RaftID(pref), pref)
	}
	return Step{}, false
}

// replaced returns the voter a promotion in in's group removes at once
// (Replace): while the group has its full count of voters, one the ring
// does not want, SWIM's dead first, never this node's (it hands over its
// leadership first: handOver).
func (c *Controller) replaced(v *View, in raftmux.Info, want map[uint64]bool) (uint64, string, bool) {
	if len(in.Voters) < c.cfg.Replicas {
		return 0, "", false
	}
	var out uint64
	var outName string
	for _, vo := range in.Voters {
		if want[vo] || vo == c.self {
			continue
		}
		name, _ := c.env.NameOf(vo)
		if out == 0 || !v.Alive(name) && v.Alive(outName) {
			out, outName = vo, name
		}
	}
	return out, outName, out != 0
}

// handOver hands the shard's leadership to the first desired live voter
// other than this node (none: no step).
func (c *Controller) handOver(v *View, in raftmux.Info, desired []string) (Step, bool) {
	for _, d := range desired {
		id := c.cfg.RaftID(d)
		if d != c.cfg.Self && v.Alive(d) && slices.Contains(in.Voters, id) {
			return Step{Kind: Transfer, Shard: in.Shard, Node: id, Name: d}, true
		}
	}
	return Step{}, false
}

// holdsBack reports whether this node, leading shard, is moving topics
// there: a reassignment of a dead or silent owner's topics is in flight,
// or an open it owes is not acknowledged yet (Env.HoldsBack). Its
// leadership is then not handed to the preferred replica: the next leader
// would owe the opens again and hold them back for its own NewLeaderWait,
// from its election, and a topic moved off a dead owner would stay
// unwritable for a second such wait (4 s "lan").
func (c *Controller) holdsBack(shard uint64) bool {
	c.mu.Lock()
	busy := c.reassigning[shard] > 0
	c.mu.Unlock()
	return busy || c.env.HoldsBack(shard)
}

// Pin keeps the leadership of shard here while the placement stays p and
// this node is not drained: an operator moved it here (TransferLeader).
func (c *Controller) Pin(shard uint64, p *router.Placement) {
	c.mu.Lock()
	c.pins[shard] = p
	c.mu.Unlock()
}

// Pinned reports whether an operator moved the leadership of shard here
// under a placement that places shard as v's does (a split elsewhere
// makes a new placement, but not for this shard) and this node is not
// drained since; a pin of another placement is forgotten.
func (c *Controller) Pinned(shard uint64, v *View) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.pins[shard]
	if ok && (!samePlace(p, v.Placement, uint32(shard)) || v.Drained[c.cfg.Self]) {
		delete(c.pins, shard)
		return false
	}
	return ok
}

// samePlace reports whether two placements place shard alike: the same
// replicas, the same preferred leader.
func samePlace(a, b *router.Placement, shard uint32) bool {
	if a == b {
		return true
	}
	if a == nil || b == nil {
		return false
	}
	var ra, rb [router.MaxReplicas]string
	return slices.Equal(a.Replicas(shard, ra[:0]), b.Replicas(shard, rb[:0]))
}
