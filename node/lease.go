package node

import (
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// Lease rounds (docs/leases.md): every Config.LeaseRenewInterval this node
// sends each peer it has business with one LeaseRound, carrying its lease
// requests as a topic owner (to the shards' leaders) and its vouch
// requests as a shard leader (to the shards' voters); each answers with
// one LeaseReply. Rounds, and the rounds that arrive from peers, run on the
// lease task; replies on a task of their own.

// maxLeaseFrames bounds the LeaseRound and LeaseReply frames waiting for
// the lease tasks; past it they are dropped (the next round repeats them).
const maxLeaseFrames = 1024

// leaseFrame is a received LeaseRound or LeaseReply.
type leaseFrame struct {
	from    string
	kind    wire.Kind
	payload []byte
}

// raftLead is a hosted replica's leader and term as raft last reported
// them.
type raftLead struct {
	lead, term uint64
}

// offerLeaseFrame queues a lease frame from peer from (where netio read it:
// it copies and never blocks).
func (n *Node) offerLeaseFrame(from string, h wire.Header, frame []byte) {
	payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil)
	if err != nil {
		return
	}
	if h.Kind == wire.KindLeaseRound {
		n.roundsMu.Lock()
		n.roundsFrom[from] = n.clock()
		n.roundsMu.Unlock()
	}
	f := leaseFrame{from: from, kind: h.Kind, payload: append([]byte(nil), payload...)}
	// Rounds and replies wait apart: taking a reply may write to disk
	// (topics it closes), which must not hold up answering the peers.
	q, t := &n.leaseIn, n.leaseTask
	if h.Kind == wire.KindLeaseReply {
		q, t = &n.leaseReplies, n.leaseReplyTask
	}
	if !q.offer(f) {
		n.counters.leaseFramesDropped.Add(1)
		return
	}
	t.kick()
}

// takeLeaseReplies is the lease replies' task: it takes the replies to
// this node's lease rounds.
func (n *Node) takeLeaseReplies(time.Time) time.Time {
	for _, f := range n.leaseReplies.take() {
		n.takeLeaseFrame(f)
	}
	return time.Time{}
}

// kickLeases asks for a round soon: a topic of shard was just opened here.
// The round asks for the shards with new topics alone
// (ownership.Holder.FreshRound), unless a full one was asked for since.
func (n *Node) kickLeases(uint64) {
	if !n.leaseWant.Swap(true) {
		n.leaseTask.kick()
	}
}

// kickFullLeases asks for a full round soon: a peer's state sums
// otherwise than the summary a round sent alone, so the next lists.
func (n *Node) kickFullLeases() {
	n.leaseFull.Store(true)
	n.kickLeases(0)
}

// leaseDuty is the lease task: it answers the rounds peers sent, and runs
// this node's rounds. A full round comes every renewal interval; a kicked
// one (after opens) at most every quarter interval, so that a burst of
// opens costs a few rounds, not one each. It is a fresh round (the shards
// with new topics alone) unless a full one was asked for.
func (n *Node) leaseDuty(now time.Time) time.Time {
	for _, f := range n.leaseIn.take() {
		n.takeLeaseFrame(f)
	}
	l := &n.leaseSched
	minGap := n.cfg.LeaseRenewInterval / 4
	due := !now.Before(l.nextFull)
	wanted := n.leaseWant.Load()
	if due || (wanted && now.Sub(l.last) >= minGap) {
		n.leaseWant.Store(false)
		full := due || n.leaseFull.Load()
		n.leaseRound(full)
		l.last = now
		if full {
			l.nextFull = now.Add(n.cfg.LeaseRenewInterval)
		}
	}
	next := l.nextFull
	if n.leaseWant.Load() && l.last.Add(minGap).Before(next) {
		next = l.last.Add(minGap)
	}
	return next
}

// leaseSchedule is the lease task's own record of its rounds.
type leaseSchedule struct {
	last, nextFull time.Time
}

func (n *Node) takeLeaseFrame(f leaseFrame) {
	switch f.kind {
	case wire.KindLeaseRound:
		var m wire.LeaseRound
		if wire.DecodeLeaseRound(f.payload, &m) != nil {
			n.counters.leaseFramesBad.Add(1)
			return
		}
		reply := n.answerLeaseRound(f.from, &m)
		fr, start := wire.BeginFrame(nil, wire.KindLeaseReply, m.Seq)
		fr = wire.AppendLeaseReply(fr, reply)
		if fr, err := wire.EndFrame(fr, start); err == nil && n.net.Send(f.from, fr) == nil {
			n.counters.leaseMessagesSent.Add(1)
			n.counters.leaseBytesSent.Add(uint64(len(fr)))
		}
	case wire.KindLeaseReply:
		var r wire.LeaseReply
		if wire.DecodeLeaseReply(f.payload, &r) != nil {
			n.counters.leaseFramesBad.Add(1)
			return
		}
		n.takeLeaseReply(f.from, &r)
	}
}

// leaderOfShard is the shard's leader as this node's table knows it.
func (n *Node) leaderOfShard(shard uint64) (string, bool) {
	if shard >= uint64(n.cfg.Shards) {
		return "", false
	}
	l, _, ok := n.leaders.Get(uint32(shard))
	return l, ok && l != ""
}

// leaseRound sends this round's LeaseRound to every peer it concerns: a
// full round (every lease and vouch request) or a fresh one (leases for
// the shards with topics newly held since the last round, nothing else).
func (n *Node) leaseRound(full bool) {
	if !n.born.Load() {
		return
	}
	now := n.clock()
	var (
		seq      uint64
		reqs     map[string]*ownership.Ask
		released bool
		askIDs   map[uint64]*duty.VouchAsk
	)
	n.ownMu.Lock()
	if full {
		n.leaseFull.Store(false)
		seq, reqs, released = n.own.Round(now, n.leaderOfShard, n.leaders.Version())
	} else {
		var ok bool
		if seq, reqs, ok = n.own.FreshRound(now, n.leaderOfShard); !ok {
			n.ownMu.Unlock()
			return
		}
	}
	n.ownMu.Unlock()
	if full {
		n.dutyMu.Lock()
		askIDs = n.duty.VouchRound(now, seq)
		n.dutyMu.Unlock()
	}
	asks := make(map[string]*duty.VouchAsk, len(askIDs))
	for id, st := range askIDs {
		if name, ok := n.nameOf(id); ok {
			asks[name] = st
		}
	}
	peers := make(map[string]bool, len(reqs)+len(asks))
	for p := range reqs {
		peers[p] = true
	}
	for p := range asks {
		peers[p] = true
	}
	for _, p := range slices.Sorted(maps.Keys(peers)) {
		m := &wire.LeaseRound{Seq: seq, Released: released}
		if q := reqs[p]; q != nil {
			m.Requests, m.Held = q.Requests, q.Held
		}
		if a := asks[p]; a != nil {
			m.Vouch, m.Led = a.Vouch, a.Led
		}
		if p == n.cfg.ID {
			n.takeLeaseReply(p, n.answerLeaseRound(p, m))
			continue
		}
		f, start := wire.BeginFrame(nil, wire.KindLeaseRound, seq)
		f = wire.AppendLeaseRound(f, m)
		f, err := wire.EndFrame(f, start)
		if err != nil {
			n.log.Error("node: lease round too large", "peer", p, "err", err)
			continue
		}
		if n.net.Send(p, f) == nil {
			n.counters.leaseMessagesSent.Add(1)
			n.counters.leaseBytesSent.Add(uint64(len(f)))
		}
	}
}

// answerLeaseRound answers node from's round: grants on the shards this
// node leads and may grant, refusals with leader hints for the others,
// and vouches for the shards whose replica here follows from at the term
// it named.
func (n *Node) answerLeaseRound(from string, m *wire.LeaseRound) *wire.LeaseReply {
	reply := &wire.LeaseReply{Seq: m.Seq}
	n.dutyMu.Lock()
	if m.Released {
		n.duty.Released(from)
	} else if len(m.Requests) > 0 || m.Held.Count > 0 {
		n.duty.Holding(from)
	}
	n.dutyMu.Unlock()
	may := func(shard uint64) func(time.Time) (uint64, bool) {
		return func(now time.Time) (uint64, bool) {
			n.dutyMu.Lock()
			defer n.dutyMu.Unlock()
			return n.duty.CanGrant(now, shard)
		}
	}
	if m.Held.Count > 0 {
		n.answerHeld(from, m.Held, reply)
	}
	for _, q := range m.Requests {
		if reply.HeldMatched {
			break // answered for the summary's shards
		}
		if q.Shard >= uint64(n.cfg.Shards) {
			continue
		}
		if g, ok := n.sm.Grant(q.Shard, from, q.Digest, n.clock, may(q.Shard)); ok {
			reply.Grants = append(reply.Grants, g)
			n.counters.leaseGrants.Add(1)
			continue
		}
		n.counters.leaseRefusals.Add(1)
		f := wire.LeaseRefusal{Shard: q.Shard}
		if l, t, ok := n.leaders.Get(uint32(q.Shard)); ok {
			f.Leader, f.Term = []byte(l), t
		}
		reply.Refused = append(reply.Refused, f)
	}
	if len(m.Vouch) > 0 || m.Led.Count > 0 {
		rid := RaftID(from)
		n.leadMu.Lock()
		if m.Led.Count > 0 {
			var sum wire.Summary
			for shard, rl := range n.replicaLead {
				if rl.lead == rid {
					sum.Count++
					sum.Digest ^= meta.ShardSummary(shard, rl.term, 0)
				}
			}
			reply.LedMatched = sum == m.Led
		}
		if !reply.LedMatched {
			for _, v := range m.Vouch {
				if rl, ok := n.replicaLead[v.Shard]; ok && rl.lead == rid && rl.term == v.Term {
					reply.Vouched = append(reply.Vouched, v.Shard)
				}
			}
		}
		n.leadMu.Unlock()
	}
	return reply
}

// answerHeld answers the summary of a lease round from node from: if this
// node's state sums to the same over the shards it leads in which from
// owns topics, it answers for all of them — a grant of every one at the
// term summed, or grants and refusals one by one when some cannot be
// granted now. Each shard is read under its lock, which orders the read
// against every apply, and the grant is recorded there before the answer
// is known: an apply that moves a topic after the read counts the grant
// (a longer fence for a grant not given costs a wait, never safety).
func (n *Node) answerHeld(from string, held wire.Summary, reply *wire.LeaseReply) {
	now := n.clock()
	events := n.shardEvents.Load()
	var sum wire.Summary
	var mine []wire.ShardTerm
	var ledVersion uint64
	// An owner whose summary matched before, with no state changed and no
	// leadership moved since: the same shards, digests and terms, so the
	// shards need not be read again. The grant is recorded for the owner
	// as a whole (shardsm.Machine.GrantIfUnchanged orders it against applies).
	n.heldMu.Lock()
	c, cached := n.heldCache[from]
	n.heldMu.Unlock()
	if cached && c.sum == held && c.events == events && n.sm.GrantIfUnchanged(from, c.version, now) {
		sum, mine, ledVersion = c.sum, c.mine, c.ledVersion
	} else {
		version := n.sm.StateVersion()
		sum, mine, ledVersion = n.sumHeld(from, now)
		n.heldMu.Lock()
		if sum == held {
			n.heldCache[from] = heldSummary{version: version, events: events, sum: sum, mine: mine, ledVersion: ledVersion}
		} else {
			delete(n.heldCache, from)
		}
		n.heldMu.Unlock()
	}
	if sum != held {
		return
	}
	reply.HeldMatched = true
	// Every shard is asked (which also keeps its leadership confirmed by
	// vouch rounds); only refusals need listing. While every shard this
	// node leads may be granted, as it led them when mine was read, one
	// answer does for all.
	var refused []int
	n.dutyMu.Lock()
	if n.duty.GrantAll(now, ledVersion) {
		n.dutyMu.Unlock()
		n.counters.leaseGrants.Add(uint64(len(mine)))
		reply.HeldGranted = true
		return
	}
	for i, st := range mine {
		if term, ok := n.duty.CanGrant(now, st.Shard); !ok || term != st.Term {
			refused = append(refused, i)
		}
	}
	n.dutyMu.Unlock()
	n.counters.leaseGrants.Add(uint64(len(mine) - len(refused)))
	if len(refused) == 0 {
		reply.HeldGranted = true
		return
	}
	n.counters.leaseRefusals.Add(uint64(len(refused)))
	for i, st := range mine {
		if len(refused) > 0 && refused[0] == i {
			refused = refused[1:]
			reply.Refused = append(reply.Refused, wire.LeaseRefusal{Shard: st.Shard, Leader: []byte(n.cfg.ID), Term: st.Term})
			continue
		}
		reply.Grants = append(reply.Grants, wire.LeaseGrant{Shard: st.Shard, Term: st.Term})
	}
}

// heldSummary is a summary of an owner's shards that matched its own.
type heldSummary struct {
	version, events uint64
	ledVersion      uint64 // duty's, when mine was read
	sum             wire.Summary
	mine            []wire.ShardTerm // read only once cached
}

// sumHeld reads, under each shard's lock, the shards this node leads in
// which from owns topics, sums them as the owner does, and records a
// grant to from on each at now (before knowing whether it is given: a
// fence longer than needed costs a wait, never safety).
func (n *Node) sumHeld(from string, now time.Time) (sum wire.Summary, mine []wire.ShardTerm, ledVersion uint64) {
	n.dutyMu.Lock()
	led, ledVersion := n.duty.LedTerms(), n.duty.Version()
	n.dutyMu.Unlock()
	for _, st := range led {
		if st.Shard >= uint64(n.cfg.Shards) {
			continue
		}
		owns := false
		_ = n.sm.WithShard(st.Shard, func(sh *shardsm.Shard) {
			if sh.State.Load(from) == 0 {
				return
			}
			owns = true
			if sh.LastAsk == nil {
				sh.LastAsk = make(map[string]time.Time)
			}
			if sh.LastGrant == nil {
				sh.LastGrant = make(map[string]time.Time)
			}
			sh.LastAsk[from], sh.LastGrant[from] = now, now
			sum.Count++
			sum.Digest ^= meta.ShardSummary(st.Shard, st.Term, sh.State.OwnerDigest(from))
		})
		if owns {
			mine = append(mine, st)
		}
	}
	return sum, mine, ledVersion
}

// takeLeaseReply takes node from's answer to one of this node's rounds.
func (n *Node) takeLeaseReply(from string, r *wire.LeaseReply) {
	n.ownWrite.Lock()
	n.ownMu.Lock()
	sent, pending := n.own.RoundAt(r.Seq)
	changes, refused, again := n.own.Reply(from, r)
	n.ownMu.Unlock()
	if pending && from != n.cfg.ID {
		n.lat.leaseRound.Observe(n.clock().Sub(sent))
	}
	_ = n.persistOwnership(changes, ReasonSuperseded)
	n.ownWrite.Unlock()
	for _, f := range refused {
		if f.Shard < uint64(n.cfg.Shards) && len(f.Leader) > 0 && string(f.Leader) != from && f.Term > 0 {
			_, _ = n.leaders.Update(uint32(f.Shard), string(f.Leader), f.Term)
		}
	}
	n.dutyMu.Lock()
	if n.duty.Vouched(RaftID(from), r.Seq, r.Vouched, r.LedMatched) {
		again = true
	}
	n.dutyMu.Unlock()
	if again {
		// A summary alone asked and the peer's state sums otherwise: the
		// next round lists, and comes soon.
		n.kickFullLeases()
	}
}

// leaderProof records that a quorum showed, at a moment at or after at,
// that this node led shard at term and that its state held every entry
// committed before (a read index or a commit at that term completed).
func (n *Node) leaderProof(shard, term uint64, at time.Time) {
	n.dutyMu.Lock()
	n.duty.Current(shard, term)
	n.duty.Confirm(shard, term, at)
	n.dutyMu.Unlock()
}

// propose proposes data on shard and hands the state machine's result to
// done. A commit proves this node's leadership at the term it led at when
// it proposed, from that moment on, and that its state is current
// (leaderProof).
func (n *Node) propose(shard uint64, data []byte, done func(res any, err error)) {
	term, led := n.leadsAt(shard)
	start := n.clock()
	n.host.Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: shard, Data: data}, func(r raftmux.Result) {
		if r.Err == nil {
			n.lat.raftCommit.Observe(n.clock().Sub(start))
			if led {
				n.leaderProof(shard, term, start)
			}
		}
		done(r.Value, r.Err)
	})
}

// leaderSince returns when this node became shard's leader.
func (n *Node) leaderSince(shard uint64) (time.Time, bool) {
	n.dutyMu.Lock()
	defer n.dutyMu.Unlock()
	return n.duty.Since(shard)
}

// leadsAt returns the term at which this node leads shard, as its duties
// know it.
func (n *Node) leadsAt(shard uint64) (uint64, bool) {
	n.dutyMu.Lock()
	defer n.dutyMu.Unlock()
	return n.duty.Leads(shard)
}

// maxLeaderDuties bounds the leaderships being taken up at once.
const maxLeaderDuties = 32

// takeUpLeaderships starts the duties of the leaderships this node won
// and has not taken up: a read index proves the leadership and makes the
// state current, then every topic's Open (and its previous owner's Close)
// is queued again, as the predecessor may have died before they were
// acknowledged. A failed one is retried at the next call.
func (n *Node) takeUpLeaderships() {
	n.dutyMu.Lock()
	var shards []uint64
	for _, s := range slices.Sorted(maps.Keys(n.leaderDue)) {
		if len(shards)+len(n.takingUp) == maxLeaderDuties {
			break
		}
		if !n.takingUp[s] {
			shards = append(shards, s)
		}
	}
	for _, s := range shards {
		delete(n.leaderDue, s)
		n.takingUp[s] = true
	}
	n.dutyMu.Unlock()
	slices.Sort(shards)
	for _, s := range shards {
		n.takeUpLeadership(s, func(ok bool) {
			n.dutyMu.Lock()
			delete(n.takingUp, s)
			if _, leads := n.duty.Leads(s); !ok && leads {
				n.leaderDue[s] = true
			}
			n.dutyMu.Unlock()
		})
	}
}

func (n *Node) takeUpLeadership(shard uint64, done func(ok bool)) {
	term, ok := n.leadsAt(shard)
	if !ok {
		done(true)
		return
	}
	start := n.clock()
	n.host.Submit(raftmux.Op{Kind: raftmux.OpReadIndex, Shard: shard}, func(r raftmux.Result) {
		if r.Err != nil {
			done(false)
			return
		}
		n.leaderProof(shard, term, start)
		var topics []meta.Assignment
		if err := n.sm.With(shard, func(st *meta.State) {
			for a := range st.Topics() {
				topics = append(topics, a)
			}
		}); err != nil {
			done(false)
			return
		}
		n.dutyMu.Lock()
		if t, ok := n.duty.Leads(shard); ok && t == term {
			n.duty.Resend(shard, topics)
		}
		n.dutyMu.Unlock()
		n.kickDuty()
		done(true)
	})
}
