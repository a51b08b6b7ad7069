package metasync

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Env is what the sync touches of the rest of the node. Its methods are
// called without the sync's lock held.
type Env interface {
	// Send queues a frame for a peer; an error means it was not sent.
	Send(peer string, frame []byte) error
	// Members is SWIM's member list, sorted by id.
	Members() []swim.Member
	// Join makes SWIM exchange its full state with the first of seeds that
	// answers (swim.Driver.Join).
	Join(seeds []string)
	// SetMetadataVersion announces this node's version of a kind (a
	// wire.MetaKind) through SWIM.
	SetMetadataVersion(kind, version uint64)
	// Now is the node's clock.
	Now() time.Time
	// IntN draws a number in [0, n) from the node's random source.
	IntN(n int) int
	// Merged says that a push was merged (the node may now be ready).
	Merged()
}

// Config configures a Sync.
type Config struct {
	// Self is this node's id. Required.
	Self string
	// Seeds are the SWIM addresses this node was given to join. SWIM is
	// asked to exchange its state with them, after the peer whose list
	// holds a newer member; a node given none never waits for a peer to
	// sync with.
	Seeds []string
	// PullTimeout is how long a pull may stay unanswered (or answered with
	// less than the announced version) before another peer is asked.
	// Required; the node's default is 1 s.
	PullTimeout time.Duration
	// Interval bounds staleness: at least this often every kind is pulled
	// from a random live peer, even when no newer version was announced
	// (announcements are gossip and may be lost). Required; the node's
	// default is 10 s.
	Interval time.Duration
	// Leaders is the node's shard-leader table, which pushes of that kind
	// update (term-checked) and pulls of it read. Required.
	Leaders *router.LeaderTable
	// Env is the rest of the node. Required.
	Env Env
	// BucketRecords is the records of a copy per bucket when a pull names
	// its buckets (delta.go). Default DefaultBucketRecords.
	BucketRecords int
	// Logger takes the pushes that do not decode. Default slog.Default().
	Logger *slog.Logger
}

// AloneGrace is how long a node given seeds waits to hear of a peer before
// it counts itself alone (Synced).
const AloneGrace = 5 * time.Second

// Stats are the sync's counters.
type Stats struct {
	Pulls  uint64 // pulls sent (every kind)
	Merges uint64 // pushes received and merged
}

// Sync is a node's side of the cluster metadata sync: the tracker and the
// versions of the membership and the ring under one lock, and the frames
// it sends and answers. Safe for concurrent use; Announced and Tick are
// called from the node's event loop only.
type Sync struct {
	cfg Config
	env Env

	mu      sync.Mutex
	members digestVersion // the membership's version
	ring    digestVersion // the ring's version
	track   tracker
	// announced: the versions last said through SWIM.
	announced Versions

	pulls, merges atomic.Uint64
}

// New returns a Sync that has merged nothing yet.
func New(cfg Config) (*Sync, error) {
	switch {
	case cfg.Self == "":
		return nil, errors.New("metasync: Self required")
	case cfg.PullTimeout <= 0, cfg.Interval <= 0:
		return nil, fmt.Errorf("metasync: PullTimeout %v and Interval %v must be positive", cfg.PullTimeout, cfg.Interval)
	case cfg.Leaders == nil, cfg.Env == nil:
		return nil, errors.New("metasync: Leaders and Env required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.BucketRecords <= 0 {
		cfg.BucketRecords = DefaultBucketRecords
	}
	return &Sync{cfg: cfg, env: cfg.Env, track: newTracker(cfg.PullTimeout, cfg.Interval)}, nil
}

// Versions reports this node's versions of the cluster metadata.
func (s *Sync) Versions() Versions {
	s.mu.Lock()
	v := Versions{Membership: s.members.version, Ring: s.ring.version}
	s.mu.Unlock()
	v.ShardLeaders = s.cfg.Leaders.TermSum()
	return v
}

// Stats returns the sync's counters.
func (s *Sync) Stats() Stats {
	return Stats{Pulls: s.pulls.Load(), Merges: s.merges.Load()}
}

// Observe updates the membership and ring versions from a fresh view of
// SWIM's members: a version rises by one when its digest changed.
func (s *Sync) Observe(ms []swim.Member) {
	md, rd := wire.MembershipDigests(recordsOf(ms))
	s.mu.Lock()
	s.members.observe(md)
	s.ring.observe(rd)
	s.mu.Unlock()
}

// Synced reports whether the node completed its first full sync, or found
// itself alone: no live peer known once SWIM had time to join (a node
// bootstrapping a cluster of one, or whose seeds are all down, must not
// wait for a sync that cannot happen). live are the live members (sorted),
// started is when the node started.
func (s *Sync) Synced(live []string, started time.Time) bool {
	s.mu.Lock()
	full := s.track.fullySynced()
	s.mu.Unlock()
	if full {
		return true
	}
	alone := len(live) <= 1 && (len(live) == 0 || live[0] == s.cfg.Self)
	return alone && (len(s.cfg.Seeds) == 0 || s.env.Now().Sub(started) > AloneGrace)
}

// Announced handles a SWIM MetadataVersion event, peer holding version of
// kind (a wire.MetaKind): a pull at once from a peer with a newer version
// than this node's. Event loop only.
func (s *Sync) Announced(kind uint64, peer string, version uint64) {
	k, ok := kindOf(kind)
	if !ok || peer == s.cfg.Self || peer == "" {
		return
	}
	have := s.Versions().get(k)
	s.mu.Lock()
	pull := s.track.announce(k, peer, version, have, s.env.Now())
	s.mu.Unlock()
	if pull {
		s.sendPull(k, peer, have, true)
	}
}

// Tick announces this node's versions through SWIM where they changed,
// forgets what members now dead announced, and sends the pulls that are
// due. live are the live members (sorted; this node may be among them),
// dead those declared dead or gone. Event loop only.
func (s *Sync) Tick(live []string, dead map[string]bool) {
	vs := s.Versions()
	s.mu.Lock()
	was := s.announced
	s.announced = vs
	s.mu.Unlock()
	for k := range numKinds {
		if ver := vs.get(k); ver != was.get(k) {
			s.env.SetMetadataVersion(uint64(wireKinds[k]), ver)
		}
	}
	peers := make([]string, 0, len(live))
	for _, id := range live {
		if id != s.cfg.Self {
			peers = append(peers, id)
		}
	}
	s.mu.Lock()
	for k := range s.track.heard {
		for id := range s.track.heard[k] {
			if dead[id] {
				s.track.forget(id)
			}
		}
	}
	reqs := s.track.due(s.env.Now(), vs, peers, s.env.IntN)
	s.mu.Unlock()
	for _, r := range reqs {
		s.sendPull(r.kind, r.peer, vs.get(r.kind), r.announced)
	}
}

// sendPull asks peer for what it has of kind k that this node's copy
// lacks, naming the copy by its digest and, when a newer version was
// announced, by its buckets' (delta.go); the answer arrives as a
// MetadataPush frame and is merged whenever it comes.
func (s *Sync) sendPull(k kind, peer string, have uint64, announced bool) {
	per := 0
	if announced {
		per = s.cfg.BucketRecords
	}
	var m wire.MetadataPull
	if k == kLeaders {
		rows, _ := s.cfg.Leaders.Snapshot(nil)
		m = leaderTable(leaderRows(rows)).pull(wireKinds[k], have, per)
	} else {
		m = members(recordsOf(s.env.Members())).pull(wireKinds[k], have, per)
	}
	f, start := wire.BeginFrame(nil, wire.KindMetadataPull, 0)
	f = wire.AppendMetadataPull(f, &m)
	if f, err := wire.EndFrame(f, start); err == nil {
		if s.env.Send(peer, f) == nil {
			s.pulls.Add(1)
		}
	}
}

// AnswerPull answers a peer's pull (a MetadataPull payload, in the frame
// numbered reqID) with what this node's copy of the kind holds that the
// peer's lacks (delta.go), and its version, as a MetadataPush frame to
// write back; nil when the pull does not decode.
// Answered whether or not this node is ready, so that nodes starting
// together never wait on each other.
func (s *Sync) AnswerPull(reqID uint64, payload []byte) []byte {
	var m wire.MetadataPull
	if err := wire.DecodeMetadataPull(payload, &m); err != nil {
		return nil
	}
	push := wire.MetadataPush{Kind: m.Kind}
	switch m.Kind {
	case wire.MetaShardLeaders:
		rows, _ := s.cfg.Leaders.Snapshot(nil)
		for _, r := range rows {
			push.Version += r.Term
		}
		push.Form, push.Data = leaderTable(leaderRows(rows)).answer(&m)
	default:
		rs := recordsOf(s.env.Members())
		vs := s.Versions()
		md, rd := wire.MembershipDigests(rs)
		push.Version, push.Digest = vs.Membership, md
		if m.Kind == wire.MetaRing {
			push.Version, push.Digest = vs.Ring, rd
		}
		push.Form, push.Data = members(rs).answer(&m)
	}
	f, start := wire.BeginFrame(nil, wire.KindMetadataPush, reqID)
	f = wire.AppendMetadataPush(f, &push)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		return nil
	}
	return f
}

// MergePush merges what a peer pushed (a MetadataPush payload).
func (s *Sync) MergePush(from string, payload []byte) {
	var m wire.MetadataPush
	if err := wire.DecodeMetadataPush(payload, &m); err != nil {
		return
	}
	k, _ := kindOf(uint64(m.Kind)) // the decoder admits known kinds only
	if k == kLeaders {
		// A PushSame holds nothing this node lacks.
		if m.Form != wire.PushSame {
			if err := mergeLeaderTable(s.cfg.Leaders, m.Data); err != nil {
				s.cfg.Logger.Warn("metasync: push", "from", from, "kind", m.Kind, "err", err)
				return
			}
		}
		have := s.cfg.Leaders.TermSum()
		s.mu.Lock()
		s.track.merged(k, have)
		s.mu.Unlock()
	} else {
		var rs []wire.MemberRecord // none when the peer's list is this node's
		if m.Form != wire.PushSame {
			var err error
			if rs, err = wire.DecodeMemberRecords(m.Data, nil); err != nil {
				err = fmt.Errorf("%w: %w", errBadMembers, err)
				s.cfg.Logger.Warn("metasync: push", "from", from, "kind", m.Kind, "err", err)
				return
			}
		}
		if !s.mergeMembers(from, k, m.Version, m.Digest, rs) {
			return
		}
	}
	s.merges.Add(1)
	s.env.Merged()
}

// mergeMembers handles a pushed member list for kind k (membership or
// ring, whose only input is the membership): rs are the records this
// node's list lacked (all of the peer's, or those of the buckets that
// differ), peerDigest the peer's digest of kind k. When the peer knows a
// member newer than SWIM here does, SWIM runs its full-state exchange with
// that peer (its merge rules decide) and the pull stays pending, to be
// repeated after the pull timeout. Otherwise this node knows at least what
// the peer knows, and the version follows digestVersion.merge. It reports
// whether the push was merged.
func (s *Sync) mergeMembers(from string, k kind, ver, peerDigest uint64, rs []wire.MemberRecord) bool {
	mine := s.env.Members()
	if newer, addr := newerMember(s.cfg.Self, from, mine, rs); newer {
		if addr == "" {
			// A delta need not hold the peer's own record.
			addr = swimAddrOf(mine, from)
		}
		if addr != "" {
			s.env.Join(append([]string{addr}, s.cfg.Seeds...))
		}
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := &s.members
	if k == kRing {
		d = &s.ring
	}
	d.merge(ver, peerDigest)
	s.track.merged(k, d.version)
	return true
}

// swimAddrOf is id's SWIM address in the member list ms ("" if it is not
// there).
func swimAddrOf(ms []swim.Member, id string) string {
	for i := range ms {
		if ms[i].ID == id {
			return ms[i].SwimAddr
		}
	}
	return ""
}
