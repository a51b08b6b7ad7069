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
	"fmt"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
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
	// Window bounds the messages sent to one node and not yet
	// acknowledged (or dropped); more wait, in the order they became due,
	// until one of those ends. An owner handed thousands of topics at once
	// takes them as fast as it can answer, rather than being sent each
	// again and again while it works through the first copies. 0:
	// DefaultWindow.
	Window int
}

// DefaultWindow is Config.Window's default.
const DefaultWindow = 1024

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
	case c.Window < 0:
		return fmt.Errorf("duty: Window %d is negative", c.Window)
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
	// inWindow: sent and counted in Leader.inflight of its node; waiting:
	// due, but held in Leader.waiting of its node for room in the window
	// (then it has no live entry in Leader.queue).
	inWindow, waiting bool
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
	// resend: what its predecessors may have owed is owed again from
	// resendAt (TakeUp), except to the nodes in verified (Verified).
	resend   bool
	resendAt time.Time
	verified map[string]bool
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
	// inflight: per node, the messages sent and not yet ended (at most
	// Config.Window); waiting: per node, the messages due that wait for
	// room, in the order they became due (entries no longer waiting are
	// skipped).
	inflight map[string]int
	waiting  map[string][]*RPC
	// roomMade: a message left a window others wait for since the last
	// makeRoom.
	roomMade bool
	vrounds  map[uint64]*vouchRound
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
	// resends counts the led shards whose resend is pending (TakeUp).
	resends int
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
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	return &Leader{cfg: cfg, led: make(map[uint64]*led), voters: make(map[uint64]voters),
		rpcs: make(map[string]*RPC), byReq: make(map[uint64]string), byShard: make(map[uint64]map[*RPC]struct{}),
		nextReq: 1 << 62, vrounds: make(map[uint64]*vouchRound), released: make(map[string]bool),
		gatedBy: make(map[string][]*RPC), demanded: make(map[uint64]struct{}),
		inflight: make(map[string]int), waiting: make(map[string][]*RPC),
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
	if s.resend {
		l.resends--
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
