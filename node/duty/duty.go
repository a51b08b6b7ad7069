// Package duty is a shard leader's half of Shoal's ownership protocol
// (docs/leases.md), as a core with no I/O: which shards this node leads and
// whether it may grant leases on them, the OpenTopic and CloseTopic
// messages it owes topic owners, and the fences that hold a topic's new
// owner back until every earlier owner has stopped serving it.
//
// A leader grants a lease on a shard only while
//   - its state is current: it applied every entry committed before its
//     term (a read index or a commit at its term proved it), so it never
//     grants from an assignment its predecessors already changed; and
//   - its leadership is confirmed: a quorum of the shard's voters showed
//     that it still led at its term at some moment at most
//     Config.ConfirmFresh ago (a commit or read index at its term, or a
//     vouch round: every voter that vouches follows it at that term, and a
//     later leader needs the vote of one of them, given after the vouch).
//
// So every grant of a deposed leader was made at most ConfirmFresh (on its
// clock) after a moment its successor was elected after. A new leader
// therefore waits NewLeaderWait before it opens a topic to an owner that
// may not be its only holder, and a leader that moved or revoked a topic
// during its own term waits, for each earlier owner, until that owner
// acknowledged the close or the last lease it granted it has run out
// (OwnGrantWait after it computed the grant). Both waits allow for clocks
// that run at rates up to Config.MaxDrift apart.
//
// A Leader is not safe for concurrent use; it reads no clock.
package duty

import (
	"cmp"
	"container/heap"
	"fmt"
	"maps"
	"math/bits"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// Config configures a Leader.
type Config struct {
	// Self is this node's raft id (replica ids are node ids).
	Self uint64
	// Lease is the lease length holders use. Required.
	Lease time.Duration
	// ConfirmFresh is how old a leadership confirmation may be for a grant
	// to rely on it. Required.
	ConfirmFresh time.Duration
	// MaxDrift bounds how far the rate of any node's clock may be from true
	// time, as a fraction (0.01: 1%). Must be in [0, 0.1].
	MaxDrift float64
	// Resend is how often an unacknowledged OpenTopic or CloseTopic is sent
	// again. Required.
	Resend time.Duration
}

// OwnGrantWait is how long after computing a grant this leader waits
// before it counts the grant as run out: Lease·(1+d)/(1−d).
func (c *Config) OwnGrantWait() time.Duration { return stretch(c.Lease, c.MaxDrift) }

// NewLeaderWait is how long a new leader waits before it counts every
// grant of its predecessors as run out: (ConfirmFresh+Lease)·(1+d)/(1−d).
func (c *Config) NewLeaderWait() time.Duration {
	return stretch(c.ConfirmFresh+c.Lease, c.MaxDrift)
}

func stretch(d time.Duration, drift float64) time.Duration {
	return time.Duration(float64(d)*(1+drift)/(1-drift)) + time.Millisecond
}

func (c *Config) validate() error {
	switch {
	case c.Lease <= 0, c.ConfirmFresh <= 0, c.Resend <= 0:
		return fmt.Errorf("duty: Lease, ConfirmFresh and Resend must be positive")
	case c.MaxDrift < 0 || c.MaxDrift > 0.1:
		return fmt.Errorf("duty: MaxDrift %v not in [0, 0.1]", c.MaxDrift)
	case c.Self == 0:
		return fmt.Errorf("duty: Self required")
	}
	return nil
}

// RPC is an OpenTopic (Open) or CloseTopic a leader owes a node.
type RPC struct {
	Node       string
	Open       bool
	Topic      string
	Epoch      uint64
	Partitions uint32
	Shard      uint64
	Term       uint64
	ReqID      uint64
	// Prev: on an Open, the owner whose records the new owner pulls.
	Prev string
	// Revoked: on a Close, the topic was revoked (its records go).
	Revoked bool
	// fresh: an Open of a topic nobody held before; never gated.
	fresh  bool
	sentAt time.Time
	sent   bool
	tries  int    // times sent
	k      string // key in Leader.rpcs
	wseq   uint64 // the seq of its live entry in Leader.queue
}

type fence struct {
	node     string
	epoch    uint64
	deadline time.Time
}

type led struct {
	term        uint64
	since       time.Time
	current     bool
	confirmedAt time.Time
	demand      time.Time
	fences      map[string][]fence // topic → earlier owners not yet fenced
}

type voters struct {
	in, out []uint64
}

type vouchRound struct {
	at     time.Time
	shards []vshard                // the shards asked about, sorted (none in a round by summaries alone)
	led    map[uint64]wire.Summary // voter → the summary it was asked
	listed map[uint64]bool         // voters asked with the list, not only the summary
	// version is ledVersion when the round was built; shared: the voters
	// that said they share their summary.
	version uint64
	shared  map[uint64]bool
}

// Leader is one node's duties as the leader of some shards.
type Leader struct {
	cfg     Config
	led     map[uint64]*led
	voters  map[uint64]voters
	rpcs    map[string]*RPC // node + "\x00" + topic
	byReq   map[uint64]string
	byShard map[uint64]map[*RPC]struct{}
	nextReq uint64
	// vouchMatched: per voter, the last summary it said it shares.
	vouchMatched map[uint64]wire.Summary
	// demanded: led shards someone asked a lease of (see led.demand);
	// vouch rounds look at these only.
	demanded map[uint64]struct{}
	// queue holds every owed message at the time Due should look at it
	// next: at once for a new one, when its resend is due, or when the
	// wait that holds back an Open ends. A pass costs the messages due,
	// not the messages owed. Entries are invalidated lazily (RPC.wseq).
	queue wakeQueue
	wseq  uint64
	// gatedBy: Opens found held back, by topic; a close acknowledged or a
	// node released looks at them again at once.
	gatedBy map[string][]*RPC
	vrounds map[uint64]*vouchRound
	// ledVersion counts changes of leaderships, terms and voters; sums
	// (VouchAsk.Led per voter) was computed at sumsAt.
	ledVersion, sumsAt uint64
	sums               map[uint64]wire.Summary
	// sumsCover: how many led shards the sums cover (those with a voter
	// besides this node).
	sumsCover int
	// allAt: every led shard was confirmed at allAt, by a vouch round
	// built at ledVersion allVersion whose every voter shared its summary
	// (each voter follows this node in every shard it votes in, at the
	// terms summed). It holds for every shard while ledVersion is still
	// allVersion.
	allAt      time.Time
	allVersion uint64
	// lastVround: the last vouch round built; a round by summaries alone
	// follows only a round every voter answered by sharing its summary.
	lastVround *vouchRound
	// nonCurrent counts the led shards whose state is not yet current.
	nonCurrent int
	// demandAll: when a lease of every led shard was last asked at once
	// (GrantAll); lastDemand: when any lease was last asked.
	demandAll, lastDemand time.Time
	// released: nodes that gave up every topic they held; none needs
	// fencing until it holds something again (an Open was sent to it, or
	// it asked for a lease without saying it is released).
	released map[string]bool
	// inv is what the invariant checks compare against (invariants.go);
	// only builds with invariants use it.
	inv leaderCheck
}

// New returns a Leader that leads nothing.
func New(cfg Config) (*Leader, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Leader{cfg: cfg, led: make(map[uint64]*led), voters: make(map[uint64]voters),
		rpcs: make(map[string]*RPC), byReq: make(map[uint64]string), byShard: make(map[uint64]map[*RPC]struct{}),
		nextReq: 1 << 62, vrounds: make(map[uint64]*vouchRound), released: make(map[string]bool),
		gatedBy: make(map[string][]*RPC), demanded: make(map[uint64]struct{}),
		vouchMatched: make(map[uint64]wire.Summary)}, nil
}

// Config returns the configuration.
func (l *Leader) Config() Config { return l.cfg }

// Won records that this node became shard's leader at term at now. Until
// Current, it grants nothing.
func (l *Leader) Won(now time.Time, shard, term uint64) {
	if invariants.Enabled {
		defer l.inv.after(l, "won")
	}
	if cur := l.led[shard]; cur != nil && cur.term == term {
		return
	}
	l.Lost(shard)
	l.led[shard] = &led{term: term, since: now, fences: make(map[string][]fence)}
	l.ledVersion++
	l.nonCurrent++
}

// Lost records that this node no longer leads shard: what it owed there is
// dropped (its successor owes it now), and it grants nothing more.
func (l *Leader) Lost(shard uint64) {
	if invariants.Enabled {
		defer l.inv.after(l, "lost")
	}
	s := l.led[shard]
	if s == nil {
		return
	}
	l.ledVersion++
	if !s.current {
		l.nonCurrent--
	}
	delete(l.led, shard)
	for r := range l.byShard[shard] {
		l.drop(r.k, r)
	}
}

// Leads returns the term at which this node leads shard.
func (l *Leader) Leads(shard uint64) (uint64, bool) {
	if s := l.led[shard]; s != nil {
		return s.term, true
	}
	return 0, false
}

// LedTerms returns the shards this node leads, each at its term, sorted.
func (l *Leader) LedTerms() []wire.ShardTerm {
	out := make([]wire.ShardTerm, 0, len(l.led))
	for shard, s := range l.led {
		out = append(out, wire.ShardTerm{Shard: shard, Term: s.term})
	}
	slices.SortFunc(out, func(a, b wire.ShardTerm) int { return cmp.Compare(a.Shard, b.Shard) })
	return out
}

// Since returns when this node became shard's leader.
func (l *Leader) Since(shard uint64) (time.Time, bool) {
	if s := l.led[shard]; s != nil {
		return s.since, true
	}
	return time.Time{}, false
}

// Current records that this node's state of shard holds every entry
// committed before term.
func (l *Leader) Current(shard, term uint64) {
	if s := l.led[shard]; s != nil && s.term == term && !s.current {
		s.current = true
		l.nonCurrent--
	}
}

// Confirm records that a quorum showed at time at that this node led
// shard at term (at is when the proof started: a proposal or read index
// was handed to raft).
func (l *Leader) Confirm(shard, term uint64, at time.Time) {
	if s := l.led[shard]; s != nil && s.term == term && at.After(s.confirmedAt) {
		s.confirmedAt = at
	}
}

// SetVoters records shard's voters (and the outgoing voters of a joint
// configuration), by raft id.
func (l *Leader) SetVoters(shard uint64, in, out []uint64) {
	if cur, ok := l.voters[shard]; ok && slices.Equal(cur.in, in) && slices.Equal(cur.out, out) {
		return
	}
	l.ledVersion++
	if len(in) == 0 && len(out) == 0 {
		delete(l.voters, shard)
		return
	}
	l.voters[shard] = voters{in: in, out: out}
}

// CanGrant reports whether this node may grant leases on shard at now,
// and at which term. It also records the demand, which keeps the shard's
// leadership confirmed by vouch rounds.
func (l *Leader) CanGrant(now time.Time, shard uint64) (uint64, bool) {
	s := l.led[shard]
	if s == nil {
		return 0, false
	}
	s.demand, l.lastDemand = now, now
	l.demanded[shard] = struct{}{}
	if !s.current {
		return s.term, false
	}
	if !s.confirmedAt.IsZero() && now.Sub(s.confirmedAt) <= l.cfg.ConfirmFresh {
		return s.term, true
	}
	if l.allFresh(now) {
		if vs, ok := l.voters[shard]; ok && l.hasOtherVoter(vs) {
			return s.term, true
		}
	}
	return s.term, false
}

// Version returns a counter of changes of leaderships, terms and voters:
// GrantAll answers for the shards LedTerms returned at that version.
func (l *Leader) Version() uint64 { return l.ledVersion }

// GrantAll reports whether, at now, leases may be granted on every shard
// this node leads, each at its term, as LedTerms listed them at version
// (that is, nothing changed since): every led state is current and a vouch
// round whose every voter shared its summary confirmed them all at most
// ConfirmFresh ago. It records the demand of every led shard. It costs
// O(1): an owner whose summary matched is answered without looking at its
// shards one by one.
func (l *Leader) GrantAll(now time.Time, version uint64) bool {
	l.lastDemand, l.demandAll = now, now
	if version != l.ledVersion || l.nonCurrent != 0 || !l.allFresh(now) {
		return false
	}
	l.ledSums()
	return l.sumsCover == len(l.led)
}

// allFresh reports whether the confirmation of every led shard with
// another voter (allAt) still holds at now.
func (l *Leader) allFresh(now time.Time) bool {
	return !l.allAt.IsZero() && l.allVersion == l.ledVersion && now.Sub(l.allAt) <= l.cfg.ConfirmFresh
}

func (l *Leader) hasOtherVoter(vs voters) bool {
	for _, v := range vs.in {
		if v != l.cfg.Self {
			return true
		}
	}
	for _, v := range vs.out {
		if v != l.cfg.Self {
			return true
		}
	}
	return false
}

// VouchAsk is a vouch round's question to one voter.
type VouchAsk struct {
	// Led sums every shard this node leads of which the voter is a voter:
	// meta.ShardSummary(shard, term, 0).
	Led wire.Summary
	// Vouch lists the shards to vouch for (those someone asked a lease
	// of) at their terms, unless the voter said, answering an earlier
	// round with the same Led, that it follows this node in exactly those
	// shards: then the summary alone asks.
	Vouch []wire.ShardTerm
}

// VouchRound starts vouch round seq (the caller's round number, which the
// answers echo; it must rise) at now, for the led shards someone asked a
// lease of within the last lease: what to ask each other voter. Nothing is
// asked when no lease was.
//
// When every voter shared its summary in the last round, and nothing led
// changed since, the round asks each voter by its summary alone, for
// every led shard at once, and costs O(voters); a shared answer from every
// voter then confirms every led shard (allAt). Otherwise it lists the
// shards (every led shard while leases of all of them are asked at once,
// else those asked one by one) to the voters that did not share their
// summary, and counts vouches shard by shard.
func (l *Leader) VouchRound(now time.Time, seq uint64) map[uint64]*VouchAsk {
	for s, r := range l.vrounds {
		if now.Sub(r.at) > l.cfg.ConfirmFresh {
			delete(l.vrounds, s)
		}
	}
	if l.lastDemand.IsZero() || now.Sub(l.lastDemand) > l.cfg.Lease {
		clear(l.demanded)
		return nil
	}
	sums := l.ledSums()
	if last := l.lastVround; last != nil && last.version == l.ledVersion && len(sums) > 0 && len(last.shared) == len(sums) {
		rd := l.newVouchRound(now, seq)
		asks := make(map[uint64]*VouchAsk, len(sums))
		for v, sum := range sums {
			asks[v] = &VouchAsk{Led: sum}
			rd.led[v] = sum
		}
		return asks
	}
	var rd *vouchRound
	add := func(shard uint64, s *led) {
		vs, ok := l.voters[shard]
		if !ok {
			return
		}
		if rd == nil {
			rd = l.newVouchRound(now, seq)
		}
		v := vshard{shard: shard, term: s.term, vs: vs}
		v.ack(l.cfg.Self)
		rd.shards = append(rd.shards, v)
	}
	if !l.demandAll.IsZero() && now.Sub(l.demandAll) <= l.cfg.Lease {
		for _, shard := range slices.Sorted(maps.Keys(l.led)) {
			add(shard, l.led[shard])
		}
	} else {
		for _, shard := range slices.Sorted(maps.Keys(l.demanded)) {
			s := l.led[shard]
			if s == nil || s.demand.IsZero() || now.Sub(s.demand) > l.cfg.Lease {
				delete(l.demanded, shard)
				continue
			}
			add(shard, s)
		}
	}
	if rd == nil {
		return nil
	}
	asks := make(map[uint64]*VouchAsk)
	for i := range rd.shards {
		l.eachVoter(rd.shards[i].vs, func(v uint64) {
			a := asks[v]
			if a == nil {
				a = &VouchAsk{Led: sums[v]}
				asks[v] = a
				rd.led[v] = a.Led
				m, ok := l.vouchMatched[v]
				rd.listed[v] = !ok || m != a.Led
			}
			if rd.listed[v] {
				a.Vouch = append(a.Vouch, wire.ShardTerm{Shard: rd.shards[i].shard, Term: rd.shards[i].term})
			}
		})
	}
	return asks
}

// newVouchRound records vouch round seq, built at now, as the last one.
func (l *Leader) newVouchRound(now time.Time, seq uint64) *vouchRound {
	rd := &vouchRound{at: now, led: make(map[uint64]wire.Summary), listed: make(map[uint64]bool),
		version: l.ledVersion, shared: make(map[uint64]bool)}
	l.vrounds[seq], l.lastVround = rd, rd
	return rd
}

// ledSums returns, for every voter of a shard this node leads, the
// summary of those shards at their terms (VouchAsk.Led), computed again
// only when a leadership or a configuration changed.
func (l *Leader) ledSums() map[uint64]wire.Summary {
	if l.sums != nil && l.sumsAt == l.ledVersion {
		return l.sums
	}
	sums := make(map[uint64]wire.Summary)
	l.sumsCover = 0
	for shard, s := range l.led {
		vs, ok := l.voters[shard]
		if !ok || !l.hasOtherVoter(vs) {
			continue
		}
		l.sumsCover++
		share := meta.ShardSummary(shard, s.term, 0)
		l.eachVoter(vs, func(v uint64) {
			sum := sums[v]
			sum.Count++
			sum.Digest ^= share
			sums[v] = sum
		})
	}
	l.sums, l.sumsAt = sums, l.ledVersion
	return sums
}

// eachVoter calls fn once for every voter of vs but this node.
func (l *Leader) eachVoter(vs voters, fn func(v uint64)) {
	for _, v := range vs.in {
		if v != l.cfg.Self {
			fn(v)
		}
	}
	for _, v := range vs.out {
		if v != l.cfg.Self && !slices.Contains(vs.in, v) {
			fn(v)
		}
	}
}

// Vouched takes node from's (a raft id) answer to vouch round seq: the
// shards it follows this node in, at the terms asked. all: it follows this
// node in every shard the round's summary stood for, so it vouches for
// every shard the round asked it about. again reports that the round
// asked by its summary alone and the voter's state sums otherwise: it
// vouched for nothing, and the next round lists the shards.
func (l *Leader) Vouched(from, seq uint64, shards []uint64, all bool) (again bool) {
	rd := l.vrounds[seq]
	if rd == nil {
		return false
	}
	led, asked := rd.led[from]
	if !asked {
		return false
	}
	if all {
		l.vouchMatched[from] = led
		rd.shared[from] = true
		for i := range rd.shards {
			if v := &rd.shards[i]; v.vs.has(from) {
				l.vouch(rd, v, from)
			}
		}
		if rd.version == l.ledVersion && len(rd.shared) == len(l.ledSums()) && rd.at.After(l.allAt) {
			l.allAt, l.allVersion = rd.at, rd.version
		}
		return false
	}
	delete(l.vouchMatched, from)
	if !rd.listed[from] {
		return true // asked by the summary alone, which the voter does not share
	}
	for _, shard := range shards {
		i, found := slices.BinarySearchFunc(rd.shards, shard, func(v vshard, s uint64) int { return cmp.Compare(v.shard, s) })
		if found && rd.shards[i].vs.has(from) {
			l.vouch(rd, &rd.shards[i], from)
		}
	}
	return false
}

// vouch counts from's vouch for v in round rd.
func (l *Leader) vouch(rd *vouchRound, v *vshard, from uint64) {
	v.ack(from)
	if v.quorum() {
		l.Confirm(v.shard, v.term, rd.at)
	}
}

// vshard is one shard of a vouch round: its voters when the round began
// and which of them vouched (bit i: vs.in[i]; bit 32+i: vs.out[i]).
type vshard struct {
	shard, term uint64
	vs          voters
	acked       uint64
}

func (v *vshard) ack(voter uint64) {
	for i, x := range v.vs.in {
		if x == voter && i < 32 {
			v.acked |= 1 << i
		}
	}
	for i, x := range v.vs.out {
		if x == voter && i < 32 {
			v.acked |= 1 << (32 + i)
		}
	}
}

// quorum reports whether a majority of the voters vouched (of both sets
// of a joint configuration).
func (v *vshard) quorum() bool {
	in := bits.OnesCount32(uint32(v.acked)) > len(v.vs.in)/2
	return in && (len(v.vs.out) == 0 || bits.OnesCount32(uint32(v.acked>>32)) > len(v.vs.out)/2)
}

func (vs voters) has(id uint64) bool {
	return slices.Contains(vs.in, id) || slices.Contains(vs.out, id)
}

func key(node, topic string) string { return node + "\x00" + topic }

func (l *Leader) add(r *RPC) {
	k := key(r.Node, r.Topic)
	if old := l.rpcs[k]; old != nil {
		if old.Epoch > r.Epoch {
			return
		}
		l.drop(k, old)
	}
	l.nextReq++
	r.ReqID = l.nextReq
	r.k = k
	l.rpcs[k] = r
	l.byReq[r.ReqID] = k
	m := l.byShard[r.Shard]
	if m == nil {
		m = make(map[*RPC]struct{})
		l.byShard[r.Shard] = m
	}
	m[r] = struct{}{}
	l.schedule(r, time.Time{})
}

func (l *Leader) drop(k string, r *RPC) {
	if l.rpcs[k] != r {
		return
	}
	delete(l.rpcs, k)
	delete(l.byReq, r.ReqID)
	if m := l.byShard[r.Shard]; m != nil {
		delete(m, r)
		if len(m) == 0 {
			delete(l.byShard, r.Shard)
		}
	}
}

// schedule makes Due look at r at time at (zero: at once); an earlier
// entry of r no longer counts.
func (l *Leader) schedule(r *RPC, at time.Time) {
	l.wseq++
	r.wseq = l.wseq
	heap.Push(&l.queue, wake{at: at, seq: l.wseq, r: r})
}

// wakeGated makes Due look again at once at the held-back Opens of topic
// (of every topic if all).
func (l *Leader) wakeGated(topic string, all bool) {
	wakeList := func(rs []*RPC) {
		for _, r := range rs {
			if l.rpcs[r.k] == r {
				l.schedule(r, time.Time{})
			}
		}
	}
	if all {
		for _, t := range slices.Sorted(maps.Keys(l.gatedBy)) {
			wakeList(l.gatedBy[t])
		}
		clear(l.gatedBy)
		return
	}
	wakeList(l.gatedBy[topic])
	delete(l.gatedBy, topic)
}

// maxResendShift bounds the resend backoff: an unacknowledged message is
// sent again after Resend, 2·Resend, 4·Resend, then every 8·Resend, so a
// slow owner is not buried under copies of what it has not yet taken.
const maxResendShift = 3

// wake is one entry of the queue.
type wake struct {
	at  time.Time
	seq uint64
	r   *RPC
}

// wakeQueue is a min-heap of wakes by (at, seq).
type wakeQueue []wake

func (q wakeQueue) Len() int { return len(q) }
func (q wakeQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q wakeQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *wakeQueue) Push(x any)   { *q = append(*q, x.(wake)) }
func (q *wakeQueue) Pop() any {
	old := *q
	w := old[len(old)-1]
	old[len(old)-1] = wake{}
	*q = old[:len(old)-1]
	return w
}

// Effects takes the effects of commands shard applied at now. lastGrant
// returns when this node last computed a grant for a node on shard (zero:
// never); for every owner a topic left, the topic's next owner is held
// back until that owner acknowledges the close, or the lease of that grant
// runs out. Effects of a shard this node does not lead are ignored.
func (l *Leader) Effects(now time.Time, shard uint64, effs []meta.Effect, lastGrant func(node string) time.Time) {
	if invariants.Enabled {
		defer l.inv.after(l, "effects")
	}
	s := l.led[shard]
	if s == nil {
		return
	}
	for _, e := range effs {
		r := &RPC{Node: e.Node, Open: e.Kind == meta.EffectOpen, Topic: e.Topic, Epoch: e.Epoch, Partitions: e.Partitions,
			Shard: shard, Term: s.term, Prev: e.Prev, Revoked: e.Revoked, fresh: e.Fresh}
		if !r.Open {
			if l.released[e.Node] {
				continue
			}
			deadline := s.since.Add(l.cfg.NewLeaderWait())
			if g := lastGrant(e.Node); !g.IsZero() {
				if d := g.Add(l.cfg.OwnGrantWait()); d.After(deadline) {
					deadline = d
				}
			}
			s.fences[e.Topic] = append(s.fences[e.Topic], fence{node: e.Node, epoch: e.Epoch, deadline: deadline})
		}
		l.add(r)
	}
}

// Resend queues, for a shard this node just became current in, an Open of
// every active topic to its owner and a Close to its previous owner: its
// predecessor may have died before they were acknowledged. The Opens of
// topics that may have had another holder wait out NewLeaderWait.
func (l *Leader) Resend(shard uint64, topics []meta.Assignment) {
	if invariants.Enabled {
		defer l.inv.after(l, "resend")
	}
	s := l.led[shard]
	if s == nil {
		return
	}
	deadline := s.since.Add(l.cfg.NewLeaderWait())
	for _, a := range topics {
		l.add(&RPC{Node: a.Owner, Open: true, Topic: a.Topic, Epoch: a.Epoch, Partitions: a.Partitions, Shard: shard, Term: s.term,
			Prev: a.Previous, fresh: a.Epoch == 1 && a.Previous == ""})
		if a.Previous != "" {
			s.fences[a.Topic] = append(s.fences[a.Topic], fence{node: a.Previous, epoch: a.Epoch, deadline: deadline})
			l.add(&RPC{Node: a.Previous, Topic: a.Topic, Epoch: a.Epoch, Shard: shard, Term: s.term})
		}
	}
}

// gated reports whether an Open must still wait at now: for the new
// leader's wait, or for an earlier owner of its topic; until is when the
// wait ends unless an acknowledged close ends it sooner.
func (l *Leader) gated(now time.Time, s *led, r *RPC) (until time.Time, gated bool) {
	fs := s.fences[r.Topic]
	kept := fs[:0]
	for _, f := range fs {
		if now.Before(f.deadline) {
			kept = append(kept, f)
			if f.deadline.After(until) {
				until = f.deadline
			}
		}
	}
	if len(kept) == 0 {
		delete(s.fences, r.Topic)
	} else {
		s.fences[r.Topic] = kept
	}
	if r.fresh || mutant.On(mutant.LeaseWait) {
		return time.Time{}, false
	}
	if end := s.since.Add(l.cfg.NewLeaderWait()); now.Before(end) && end.After(until) {
		until = end
	}
	return until, !until.IsZero()
}

// Due returns the messages to send at now: those never sent whose topic is
// not held back, and those unacknowledged for Config.Resend. gone reports
// nodes that will never answer (dead or left): what is owed to them is
// dropped, their fences stay until their leases run out.
func (l *Leader) Due(now time.Time, gone func(node string) bool) (out []RPC) {
	if invariants.Enabled {
		defer func() {
			l.checkDue(now, out)
			l.inv.after(l, "due")
		}()
	}
	for len(l.queue) > 0 && !l.queue[0].at.After(now) {
		w := heap.Pop(&l.queue).(wake)
		r := w.r
		if r.wseq != w.seq || l.rpcs[r.k] != r {
			continue // rescheduled, acknowledged or dropped since
		}
		s := l.led[r.Shard]
		if s == nil || s.term != r.Term || gone(r.Node) {
			l.drop(r.k, r)
			continue
		}
		if r.Open {
			if until, gated := l.gated(now, s, r); gated {
				l.gatedBy[r.Topic] = append(l.gatedBy[r.Topic], r)
				l.schedule(r, until)
				continue
			}
		}
		r.sent, r.sentAt = true, now
		r.tries++
		if r.Open {
			delete(l.released, r.Node)
		}
		out = append(out, *r)
		l.schedule(r, now.Add(l.cfg.Resend<<min(r.tries-1, maxResendShift)))
	}
	return out
}

// Next returns when the earliest queued message is due, to be sent or to
// be looked at again (a held-back open whose wait ends, a resend); ok is
// false when nothing is queued. A caller that calls Due then, rather than
// at its next periodic turn, sends a held-back open the moment its fences
// allow, not up to a period later.
func (l *Leader) Next() (at time.Time, ok bool) {
	if len(l.queue) == 0 {
		return time.Time{}, false
	}
	return l.queue[0].at, true
}

// HoldsBack reports whether this leader owes an open of a topic of shard
// that it has not sent yet (held back by a fence or by its new-leader
// wait, or not yet looked at): were it to hand the shard's leadership
// away now, the next leader would hold the open back again, for its own
// NewLeaderWait from its election.
func (l *Leader) HoldsBack(shard uint64) bool {
	for r := range l.byShard[shard] {
		if r.Open && !r.sent {
			return true
		}
	}
	return false
}

// Ack takes node from's TopicAck of request reqID. An ack from another
// node than the one asked, or about another topic, is ignored.
func (l *Leader) Ack(from string, reqID uint64, a *wire.TopicAck) {
	if invariants.Enabled {
		defer l.inv.after(l, "ack")
	}
	k, ok := l.byReq[reqID]
	if !ok {
		return
	}
	r := l.rpcs[k]
	if r.Node != from || r.Topic != string(a.Topic) {
		return
	}
	switch a.Status {
	case wire.TopicStaleTerm, wire.TopicBelowFloor:
		// A newer leader exists, or the owner closed a later epoch already:
		// this message has nothing left to do.
		l.drop(k, r)
	case wire.TopicDone:
		if a.Epoch < r.Epoch {
			return // took an older message's effect; keep sending
		}
		l.drop(k, r)
		if !r.Open {
			l.fenced(r.Shard, r.Topic, from, a.Epoch)
		}
	}
}

// fenced records that node closed topic up to epoch.
func (l *Leader) fenced(shard uint64, topic, node string, epoch uint64) {
	s := l.led[shard]
	if s == nil {
		return
	}
	fs := s.fences[topic]
	kept := fs[:0]
	for _, f := range fs {
		if f.node != node || f.epoch > epoch {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		delete(s.fences, topic)
	} else {
		s.fences[topic] = kept
	}
	l.wakeGated(topic, false)
}

// Settled reports whether, at now, every owner that topic left by a
// command at or below epoch is fenced: it acknowledged the close, or the
// last lease it may hold has run out. A move or revoke is acknowledged to
// its client only once settled, so no write at an older epoch is
// acknowledged after it. A leader in its first NewLeaderWait settles
// nothing but fresh topics (never owned before): its predecessors' grants
// may still run. When not settled, wait
// is how long until the last of those leases runs out (an ack may come
// sooner). leads is false
// when this node no longer leads shard at term: its fences are gone, and
// the next leader fences the previous owners again.
func (l *Leader) Settled(now time.Time, shard, term uint64, topic string, epoch uint64, fresh bool) (settled bool, wait time.Duration, leads bool) {
	s := l.led[shard]
	if s == nil || s.term != term {
		return false, 0, false
	}
	settled = true
	// A predecessor's grants are not all known here (only each topic's
	// last owner is fenced again): until they have all run out, no older
	// epoch can be counted as dead.
	if end := s.since.Add(l.cfg.NewLeaderWait()); now.Before(end) && !fresh {
		settled, wait = false, end.Sub(now)
	}
	for _, f := range s.fences[topic] {
		if f.epoch <= epoch && now.Before(f.deadline) {
			settled = false
			wait = max(wait, f.deadline.Sub(now))
		}
	}
	return settled, wait, true
}

// Holding records that node asked for leases without saying it released
// its topics: it may hold some again (a new life of a node that left).
func (l *Leader) Holding(node string) { delete(l.released, node) }

// Released records that node gave up every topic it held (it is leaving):
// it is fenced everywhere, and nothing more is owed to it.
func (l *Leader) Released(node string) {
	if invariants.Enabled {
		defer l.inv.after(l, "released")
	}
	l.released[node] = true
	for _, s := range l.led {
		for topic, fs := range s.fences {
			kept := fs[:0]
			for _, f := range fs {
				if f.node != node {
					kept = append(kept, f)
				}
			}
			if len(kept) == 0 {
				delete(s.fences, topic)
			} else {
				s.fences[topic] = kept
			}
		}
	}
	for k, r := range l.rpcs {
		if r.Node == node {
			l.drop(k, r)
		}
	}
	l.wakeGated("", true)
}

// Pending is the number of messages owed.
func (l *Leader) Pending() int { return len(l.rpcs) }

// Fences is the number of earlier owners not yet fenced.
func (l *Leader) Fences() int {
	n := 0
	for _, s := range l.led {
		for _, fs := range s.fences {
			n += len(fs)
		}
	}
	return n
}
