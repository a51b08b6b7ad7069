package lease

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/duty"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/wire"
)

// Lease rounds (docs/leases.md): every renewal interval this node sends
// each peer it has business with one LeaseRound, carrying its lease
// requests as a topic owner (to the shards' leaders) and its vouch
// requests as a shard leader (to the shards' voters); each answers with
// one LeaseReply. Rounds, and the rounds that arrive from peers, run on
// the Rounds task; replies on the Replies task.

// maxFrames bounds the LeaseRound and LeaseReply frames waiting for their
// tasks; past it they are dropped (the next round repeats them).
const maxFrames = 1024

// frame is a received LeaseRound or LeaseReply.
type frame struct {
	from    string
	kind    wire.Kind
	payload []byte
}

// frameQueue holds frames for a task, up to max of them: past it, offer
// drops and says so.
type frameQueue struct {
	mu    sync.Mutex
	items []frame
	max   int
}

// offer adds f unless the queue is full, and reports whether it did.
func (q *frameQueue) offer(f frame) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) >= q.max {
		return false
	}
	q.items = append(q.items, f)
	return true
}

// take empties the queue.
func (q *frameQueue) take() []frame {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.items
	q.items = nil
	return s
}

// roundSchedule is the Rounds task's own record of its rounds.
type roundSchedule struct {
	last, nextFull time.Time
}

// Offer queues a LeaseRound or LeaseReply frame from peer from (where the
// network read it: it copies and never blocks) for its task.
func (a *Agent) Offer(from string, h wire.Header, fr []byte) {
	payload, _, err := wire.FramePayload(&h, fr[wire.HeaderSize:], nil)
	if err != nil {
		return
	}
	if h.Kind == wire.KindLeaseRound {
		a.roundsMu.Lock()
		a.roundsFrom[from] = a.env.Now()
		a.roundsMu.Unlock()
	}
	f := frame{from: from, kind: h.Kind, payload: append([]byte(nil), payload...)}
	// Rounds and replies wait apart: taking a reply may write to disk
	// (topics it closes), which must not hold up answering the peers.
	q, t := &a.roundsIn, Rounds
	if h.Kind == wire.KindLeaseReply {
		q, t = &a.repliesIn, Replies
	}
	if !q.offer(f) {
		a.counters.framesDropped.Add(1)
		return
	}
	a.env.Kick(t)
}

// RunReplies is the Replies task: it takes the replies to this node's
// lease rounds.
func (a *Agent) RunReplies(time.Time) time.Time {
	for _, f := range a.repliesIn.take() {
		a.takeFrame(f)
	}
	return time.Time{}
}

// kickRounds asks for a round soon: a topic was just opened here. The
// round asks for the shards with new topics alone
// (ownership.Holder.FreshRound), unless a full one was asked for since.
func (a *Agent) kickRounds() {
	if !a.want.Swap(true) {
		a.env.Kick(Rounds)
	}
}

// kickFullRound asks for a full round soon: a peer's state sums
// otherwise than the summary a round sent alone, so the next lists.
func (a *Agent) kickFullRound() {
	a.full.Store(true)
	a.kickRounds()
}

// RunRounds is the Rounds task: it answers the rounds peers sent, and
// runs this node's rounds. A full round comes every renewal interval; a
// kicked one (after opens) at most every quarter interval, so that a
// burst of opens costs a few rounds, not one each. It is a fresh round
// (the shards with new topics alone) unless a full one was asked for.
func (a *Agent) RunRounds(now time.Time) time.Time {
	for _, f := range a.roundsIn.take() {
		a.takeFrame(f)
	}
	l := &a.sched
	minGap := a.cfg.RenewInterval / 4
	due := !now.Before(l.nextFull)
	wanted := a.want.Load()
	if due || (wanted && now.Sub(l.last) >= minGap) {
		a.want.Store(false)
		full := due || a.full.Load()
		a.round(full)
		l.last = now
		if full {
			l.nextFull = now.Add(a.cfg.RenewInterval)
		}
	}
	next := l.nextFull
	if a.want.Load() && l.last.Add(minGap).Before(next) {
		next = l.last.Add(minGap)
	}
	return next
}

func (a *Agent) takeFrame(f frame) {
	switch f.kind {
	case wire.KindLeaseRound:
		var m wire.LeaseRound
		if wire.DecodeLeaseRound(f.payload, &m) != nil {
			a.counters.framesBad.Add(1)
			return
		}
		reply := a.answerRound(f.from, &m)
		fr, start := wire.BeginFrame(nil, wire.KindLeaseReply, m.Seq)
		fr = wire.AppendLeaseReply(fr, reply)
		if fr, err := wire.EndFrame(fr, start); err == nil && a.env.Send(f.from, fr) == nil {
			a.counters.messagesSent.Add(1)
			a.counters.bytesSent.Add(uint64(len(fr)))
		}
	case wire.KindLeaseReply:
		var r wire.LeaseReply
		if wire.DecodeLeaseReply(f.payload, &r) != nil {
			a.counters.framesBad.Add(1)
			return
		}
		a.takeReply(f.from, &r)
	}
}

// leaderOf is the shard's leader as this node's table knows it.
func (a *Agent) leaderOf(shard uint64) (string, bool) {
	if !a.space.Valid(shard) {
		return "", false
	}
	l, _, ok := a.cfg.Leaders.Get(uint32(shard))
	return l, ok && l != ""
}

// round sends this round's LeaseRound to every peer it concerns: a full
// round (every lease and vouch request) or a fresh one (leases for the
// shards with topics newly held since the last round, nothing else).
func (a *Agent) round(full bool) {
	if !a.env.Born() {
		return
	}
	now := a.env.Now()
	var (
		seq      uint64
		reqs     map[string]*ownership.Ask
		released bool
		askIDs   map[uint64]*duty.VouchAsk
	)
	a.ownMu.Lock()
	a.splitHeld()
	if full {
		a.full.Store(false)
		seq, reqs, released = a.own.Round(now, a.leaderOf, a.cfg.Leaders.Version())
	} else {
		var ok bool
		if seq, reqs, ok = a.own.FreshRound(now, a.leaderOf); !ok {
			a.ownMu.Unlock()
			return
		}
	}
	a.ownMu.Unlock()
	if full {
		a.dutyMu.Lock()
		askIDs = a.duty.VouchRound(now, seq)
		a.dutyMu.Unlock()
	}
	asks := make(map[string]*duty.VouchAsk, len(askIDs))
	for id, st := range askIDs {
		if name, ok := a.env.NameOf(id); ok {
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
		if v := asks[p]; v != nil {
			m.Vouch, m.Led = v.Vouch, v.Led
		}
		if p == a.cfg.Self {
			a.takeReply(p, a.answerRound(p, m))
			continue
		}
		f, start := wire.BeginFrame(nil, wire.KindLeaseRound, seq)
		f = wire.AppendLeaseRound(f, m)
		f, err := wire.EndFrame(f, start)
		if err != nil {
			a.log.Error("node: lease round too large", "peer", p, "err", err)
			continue
		}
		if a.env.Send(p, f) == nil {
			a.counters.messagesSent.Add(1)
			a.counters.bytesSent.Add(uint64(len(f)))
		}
	}
}

// splitHeld moves the topics this node holds in shards that split, as
// the node's shard map knows them, to the children their keys go to
// (ownership.Holder.Split): the round asks those children's leaders. It
// looks at every round, while the map holds splits: an Open its parent's
// leader owed from before the split may arrive after the map learnt it.
// Under ownMu.
func (a *Agent) splitHeld() {
	sm := a.cfg.Leaders.Map()
	if sm.Version() == 0 {
		return // no shard split
	}
	for _, s := range a.own.HeldShards() {
		if s <= uint64(^uint32(0)) && sm.HasSplit(uint32(s)) {
			n := a.own.Split(s, func(topic string) uint64 { return uint64(sm.OfString(topic)) })
			a.log.Info("node: held topics moved to a split shard's children", "shard", s, "topics", n)
		}
	}
}

// answerRound answers node from's round: grants on the shards this node
// leads and may grant, refusals with leader hints for the others, and
// vouches for the shards whose replica here follows from at the term it
// named.
func (a *Agent) answerRound(from string, m *wire.LeaseRound) *wire.LeaseReply {
	reply := &wire.LeaseReply{Seq: m.Seq}
	a.dutyMu.Lock()
	if m.Released {
		a.duty.Released(from)
	} else if len(m.Requests) > 0 || m.Held.Count > 0 {
		a.duty.Holding(from)
	}
	a.dutyMu.Unlock()
	may := func(shard uint64) func(time.Time) (uint64, bool) {
		return func(now time.Time) (uint64, bool) {
			a.dutyMu.Lock()
			defer a.dutyMu.Unlock()
			return a.duty.CanGrant(now, shard)
		}
	}
	if m.Held.Count > 0 {
		a.answerHeld(from, m.Held, reply)
	} else if !m.Released && len(m.Requests) == 0 {
		a.verifyEmpty(from)
	}
	var exact []wire.ShardTerm // granted on a digest equal to the state's
	for _, q := range m.Requests {
		if reply.HeldMatched {
			break // answered for the summary's shards
		}
		if !a.space.Valid(q.Shard) {
			continue
		}
		if g, same, ok := a.cfg.Machine.Grant(q.Shard, from, q.Digest, a.env.Now, may(q.Shard)); ok {
			if same {
				exact = append(exact, wire.ShardTerm{Shard: q.Shard, Term: g.Term})
			}
			reply.Grants = append(reply.Grants, g)
			a.counters.grants.Add(1)
			continue
		}
		a.counters.refusals.Add(1)
		f := wire.LeaseRefusal{Shard: q.Shard}
		if l, t, ok := a.cfg.Leaders.Get(uint32(q.Shard)); ok {
			f.Leader, f.Term = []byte(l), t
		}
		reply.Refused = append(reply.Refused, f)
	}
	if len(exact) > 0 {
		a.dutyMu.Lock()
		for _, st := range exact {
			a.duty.Verified(st.Shard, st.Term, from)
		}
		a.dutyMu.Unlock()
	}
	if len(m.Vouch) > 0 || m.Led.Count > 0 {
		rid := a.cfg.RaftID(from)
		a.leadMu.Lock()
		if m.Led.Count > 0 {
			var sum wire.Summary
			for shard, rl := range a.replicaLead {
				if rl.lead == rid && !a.cfg.Machine.Ended(shard) {
					sum.Count++
					sum.Digest ^= meta.ShardSummary(shard, rl.term, 0)
				}
			}
			reply.LedMatched = sum == m.Led
		}
		if !reply.LedMatched {
			for _, v := range m.Vouch {
				if rl, ok := a.replicaLead[v.Shard]; ok && rl.lead == rid && rl.term == v.Term && !a.cfg.Machine.Ended(v.Shard) {
					reply.Vouched = append(reply.Vouched, v.Shard)
				}
			}
		}
		a.leadMu.Unlock()
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
func (a *Agent) answerHeld(from string, held wire.Summary, reply *wire.LeaseReply) {
	now := a.env.Now()
	events := a.env.ShardEvents()
	var sum wire.Summary
	var mine []wire.ShardTerm
	var ledVersion uint64
	// An owner whose summary matched before, with no state changed and no
	// leadership moved since: the same shards, digests and terms, so the
	// shards need not be read again. The grant is recorded for the owner
	// as a whole (shardsm.Machine.GrantIfUnchanged orders it against applies).
	a.heldMu.Lock()
	c, cached := a.heldCache[from]
	a.heldMu.Unlock()
	if cached && c.sum == held && c.events == events && a.cfg.Machine.GrantIfUnchanged(from, c.version, now) {
		sum, mine, ledVersion = c.sum, c.mine, c.ledVersion
	} else {
		version := a.cfg.Machine.StateVersion()
		var loaded bool
		sum, mine, ledVersion, loaded = a.sumHeld(from, now)
		if !loaded {
			// A shard this node leads is still loading: the owner's
			// summary cannot be checked yet, and it asks shard by shard.
			return
		}
		a.heldMu.Lock()
		if sum == held {
			a.heldCache[from] = heldSummary{version: version, events: events, sum: sum, mine: mine, ledVersion: ledVersion}
		} else {
			delete(a.heldCache, from)
		}
		a.heldMu.Unlock()
	}
	if sum != held {
		return
	}
	reply.HeldMatched = true
	// The sums agree: in each of these shards the owner holds exactly
	// what the state gives it, and in the other shards this node leads,
	// nothing (duty.Leader.VerifiedLed).
	var refused []int
	a.dutyMu.Lock()
	if !a.duty.VerifiedLed(ledVersion, from) {
		for _, st := range mine {
			a.duty.Verified(st.Shard, st.Term, from)
		}
	}
	// Every shard is asked (which also keeps its leadership confirmed by
	// vouch rounds); only refusals need listing. While every shard this
	// node leads may be granted, as it led them when mine was read, one
	// answer does for all.
	if a.duty.GrantAll(now, ledVersion) {
		a.dutyMu.Unlock()
		a.counters.grants.Add(uint64(len(mine)))
		reply.HeldGranted = true
		return
	}
	for i, st := range mine {
		if term, ok := a.duty.CanGrant(now, st.Shard); !ok || term != st.Term {
			refused = append(refused, i)
		}
	}
	a.dutyMu.Unlock()
	a.counters.grants.Add(uint64(len(mine) - len(refused)))
	if len(refused) == 0 {
		reply.HeldGranted = true
		return
	}
	a.counters.refusals.Add(uint64(len(refused)))
	for i, st := range mine {
		if len(refused) > 0 && refused[0] == i {
			refused = refused[1:]
			reply.Refused = append(reply.Refused, wire.LeaseRefusal{Shard: st.Shard, Leader: []byte(a.cfg.Self), Term: st.Term})
			continue
		}
		reply.Grants = append(reply.Grants, wire.LeaseGrant{Shard: st.Shard, Term: st.Term})
	}
}

// verifyEmpty takes a round from node from that asks no lease of this
// node: from holds no topic in a shard it takes this node to lead. While
// a new leadership's resend is pending, if the state gives from no topic
// in any shard this node leads, from is verified in all of them
// (duty.Leader.VerifiedLed): a node whose topics all moved away, the
// previous owner of each, is then sent no Close of them.
func (a *Agent) verifyEmpty(from string) {
	a.dutyMu.Lock()
	pending := a.duty.ResendsPending()
	a.dutyMu.Unlock()
	if !pending {
		return
	}
	sum, _, ledVersion, loaded := a.sumHeld(from, a.env.Now())
	if !loaded || sum.Count > 0 {
		return
	}
	a.dutyMu.Lock()
	a.duty.VerifiedLed(ledVersion, from)
	a.dutyMu.Unlock()
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
// fence longer than needed costs a wait, never safety). loaded is false,
// and the sum unfinished, when one of those shards is not loaded here yet
// (shardsm.Machine.Grant says why a lease answer never waits for a load).
func (a *Agent) sumHeld(from string, now time.Time) (sum wire.Summary, mine []wire.ShardTerm, ledVersion uint64, loaded bool) {
	a.dutyMu.Lock()
	led, ledVersion := a.duty.LedTerms(), a.duty.Version()
	a.dutyMu.Unlock()
	for _, st := range led {
		if !a.space.Valid(st.Shard) {
			continue
		}
		owns := false
		if !a.cfg.Machine.WithLoadedShard(st.Shard, func(sh *shardsm.Shard) {
			if sh.State.Split() || sh.State.Load(from) == 0 {
				return // a split shard gives no one anything
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
		}) {
			return sum, mine, ledVersion, false
		}
		if owns {
			mine = append(mine, st)
		}
	}
	return sum, mine, ledVersion, true
}

// takeReply takes node from's answer to one of this node's rounds.
func (a *Agent) takeReply(from string, r *wire.LeaseReply) {
	a.ownWrite.Lock()
	a.ownMu.Lock()
	sent, pending := a.own.RoundAt(r.Seq)
	changes, refused, again := a.own.Reply(from, r)
	a.ownMu.Unlock()
	if pending && from != a.cfg.Self {
		a.cfg.RoundTimes.Observe(a.env.Now().Sub(sent))
	}
	_ = a.persist(changes, Superseded)
	a.ownWrite.Unlock()
	for _, f := range refused {
		if a.space.Valid(f.Shard) && len(f.Leader) > 0 && string(f.Leader) != from && f.Term > 0 {
			_, _ = a.cfg.Leaders.Update(uint32(f.Shard), string(f.Leader), f.Term)
		}
	}
	a.dutyMu.Lock()
	if a.duty.Vouched(a.cfg.RaftID(from), r.Seq, r.Vouched, r.LedMatched) {
		again = true
	}
	a.dutyMu.Unlock()
	if again {
		// A summary alone asked and the peer's state sums otherwise: the
		// next round lists, and comes soon.
		a.kickFullRound()
	}
}
