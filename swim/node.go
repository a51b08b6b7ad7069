package swim

import (
	"bytes"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/wire"
)

// member is the core's record of one member.
type member struct {
	Member
	idb     []byte // ID as bytes, for datagrams
	ringKey uint64
	since   time.Time // last state change
	susp    *suspicion
	idx     int // position in Node.order
	reaped  bool
}

// suspicion is Lifeguard's shrinking timer for one suspect.
type suspicion struct {
	start    time.Time
	min, max time.Duration
	k        int
	from     []string // distinct suspecters, first one included
	// mine: this node's own probe of the suspect failed, so it may declare
	// it dead when the timer runs out. Others only hold it suspect (with a
	// backstop of twice the longest timeout): a refutation then has to
	// reach the few accusers, which it does directly, not every node.
	mine bool
}

func (s *suspicion) timeout() time.Duration {
	if !s.mine {
		return 2 * s.max
	}
	c := len(s.from) - 1
	if s.k <= 0 || c <= 0 {
		if s.k <= 0 {
			return s.min
		}
		return s.max
	}
	frac := math.Log(float64(c)+1) / math.Log(float64(s.k)+1)
	t := s.max - time.Duration(frac*float64(s.max-s.min))
	return max(t, s.min)
}

// confirm records a suspecter; it reports whether it is a new one.
func (s *suspicion) confirm(from string) bool {
	if from == "" || slices.Contains(s.from, from) {
		return false
	}
	s.from = append(s.from, from)
	return true
}

type probe struct {
	active        bool
	seq           uint64
	target        *member
	targetID      string   // who may ack it directly
	asked         []string // the members asked to ping it: they forward its ack, or nack
	nacked        []string // those of asked who nacked
	gen           uint64
	pingDeadline  time.Time
	end           time.Time
	indirect      bool
	lastPing      bool
	lastPingAt    time.Time
	expectedNacks int
	nacks         int
}

type relay struct {
	seq      uint64 // our ping's seq
	origSeq  uint64 // the requester's seq
	to       string // the requester's address
	toID     []byte // the requester's node id
	target   string // the node id pinged: only it may ack
	deadline time.Time
}

type ppPending struct {
	id     uint64
	join   bool
	digest bool // an anti-entropy exchange by digests (digest.go)
	addr   string
}

type leaderEntry struct {
	leader string
	term   uint64
}

type verKey struct {
	node string
	kind uint64
}

// Node is one member's SWIM state machine. It is not safe for concurrent
// use: one owner calls every method.
type Node struct {
	cfg    Config
	rng    *rand.Rand
	self   Member
	selfID []byte
	picks  []*member

	members map[string]*member
	// buried: the generation each reaped member was final at (dead or
	// left): an Alive of it at or below that generation, arriving after
	// the reap, is refused, and the member is told it is dead (see
	// applyNew). At most wire.MaxListEntries; the oldest go first.
	buried     map[string]uint64
	buriedList []string
	order      []*member // every known member but self, for random picks
	probeList  []*member
	probeIdx   int
	urgent     []*member // suspects others reported: probe them next
	ring       []*member // ProbeAligned: live members and self, by ringKey
	ringDirty  bool
	selfM      *member // self's place in ring
	phase      time.Duration
	suspects   []*member
	live       int // alive or suspect members, self excluded

	queue *broadcastQueue
	seq   uint64
	probe probe
	// relays are pings sent for another member's ping-req.
	relays []relay

	started      bool
	health       int
	leaving      bool
	nextProbe    time.Time
	nextGossip   time.Time
	nextPushPull time.Time
	nextReap     time.Time

	seeds       []string
	seedIdx     int    // the next seed missingSeed looks at
	seedSeen    []bool // missingSeed's scratch, one per seed
	joining     bool
	joinIdx     int
	joinBackoff time.Duration
	nextJoin    time.Time
	joinPending bool
	ppNext      uint64
	ppPending   []ppPending
	syncAt      time.Time // a second exchange with the seed that let us in
	syncAddr    string

	leaders  map[uint64]leaderEntry
	versions map[verKey]uint64

	// Sealing (nil keys: datagrams travel unsealed): the keyring, this
	// life's salt, the last sequence number sent, the header of the
	// datagram being built, the senders' replay windows, and the buffer
	// a received body is opened into.
	keys    *wire.SwimKeyring
	salt    uint64
	sealSeq uint64
	hdr     wire.SwimHeader
	replay  map[string]*replayWindow
	plain   []byte

	out   Ready
	arena []byte
	dg    wire.SwimDatagram
	ev    wire.SwimEvent
	pp    wire.SwimPushPull
	// Anti-entropy digests (digest.go): the hasher, this node's sums, the
	// peer's, and which buckets differ.
	hasher entryHasher
	sums   []uint64
	theirs []uint64
	differ []bool
	stats  Stats
}

// New returns a Node for cfg (defaults filled, then validated).
func New(cfg Config) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	n := &Node{
		cfg:      cfg,
		rng:      cfg.Rand,
		members:  make(map[string]*member),
		queue:    newBroadcastQueue(cfg.QueueMaxEntries, cfg.QueueMaxBytes),
		leaders:  make(map[uint64]leaderEntry),
		versions: make(map[verKey]uint64),
	}
	if n.rng == nil {
		n.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	}
	if keys := cfg.keys(); len(keys) > 0 {
		ring, err := wire.NewSwimKeyring(keys)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		n.keys = ring
		var salt [8]byte
		_, _ = crand.Read(salt[:])
		n.salt = binary.LittleEndian.Uint64(salt[:])
		n.replay = make(map[string]*replayWindow)
		n.plain = make([]byte, 0, wire.MaxDatagram)
	}
	n.self = Member{
		ID: cfg.NodeID, Generation: cfg.Generation, State: StateAlive,
		SwimAddr: cfg.SwimAddr, ClientAddr: cfg.ClientAddr, PeerAddr: cfg.PeerAddr,
		Rack: cfg.Rack, Meta: slices.Clone(cfg.Meta),
	}
	n.selfID = []byte(cfg.NodeID)
	n.selfM = &member{Member: Member{ID: cfg.NodeID}, ringKey: ringKey(cfg.NodeID)}
	// Phases spread over a quarter of the interval: the gaps between two
	// probes of one member stay within 0.75 and 1.25 intervals.
	n.phase = time.Duration(n.selfM.ringKey % uint64(max(1, cfg.ProbeInterval/4)))
	n.ringDirty = true
	n.dg.Events = make([]wire.SwimEvent, 0, wire.MaxEventsPerDatagram)
	n.enqueueSelfAlive()
	return n, nil
}

// Self reports this node's own record.
func (n *Node) Self() Member { return n.self }

// Stats reports the counters.
func (n *Node) Stats() Stats {
	s := n.stats
	s.QueueDropped = n.queue.dropped
	return s
}

// Health reports Lifeguard's local health score (0 is healthy).
func (n *Node) Health() int { return n.health }

// NumLive reports the members alive or suspect, this node excluded.
func (n *Node) NumLive() int { return n.live }

// QueueLen reports the events waiting in the broadcast queue.
func (n *Node) QueueLen() int { return n.queue.Len() }

// Member reports what this node knows of id.
func (n *Node) Member(id string) (Member, bool) {
	if id == n.self.ID {
		return n.self, true
	}
	m := n.members[id]
	if m == nil {
		return Member{}, false
	}
	return m.Member, true
}

// Members lists every known member, this node included, sorted by id.
func (n *Node) Members() []Member {
	out := make([]Member, 0, len(n.order)+1)
	out = append(out, n.self)
	for _, m := range n.order {
		out = append(out, m.Member)
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// ShardLeader reports the highest-term leader known for shard.
func (n *Node) ShardLeader(shard uint64) (leader string, term uint64, ok bool) {
	e, ok := n.leaders[shard]
	return e.leader, e.term, ok
}

// Ready returns what to send and report; it stays valid until Advance.
func (n *Node) Ready() Ready { return n.out }

// HasReady reports whether Ready holds anything.
func (n *Node) HasReady() bool {
	return len(n.out.Packets) > 0 || len(n.out.Events) > 0 || len(n.out.PushPulls) > 0
}

// Advance releases what Ready returned.
func (n *Node) Advance() {
	clear(n.out.Packets)
	clear(n.out.Events)
	clear(n.out.PushPulls)
	n.out.Packets = n.out.Packets[:0]
	n.out.Events = n.out.Events[:0]
	n.out.PushPulls = n.out.PushPulls[:0]
	n.arena = n.arena[:0]
}

// Join starts joining through seeds (SWIM addresses; this node's own is
// skipped): a full-state push-pull with one seed after another, with
// backoff, until one answers. The seeds are kept: a node left alone
// retries them, and each periodic push-pull also goes to a seed that no
// live member answers at, if there is one (missingSeed).
func (n *Node) Join(seeds []string) {
	n.seeds = n.seeds[:0]
	n.seedIdx = 0
	for _, s := range seeds {
		if s != "" && s != n.self.SwimAddr && !slices.Contains(n.seeds, s) {
			n.seeds = append(n.seeds, s)
		}
	}
	if len(n.seeds) == 0 {
		return
	}
	n.joining = true
	n.joinIdx = 0
	n.joinBackoff = n.cfg.JoinRetryMin
	n.nextJoin = time.Time{}
}

// Leave announces that this node leaves: it stops probing and gossips a
// Leave about itself; the caller keeps ticking for a few gossip intervals
// so that it spreads, then stops.
func (n *Node) Leave() {
	if n.leaving {
		return
	}
	n.leaving = true
	n.self.State = StateLeft
	n.probe.active = false
	n.ev = wire.SwimEvent{Kind: wire.SwimLeave, Node: []byte(n.self.ID), Generation: n.self.Generation, Incarnation: n.self.Incarnation}
	enc := wire.AppendSwimEvent(nil, &n.ev)
	n.queue.push(qkey{kind: qMember, id: n.self.ID}, enc)
	for _, m := range n.pickRandom(n.cfg.GossipNodes, nil, isLive) {
		n.sendGossip(m)
	}
}

// AnnounceShardLeader spreads that leader leads shard at term, if term is
// higher than the known one.
func (n *Node) AnnounceShardLeader(shard uint64, leader string, term uint64) {
	if leader == "" || len(leader) > wire.MaxNodeIDLen {
		return
	}
	n.applyShardLeader(shard, leader, term)
}

// SetMeta replaces this node's metadata (Config.Meta) and spreads it: a
// higher incarnation of this node, alive, with the new metadata. Metadata
// longer than wire.MaxMetaLen is refused, and the same metadata again
// changes nothing.
func (n *Node) SetMeta(meta []byte) error {
	if len(meta) > wire.MaxMetaLen {
		return fmt.Errorf("%w: %d bytes, the limit is %d", ErrMetaTooLarge, len(meta), wire.MaxMetaLen)
	}
	if bytes.Equal(meta, n.self.Meta) || n.leaving {
		return nil
	}
	n.self.Meta = slices.Clone(meta)
	n.self.Incarnation++
	n.enqueueSelfAlive()
	return nil
}

// SetMetadataVersion spreads that this node has version of metadata kind.
func (n *Node) SetMetadataVersion(kind, version uint64) {
	n.applyVersion(n.self.ID, kind, version)
}

// retransmitLimit is RetransmitMult·ceil(log10(n+1)).
func (n *Node) retransmitLimit() int {
	return n.cfg.RetransmitMult * int(math.Ceil(math.Log10(float64(n.live+2))))
}

func (n *Node) scaled(d time.Duration) time.Duration { return d * time.Duration(n.health+1) }

func (n *Node) suspicionBounds() (lo, hi time.Duration) {
	lo = time.Duration(n.cfg.SuspicionMult * math.Log10(float64(n.live+2)) * float64(n.cfg.GossipInterval))
	lo = max(lo, n.cfg.SuspicionMinFloor)
	return lo, time.Duration(n.cfg.SuspicionMaxMult * float64(lo))
}

func (n *Node) pushPullInterval() time.Duration {
	size := float64(n.live + 1)
	mult := 1.0
	if size > 32 {
		mult = math.Ceil(math.Log2(size)-5) + 1
	}
	return time.Duration(mult * float64(n.cfg.PushPullInterval))
}

func (n *Node) jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return time.Duration(n.rng.Int64N(int64(d)))
}

// Tick advances the node's timers to now.
func (n *Node) Tick(now time.Time) {
	if !n.started {
		n.started = true
		n.nextProbe = n.alignProbe(now)
		if n.cfg.ProbeOrder != ProbeAligned {
			n.nextProbe = now.Add(n.jitter(n.cfg.ProbeInterval))
		}
		n.nextGossip = now.Add(n.jitter(n.cfg.GossipInterval))
		n.nextPushPull = now.Add(n.cfg.PushPullInterval/2 + n.jitter(n.cfg.PushPullInterval))
		n.nextReap = now.Add(time.Second)
	}
	n.tickJoin(now)
	if !n.leaving {
		n.tickProbe(now)
	}
	n.tickRelays(now)
	n.tickSuspicions(now)
	if !now.Before(n.nextGossip) {
		n.nextGossip = now.Add(n.cfg.GossipInterval)
		if n.queue.Len() > 0 {
			for _, m := range n.pickRandom(n.cfg.GossipNodes, nil, n.gossipTarget(now)) {
				n.sendGossip(m)
			}
		}
	}
	if !n.syncAt.IsZero() && !now.Before(n.syncAt) {
		n.syncAt = time.Time{}
		if !n.leaving {
			n.requestPushPull(n.syncAddr, false)
		}
	}
	if !n.leaving && !now.Before(n.nextPushPull) {
		n.nextPushPull = now.Add(n.pushPullInterval())
		if ms := n.pickRandom(1, nil, notLeft); len(ms) == 1 {
			n.requestPushPull(ms[0].SwimAddr, false)
		}
		if seed, ok := n.missingSeed(); ok {
			n.requestPushPull(seed, false)
		}
	}
	if !now.Before(n.nextReap) {
		n.nextReap = now.Add(time.Second)
		n.reap(now)
	}
}

// NextDeadline reports when Tick next has something to do (the caller may
// tick earlier; ticking later delays the protocol).
func (n *Node) NextDeadline() time.Time {
	if !n.started {
		return time.Time{}
	}
	t := n.nextReap
	earliest := func(x time.Time) {
		if !x.IsZero() && x.Before(t) {
			t = x
		}
	}
	if !n.leaving {
		earliest(n.nextPushPull)
		if n.probe.active {
			if !n.probe.indirect {
				earliest(n.probe.pingDeadline)
			} else if !n.probe.lastPing {
				earliest(n.probe.lastPingAt)
			}
			earliest(n.probe.end)
		} else {
			earliest(n.nextProbe)
		}
	}
	if n.queue.Len() > 0 {
		earliest(n.nextGossip)
	}
	earliest(n.syncAt)
	if (n.joining || (n.live == 0 && len(n.seeds) > 0)) && !n.joinPending {
		earliest(n.nextJoin)
	}
	for i := range n.relays {
		earliest(n.relays[i].deadline)
	}
	for _, m := range n.suspects {
		if m.susp != nil {
			earliest(m.susp.start.Add(m.susp.timeout()))
		}
	}
	return t
}

func (n *Node) tickJoin(now time.Time) {
	lonely := !n.joining && n.live == 0 && len(n.seeds) > 0 && !n.leaving
	if (!n.joining && !lonely) || n.joinPending || now.Before(n.nextJoin) {
		return
	}
	seed := n.seeds[n.joinIdx%len(n.seeds)]
	n.joinIdx++
	n.joinPending = true
	n.requestPushPull(seed, true)
}

// missingSeed returns the next seed, in turn, at whose address no live
// member is known, if there is one. The cluster can split into islands
// that each joined only within itself (every node restarted at once, the
// ones back first joining each other before the others were up; a
// partition while nodes joined), and an island that knows nothing of the
// other would never probe or gossip to it: one push-pull with a seed of
// the other island merges the two.
func (n *Node) missingSeed() (string, bool) {
	if len(n.seeds) == 0 {
		return "", false
	}
	seen := n.seedSeen[:0]
	for range n.seeds {
		seen = append(seen, false)
	}
	n.seedSeen = seen
	left := len(n.seeds)
	for _, m := range n.order {
		if !isLive(m) || m.SwimAddr == "" {
			continue
		}
		if i := slices.Index(n.seeds, m.SwimAddr); i >= 0 && !seen[i] {
			seen[i] = true
			if left--; left == 0 {
				return "", false
			}
		}
	}
	for k := range n.seeds {
		i := (n.seedIdx + k) % len(n.seeds)
		if !seen[i] {
			n.seedIdx = i + 1
			return n.seeds[i], true
		}
	}
	return "", false
}

// joinFailed schedules the next attempt with a doubled backoff.
func (n *Node) joinFailed(now time.Time) {
	n.joinPending = false
	n.nextJoin = now.Add(n.joinBackoff + n.jitter(n.joinBackoff/4))
	n.joinBackoff = min(2*n.joinBackoff, n.cfg.JoinRetryMax)
}

func isLive(m *member) bool  { return m.State == StateAlive || m.State == StateSuspect }
func notLeft(m *member) bool { return m.State != StateLeft }

func (n *Node) gossipTarget(now time.Time) func(*member) bool {
	return func(m *member) bool {
		if isLive(m) {
			return true
		}
		return m.State == StateDead && now.Sub(m.since) < n.cfg.GossipToTheDead
	}
}

// pickRandom returns up to k distinct random members satisfying ok, other
// than exclude. Sampling first, then a scan when members are scarce.
func (n *Node) pickRandom(k int, exclude *member, ok func(*member) bool) []*member {
	if k <= 0 || len(n.order) == 0 {
		return nil
	}
	out := n.picks[:0]
	defer func() { n.picks = out[:0] }()
	ok0 := ok
	ok = func(m *member) bool { return m.SwimAddr != "" && ok0(m) }
	for tries := 0; tries < 4*k && len(out) < k; tries++ {
		m := n.order[n.rng.IntN(len(n.order))]
		if m != exclude && ok(m) && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	if len(out) < k {
		var cands []*member
		for _, m := range n.order {
			if m != exclude && ok(m) && !slices.Contains(out, m) {
				cands = append(cands, m)
			}
		}
		for len(out) < k && len(cands) > 0 {
			i := n.rng.IntN(len(cands))
			out = append(out, cands[i])
			cands[i] = cands[len(cands)-1]
			cands = cands[:len(cands)-1]
		}
	}
	return out
}

// nextTarget walks the shuffled round-robin, reshuffling at each pass;
// suspects reported by others jump the queue.
func (n *Node) nextTarget(now time.Time) *member {
	for len(n.urgent) > 0 {
		m := n.urgent[0]
		n.urgent = n.urgent[1:]
		if !m.reaped && m.State == StateSuspect {
			return m
		}
	}
	if n.cfg.ProbeOrder == ProbeAligned {
		return n.alignedTarget(now)
	}
	for tries := 0; tries <= len(n.probeList); tries++ {
		if n.probeIdx >= len(n.probeList) {
			n.probeList = slices.DeleteFunc(n.probeList, func(m *member) bool { return m.reaped })
			n.rng.Shuffle(len(n.probeList), func(i, j int) { n.probeList[i], n.probeList[j] = n.probeList[j], n.probeList[i] })
			n.probeIdx = 0
			if len(n.probeList) == 0 {
				return nil
			}
		}
		m := n.probeList[n.probeIdx]
		n.probeIdx++
		if !m.reaped && isLive(m) {
			return m
		}
	}
	return nil
}

func (n *Node) tickProbe(now time.Time) {
	p := &n.probe
	if p.active {
		if !p.indirect && !now.Before(p.pingDeadline) {
			p.indirect = true
			n.sendPingReqs(p)
		}
		// A last direct ping halfway between the ping-reqs and the end:
		// under 5% loss it cuts false suspicions tenfold for about one
		// datagram per hundred probes.
		if p.indirect && !p.lastPing && !now.Before(p.lastPingAt) {
			p.lastPing = true
			n.sendMsg(p.target.SwimAddr, p.target.idb, &wire.SwimMessage{Kind: wire.SwimPing, Seq: p.seq, Target: p.target.idb}, nil)
		}
		if !now.Before(p.end) {
			n.finishProbe(now, false)
		}
	}
	if p.active || now.Before(n.nextProbe) {
		return
	}
	interval := n.scaled(n.cfg.ProbeInterval)
	n.nextProbe = n.alignProbe(now.Add(interval - n.cfg.ProbeInterval/2))
	m := n.nextTarget(now)
	if m == nil {
		return
	}
	n.seq++
	*p = probe{
		active: true, seq: n.seq, target: m, targetID: m.ID, gen: m.Generation, asked: p.asked[:0], nacked: p.nacked[:0],
		pingDeadline: now.Add(n.scaled(n.cfg.ProbeTimeout)),
		end:          now.Add(interval),
	}
	p.lastPingAt = p.pingDeadline.Add(p.end.Sub(p.pingDeadline) / 2)
	n.stats.Probes++
	n.sendMsg(m.SwimAddr, m.idb, &wire.SwimMessage{Kind: wire.SwimPing, Seq: p.seq, Target: m.idb}, nil)
}

func (n *Node) sendPingReqs(p *probe) {
	t := p.target
	// A second direct ping goes with the ping-reqs: one lost datagram of
	// the first exchange should not be worth a suspicion.
	n.sendMsg(t.SwimAddr, t.idb, &wire.SwimMessage{Kind: wire.SwimPing, Seq: p.seq, Target: t.idb}, nil)
	for _, m := range n.pickRandom(n.cfg.IndirectChecks, t, func(m *member) bool { return m.State == StateAlive }) {
		n.stats.PingReqs++
		p.expectedNacks++
		p.asked = append(p.asked, m.ID)
		n.sendMsg(m.SwimAddr, m.idb, &wire.SwimMessage{Kind: wire.SwimPingReq, Seq: p.seq, Target: t.idb, Addr: []byte(t.SwimAddr)}, nil)
	}
}

// finishProbe ends the current probe; Lifeguard's health moves by the
// outcome: down on an ack, up by the nacks that did not come (missing
// nacks mean this node, not the target, is the slow one).
func (n *Node) finishProbe(now time.Time, acked bool) {
	p := &n.probe
	p.active = false
	if acked {
		n.health = max(0, n.health-1)
		return
	}
	n.stats.ProbeFailures++
	delta := 1
	if p.expectedNacks > 0 {
		delta = p.expectedNacks - p.nacks
	}
	n.health = min(n.cfg.MaxHealth-1, n.health+delta)
	m := p.target
	if m.reaped || m.Generation != p.gen || !isLive(m) {
		return
	}
	n.ev = wire.SwimEvent{Kind: wire.SwimSuspect, Node: []byte(m.ID), Generation: m.Generation, Incarnation: m.Incarnation, From: []byte(n.self.ID)}
	wasSuspect := m.State == StateSuspect
	if wasSuspect && m.susp != nil && !m.susp.mine {
		m.susp.mine = true
	}
	if n.apply(now, &n.ev) && !wasSuspect {
		n.stats.Suspicions++
		// Lifeguard: tell the suspect itself so it can refute at once.
		n.sendMsg(m.SwimAddr, m.idb, &wire.SwimMessage{}, n.queue.byKey[qkey{kind: qMember, id: m.ID}].encOrNil())
	}
}

func (e *qentry) encOrNil() []byte {
	if e == nil {
		return nil
	}
	return e.enc
}

func (n *Node) tickRelays(now time.Time) {
	kept := n.relays[:0]
	for _, r := range n.relays {
		if now.Before(r.deadline) {
			kept = append(kept, r)
			continue
		}
		n.sendMsg(r.to, r.toID, &wire.SwimMessage{Kind: wire.SwimNack, Seq: r.origSeq}, nil)
	}
	n.relays = kept
}

func (n *Node) tickSuspicions(now time.Time) {
	kept := n.suspects[:0]
	var expired []*member
	for _, m := range n.suspects {
		if m.susp == nil || m.State != StateSuspect || m.reaped {
			m.susp = nil
			continue
		}
		if now.Sub(m.susp.start) >= m.susp.timeout() {
			expired = append(expired, m)
			continue
		}
		kept = append(kept, m)
	}
	n.suspects = kept
	for _, m := range expired {
		n.ev = wire.SwimEvent{Kind: wire.SwimDead, Node: []byte(m.ID), Generation: m.Generation, Incarnation: m.Incarnation, From: []byte(n.self.ID)}
		if n.apply(now, &n.ev) {
			n.stats.DeadDeclared++
		}
	}
}

func (n *Node) reap(now time.Time) {
	for i := 0; i < len(n.order); {
		m := n.order[i]
		if m.State.final() && now.Sub(m.since) >= n.cfg.DeadReapTimeout {
			n.bury(m.ID, m.Generation)
			n.removeMember(m)
			continue
		}
		i++
	}
}

// bury remembers that id was final at generation gen once its member
// is reaped.
func (n *Node) bury(id string, gen uint64) {
	if n.buried == nil {
		n.buried = make(map[string]uint64)
	}
	if _, ok := n.buried[id]; !ok {
		if len(n.buriedList) >= wire.MaxListEntries {
			delete(n.buried, n.buriedList[0])
			n.buriedList = n.buriedList[1:]
		}
		n.buriedList = append(n.buriedList, id)
	}
	n.buried[id] = max(n.buried[id], gen)
}

func (n *Node) removeMember(m *member) {
	last := len(n.order) - 1
	n.order[m.idx] = n.order[last]
	n.order[m.idx].idx = m.idx
	n.order[last] = nil
	n.order = n.order[:last]
	delete(n.members, m.ID)
	m.reaped = true
	n.ringDirty = true
}

// --- sending ---

// header sets n.hdr to this node's header for a datagram or push-pull to
// recipient, sealed (with the next sequence number) when it has keys.
func (n *Node) header(recipient []byte) *wire.SwimHeader {
	n.hdr = wire.SwimHeader{ClusterID: n.cfg.ClusterID, Sender: n.selfID, Generation: n.self.Generation}
	if n.keys != nil {
		n.sealSeq++
		n.hdr.Sealed, n.hdr.Recipient, n.hdr.KeyID, n.hdr.Salt, n.hdr.Seq = true, recipient, n.keys.Primary(), n.salt, n.sealSeq
	}
	return &n.hdr
}

// begin starts a datagram to recipient in the arena.
func (n *Node) begin(recipient []byte, msg *wire.SwimMessage) (start, bodyOff, countOff int) {
	start = len(n.arena)
	n.arena, bodyOff = wire.AppendSwimHeader(n.arena, n.header(recipient))
	n.arena = wire.AppendSwimMessage(n.arena, msg)
	n.arena, countOff = wire.BeginSwimEvents(n.arena)
	return start, bodyOff, countOff
}

func (n *Node) finish(to string, start, bodyOff int) {
	if n.keys != nil {
		var err error
		if n.arena, err = n.keys.Seal(n.arena, start, bodyOff, &n.hdr); err != nil {
			n.arena = n.arena[:start]
			return
		}
	}
	b := n.arena[start:len(n.arena):len(n.arena)]
	n.stats.PacketsOut++
	n.stats.BytesOut += uint64(len(b))
	n.out.Packets = append(n.out.Packets, Packet{To: to, Data: b})
}

// sendMsg sends msg to the member recipient at addr with first (an encoded
// event, may be nil) and then as many queued events as fit.
func (n *Node) sendMsg(addr string, recipient []byte, msg *wire.SwimMessage, first []byte) {
	start, bodyOff, countOff := n.begin(recipient, msg)
	budget := start + n.cfg.DatagramBudget
	if n.keys != nil {
		budget -= wire.SwimTagSize
	}
	if first != nil {
		n.arena, _ = wire.AppendSwimEventWithin(n.arena, countOff, first, budget)
	}
	n.arena = n.queue.fill(n.arena, countOff, budget, n.retransmitLimit())
	n.finish(addr, start, bodyOff)
}

func (n *Node) sendGossip(m *member) {
	n.sendMsg(m.SwimAddr, m.idb, &wire.SwimMessage{}, nil)
}

// --- receiving ---

// Receive handles one datagram from the address from.
func (n *Node) Receive(now time.Time, from string, b []byte) {
	n.stats.PacketsIn++
	n.stats.BytesIn += uint64(len(b))
	d := &n.dg
	if len(b) > wire.MaxDatagram {
		n.stats.DropMalformed++
		return
	}
	off, err := wire.DecodeSwimHeader(b, &d.Header)
	if err != nil {
		n.stats.DropMalformed++
		return
	}
	if d.Header.ClusterID != n.cfg.ClusterID {
		n.stats.DropClusterID++
		return
	}
	body, ok := n.open(b, off, &d.Header, false)
	if !ok {
		return
	}
	if err := wire.DecodeSwimBody(body, d); err != nil {
		n.stats.DropMalformed++
		return
	}
	sender := d.Header.Sender
	for i := range d.Events {
		n.apply(now, &d.Events[i])
	}
	// A sender we hold dead in its current generation learns so at once.
	if m := n.members[string(sender)]; m != nil && m.Generation == d.Header.Generation && m.State.final() {
		n.sendMsg(from, sender, &wire.SwimMessage{}, n.encodeMember(m, ""))
	}
	msg := &d.Msg
	switch msg.Kind {
	case wire.SwimPing:
		if string(msg.Target) != n.self.ID {
			n.stats.DropWrongTarget++
			return
		}
		n.sendMsg(from, sender, &wire.SwimMessage{Kind: wire.SwimAck, Seq: msg.Seq}, nil)
	case wire.SwimPingReq:
		if n.leaving {
			return
		}
		if len(n.relays) >= n.cfg.MaxRelays {
			n.stats.DropRelay++
			return
		}
		n.seq++
		n.relays = append(n.relays, relay{seq: n.seq, origSeq: msg.Seq, to: from, toID: bytes.Clone(sender), target: string(msg.Target), deadline: now.Add(n.cfg.ProbeTimeout * 4 / 5)})
		n.sendMsg(string(msg.Addr), msg.Target, &wire.SwimMessage{Kind: wire.SwimPing, Seq: n.seq, Target: msg.Target}, nil)
	case wire.SwimAck:
		// An ack counts only from the member that was pinged, or one asked
		// to ping it on this node's behalf: sequence numbers are easy to
		// guess, and an ack from anyone else would keep a dead member
		// alive.
		sender := string(sender)
		if p := &n.probe; p.active && msg.Seq == p.seq {
			if sender != p.targetID && !slices.Contains(p.asked, sender) {
				n.stats.DropAck++
				return
			}
			n.finishProbe(now, true)
			return
		}
		for i, r := range n.relays {
			if r.seq == msg.Seq {
				if sender != r.target {
					n.stats.DropAck++
					return
				}
				n.relays = slices.Delete(n.relays, i, i+1)
				n.sendMsg(r.to, r.toID, &wire.SwimMessage{Kind: wire.SwimAck, Seq: r.origSeq}, nil)
				return
			}
		}
	case wire.SwimNack:
		// Only from a member asked to relay, once each: nacks lower this
		// node's own health penalty for a failed probe.
		if p := &n.probe; p.active && msg.Seq == p.seq {
			sender := string(sender)
			if slices.Contains(p.asked, sender) && !slices.Contains(p.nacked, sender) {
				p.nacked = append(p.nacked, sender)
				p.nacks++
			} else {
				n.stats.DropAck++
			}
		}
	}
}

// --- merging ---

// apply merges one event; it reports whether it changed anything (and so
// was queued for further gossip).
func (n *Node) apply(now time.Time, e *wire.SwimEvent) bool {
	switch e.Kind {
	case wire.SwimShardLeader:
		return n.applyShardLeader(e.Shard, string(e.Node), e.Term)
	case wire.SwimMetadataVersion:
		return n.applyVersion(string(e.Node), e.MetaKind, e.Version)
	}
	if e.Generation > n.generationLimit(now) {
		n.stats.DropGeneration++
		return false
	}
	if string(e.Node) == n.self.ID {
		return n.applySelf(now, e)
	}
	m := n.members[string(e.Node)]
	if m == nil {
		return n.applyNew(now, e)
	}
	if e.Generation < m.Generation {
		return false
	}
	if e.Generation > m.Generation {
		return n.applyNewGeneration(now, m, e)
	}
	if m.State.final() && !(mutant.On(mutant.DeadFinal) && e.Kind == wire.SwimAlive && e.Incarnation > m.Incarnation) {
		return false
	}
	prev := m.State
	switch e.Kind {
	case wire.SwimDead, wire.SwimLeave:
		// Dead is final for this generation, whatever the incarnation.
		m.Incarnation = max(m.Incarnation, e.Incarnation)
		n.setState(now, m, finalState(e.Kind))
		n.emit(eventFor(m.State), m, prev)
	case wire.SwimAlive:
		if e.Incarnation <= m.Incarnation {
			return false
		}
		m.Incarnation = e.Incarnation
		changed := n.setAddrs(m, e)
		if prev == StateSuspect || prev.final() { // final: only with the mutant
			n.setState(now, m, StateAlive)
			n.emit(EventAliveAgain, m, prev)
		} else if changed {
			n.emit(EventUpdated, m, prev)
		}
	case wire.SwimSuspect:
		switch {
		case e.Incarnation > m.Incarnation || (e.Incarnation == m.Incarnation && prev == StateAlive):
			m.Incarnation = e.Incarnation
			n.setState(now, m, StateSuspect)
			n.startSuspicion(now, m, string(e.From))
			n.emit(EventSuspect, m, prev)
		case e.Incarnation == m.Incarnation && prev == StateSuspect:
			if m.susp == nil || !m.susp.confirm(string(e.From)) {
				return false
			}
			// A new independent confirmation: spread it.
			n.queue.push(qkey{kind: qMember, id: m.ID}, wire.AppendSwimEvent(nil, e))
			return true
		default:
			return false
		}
	default:
		return false
	}
	n.queue.push(qkey{kind: qMember, id: m.ID}, n.encodeEvent(m, e))
	return true
}

func finalState(k wire.SwimEventKind) State {
	if k == wire.SwimLeave {
		return StateLeft
	}
	return StateDead
}

func eventFor(s State) EventKind {
	switch s {
	case StateDead:
		return EventDead
	case StateLeft:
		return EventLeft
	case StateSuspect:
		return EventSuspect
	}
	return EventAliveAgain
}

// encodeEvent re-encodes what m now is for gossip: e itself for Suspect,
// Dead and Leave (to keep who said it), m's full record for Alive.
func (n *Node) encodeEvent(m *member, e *wire.SwimEvent) []byte {
	if e.Kind == wire.SwimAlive {
		return n.encodeMember(m, "")
	}
	return wire.AppendSwimEvent(nil, e)
}

// encodeMember encodes m's current state as an event.
func (n *Node) encodeMember(m *member, from string) []byte {
	ev := wire.SwimEvent{Node: []byte(m.ID), Generation: m.Generation, Incarnation: m.Incarnation}
	switch m.State {
	case StateAlive:
		ev.Kind = wire.SwimAlive
		ev.SwimAddr, ev.ClientAddr, ev.PeerAddr = []byte(m.SwimAddr), []byte(m.ClientAddr), []byte(m.PeerAddr)
		ev.Rack, ev.Meta = []byte(m.Rack), m.Meta
	case StateSuspect:
		ev.Kind, ev.From = wire.SwimSuspect, []byte(from)
	case StateDead:
		ev.Kind, ev.From = wire.SwimDead, []byte(from)
	case StateLeft:
		ev.Kind = wire.SwimLeave
	}
	return wire.AppendSwimEvent(nil, &ev)
}

func (n *Node) setState(now time.Time, m *member, s State) {
	wasLive, isNowLive := isLive(m), s == StateAlive || s == StateSuspect
	m.State = s
	m.since = now
	if s != StateSuspect {
		m.susp = nil
	}
	switch {
	case wasLive && !isNowLive:
		n.live--
		n.ringDirty = true
	case !wasLive && isNowLive:
		n.live++
		n.ringDirty = true
	}
}

// setAddrs copies e's addresses into m; it reports whether any changed.
func (n *Node) setAddrs(m *member, e *wire.SwimEvent) bool {
	changed := m.SwimAddr != string(e.SwimAddr) || m.ClientAddr != string(e.ClientAddr) ||
		m.PeerAddr != string(e.PeerAddr) || m.Rack != string(e.Rack) || !bytes.Equal(m.Meta, e.Meta)
	if changed {
		m.SwimAddr, m.ClientAddr, m.PeerAddr = string(e.SwimAddr), string(e.ClientAddr), string(e.PeerAddr)
		m.Rack, m.Meta = string(e.Rack), bytes.Clone(e.Meta)
	}
	return changed
}

func (n *Node) startSuspicion(now time.Time, m *member, from string) {
	lo, hi := n.suspicionBounds()
	k := n.cfg.SuspicionConfirmations
	if n.live-1 < k {
		k = max(0, n.live-1)
	}
	m.susp = &suspicion{start: now, min: lo, max: hi, k: k, mine: from == n.self.ID}
	m.susp.confirm(from)
	n.suspects = append(n.suspects, m)
	// A few of those who hear of the suspicion probe the suspect next, so
	// that independent confirmations come (about k+1 of them, whatever n).
	if !m.susp.mine && n.rng.Float64()*float64(max(1, n.live)) < float64(k+1) {
		n.urgent = append(n.urgent, m)
		if !n.probe.active && !n.leaving {
			n.nextProbe = now // at once: a confirmation is worth most early
		}
	}
}

// applyNew handles an event about a member not known.
func (n *Node) applyNew(now time.Time, e *wire.SwimEvent) bool {
	switch e.Kind {
	case wire.SwimAlive:
		if g, ok := n.buried[string(e.Node)]; ok && e.Generation <= g {
			// Dead is final for the generation, after the reap too: a
			// member cut off since it was declared dead still says it
			// is alive. It is told, so that it comes back in a new
			// generation.
			dead := wire.SwimEvent{Kind: wire.SwimDead, Node: e.Node, Generation: g, Incarnation: e.Incarnation, From: n.selfID}
			n.queue.push(qkey{kind: qMember, id: string(e.Node)}, wire.AppendSwimEvent(nil, &dead))
			return true
		}
	case wire.SwimDead, wire.SwimLeave:
		// Keep a tombstone: a delayed Alive of this generation must not
		// bring it back. No address is known, so it is never contacted.
		if len(n.members) >= wire.MaxListEntries {
			return false
		}
		m := n.addMember(now, e)
		m.State = finalState(e.Kind)
		return false
	default:
		// A suspect we never heard of: nothing to probe it at.
		return false
	}
	if len(n.members) >= wire.MaxListEntries {
		return false
	}
	m := n.addMember(now, e)
	n.setAddrs(m, e)
	m.State = 0
	n.setState(now, m, StateAlive)
	n.insertProbe(m)
	n.emit(EventJoined, m, 0)
	n.queue.push(qkey{kind: qMember, id: m.ID}, n.encodeMember(m, ""))
	return true
}

func (n *Node) addMember(now time.Time, e *wire.SwimEvent) *member {
	m := &member{Member: Member{ID: string(e.Node), Generation: e.Generation, Incarnation: e.Incarnation}, since: now}
	m.idb = []byte(m.ID)
	m.ringKey = ringKey(m.ID)
	m.idx = len(n.order)
	n.order = append(n.order, m)
	n.members[m.ID] = m
	return m
}

// insertProbe puts a new member at a random place in the probe order.
func (n *Node) insertProbe(m *member) {
	i := n.rng.IntN(len(n.probeList) + 1)
	n.probeList = slices.Insert(n.probeList, i, m)
	if i < n.probeIdx {
		n.probeIdx++
	}
}

// applyNewGeneration: a newer life of m supersedes all it was.
func (n *Node) applyNewGeneration(now time.Time, m *member, e *wire.SwimEvent) bool {
	prev := m.State
	m.Generation, m.Incarnation = e.Generation, e.Incarnation
	m.susp = nil
	switch e.Kind {
	case wire.SwimAlive:
		n.setAddrs(m, e)
		n.setState(now, m, StateAlive)
		if prev.final() || prev == 0 {
			if !slices.Contains(n.probeList, m) {
				n.insertProbe(m)
			}
			n.emit(EventAliveAgain, m, prev)
		} else {
			n.emit(EventUpdated, m, prev)
		}
		n.queue.push(qkey{kind: qMember, id: m.ID}, n.encodeMember(m, ""))
		return true
	case wire.SwimSuspect:
		if m.SwimAddr == "" {
			return false
		}
		n.setState(now, m, StateSuspect)
		n.startSuspicion(now, m, string(e.From))
		if prev.final() && !slices.Contains(n.probeList, m) {
			n.insertProbe(m)
		}
		n.emit(EventSuspect, m, prev)
	case wire.SwimDead, wire.SwimLeave:
		n.setState(now, m, finalState(e.Kind))
		if !prev.final() {
			n.emit(eventFor(m.State), m, prev)
		}
	default:
		return false
	}
	n.queue.push(qkey{kind: qMember, id: m.ID}, wire.AppendSwimEvent(nil, e))
	return true
}

// generationLimit is the highest generation taken from anyone at now:
// MaxGenerationAhead past the clock (see Config).
func (n *Node) generationLimit(now time.Time) uint64 {
	return uint64(max(now.UnixNano(), 0)) + uint64(n.cfg.MaxGenerationAhead)
}

// applySelf handles what others say about this node.
func (n *Node) applySelf(now time.Time, e *wire.SwimEvent) bool {
	if e.Generation < n.self.Generation || n.leaving {
		// An older life of this node.
		return false
	}
	if e.Generation > n.self.Generation {
		// A claim about a newer life than this one: forged, or this
		// process started with a clock behind a previous life's
		// generation. Whoever believes it ignores this life's gossip and
		// would hold a Dead of that generation as final, so this node
		// takes a generation above it, as after being declared dead.
		// (apply has bounded e.Generation: it cannot overflow here.)
		n.self.Generation = e.Generation + 1
		n.self.Incarnation = 0
		n.stats.Rejoins++
		n.out.Events = append(n.out.Events, Event{Kind: EventRejoined, Member: n.self, Prev: StateDead})
		n.enqueueSelfAlive()
		return true
	}
	switch e.Kind {
	case wire.SwimAlive:
		if e.Incarnation <= n.self.Incarnation {
			return false
		}
		n.self.Incarnation = e.Incarnation + 1
		n.stats.Refutations++
	case wire.SwimSuspect:
		if e.Incarnation < n.self.Incarnation {
			return false
		}
		n.self.Incarnation = e.Incarnation + 1
		n.health = min(n.cfg.MaxHealth-1, n.health+1)
		n.stats.Refutations++
	case wire.SwimDead, wire.SwimLeave:
		// Declared dead: dead is final for this generation, so come back
		// as a new one.
		n.self.Generation++
		n.self.Incarnation = 0
		n.stats.Rejoins++
		n.out.Events = append(n.out.Events, Event{Kind: EventRejoined, Member: n.self, Prev: StateDead})
	default:
		return false
	}
	_ = now
	n.enqueueSelfAlive()
	// Answer the accuser directly: it is the one whose timer runs.
	if acc := n.members[string(e.From)]; acc != nil && acc.SwimAddr != "" && isLive(acc) {
		n.sendMsg(acc.SwimAddr, acc.idb, &wire.SwimMessage{}, n.queue.byKey[qkey{kind: qMember, id: n.self.ID}].encOrNil())
	}
	return true
}

func (n *Node) enqueueSelfAlive() {
	s := &n.self
	ev := wire.SwimEvent{Kind: wire.SwimAlive, Node: []byte(s.ID), Generation: s.Generation, Incarnation: s.Incarnation,
		SwimAddr: []byte(s.SwimAddr), ClientAddr: []byte(s.ClientAddr), PeerAddr: []byte(s.PeerAddr), Rack: []byte(s.Rack), Meta: s.Meta}
	n.queue.push(qkey{kind: qMember, id: s.ID}, wire.AppendSwimEvent(nil, &ev))
}

func (n *Node) emit(k EventKind, m *member, prev State) {
	n.out.Events = append(n.out.Events, Event{Kind: k, Member: m.Member, Prev: prev})
}

func (n *Node) applyShardLeader(shard uint64, leader string, term uint64) bool {
	if cur, ok := n.leaders[shard]; ok && term <= cur.term {
		return false
	}
	n.leaders[shard] = leaderEntry{leader: leader, term: term}
	n.out.Events = append(n.out.Events, Event{Kind: EventShardLeader, Shard: shard, Leader: leader, Term: term})
	ev := wire.SwimEvent{Kind: wire.SwimShardLeader, Shard: shard, Node: []byte(leader), Term: term}
	n.queue.push(qkey{kind: qShard, num: shard}, wire.AppendSwimEvent(nil, &ev))
	return true
}

func (n *Node) applyVersion(node string, kind, version uint64) bool {
	k := verKey{node: node, kind: kind}
	if cur, ok := n.versions[k]; ok && version <= cur {
		return false
	}
	if len(n.versions) >= wire.MaxPushPullVersions {
		return false
	}
	n.versions[k] = version
	if node != n.self.ID {
		n.out.Events = append(n.out.Events, Event{Kind: EventMetadataVersion, Leader: node, MetaKind: kind, Version: version})
	}
	ev := wire.SwimEvent{Kind: wire.SwimMetadataVersion, Node: []byte(node), MetaKind: kind, Version: version}
	n.queue.push(qkey{kind: qVersion, id: node, num: kind}, wire.AppendSwimEvent(nil, &ev))
	return true
}

// --- push-pull ---

// ErrPushPull is wrapped by push-pull errors.
var ErrPushPull = errors.New("swim: push-pull")

// Why a push-pull's state was refused; each wraps ErrPushPull.
var (
	// ErrStateWrongCluster: the state came from another cluster.
	ErrStateWrongCluster = fmt.Errorf("%w: state of another cluster", ErrPushPull)
	// ErrStateUnauthenticated: the state did not open with this node's
	// SWIM keys, was a replay, or came from this node itself.
	ErrStateUnauthenticated = fmt.Errorf("%w: state refused: unauthenticated (another SWIM key?), replayed or from this node", ErrPushPull)
)

// requestPushPull starts an exchange with addr: of whole states for a
// join, by digests otherwise.
func (n *Node) requestPushPull(addr string, join bool) {
	var payload []byte
	if join {
		payload = n.encodeState(true)
	} else {
		payload = n.encodeDigests()
	}
	n.startPushPull(ppPending{join: join, digest: !join, addr: addr}, payload)
}

// startPushPull asks the caller to send payload to p.addr and remembers
// the exchange until its answer.
func (n *Node) startPushPull(p ppPending, payload []byte) {
	n.ppNext++
	p.id = n.ppNext
	n.ppPending = append(n.ppPending, p)
	n.out.PushPulls = append(n.out.PushPulls, PushPullRequest{ID: p.id, Addr: p.addr, Join: p.join, Payload: payload})
}

// collectState puts this node's whole state in n.pp's lists.
func (n *Node) collectState() *wire.SwimPushPull {
	p := &n.pp
	p.Members = p.Members[:0]
	p.Leaders = p.Leaders[:0]
	p.Versions = p.Versions[:0]
	p.Join, p.Partial, p.Digests = false, false, nil
	add := func(m *Member) {
		p.Members = append(p.Members, wire.SwimPushPullMember{
			Node: []byte(m.ID), Generation: m.Generation, Incarnation: m.Incarnation, State: wire.SwimMemberState(m.State),
			SwimAddr: []byte(m.SwimAddr), ClientAddr: []byte(m.ClientAddr), PeerAddr: []byte(m.PeerAddr), Rack: []byte(m.Rack), Meta: m.Meta,
		})
	}
	add(&n.self)
	for _, m := range n.order {
		if m.SwimAddr != "" {
			add(&m.Member)
		}
	}
	for shard, e := range n.leaders {
		p.Leaders = append(p.Leaders, wire.SwimShardLeaderEntry{Shard: shard, Leader: []byte(e.leader), Term: e.term})
	}
	slices.SortFunc(p.Leaders, func(a, b wire.SwimShardLeaderEntry) int { return cmpU64(a.Shard, b.Shard) })
	for k, v := range n.versions {
		p.Versions = append(p.Versions, wire.SwimVersionEntry{Node: []byte(k.node), MetaKind: k.kind, Version: v})
	}
	slices.SortFunc(p.Versions, func(a, b wire.SwimVersionEntry) int {
		if c := bytes.Compare(a.Node, b.Node); c != 0 {
			return c
		}
		return cmpU64(a.MetaKind, b.MetaKind)
	})
	return p
}

// encodePushPull encodes n.pp, sealed when the node has keys (a new
// slice), and lets go of its digests.
func (n *Node) encodePushPull() []byte {
	p := &n.pp
	p.Header = *n.header(nil)
	b, bodyOff := wire.AppendSwimPushPull(nil, p)
	p.Digests = nil // they alias n.sums; a decode must not write there
	if n.keys != nil {
		var err error
		if b, err = n.keys.Seal(b, 0, bodyOff, &p.Header); err != nil {
			return nil
		}
	}
	n.stats.BytesOut += uint64(len(b))
	return b
}

// encodeState encodes this node's whole state (a new slice).
func (n *Node) encodeState(join bool) []byte {
	p := n.collectState()
	p.Join = join
	return n.encodePushPull()
}

// encodeDigests encodes this node's state summed up in DigestBuckets
// digests, without its entries: the start of an anti-entropy exchange.
func (n *Node) encodeDigests() []byte {
	p := n.collectState()
	n.sums = resize(n.sums, DigestBuckets)
	n.hasher.digests(p, n.sums)
	p.Members, p.Leaders, p.Versions = p.Members[:0], p.Leaders[:0], p.Versions[:0]
	p.Partial, p.Digests = true, n.sums
	return n.encodePushPull()
}

// diff sums this node's state up in as many buckets as theirs holds and
// keeps in n.pp only the entries of the buckets that differ from theirs.
// It returns how many buckets differ.
func (n *Node) diff(theirs []uint64) int {
	p := n.collectState()
	n.sums = resize(n.sums, len(theirs))
	n.hasher.digests(p, n.sums)
	n.differ = resize(n.differ, len(theirs))
	differ := 0
	for i, s := range n.sums {
		n.differ[i] = s != theirs[i]
		if n.differ[i] {
			differ++
		}
	}
	n.hasher.keep(p, n.differ)
	p.Partial = true
	return differ
}

func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mergeState decodes and merges a remote state (whole or partial).
func (n *Node) mergeState(now time.Time, b []byte) error {
	n.stats.BytesIn += uint64(len(b))
	p := &n.pp
	off, err := wire.DecodeSwimHeader(b, &p.Header)
	if err != nil {
		n.stats.DropMalformed++
		return errors.Join(ErrPushPull, err)
	}
	if p.Header.ClusterID != n.cfg.ClusterID {
		n.stats.DropClusterID++
		return ErrStateWrongCluster
	}
	body, ok := n.open(b, off, &p.Header, true)
	if !ok {
		return ErrStateUnauthenticated
	}
	if err := wire.DecodeSwimPushPullBody(body, p); err != nil {
		n.stats.DropMalformed++
		return errors.Join(ErrPushPull, err)
	}
	from := p.Header.Sender
	for i := range p.Members {
		pm := &p.Members[i]
		ev := wire.SwimEvent{Node: pm.Node, Generation: pm.Generation, Incarnation: pm.Incarnation}
		switch pm.State {
		case wire.SwimStateAlive:
			ev.Kind = wire.SwimAlive
			ev.SwimAddr, ev.ClientAddr, ev.PeerAddr, ev.Rack, ev.Meta = pm.SwimAddr, pm.ClientAddr, pm.PeerAddr, pm.Rack, pm.Meta
		case wire.SwimStateSuspect:
			ev.Kind, ev.From = wire.SwimSuspect, from
		case wire.SwimStateDead:
			ev.Kind, ev.From = wire.SwimDead, from
		case wire.SwimStateLeft:
			ev.Kind = wire.SwimLeave
		}
		if ev.Kind == wire.SwimSuspect || ev.Kind == wire.SwimDead {
			// A suspect or dead member we have not met yet: learn its
			// address from the Alive form first.
			if n.members[string(pm.Node)] == nil && string(pm.Node) != n.self.ID {
				alive := ev
				alive.Kind = wire.SwimAlive
				alive.SwimAddr, alive.ClientAddr, alive.PeerAddr, alive.Rack, alive.Meta = pm.SwimAddr, pm.ClientAddr, pm.PeerAddr, pm.Rack, pm.Meta
				if ev.Kind == wire.SwimDead {
					n.apply(now, &ev)
					if m := n.members[string(pm.Node)]; m != nil {
						n.setAddrs(m, &alive)
					}
					continue
				}
				n.apply(now, &alive)
			}
		}
		n.apply(now, &ev)
	}
	for i := range p.Leaders {
		l := &p.Leaders[i]
		n.applyShardLeader(l.Shard, string(l.Leader), l.Term)
	}
	for i := range p.Versions {
		v := &p.Versions[i]
		n.applyVersion(string(v.Node), v.MetaKind, v.Version)
	}
	n.stats.PushPulls++
	return nil
}

// HandlePushPull answers a push-pull another node started: it merges the
// remote state req and returns this node's state (a new slice) to send
// back in a KindPushPull frame.
//
// A request by digests is answered with this node's digests and its
// entries of the buckets that differ; a partial one without digests (the
// asker's entries the answer showed this node lacked) with an empty
// partial state; a whole state with this node's whole state.
func (n *Node) HandlePushPull(now time.Time, req []byte) ([]byte, error) {
	if err := n.mergeState(now, req); err != nil {
		return nil, err
	}
	switch p := &n.pp; {
	case len(p.Digests) > 0:
		n.theirs = append(n.theirs[:0], p.Digests...)
		n.diff(n.theirs)
		n.pp.Digests = n.sums
		return n.encodePushPull(), nil
	case p.Partial:
		p.Members, p.Leaders, p.Versions = p.Members[:0], p.Leaders[:0], p.Versions[:0]
		p.Join = false
		return n.encodePushPull(), nil
	}
	return n.encodeState(false), nil
}

// pushDiffering ends an exchange by digests whose answer carried theirs:
// the buckets that still differ once the answer is merged hold what this
// node knows and the answerer does not, and go to it in one more
// exchange.
func (n *Node) pushDiffering(addr string, theirs []uint64, received int) {
	if n.diff(theirs) == 0 {
		if received == 0 {
			n.stats.PushPullsInSync++
		}
		return
	}
	n.startPushPull(ppPending{addr: addr}, n.encodePushPull())
}

// PushPullDone gives the node the answer to its PushPullRequest id: the
// remote state, or the error that prevented the exchange.
//
// It returns whether the exchange was a join attempt, and why it failed
// (the transport's error, or why the state was refused), nil if it did
// not.
func (n *Node) PushPullDone(now time.Time, id uint64, reply []byte, err error) (join bool, _ error) {
	i := slices.IndexFunc(n.ppPending, func(p ppPending) bool { return p.id == id })
	if i < 0 {
		return false, nil
	}
	pending := n.ppPending[i]
	n.ppPending = slices.Delete(n.ppPending, i, i+1)
	if err == nil {
		err = n.mergeState(now, reply)
	}
	if err != nil {
		n.stats.PushPullFailures++
		if pending.join {
			n.joinFailed(now)
		}
		return pending.join, err
	}
	if p := &n.pp; pending.digest && len(p.Digests) > 0 && !n.leaving {
		n.theirs = append(n.theirs[:0], p.Digests...)
		n.pushDiffering(pending.addr, n.theirs, len(p.Members)+len(p.Leaders)+len(p.Versions))
	}
	if pending.join {
		n.joinPending = false
		n.joinBackoff = n.cfg.JoinRetryMin
		if n.joining {
			n.joining = false
			// Those who joined at the same moment reached the seed after
			// we did: one more exchange with it soon picks them all up.
			n.syncAt = now.Add(n.cfg.JoinSyncDelay + n.jitter(n.cfg.JoinSyncDelay/2))
			n.syncAddr = pending.addr
		}
		n.nextJoin = now.Add(n.cfg.JoinRetryMin)
	}
	return pending.join, nil
}

// ringKey places a member on the aligned probe ring.
func ringKey(id string) uint64 {
	// FNV-1a, then a finalizer so that ids differing in one digit spread.
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// alignProbe returns the first time at or after t at this node's phase of
// the probe slot.
func (n *Node) alignProbe(t time.Time) time.Time {
	if n.cfg.ProbeOrder != ProbeAligned {
		return t.Add(n.cfg.ProbeInterval / 2)
	}
	iv := int64(n.cfg.ProbeInterval)
	x := t.UnixNano() - int64(n.phase)
	r := ((x % iv) + iv) % iv
	if r == 0 {
		return t
	}
	return t.Add(time.Duration(iv - r))
}

// alignedTarget is the ring member (slot mod (L-1))+1 places after self.
func (n *Node) alignedTarget(now time.Time) *member {
	if n.ringDirty {
		n.ring = n.ring[:0]
		n.ring = append(n.ring, n.selfM)
		for _, m := range n.order {
			if isLive(m) && m.SwimAddr != "" {
				n.ring = append(n.ring, m)
			}
		}
		slices.SortFunc(n.ring, func(a, b *member) int {
			if c := cmpU64(a.ringKey, b.ringKey); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		n.ringDirty = false
	}
	l := len(n.ring)
	if l < 2 {
		return nil
	}
	p := slices.Index(n.ring, n.selfM)
	slot := (now.UnixNano() - int64(n.phase) + int64(n.cfg.ProbeInterval)/2) / int64(n.cfg.ProbeInterval)
	j := int(uint64(slot) % uint64(l-1))
	m := n.ring[(p+1+j)%l]
	if m == n.selfM || !isLive(m) || m.reaped {
		return nil
	}
	return m
}
