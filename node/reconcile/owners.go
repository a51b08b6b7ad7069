package reconcile

import (
	"time"
)

// The owners' look: in every shard this node leads, the topics of owners
// SWIM declared dead (or gone), of drained ones, and of those that have not
// asked this leader for a lease on the shard for silentOwnerLeases leases
// move to live members (meta PlanReassign). A silent owner cannot reach
// this node, a one-way partition SWIM does not see: its topics are
// unwritable where they are. An owner whose lease rounds keep arriving is
// not silent, even if none named the shard: its shard-leader table lags (a
// refusal's hint sends it here next round), or this node has not yet taken
// its rounds. Moving its topics then would only add work.

// silentOwnerLeases: how many lease lengths an owner may go without asking
// its shard's leader for a lease before the leader moves its topics.
const silentOwnerLeases = 3

// reassignEvery: with the membership unchanged, the owners are looked at
// every this many reconcile intervals (0.8 s "fast", 2 s "lan"), and at
// the first interval after a peer's lease rounds have stopped reaching this
// node for silentOwnerLeases lease lengths (fellSilent).
const reassignEvery = 4

// unknownOwnerGrace: reconcile intervals a node must have been ready
// before a member SWIM does not know counts as gone (KnowsAll): 2 s
// "fast", 5 s "lan".
const unknownOwnerGrace = 10

// Reason says why an owner's topics move off it.
type Reason uint8

const (
	// Stays: they do not.
	Stays Reason = iota
	// Gone: SWIM declared the owner dead or left, or does not know it
	// (View.Gone).
	Gone
	// Drained: the owner carries a drain mark.
	Drained
	// Silent: the owner has neither asked this node for a lease on the
	// shard nor sent it a lease round for silentOwnerLeases leases
	// (Silent).
	Silent
)

func (r Reason) String() string {
	switch r {
	case Stays:
		return "stays"
	case Gone:
		return "gone"
	case Drained:
		return "drained"
	case Silent:
		return "silent"
	}
	return "reason?"
}

// ownersState is the owners' look between two looks.
type ownersState struct {
	pass int       // looks asked for (OwnersDue)
	view *View     // the view the last full look saw
	at   time.Time // when
	memo ownersMemo
}

// ownersMemo is what the last full look saw: every owner of a topic in a
// shard this node led, at a state version and count of shard events
// (valid: the look found no owner to move).
type ownersMemo struct {
	valid           bool
	version, events uint64
	owners          map[string]bool
}

func (c *Controller) silentFor() time.Duration { return silentOwnerLeases * c.cfg.Lease }

// Silent is the rule of silence at now: this node has led the shard since
// since, and an owner has neither asked it for a lease on the shard
// (lastAsk) nor sent it any lease round (lastRound) for longer than
// silentOwnerLeases leases.
func (c *Controller) Silent(now, since, lastAsk, lastRound time.Time) bool {
	return isSilent(now, c.silentFor(), since, lastAsk, lastRound)
}

func isSilent(now time.Time, silentFor time.Duration, since, lastAsk, lastRound time.Time) bool {
	return now.Sub(since) > silentFor && now.Sub(lastAsk) > silentFor && now.Sub(lastRound) > silentFor
}

// KnowsAll reports whether a member SWIM does not know may be taken for
// gone at now: the node has been ready (readyAt; zero: it is not) for
// unknownOwnerGrace intervals, so it merged a peer's membership (or is
// alone) and has heard of every member since. Counting from readiness
// rather than from the start keeps nodes of a cluster restarted one after
// the other from taking the ones not started yet for gone.
func (c *Controller) KnowsAll(readyAt, now time.Time) bool {
	return !readyAt.IsZero() && now.Sub(readyAt) > unknownOwnerGrace*c.cfg.Interval
}

// fellSilent reports whether a peer other than self (whose last lease
// round reached this node at rounds[peer]) has been silent for longer
// than silentFor at now, but was not yet at the last full look (at last):
// its topics, if this node leads their shards, are due to move now, not
// at the next look of the cadence.
func fellSilent(rounds map[string]time.Time, self string, last, now time.Time, silentFor time.Duration) bool {
	for id, at := range rounds {
		if id != self && now.Sub(at) > silentFor && last.Sub(at) <= silentFor {
			return true
		}
	}
	return false
}

// OwnersDue reports whether a look at the owners is due at now over v, and
// counts the call: with members live, at each new view, every
// reassignEvery calls, and as soon as a peer fell silent; rounds are when
// each peer's last lease round reached this node (read, not kept: the
// caller may hold its lock over them). Reconcile task only.
func (c *Controller) OwnersDue(v *View, now time.Time, rounds map[string]time.Time) bool {
	if len(v.Live) == 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	o := &c.owners
	o.pass++
	due := v != o.view || o.pass%reassignEvery == 0 || fellSilent(rounds, c.cfg.Self, o.at, now, c.silentFor())
	if due {
		o.view, o.at = v, now
	}
	return due
}

// OwnerLook is one look at the owners of the shards this node leads,
// which the node takes shard by shard (Shard) under each shard's lock, and
// ends with Done. Owned by its caller.
type OwnerLook struct {
	c               *Controller
	v               *View
	now             time.Time
	rounds          map[string]time.Time
	knowsAll        bool
	version, events uint64
	owners          map[string]bool
	found           bool
}

// Owners begins the look OwnersDue found due, at now over v, with rounds as
// OwnersDue had them (a copy the look keeps), knowsAll from KnowsAll, and
// the state machine's version and the count of shard events: nil when
// the last full look found no owner to move, nothing it read changed since,
// and none of its owners is gone, drained, or can be silent now (its lease
// rounds stopped): this look would find nothing either. Reconcile task
// only.
func (c *Controller) Owners(v *View, now time.Time, rounds map[string]time.Time, knowsAll bool, version, events uint64) *OwnerLook {
	l := &OwnerLook{c: c, v: v, now: now, rounds: rounds, knowsAll: knowsAll, version: version, events: events}
	c.mu.Lock()
	m := c.owners.memo
	c.mu.Unlock()
	if m.valid && m.version == version && m.events == events {
		quiet := true
		for id := range m.owners {
			if v.Gone(id, knowsAll) || v.Drained[id] || (id != c.cfg.Self && now.Sub(rounds[id]) > c.silentFor()) {
				quiet = false
				break
			}
		}
		if quiet {
			return nil
		}
	}
	l.owners = make(map[string]bool)
	return l
}

// ShardOwners judges the owners of one shard this node leads.
type ShardOwners struct {
	l       *OwnerLook
	leads   bool
	since   time.Time
	lastAsk map[string]time.Time
}

// Shard judges the owners of one shard this node leads: leads and since
// are its leadership as the node's duties know it, lastAsk when each owner
// last asked this node for a lease on the shard (read under the shard's
// lock, which the caller holds while it uses the judge).
func (l *OwnerLook) Shard(leads bool, since time.Time, lastAsk map[string]time.Time) ShardOwners {
	return ShardOwners{l: l, leads: leads, since: since, lastAsk: lastAsk}
}

// Moves notes owner id and reports whether its topics move: the predicate
// of meta.State.AnyOwner, which spares the common case a sorted list of
// the owners.
func (s ShardOwners) Moves(id string) bool {
	s.l.owners[id] = true
	if s.Why(id) == Stays {
		return false
	}
	s.l.found = true
	return true
}

// Why says why owner id's topics move off it, if they do: gone before
// drained before silent.
func (s ShardOwners) Why(id string) Reason {
	l := s.l
	switch {
	case l.v.Gone(id, l.knowsAll):
		return Gone
	case l.v.Drained[id]:
		return Drained
	case s.leads && id != l.c.cfg.Self && isSilent(l.now, l.c.silentFor(), s.since, s.lastAsk[id], l.rounds[id]):
		return Silent
	}
	return Stays
}

// Done ends the look: the next one may be left out while nothing it read
// changes, if this one found no owner to move.
func (l *OwnerLook) Done() {
	l.c.mu.Lock()
	l.c.owners.memo = ownersMemo{valid: !l.found, version: l.version, events: l.events, owners: l.owners}
	l.c.mu.Unlock()
}

// BeginReassign marks n proposals of moves in shard in flight, and reports
// whether none was: a shard has one batch of moves in flight at a time,
// and while it does, its leadership stays here (holdsBack).
func (c *Controller) BeginReassign(shard uint64, n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reassigning[shard] > 0 {
		return false
	}
	c.reassigning[shard] = n
	return true
}

// Reassigned reports that one proposal of moves in shard was answered.
func (c *Controller) Reassigned(shard uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reassigning[shard]--; c.reassigning[shard] <= 0 {
		delete(c.reassigning, shard)
	}
}
