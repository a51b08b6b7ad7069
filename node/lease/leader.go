package lease

import (
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/wire"
)

// A shard leader's side: the leaderships it wins and takes up, the
// OpenTopic and CloseTopic messages its applies owe (duty.Leader), sent
// when due and resent until a TopicAck, and what its replicas vouch for.

// Follows records raft's report that this node's replica of shard follows
// lead (a raft id, 0 for none) at term: what it vouches for. It is
// recorded before raft sends anything of the round that changed it (a
// vote above all), which is what makes a vouch safe (docs/leases.md).
func (a *Agent) Follows(shard, lead, term uint64) {
	a.leadMu.Lock()
	a.replicaLead[shard] = raftLead{lead: lead, term: term}
	a.leadMu.Unlock()
}

// ReplicaLead returns the leader and term of this node's replica of shard
// as raft last reported them.
func (a *Agent) ReplicaLead(shard uint64) (lead, term uint64) {
	a.leadMu.Lock()
	defer a.leadMu.Unlock()
	rl := a.replicaLead[shard]
	return rl.lead, rl.term
}

// Leadership records that this node won shard's leadership at term (won
// true) or does not lead it.
func (a *Agent) Leadership(shard, term uint64, won bool) {
	a.dutyMu.Lock()
	if won {
		a.duty.Won(a.env.Now(), shard, term)
	} else {
		a.duty.Lost(shard)
		delete(a.leaderDue, shard)
	}
	a.dutyMu.Unlock()
}

// TakeUpLater marks the leadership of shard at term to be taken up
// (TakeUpLeaderships), if this node still leads shard at term.
func (a *Agent) TakeUpLater(shard, term uint64) {
	a.dutyMu.Lock()
	if t, ok := a.duty.Leads(shard); ok && t == term {
		a.leaderDue[shard] = true
	}
	a.dutyMu.Unlock()
}

// ConfState records the voters of this node's replica of shard, which
// vouch for its leader.
func (a *Agent) ConfState(shard uint64, voters, outgoing []uint64) {
	a.dutyMu.Lock()
	a.duty.SetVoters(shard, slices.Clone(voters), slices.Clone(outgoing))
	a.dutyMu.Unlock()
	if len(voters) == 0 {
		a.leadMu.Lock()
		delete(a.replicaLead, shard)
		a.leadMu.Unlock()
	}
}

// maxLeaderDuties bounds the leaderships being taken up at once.
const maxLeaderDuties = 32

// TakeUpLeaderships starts the duties of the leaderships this node won
// and has not taken up: a read index proves the leadership and makes the
// state current, then every topic's Open (and its previous owner's Close)
// is queued again, as the predecessor may have died before they were
// acknowledged. A failed one is retried at the next call.
func (a *Agent) TakeUpLeaderships() {
	a.dutyMu.Lock()
	var shards []uint64
	for _, s := range slices.Sorted(maps.Keys(a.leaderDue)) {
		if len(shards)+len(a.takingUp) == maxLeaderDuties {
			break
		}
		if !a.takingUp[s] {
			shards = append(shards, s)
		}
	}
	for _, s := range shards {
		delete(a.leaderDue, s)
		a.takingUp[s] = true
	}
	a.dutyMu.Unlock()
	slices.Sort(shards)
	for _, s := range shards {
		a.takeUp(s, func(ok bool) {
			a.dutyMu.Lock()
			delete(a.takingUp, s)
			if _, leads := a.duty.Leads(s); !ok && leads {
				a.leaderDue[s] = true
			}
			a.dutyMu.Unlock()
		})
	}
}

func (a *Agent) takeUp(shard uint64, done func(ok bool)) {
	term, ok := a.LeadsAt(shard)
	if !ok {
		done(true)
		return
	}
	start := a.env.Now()
	a.env.ReadIndex(shard, func(err error) {
		if err != nil {
			done(false)
			return
		}
		a.Proof(shard, term, start)
		// A shard with no active topic owes nothing: what is applied from
		// now on owes its own messages.
		active := true
		if err := a.cfg.Machine.With(shard, func(st *meta.State) { active = st.Count() > 0 }); err != nil {
			done(false)
			return
		}
		if active {
			a.dutyMu.Lock()
			a.duty.TakeUp(a.env.Now(), shard, term)
			a.dutyMu.Unlock()
		}
		a.env.Kick(Due)
		done(true)
	})
}

// Effects takes what a run of commands applied on shard owes (the state
// machine's Config.Effects, on a raft worker): only the shard's leader
// owes the messages. lastGrant holds, for every node a Close effect
// names, when this node last computed a lease grant for it on the shard
// (see shardsm.Machine.Grant).
func (a *Agent) Effects(shard uint64, effs []meta.Effect, lastGrant map[string]time.Time) {
	// A node given a topic here counts as asking for leases from now: its
	// silence (reconcile's owners) starts when it became an owner, not at
	// the last lease it asked for before, or never.
	now := a.env.Now()
	_ = a.cfg.Machine.WithShard(shard, func(sh *shardsm.Shard) {
		for _, e := range effs {
			if e.Kind != meta.EffectOpen {
				continue
			}
			if sh.LastAsk == nil {
				sh.LastAsk = make(map[string]time.Time)
			}
			if now.After(sh.LastAsk[e.Node]) {
				sh.LastAsk[e.Node] = now
			}
		}
	})
	a.dutyMu.Lock()
	a.duty.Effects(a.env.Now(), shard, effs, func(node string) time.Time { return lastGrant[node] })
	pending := a.duty.Pending()
	a.dutyMu.Unlock()
	if pending > 0 {
		a.env.Kick(Due)
	}
}

// RunDue is the Due task: it sends the ownership messages as soon as they
// are due (off the raft worker that applied them: opening a topic on this
// node costs an fsync); messages held back by a fence, and resends, are
// sent when their time comes (nextDue), or at the next kick.
func (a *Agent) RunDue(time.Time) time.Time {
	a.sendDue()
	return a.nextDue(a.env.Now())
}

// dueWakeFloor: in lease renewal intervals, the least time between two
// looks at the ownership messages due, so that many messages due at
// slightly different times are sent together.
const dueWakeFloor = 0.05

// nextDue is when sendDue, last called at now, has work next: when the
// earliest queued ownership message is due (a held-back open whose fences
// and new-leader wait end: the topic's next owner is told then, not up to
// a renewal interval later), else a renewal interval after now; never
// sooner than dueWakeFloor after now.
func (a *Agent) nextDue(now time.Time) time.Time {
	next := now.Add(a.cfg.RenewInterval)
	a.dutyMu.Lock()
	at, ok := a.duty.Next()
	a.dutyMu.Unlock()
	if ok && at.Before(next) {
		next = at
	}
	if floor := now.Add(time.Duration(dueWakeFloor * float64(a.cfg.RenewInterval))); next.Before(floor) {
		next = floor
	}
	return next
}

// sendDue sends the ownership messages that are due.
func (a *Agent) sendDue() {
	if !a.env.Born() {
		return
	}
	gone := a.env.Gone()
	a.resendDue()
	a.dutyMu.Lock()
	due := a.duty.Due(a.env.Now(), gone)
	a.dutyMu.Unlock()
	var local []Message
	for i := range due {
		if m, ok := a.send(&due[i]); ok {
			local = append(local, m)
		}
	}
	if len(local) > 0 {
		a.queue(false, local)
	}
}

// resendDue queues, in each shard whose new leadership's resend is due
// (duty.Leader.TakeUp), what its predecessors may have owed: an Open of
// each active topic to its owner and a Close to its previous owner, but
// to the nodes whose lease requests showed they hold what the state gives
// them. Read from the state as it is now: what was applied since the
// leadership began owes its own messages already.
func (a *Agent) resendDue() {
	a.dutyMu.Lock()
	pending := a.duty.ResendsDue(a.env.Now())
	a.dutyMu.Unlock()
	for _, p := range pending {
		// This node's own holdings are known here: it needs none of its
		// own messages if it holds exactly what the state gives it.
		a.ownMu.RLock()
		mine := a.own.Digest(p.Shard)
		a.ownMu.RUnlock()
		var topics []meta.Assignment
		if err := a.cfg.Machine.With(p.Shard, func(st *meta.State) {
			if st.OwnerDigest(a.cfg.Self) == mine {
				if p.Verified == nil {
					p.Verified = make(map[string]bool)
				}
				p.Verified[a.cfg.Self] = true
			}
			for t := range st.Topics() {
				if !p.Verified[t.Owner] || t.Partitions > meta.DefaultPartitions || (t.Previous != "" && !p.Verified[t.Previous]) {
					topics = append(topics, t)
				}
			}
		}); err != nil {
			continue // still pending: the next look tries again
		}
		a.dutyMu.Lock()
		if t, ok := a.duty.Leads(p.Shard); ok && t == p.Term {
			if p.Verified[a.cfg.Self] {
				a.duty.Verified(p.Shard, p.Term, a.cfg.Self)
			}
			a.duty.Resend(p.Shard, topics)
			a.counters.resent.Add(uint64(len(topics)))
		}
		a.dutyMu.Unlock()
	}
}

// send sends one ownership message; a message to this node itself is
// returned instead (local true), to be taken with the others due.
func (a *Agent) send(r *duty.RPC) (m Message, local bool) {
	var open *wire.OpenTopic
	var closeMsg *wire.CloseTopic
	if r.Open {
		open = &wire.OpenTopic{Topic: []byte(r.Topic), Epoch: r.Epoch, Partitions: r.Partitions, Shard: r.Shard, Term: r.Term, Prev: []byte(r.Prev)}
		if r.Prev != "" {
			open.PrevSilent = a.env.PrevSilent(r.Shard, r.Prev)
		}
		a.counters.opensSent.Add(1)
	} else {
		closeMsg = &wire.CloseTopic{Topic: []byte(r.Topic), Epoch: r.Epoch, Shard: r.Shard, Term: r.Term, Revoked: r.Revoked}
		a.counters.closesSent.Add(1)
	}
	if r.Node == a.cfg.Self {
		reqID := r.ReqID
		return Message{Open: open, Close: closeMsg, From: a.cfg.Self, ReqID: reqID, Done: func(ack wire.TopicAck, ok bool) {
			if !ok {
				return
			}
			a.dutyMu.Lock()
			a.duty.Ack(a.cfg.Self, reqID, &ack)
			a.dutyMu.Unlock()
			a.RecheckSettling()
		}}, true
	}
	var f []byte
	var start int
	if open != nil {
		f, start = wire.BeginFrame(nil, wire.KindOpenTopic, r.ReqID)
		f = wire.AppendOpenTopic(f, open)
	} else {
		f, start = wire.BeginFrame(nil, wire.KindCloseTopic, r.ReqID)
		f = wire.AppendCloseTopic(f, closeMsg)
	}
	f, err := wire.EndFrame(f, start)
	if err != nil {
		return Message{}, false
	}
	_ = a.env.Send(r.Node, f)
	return Message{}, false
}

// TakeAck takes a TopicAck from node from, answering the ownership
// message it sent under reqID.
func (a *Agent) TakeAck(from string, reqID uint64, ack *wire.TopicAck) {
	a.dutyMu.Lock()
	a.duty.Ack(from, reqID, ack)
	a.dutyMu.Unlock()
	a.RecheckSettling()
	a.env.Kick(Due) // an acknowledged close may let a new owner's open go
}
