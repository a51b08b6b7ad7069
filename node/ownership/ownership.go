// Package ownership is a topic owner's half of Shoal's ownership protocol
// (docs/leases.md), as a core with no I/O: the topics a node was told to
// own, at which epochs, and the leases under which it may serve them.
//
// A node serves a produce or fetch for a topic only while it holds the
// topic at the request's epoch (a shard leader opened it there) and a lease
// from the topic's shard leader covers the topic at that epoch. Leases are
// asked for in rounds, one message per leader node covering every shard of
// it (Round), and run for Config.Lease from the moment the round was built
// on this node's clock: a grant that arrives late, or a process that was
// paused, loses time, never gains it. A grant covers what the leader's
// state says this node owns: everything this node held when it sent the
// round (the digests matched), or only the topics the grant lists.
//
// Opens and closes carry the leader's raft term and the topic's epoch. A
// message from a lower term than the highest this node has seen for the
// shard is refused; an open at or below an epoch this node has closed (its
// floor, which the caller keeps durably and passes in) is refused; an older
// open never lowers a held epoch or partition count.
//
// The core reads no clock and keeps no files: every method takes the time
// it needs, and returns the Changes the caller must make durable before it
// acknowledges the message that caused them. A Holder is not safe for
// concurrent use.
package ownership

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/enum"
	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// Topic is how a node holds a topic.
type Topic struct {
	Epoch      uint64
	Partitions uint32
	Shard      uint64
}

// Change is one durable write a message caused. Put writes Held as the
// topic's holding, Drop deletes it (neither: unchanged); a non-zero Floor
// raises the topic's epoch floor to it.
type Change struct {
	Topic     string
	Put, Drop bool
	Held      Topic
	Floor     uint64
}

// Refusal says why a topic cannot be served; the zero value means it can.
type Refusal uint8

const (
	// Servable: held at the epoch, under an unexpired lease.
	Servable Refusal = iota
	// NotHeld: this node does not hold the topic.
	NotHeld
	// OtherEpoch: held, at another epoch than the request's.
	OtherEpoch
	// NoLease: held, but no unexpired lease covers it at that epoch.
	NoLease
	// Released: this node has given up all its topics (it is leaving).
	Released
)

var refusalNames = enum.New("Refusal", map[Refusal]string{
	Servable: "servable", NotHeld: "not held here", OtherEpoch: "held at another epoch",
	NoLease: "no unexpired lease covers it", Released: "this node is leaving",
})

func (r Refusal) String() string { return refusalNames.Name(r) }

// Config configures a Holder.
type Config struct {
	// Lease is how long a grant covers its topics, from the moment the
	// round that asked for it was built. Required.
	Lease time.Duration
	// FirstRound: rounds are numbered from FirstRound+1 on. A holder
	// that restarts must number its rounds apart from those of its
	// recent lives, so that a reply to one of those, delivered late,
	// answers no round of this life (it would count a grant from this
	// round's start, later than the grant was given). The node gives the
	// low 31 bits of its generation, shifted 32 bits up.
	FirstRound uint64
}

type held struct {
	Topic
	// since is the last round built before the topic was opened at its
	// epoch: a grant for a round after it covers it.
	since uint64
}

// lease is the newest grant of one shard.
type lease struct {
	seq     uint64
	expires time.Time
	term    uint64
	listed  map[string]uint64 // nil: covers what was held at seq
}

type shardState struct {
	topics map[string]struct{}
	digest uint64
	lease  lease
	// term is the highest term of the shard's leader this node has seen.
	term uint64
	// group is the leader group the shard was last put in (nil: none);
	// its lease covers the shard too (see group).
	group *group
}

// group is the shards of one leader as the last grouping found them:
// rounds reuse it while nothing they ask about changed (Holder.version,
// the leader table's version), so that a steady round and its grant cost
// O(leaders), not O(shards). A grant of a whole group by its summary is
// kept here once, as the lease of every shard in it; when the group is
// rebuilt the lease is copied into each shard first.
type group struct {
	shards []askedShard // sorted by shard
	held   wire.Summary
	lease  lease // listed is always nil
}

// Holder is one node's held topics and leases.
type Holder struct {
	cfg    Config
	topics map[string]*held
	shards map[uint64]*shardState
	order  []uint64 // shards' keys, sorted; nil when shards changed
	// version counts changes of what a round asks: a topic held or let
	// go, a shard's term. groups (by leader) were built at version
	// groupsAt with the leader table at groupsLeaders; nil: never.
	version                 uint64
	groups                  map[string]*group
	groupsAt, groupsLeaders uint64
	// empty: shards that held no topic when last looked at; a round
	// forgets those whose lease ran out.
	empty    map[uint64]struct{}
	seq      uint64
	pending  map[uint64]*round // by seq
	released bool
	// matched: per leader, the last summary it said its state sums to.
	matched map[string]wire.Summary
	// fresh: shards in which a topic was newly held since the last
	// round; a fresh round asks for those alone (FreshRound).
	fresh map[uint64]struct{}
	// inv is what the invariant checks compare against (invariants.go);
	// only builds with invariants use it.
	inv holderCheck
}

// round is a lease round in flight: when it was built, and what was asked
// of each leader.
type round struct {
	at    time.Time
	asked map[string]*asked
}

// asked is what a round asked of one leader: the leader's group as it
// was when the round was built.
type asked struct {
	g      *group
	listed bool // the shards were listed, not only summed
	// fresh: a fresh round's list (FreshRound); g is built for it alone
	// and no summary was sent.
	fresh bool
	// answered: the leader's answer was taken; a second one (a
	// duplicate, or a confused leader's) is ignored.
	answered bool
}

type askedShard struct {
	shard, term uint64
}

// New returns an empty Holder.
func New(cfg Config) (*Holder, error) {
	if cfg.Lease <= 0 {
		return nil, fmt.Errorf("ownership: lease %v must be positive", cfg.Lease)
	}
	return &Holder{cfg: cfg, seq: cfg.FirstRound, topics: make(map[string]*held), shards: make(map[uint64]*shardState), pending: make(map[uint64]*round),
		matched: make(map[string]wire.Summary), empty: make(map[uint64]struct{}), fresh: make(map[uint64]struct{})}, nil
}

func (h *Holder) shard(s uint64) *shardState {
	st := h.shards[s]
	if st == nil {
		st = &shardState{topics: make(map[string]struct{})}
		h.shards[s] = st
		h.order = nil
		h.empty[s] = struct{}{}
	}
	return st
}

func (h *Holder) hold(topic string, t Topic) {
	if old := h.topics[topic]; old != nil {
		h.unhold(topic, old)
	}
	st := h.shard(t.Shard)
	h.version++
	st.topics[topic] = struct{}{}
	st.digest ^= meta.TopicDigest(topic, t.Epoch)
	h.topics[topic] = &held{Topic: t, since: h.seq}
	h.fresh[t.Shard] = struct{}{}
}

func (h *Holder) unhold(topic string, old *held) {
	st := h.shards[old.Shard]
	h.version++
	delete(st.topics, topic)
	if len(st.topics) == 0 {
		h.empty[old.Shard] = struct{}{}
	}
	st.digest ^= meta.TopicDigest(topic, old.Epoch)
	delete(h.topics, topic)
}

// Split moves the topics held in shard parent, which split, to the shards
// child names for them, each held as before. A child's shard takes the
// parent's lease when it is newer than its own: the split changed no
// owner and no epoch, so a grant of the parent covers the topics for as
// long as it runs (the children's leaders, new leaders, open no moved
// topic before every grant of the parent ran out). The moves are not
// stored: a topic's shard is the map's, and a restart moves them again
// once its map knows the split. It reports how many topics moved.
func (h *Holder) Split(parent uint64, child func(topic string) uint64) int {
	st := h.shards[parent]
	if st == nil || len(st.topics) == 0 {
		return 0
	}
	l := *st.current()
	if l.listed != nil {
		l.listed = maps.Clone(l.listed)
	}
	topics := slices.Sorted(maps.Keys(st.topics))
	for _, topic := range topics {
		t := h.topics[topic]
		c := child(topic)
		if c == parent {
			continue
		}
		since := t.since
		h.unhold(topic, t)
		moved := t.Topic
		moved.Shard = c
		cs := h.shard(c)
		if cur := cs.current(); cur.seq < l.seq || (cur.seq == l.seq && cur.expires.Before(l.expires)) {
			cs.lease = l
		}
		h.version++
		cs.topics[topic] = struct{}{}
		cs.digest ^= meta.TopicDigest(topic, moved.Epoch)
		h.topics[topic] = &held{Topic: moved, since: since}
	}
	if invariants.Enabled {
		h.inv.after(h, "split")
	}
	return len(topics)
}

// HeldShards returns the shards this node holds topics of, in ascending
// order.
func (h *Holder) HeldShards() []uint64 {
	out := make([]uint64, 0, len(h.shards))
	for s, st := range h.shards {
		if len(st.topics) > 0 {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// Load adds a topic held before a restart. Until a grant covers it, it is
// not served.
func (h *Holder) Load(topic string, t Topic) {
	if t.Epoch > 0 && t.Partitions > 0 {
		h.hold(topic, t)
	}
}

// LoadAll loads the topics of every chunk of cs (Put changes, as a
// restart reads them from the store) as Load would one by one, with the
// maps made once at their size: a node that holds millions of topics
// loads them at start. (Chunks, so that the caller's list never copies
// itself while it grows.)
func (h *Holder) LoadAll(cs [][]Change) {
	n := 0
	perShard := make(map[uint64]int)
	for _, chunk := range cs {
		n += len(chunk)
		for _, c := range chunk {
			if c.Held.Epoch > 0 && c.Held.Partitions > 0 {
				perShard[c.Held.Shard]++
			}
		}
	}
	if len(h.topics) == 0 && n > 0 {
		h.topics = make(map[string]*held, n)
	}
	for s, n := range perShard {
		if h.shards[s] == nil {
			h.shards[s] = &shardState{topics: make(map[string]struct{}, n)}
			h.order = nil
			h.empty[s] = struct{}{}
		}
	}
	for _, chunk := range cs {
		for _, c := range chunk {
			h.Load(c.Topic, c.Held)
		}
	}
}

// Get returns how topic is held.
func (h *Holder) Get(topic []byte) (Topic, bool) {
	if t := h.topics[string(topic)]; t != nil {
		return t.Topic, true
	}
	return Topic{}, false
}

// Digest returns the digest of the topics held in shard (the XOR of
// meta.TopicDigest over them, as meta.State.OwnerDigest sums an owner's):
// 0 when none is held there.
func (h *Holder) Digest(shard uint64) uint64 {
	if st := h.shards[shard]; st != nil {
		return st.digest
	}
	return 0
}

// Count is the number of topics held.
func (h *Holder) Count() int { return len(h.topics) }

// seeTerm records a leader term of shard and reports whether it is not
// below the highest seen.
func (h *Holder) seeTerm(shard, term uint64) bool {
	st := h.shard(shard)
	if term < st.term {
		return false
	}
	if term > st.term {
		st.term = term
		h.version++
	}
	return true
}

// Open takes an OpenTopic. floor is the topic's durable epoch floor.
func (h *Holder) Open(m *wire.OpenTopic, floor uint64) (st wire.TopicStatus, epoch uint64, changes []Change) {
	if invariants.Enabled {
		pre := h.heldNow(m.Topic)
		defer func() { h.afterOpen(pre, m, floor, st, changes) }()
	}
	if !h.seeTerm(m.Shard, m.Term) {
		return wire.TopicStaleTerm, 0, nil
	}
	if m.Epoch <= floor && !mutant.On(mutant.EpochFloor) {
		return wire.TopicBelowFloor, floor, nil
	}
	topic := string(m.Topic)
	cur := h.topics[topic]
	switch {
	case cur != nil && cur.Epoch > m.Epoch:
		return wire.TopicDone, cur.Epoch, nil
	case cur != nil && cur.Epoch == m.Epoch:
		if m.Partitions <= cur.Partitions {
			return wire.TopicDone, cur.Epoch, nil
		}
		cur.Partitions = m.Partitions
		return wire.TopicDone, cur.Epoch, []Change{{Topic: topic, Put: true, Held: cur.Topic}}
	}
	t := Topic{Epoch: m.Epoch, Partitions: m.Partitions, Shard: m.Shard}
	c := Change{Topic: topic, Put: true, Held: t}
	if cur != nil {
		// The epoch held until now is over for good.
		c.Floor = cur.Epoch
	}
	h.hold(topic, t)
	return wire.TopicDone, t.Epoch, []Change{c}
}

// Close takes a CloseTopic: every epoch up to m.Epoch is closed for good.
// floor is the topic's durable epoch floor.
func (h *Holder) Close(m *wire.CloseTopic, floor uint64) (st wire.TopicStatus, closed uint64, changes []Change) {
	if invariants.Enabled {
		pre := h.heldNow(m.Topic)
		defer func() { h.afterClose(pre, m, st, closed, changes) }()
	}
	if !h.seeTerm(m.Shard, m.Term) {
		return wire.TopicStaleTerm, 0, nil
	}
	topic := string(m.Topic)
	c := Change{Topic: topic}
	if m.Epoch > floor {
		c.Floor, floor = m.Epoch, m.Epoch
	}
	if cur := h.topics[topic]; cur != nil && cur.Epoch <= m.Epoch {
		h.unhold(topic, cur)
		c.Drop = true
	}
	if !c.Drop && c.Floor == 0 {
		return wire.TopicDone, floor, nil
	}
	return wire.TopicDone, floor, []Change{c}
}

// Serve reports whether topic may be served at epoch at time now, and how
// it is held. It is the check a produce makes after its append and before
// its acknowledgement, and a fetch after its read.
func (h *Holder) Serve(now time.Time, topic []byte, epoch uint64) (Topic, Refusal) {
	if h.released {
		return Topic{}, Released
	}
	t := h.topics[string(topic)]
	if t == nil {
		return Topic{}, NotHeld
	}
	if t.Epoch != epoch {
		return t.Topic, OtherEpoch
	}
	l := h.shards[t.Shard].current()
	if !now.Before(l.expires) && !mutant.On(mutant.LeaseExpiry) {
		return t.Topic, NoLease
	}
	if l.listed == nil {
		if t.since >= l.seq {
			return t.Topic, NoLease
		}
	} else if e, ok := l.listed[string(topic)]; !ok || e != t.Epoch {
		return t.Topic, NoLease
	}
	return t.Topic, Servable
}

// LeaseExpiry returns when the lease on shard runs out (zero: none).
func (h *Holder) LeaseExpiry(shard uint64) time.Time {
	if st := h.shards[shard]; st != nil {
		return st.current().expires
	}
	return time.Time{}
}

// Ask is a lease round's question to one shard leader: every shard this
// node holds topics of and believes the leader leads.
type Ask struct {
	// Held sums the shards: meta.ShardSummary of each shard, the highest
	// term of its leader seen here, and the digest of what is held there.
	Held wire.Summary
	// Requests lists the shards with their digests, unless the leader
	// said, answering an earlier round with the same Held, that its state
	// sums to the same: then the summary alone asks for them all.
	Requests []wire.LeaseRequest
}

// Round starts a lease round at now: for every shard this node holds
// topics of, a request with the digest of what it holds there, grouped by
// the node leaderOf names as the shard's leader (shards whose leader is
// unknown are left out: their leases run out). leadersVersion must change
// whenever leaderOf may answer otherwise (the leader table's version): the
// grouping of the last round is reused while neither it nor what is held
// changed. released reports that the node has given up its topics.
func (h *Holder) Round(now time.Time, leaderOf func(shard uint64) (string, bool), leadersVersion uint64) (seq uint64, asks map[string]*Ask, released bool) {
	if invariants.Enabled {
		h.inv.roundAt(now)
		defer h.inv.after(h, "round")
	}
	h.seq++
	seq = h.seq
	for s, r := range h.pending {
		if now.Sub(r.at) >= h.cfg.Lease {
			delete(h.pending, s)
		}
	}
	if h.groups == nil || h.groupsAt != h.version || h.groupsLeaders != leadersVersion {
		h.regroup(leaderOf)
		h.groupsAt, h.groupsLeaders = h.version, leadersVersion
	}
	for s := range h.empty {
		st := h.shards[s]
		if len(st.topics) > 0 {
			delete(h.empty, s)
		} else if now.After(st.lease.expires) {
			// Not in a group (regroup left it out), so its own lease
			// is its newest.
			delete(h.empty, s)
			delete(h.shards, s)
			h.order = nil
			if invariants.Enabled {
				delete(h.inv.leases, s) // a shard made again starts afresh
			}
		}
	}
	rd := &round{at: now, asked: make(map[string]*asked, len(h.groups))}
	h.pending[seq] = rd
	asks = make(map[string]*Ask, len(h.groups))
	for leader, g := range h.groups {
		a := &asked{g: g}
		rd.asked[leader] = a
		ask := &Ask{Held: g.held}
		if m, ok := h.matched[leader]; !ok || m != g.held {
			a.listed = true
			ask.Requests = h.requests(g)
		}
		asks[leader] = ask
	}
	clear(h.fresh)
	return seq, asks, h.released
}

// FreshRound starts a lease round at now that asks only for the shards in
// which a topic was newly held since the last round, each listed with its
// digest, of the node leaderOf names as its leader. It is the round to
// send soon after opens: their topics are served once a grant covers
// them, while the other shards' leases run on until the next Round renews
// them, so a stream of opens costs rounds the size of the opens, not of
// everything held. ok is false when there is nothing to ask (no fresh
// shard, or the node has given up its topics: Round says so).
func (h *Holder) FreshRound(now time.Time, leaderOf func(shard uint64) (string, bool)) (seq uint64, asks map[string]*Ask, ok bool) {
	if h.released || len(h.fresh) == 0 {
		return 0, nil, false
	}
	if invariants.Enabled {
		h.inv.roundAt(now)
		defer h.inv.after(h, "fresh round")
	}
	groups := make(map[string]*group)
	for _, s := range slices.Sorted(maps.Keys(h.fresh)) {
		st := h.shards[s]
		if st == nil || len(st.topics) == 0 {
			continue
		}
		leader, known := leaderOf(s)
		if !known {
			continue
		}
		g := groups[leader]
		if g == nil {
			g = &group{}
			groups[leader] = g
		}
		g.shards = append(g.shards, askedShard{shard: s, term: st.term})
	}
	clear(h.fresh)
	if len(groups) == 0 {
		return 0, nil, false
	}
	h.seq++
	seq = h.seq
	rd := &round{at: now, asked: make(map[string]*asked, len(groups))}
	h.pending[seq] = rd
	asks = make(map[string]*Ask, len(groups))
	for leader, g := range groups {
		rd.asked[leader] = &asked{g: g, listed: true, fresh: true}
		asks[leader] = &Ask{Requests: h.requests(g)}
	}
	return seq, asks, true
}

// requests lists g's shards with the digests of what is held there.
func (h *Holder) requests(g *group) []wire.LeaseRequest {
	out := make([]wire.LeaseRequest, len(g.shards))
	for i, e := range g.shards {
		out[i] = wire.LeaseRequest{Shard: e.shard, Digest: h.shards[e.shard].digest}
	}
	return out
}

// regroup builds the groups again from every shard that holds topics; a
// group's lease is first copied into its shards.
func (h *Holder) regroup(leaderOf func(shard uint64) (string, bool)) {
	for _, st := range h.shards {
		if g := st.group; g != nil {
			if g.lease.seq > st.lease.seq {
				st.lease = g.lease
			}
			st.group = nil
		}
	}
	if h.order == nil {
		h.order = slices.Sorted(maps.Keys(h.shards))
	}
	h.groups = make(map[string]*group, len(h.groups))
	for _, s := range h.order {
		st := h.shards[s]
		if st == nil {
			continue
		}
		if len(st.topics) == 0 {
			continue
		}
		leader, ok := leaderOf(s)
		if !ok {
			continue
		}
		g := h.groups[leader]
		if g == nil {
			g = &group{}
			h.groups[leader] = g
		}
		st.group = g
		g.shards = append(g.shards, askedShard{shard: s, term: st.term})
		g.held.Count++
		g.held.Digest ^= meta.ShardSummary(s, st.term, st.digest)
	}
}

// current returns the newest lease of the shard: its own or its group's.
func (st *shardState) current() *lease {
	if g := st.group; g != nil && g.lease.seq > st.lease.seq {
		return &g.lease
	}
	return &st.lease
}

// RoundAt returns when round seq started, while its replies are still
// taken.
func (h *Holder) RoundAt(seq uint64) (time.Time, bool) {
	rd, ok := h.pending[seq]
	if !ok {
		return time.Time{}, false
	}
	return rd.at, true
}

// Reply takes node from's answer to round r.Seq. Only grants of shards the
// round asked of from count. It returns the changes the grants caused
// (topics a grant's list showed this node no longer owns at the epoch it
// holds are closed at that epoch) and the refusals, whose leader hints the
// caller may use. A round's first answer from a leader is the one taken.
// again reports that the round asked from by its summary
// alone and the summaries differ: nothing was granted, and the next round
// lists the shards; it should come soon.
func (h *Holder) Reply(from string, r *wire.LeaseReply) (changes []Change, refused []wire.LeaseRefusal, again bool) {
	if invariants.Enabled {
		defer h.inv.after(h, "reply")
	}
	rd, ok := h.pending[r.Seq]
	if !ok {
		return nil, nil, false // a round too old to give anything
	}
	a := rd.asked[from]
	if a == nil {
		return nil, r.Refused, false
	}
	if a.answered {
		return nil, nil, false
	}
	a.answered = true
	switch {
	case a.fresh:
		// No summary was sent: only the listed shards' grants count,
		// and what the leader said of summaries stands.
	case r.HeldMatched:
		h.matched[from] = a.g.held
		if r.HeldGranted {
			if h.groups[from] == a.g && h.groupsAt == h.version {
				// Nothing the round asked about changed since: the
				// grant covers the group as it still is.
				if a.g.lease.seq < r.Seq {
					l := lease{seq: r.Seq, expires: rd.at.Add(h.cfg.Lease)}
					if invariants.Enabled {
						checkRenewal(&a.g.lease, &l)
					}
					a.g.lease = l
				}
				return nil, r.Refused, false
			}
			for _, e := range a.g.shards {
				changes = h.granted(rd, r.Seq, e.shard, &wire.LeaseGrant{Shard: e.shard, Term: e.term}, changes)
			}
			return changes, r.Refused, false
		}
	default:
		delete(h.matched, from)
		if !a.listed {
			// The leader saw neither our summary's shards nor their
			// digests: a grant now would cover what it never checked.
			return nil, r.Refused, true
		}
	}
	for i := range r.Grants {
		g := &r.Grants[i]
		if _, asked := slices.BinarySearchFunc(a.g.shards, g.Shard, func(e askedShard, s uint64) int { return cmp.Compare(e.shard, s) }); asked {
			changes = h.granted(rd, r.Seq, g.Shard, g, changes)
		}
	}
	return changes, r.Refused, false
}

// granted takes grant g of round rd (number seq) on shard, asked of the
// node that gave it.
func (h *Holder) granted(rd *round, seq, shard uint64, g *wire.LeaseGrant, changes []Change) []Change {
	st := h.shards[shard]
	if st == nil || g.Term < st.term || st.current().seq > seq {
		return changes // nothing held there, a deposed leader, or older than the grant we have
	}
	if g.Term > st.term {
		st.term = g.Term
		h.version++
	}
	l := lease{seq: seq, expires: rd.at.Add(h.cfg.Lease), term: g.Term}
	if g.Listed {
		l.listed = make(map[string]uint64, len(g.Topics))
		for _, te := range g.Topics {
			l.listed[string(te.Topic)] = te.Epoch
		}
		changes = h.closeUnlisted(st, l.listed, seq, changes)
	}
	if invariants.Enabled {
		checkRenewal(st.current(), &l)
	}
	st.lease = l
	return changes
}

// closeUnlisted closes the topics held in st since before round seq that
// a current leader's list of this node's topics shows at a later epoch or
// not at all: their ownership moved on, and their Close may never come
// (its sender died).
func (h *Holder) closeUnlisted(st *shardState, listed map[string]uint64, seq uint64, changes []Change) []Change {
	for topic := range st.topics {
		t := h.topics[topic]
		if t.since >= seq {
			continue
		}
		if e, ok := listed[topic]; ok && e <= t.Epoch {
			continue
		}
		h.unhold(topic, t)
		changes = append(changes, Change{Topic: topic, Drop: true, Floor: t.Epoch})
	}
	return changes
}

// Release gives up every topic: nothing is served from now on, and later
// rounds say so to the leaders, so that they need not wait out the leases.
func (h *Holder) Release() { h.released = true }

// Each calls fn for every held topic.
func (h *Holder) Each(fn func(topic string, t Topic)) {
	for k, t := range h.topics {
		fn(k, t.Topic)
	}
}
