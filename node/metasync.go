package node

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Malformed MetadataPush payloads.
var (
	errBadLeaderTable = errors.New("node: malformed shard-leader table")
	errBadMembers     = errors.New("node: malformed member list")
)

// Versioned metadata kinds, indexed 0..2 (wire.MetaKind - 1).
const (
	kMembers = iota
	kRing
	kLeaders
	numMetaKinds
)

var metaKinds = [numMetaKinds]wire.MetaKind{wire.MetaMembership, wire.MetaRing, wire.MetaShardLeaders}

// MetadataVersions are the versions of the cluster metadata a node holds
// (see the package documentation for what each counts).
type MetadataVersions struct {
	Membership, Ring, ShardLeaders uint64
}

func (v MetadataVersions) get(k int) uint64 {
	switch k {
	case kMembers:
		return v.Membership
	case kRing:
		return v.Ring
	}
	return v.ShardLeaders
}

func live(s swim.State) bool { return s == swim.StateAlive || s == swim.StateSuspect }

func recordsOf(ms []swim.Member) []wire.MemberRecord {
	out := make([]wire.MemberRecord, len(ms))
	for i, m := range ms {
		out[i] = wire.MemberRecord{ID: []byte(m.ID), Rack: []byte(m.Rack), SwimAddr: []byte(m.SwimAddr),
			Generation: m.Generation, Incarnation: m.Incarnation, State: wire.MemberState(m.State)}
	}
	return out
}

// leaderVersion is the version of the shard-leader table: the sum of its
// terms. Terms only rise, so a higher sum means a newer view of at least one
// shard; two nodes with equal sums usually agree.
func (n *Node) leaderVersion() uint64 { return n.leaders.TermSum() }

// leaderRows is the table as wire's rows.
func leaderRows(rows []router.ShardLeader) []wire.LeaderRow {
	out := make([]wire.LeaderRow, len(rows))
	for i, r := range rows {
		out[i] = wire.LeaderRow{Shard: uint64(r.Shard), Term: r.Term, Leader: []byte(r.Leader)}
	}
	return out
}

// mergeLeaderTable applies an encoded table, term-checked row by row.
func (n *Node) mergeLeaderTable(b []byte) error {
	rows, err := wire.DecodeLeaderTable(b, uint64(n.cfg.Shards), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadLeaderTable, err)
	}
	for _, r := range rows {
		_, _ = n.leaders.Update(uint32(r.Shard), string(r.Leader), r.Term)
	}
	return nil
}

// pullState is the pull of one kind in flight.
type pullState struct {
	peer     string // "" when none is in flight
	want     uint64 // the version that caused it
	deadline time.Time
	tried    []string // peers asked since the pull began
}

// pullReq is a pull to send.
type pullReq struct {
	kind int
	peer string
}

// syncTracker decides which pulls to send: at once to a peer announcing a
// newer version, to another peer when one does not answer within timeout,
// every kind from a random live peer every interval (which bounds
// staleness when announcements are lost), and until the first full sync
// every kind from any live peer. Time is passed in; it does no I/O.
type syncTracker struct {
	timeout, interval time.Duration
	pulls             [numMetaKinds]pullState
	heard             [numMetaKinds]map[string]uint64 // peer → highest version announced
	synced            [numMetaKinds]bool
	lastFull          time.Time
}

func newSyncTracker(timeout, interval time.Duration) syncTracker {
	t := syncTracker{timeout: timeout, interval: interval}
	for k := range t.heard {
		t.heard[k] = make(map[string]uint64)
	}
	return t
}

// fullySynced reports whether every kind was merged from a peer once.
func (t *syncTracker) fullySynced() bool {
	return t.synced[kMembers] && t.synced[kRing] && t.synced[kLeaders]
}

// announce records that peer holds version v of kind k; have is this
// node's. It returns whether to pull from peer now.
func (t *syncTracker) announce(k int, peer string, v, have uint64, now time.Time) bool {
	if v > t.heard[k][peer] {
		t.heard[k][peer] = v
	}
	if v <= have {
		return false
	}
	p := &t.pulls[k]
	if p.peer != "" && now.Before(p.deadline) {
		p.want = max(p.want, v)
		return false
	}
	t.start(k, peer, v, now)
	return true
}

func (t *syncTracker) start(k int, peer string, want uint64, now time.Time) {
	p := &t.pulls[k]
	if p.peer == "" {
		p.tried = p.tried[:0]
	}
	p.peer, p.want, p.deadline = peer, max(p.want, want), now.Add(t.timeout)
	if !slices.Contains(p.tried, peer) {
		p.tried = append(p.tried, peer)
	}
}

// merged records that a push of kind k from peer was merged and that this
// node now holds version have.
func (t *syncTracker) merged(k int, have uint64) {
	t.synced[k] = true
	if p := &t.pulls[k]; have >= p.want {
		*p = pullState{tried: p.tried[:0]}
	}
}

// forget drops what a gone member announced.
func (t *syncTracker) forget(peer string) {
	for k := range t.heard {
		delete(t.heard[k], peer)
	}
}

// due returns the pulls to send at now. have holds this node's versions,
// peers the live members other than this node (sorted), intn a random
// source.
func (t *syncTracker) due(now time.Time, have MetadataVersions, peers []string, intn func(int) int) []pullReq {
	if len(peers) == 0 {
		return nil
	}
	var out []pullReq
	full := now.Sub(t.lastFull) >= t.interval
	for k := range numMetaKinds {
		p := &t.pulls[k]
		switch {
		case p.peer != "" && have.get(k) >= p.want && t.synced[k]:
			*p = pullState{tried: p.tried[:0]}
		case p.peer != "" && !now.Before(p.deadline):
			// No answer in time (or the answer was not enough): another
			// peer, preferably one that announced the wanted version.
			peer := t.fallback(k, peers, intn)
			t.start(k, peer, p.want, now)
			out = append(out, pullReq{kind: k, peer: peer})
			continue
		}
		if p.peer == "" && (full || !t.synced[k]) {
			peer := peers[intn(len(peers))]
			t.start(k, peer, 0, now)
			out = append(out, pullReq{kind: k, peer: peer})
		}
	}
	if full {
		t.lastFull = now
	}
	return out
}

func (t *syncTracker) fallback(k int, peers []string, intn func(int) int) string {
	p := &t.pulls[k]
	var best string
	var bestV uint64
	for _, id := range peers {
		if v := t.heard[k][id]; v >= p.want && v > bestV && !slices.Contains(p.tried, id) {
			best, bestV = id, v
		}
	}
	if best != "" {
		return best
	}
	var fresh []string
	for _, id := range peers {
		if !slices.Contains(p.tried, id) {
			fresh = append(fresh, id)
		}
	}
	if len(fresh) == 0 {
		p.tried = p.tried[:0]
		fresh = peers
	}
	return fresh[intn(len(fresh))]
}

// metaSync is the node's side of cluster metadata versions.
type metaSync struct {
	mu         sync.Mutex
	memVer     uint64 // Lamport version of the membership
	memDigest  uint64
	ringVer    uint64 // Lamport version of the ring
	ringDigest uint64
	track      syncTracker
	announced  MetadataVersions // event loop only
}

// MetadataVersions reports the node's versions of the cluster metadata.
func (n *Node) MetadataVersions() MetadataVersions {
	n.msync.mu.Lock()
	v := MetadataVersions{Membership: n.msync.memVer, Ring: n.msync.ringVer}
	n.msync.mu.Unlock()
	v.ShardLeaders = n.leaderVersion()
	return v
}

// observeMembers updates the membership and ring versions from a fresh
// view: a version rises by one when its digest changed.
func (n *Node) observeMembers(ms []swim.Member) {
	md, rd := wire.MembershipDigests(recordsOf(ms))
	s := &n.msync
	s.mu.Lock()
	if md != s.memDigest {
		s.memDigest = md
		s.memVer++
	}
	if rd != s.ringDigest {
		s.ringDigest = rd
		s.ringVer++
	}
	s.mu.Unlock()
}

// sendPull asks peer for its copy of kind k; the answer arrives as a
// MetadataPush frame and is merged whenever it comes.
func (n *Node) sendPull(k int, peer string, have uint64) {
	f, start := wire.BeginFrame(nil, wire.KindMetadataPull, 0)
	f = wire.AppendMetadataPull(f, &wire.MetadataPull{Kind: metaKinds[k], Have: have})
	if f, err := wire.EndFrame(f, start); err == nil {
		if n.net.Send(peer, f) == nil {
			n.counters.metaPulls.Add(1)
		}
	}
}

// serveMetadataPull answers a peer's pull with this node's copy of the
// kind and its version. Served whether or not this node is ready, so that
// nodes starting together never wait on each other.
func (n *Node) serveMetadataPull(c Conn, h wire.Header, payload []byte) {
	var m wire.MetadataPull
	if err := wire.DecodeMetadataPull(payload, &m); err != nil {
		return
	}
	push := wire.MetadataPush{Kind: m.Kind}
	switch m.Kind {
	case wire.MetaShardLeaders:
		rows, _ := n.leaders.Snapshot(nil)
		for _, r := range rows {
			push.Version += r.Term
		}
		push.Data = wire.AppendLeaderTable(nil, leaderRows(rows))
	default:
		ms := n.swim.Members()
		vs := n.MetadataVersions()
		push.Version = vs.Membership
		if m.Kind == wire.MetaRing {
			push.Version = vs.Ring
		}
		push.Data = wire.AppendMemberRecords(nil, recordsOf(ms))
	}
	f, start := wire.BeginFrame(nil, wire.KindMetadataPush, h.RequestID)
	f = wire.AppendMetadataPush(f, &push)
	if f, err := wire.EndFrame(f, start); err == nil {
		_ = c.Write(f)
	}
}

// onMetadataPush merges what a peer pushed; runs on a request goroutine.
func (n *Node) onMetadataPush(from string, payload []byte) {
	var m wire.MetadataPush
	if err := wire.DecodeMetadataPush(payload, &m); err != nil {
		return
	}
	k := int(m.Kind) - 1
	if k == kLeaders {
		if err := n.mergeLeaderTable(m.Data); err != nil {
			n.log.Warn("node: metadata push", "from", from, "kind", m.Kind, "err", err)
			return
		}
		have := n.leaderVersion()
		n.msync.mu.Lock()
		n.msync.track.merged(k, have)
		n.msync.mu.Unlock()
	} else {
		rs, err := wire.DecodeMemberRecords(m.Data, nil)
		if err != nil {
			err = fmt.Errorf("%w: %w", errBadMembers, err)
			n.log.Warn("node: metadata push", "from", from, "kind", m.Kind, "err", err)
			return
		}
		if !n.mergeMembers(from, k, m.Version, rs) {
			return
		}
	}
	n.counters.metaSyncs.Add(1)
	n.lastSync.Store(n.clock().UnixNano())
	n.events.wake()
}

// mergeMembers handles a pushed member list for kind k (membership or
// ring, whose only input is the membership). When the peer knows a member
// newer than SWIM here does, SWIM runs its full-state exchange with that
// peer (its merge rules decide) and the pull stays pending, to be repeated
// after the pull timeout. Otherwise this node knows at least what the peer
// knows: it takes the peer's version if its own digest matches the
// peer's, or one above it if it knows more (so that the peer pulls in
// turn). It reports whether the push was merged.
func (n *Node) mergeMembers(from string, k int, ver uint64, rs []wire.MemberRecord) bool {
	mine := n.swim.Members()
	byID := make(map[string]*swim.Member, len(mine))
	for i := range mine {
		byID[mine[i].ID] = &mine[i]
	}
	var peerAddr string
	newer := false
	for i := range rs {
		r := &rs[i]
		st := swim.State(r.State)
		if string(r.ID) == from {
			peerAddr = string(r.SwimAddr)
		}
		if string(r.ID) == n.cfg.ID {
			continue
		}
		m := byID[string(r.ID)]
		if (m == nil && live(st)) || (m != nil && swim.Supersedes(r.Generation, r.Incarnation, st, m.Generation, m.Incarnation, m.State)) {
			newer = true
		}
	}
	if newer {
		if peerAddr != "" {
			n.swim.Join(append([]string{peerAddr}, n.cfg.Join...))
		}
		return false
	}
	md, rd := wire.MembershipDigests(rs)
	s := &n.msync
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, mineD, peerD := &s.memVer, s.memDigest, md
	if k == kRing {
		cur, mineD, peerD = &s.ringVer, s.ringDigest, rd
	}
	switch {
	case mineD == peerD:
		*cur = max(*cur, ver)
	case *cur <= ver:
		*cur = ver + 1
	}
	s.track.merged(k, *cur)
	return true
}

// onVersionAnnounced handles a SWIM MetadataVersion event: pull at once
// from a peer with a newer version. Event loop only.
func (n *Node) onVersionAnnounced(e swim.Event) {
	k := int(e.MetaKind) - 1
	if k < 0 || k >= numMetaKinds || e.Leader == n.cfg.ID || e.Leader == "" {
		return
	}
	have := n.MetadataVersions().get(k)
	n.msync.mu.Lock()
	pull := n.msync.track.announce(k, e.Leader, e.Version, have, n.clock())
	n.msync.mu.Unlock()
	if pull {
		n.sendPull(k, e.Leader, have)
	}
}

// metadataTick announces this node's versions through SWIM and sends the
// pulls that are due. Event loop only.
func (n *Node) metadataTick(v *clusterView) {
	vs := n.MetadataVersions()
	s := &n.msync
	for k := range numMetaKinds {
		if ver := vs.get(k); ver != s.announced.get(k) {
			n.swim.SetMetadataVersion(uint64(metaKinds[k]), ver)
		}
	}
	s.announced = vs
	peers := make([]string, 0, len(v.live))
	for _, id := range v.live {
		if id != n.cfg.ID {
			peers = append(peers, id)
		}
	}
	s.mu.Lock()
	for k := range s.track.heard {
		for id := range s.track.heard[k] {
			if v.dead[id] {
				s.track.forget(id)
			}
		}
	}
	reqs := s.track.due(n.clock(), vs, peers, n.randIntN)
	s.mu.Unlock()
	for _, r := range reqs {
		n.sendPull(r.kind, r.peer, vs.get(r.kind))
	}
}

// metadataSynced reports whether the node completed its first full sync,
// or found itself alone: no live peer known once SWIM had time to join (a
// node bootstrapping a cluster of one, or whose seeds are all down, must
// not wait for a sync that cannot happen).
func (n *Node) metadataSynced() bool {
	n.msync.mu.Lock()
	full := n.msync.track.fullySynced()
	n.msync.mu.Unlock()
	if full {
		return true
	}
	v := n.view.Load()
	alone := len(v.live) <= 1 && (len(v.live) == 0 || v.live[0] == n.cfg.ID)
	return alone && (len(n.cfg.Join) == 0 || n.clock().Sub(n.startedAt) > aloneGrace)
}

// aloneGrace: how long a node given seeds waits to hear of a peer before it
// counts itself alone.
const aloneGrace = 5 * time.Second
