package router

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/zeebo/xxh3"
)

// Walk selects the order in which a shard's walk visits the nodes.
type Walk uint8

const (
	// WalkRendezvous visits nodes in descending order of a per-(node,
	// shard) score, xxh3-derived (rendezvous or highest-random-weight
	// hashing): the ring of V = ∞ tokens. Default.
	WalkRendezvous Walk = iota
	// WalkTokens visits nodes clockwise on a ring of V tokens per node,
	// starting at the shard's token.
	WalkTokens
)

// String names the walk as the placement bench's -walk flag does.
func (w Walk) String() string {
	switch w {
	case WalkRendezvous:
		return "rendezvous"
	case WalkTokens:
		return "tokens"
	}
	return "walk(" + strconv.Itoa(int(w)) + ")"
}

// DefaultVNodes is the number of ring tokens per node for WalkTokens when
// RingConfig.VNodes is zero. bench/README.md ("Placement") has the
// measurements: at 256 tokens the busiest node holds up to 1.15–1.21× its
// fair share of replicas, at 1024 up to 1.09–1.10×, at four times the memory
// and build time; rendezvous reaches 1.05–1.08× with no tokens at all.
const DefaultVNodes = 256

// MaxVNodes bounds RingConfig.VNodes.
const MaxVNodes = 4096

// MaxReplicas bounds the replication factor a walk returns; a larger request
// is clamped. Raft groups with more voters than this are not useful.
const MaxReplicas = 16

// shardSeed separates shard tokens from node tokens.
const shardSeed = 0x5368_6f61_6c53_6864 // "ShoalShd"

// Member is one node on the ring.
type Member struct {
	ID   string // node id, unique and non-empty
	Rack string // failure domain; nodes with the same rack string share it
}

// RingConfig configures NewRing.
type RingConfig struct {
	// Walk selects the walk; default WalkRendezvous. Every node of a
	// cluster must use the same walk.
	Walk Walk
	// VNodes is the number of tokens per node. Default DefaultVNodes; at most
	// MaxVNodes. Used by WalkTokens only. Every node of a cluster must use
	// the same value.
	VNodes int
	// ReplicaSlack, when positive, makes Placement bound replica loads: a
	// shard's walk skips a node that already holds more than
	// (1+ReplicaSlack) times its fair share of replicas (given its rack's
	// size) while another node its rack rule allows remains. Default 0:
	// off, the walk alone places replicas. Bounded loads even out replica
	// counts but break minimal movement (a join or leave shifts the
	// counts, and with them the choices of every later shard); see
	// bench/README.md, "Placement". At most MaxReplicaSlack. Every node of
	// a cluster must use the same value.
	ReplicaSlack float64
}

// MaxReplicaSlack bounds RingConfig.ReplicaSlack.
const MaxReplicaSlack = 10

// Ring is the immutable placement function of one member set: the walk
// (rendezvous by default, or a token ring of virtual nodes) and the rack of
// every node. Build a new one from the new member set on every membership
// change; the same member set gives the same Ring whatever order it is given
// in. A Ring is safe for concurrent use.
type Ring struct {
	tokens []uint64 // sorted ascending
	owner  []uint32 // node index of tokens[i]
	nodes  []Member // sorted by ID; a node's index is its position here
	rackOf []uint32 // node index -> rack index
	racks  []string // sorted distinct rack names
	vnodes int

	kind     Walk
	nodeHash []uint64 // xxh3(id), the rendezvous seeds
	slack    float64  // RingConfig.ReplicaSlack
}

type token struct {
	hash uint64
	node uint32
}

// NewRing builds the ring for a member set. Members must have distinct,
// non-empty ids. An empty member set gives an empty ring whose walks return
// no replicas.
func NewRing(members []Member, cfg RingConfig) (*Ring, error) {
	v := cfg.VNodes
	if v == 0 {
		v = DefaultVNodes
	}
	if v < 0 || v > MaxVNodes {
		return nil, fmt.Errorf("router: vnodes %d not in [1, %d]: %w", cfg.VNodes, MaxVNodes, ErrConfig)
	}
	if cfg.Walk > WalkTokens {
		return nil, fmt.Errorf("router: %v: %w", cfg.Walk, ErrConfig)
	}
	if !(cfg.ReplicaSlack >= 0 && cfg.ReplicaSlack <= MaxReplicaSlack) {
		return nil, fmt.Errorf("router: replica slack %v not in [0, %d]: %w", cfg.ReplicaSlack, MaxReplicaSlack, ErrConfig)
	}
	nodes := slices.Clone(members)
	slices.SortFunc(nodes, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	for i, m := range nodes {
		if m.ID == "" {
			return nil, fmt.Errorf("router: member %d: %w", i, ErrEmptyID)
		}
		if i > 0 && nodes[i-1].ID == m.ID {
			return nil, fmt.Errorf("router: member %q: %w", m.ID, ErrDuplicateMember)
		}
	}
	r := &Ring{nodes: nodes, vnodes: v, kind: cfg.Walk, rackOf: make([]uint32, len(nodes)), slack: cfg.ReplicaSlack}
	for _, m := range nodes {
		r.racks = append(r.racks, m.Rack)
	}
	slices.Sort(r.racks)
	r.racks = slices.Compact(r.racks)
	for i, m := range nodes {
		ri, _ := slices.BinarySearch(r.racks, m.Rack)
		r.rackOf[i] = uint32(ri)
	}
	if r.kind == WalkRendezvous {
		r.vnodes = 0
		r.nodeHash = make([]uint64, len(nodes))
		for i, m := range nodes {
			r.nodeHash[i] = xxh3.HashString(m.ID)
		}
		return r, nil
	}
	toks := make([]token, 0, len(nodes)*v)
	var buf []byte
	for i, m := range nodes {
		buf = append(buf[:0], m.ID...)
		buf = append(buf, 0, 0, 0, 0)
		for j := range v {
			toks = append(toks, token{hash: nodeToken(buf, j), node: uint32(i)})
		}
	}
	r.setTokens(toks)
	return r, nil
}

// setTokens sorts toks into the ring.
func (r *Ring) setTokens(toks []token) {
	// Ties (equal 64-bit tokens) are ordered by node index, which is the
	// id order, so the ring does not depend on input order even then.
	slices.SortFunc(toks, func(a, b token) int {
		if c := cmp.Compare(a.hash, b.hash); c != 0 {
			return c
		}
		return cmp.Compare(a.node, b.node)
	})
	r.tokens = make([]uint64, len(toks))
	r.owner = make([]uint32, len(toks))
	for i, t := range toks {
		r.tokens[i] = t.hash
		r.owner[i] = t.node
	}
}

// Len returns the number of members.
func (r *Ring) Len() int { return len(r.nodes) }

// Fingerprint is a hash of what determines the placement: the walk, the
// token count, the replica slack and every member's id and rack in id order. Two rings with
// equal fingerprints place every shard alike; nodes can compare views of
// the membership by it.
func (r *Ring) Fingerprint() uint64 {
	h := xxh3.New()
	var b [8]byte
	binary.BigEndian.PutUint32(b[:4], uint32(r.kind))
	binary.BigEndian.PutUint32(b[4:], uint32(r.vnodes))
	h.Write(b[:])
	if r.slack > 0 {
		binary.BigEndian.PutUint64(b[:], math.Float64bits(r.slack))
		h.Write(b[:])
	}
	for _, m := range r.nodes {
		// Length-prefixed, so ("ab","c") and ("a","bc") differ.
		binary.BigEndian.PutUint32(b[:4], uint32(len(m.ID)))
		binary.BigEndian.PutUint32(b[4:], uint32(len(m.Rack)))
		h.Write(b[:])
		h.WriteString(m.ID)
		h.WriteString(m.Rack)
	}
	return h.Sum64()
}

// Walk returns the ring's walk.
func (r *Ring) Walk() Walk { return r.kind }

// VNodes returns the number of tokens per node; 0 for WalkRendezvous.
func (r *Ring) VNodes() int { return r.vnodes }

// Racks returns the number of distinct racks.
func (r *Ring) Racks() int { return len(r.racks) }

// Member returns the member with index i (members are indexed in id order);
// ok is false for an index outside [0, Len()).
func (r *Ring) Member(i int) (m Member, ok bool) {
	if i < 0 || i >= len(r.nodes) {
		return Member{}, false
	}
	return r.nodes[i], true
}

// Members returns a copy of the members in id order.
func (r *Ring) Members() []Member { return slices.Clone(r.nodes) }

// Index returns the index of the member with the given id.
func (r *Ring) Index(id string) (int, bool) {
	return slices.BinarySearchFunc(r.nodes, id, func(m Member, id string) int { return cmp.Compare(m.ID, id) })
}

// nodeToken returns token j of a node: xxh3 over the node id followed by j
// as 4 big-endian bytes. buf holds the id and 4 spare bytes. The index is
// hashed as part of the message rather than passed as the xxh3 seed because
// for short inputs the seed is folded in by xor, so ids that differ in a few
// bits ("n1", "n10") would share many tokens.
func nodeToken(buf []byte, j int) uint64 {
	binary.BigEndian.PutUint32(buf[len(buf)-4:], uint32(j))
	return xxh3.Hash(buf)
}

// ShardToken is a shard's hash: the ring position its token walk starts
// from, and what its rendezvous scores mix with each node's hash.
func ShardToken(shard uint32) uint64 {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], shard)
	return xxh3.HashSeed(b[:], shardSeed)
}

// walk fills out with the node indexes of a shard's replicas in walk order
// and returns how many it found: min(rf, members, MaxReplicas).
//
// It takes distinct nodes in walk order, skipping a node whose rack is
// already taken while an unused rack remains. A node not taken changes
// nothing, so a membership change only moves the shards whose replica set
// contains the node that joined or left.
func (r *Ring) walk(shard uint32, rf int, out *[MaxReplicas]uint32) int {
	t := ShardToken(shard)
	if r.kind == WalkRendezvous {
		return r.rendezvous(t, rf, out)
	}
	n := len(r.tokens)
	i := sort.Search(n, func(k int) bool { return r.tokens[k] >= t })
	if i == n {
		i = 0
	}
	return r.walkFrom(i, rf, out)
}

// mix64 is the 64-bit finalizer of MurmurHash3, a bijection whose every
// output bit depends on every input bit.
func mix64(k uint64) uint64 {
	k ^= k >> 33
	k *= 0xff51afd7ed558ccd
	k ^= k >> 33
	k *= 0xc4ceb9fe1a85ec53
	k ^= k >> 33
	return k
}

// rendezvous is the walk over nodes in descending order of score(n) =
// mix64(nodeHash[n] ^ t), ties to the lower node index: each pick is the
// best-scoring node not yet taken whose rack is unused while an unused rack
// remains, and once every rack is used, the best-scoring node not yet taken.
//
// That is computed in one pass over the members: the first min(want, racks)
// picks are the best node of each of the racks whose best nodes score
// highest, kept in a small array ordered best first; a node enters it by
// beating its rack's entry, or, for a rack not in it, the weakest entry. A
// rack pushed out only held nodes that score below every entry left, so it
// cannot belong in the result unless a later node of it enters again. If
// racks are fewer than want, a second pass takes the best remaining nodes.
// The cost is O(members) scores per shard; nothing is allocated.
func (r *Ring) rendezvous(t uint64, rf int, out *[MaxReplicas]uint32) int {
	want := min(rf, len(r.nodes), MaxReplicas)
	if want <= 0 {
		return 0
	}
	var scores [MaxReplicas]uint64
	k := min(want, len(r.racks))
	got := 0
	for n := range uint32(len(r.nodes)) {
		sc := mix64(r.nodeHash[n] ^ t)
		rack := r.rackOf[n]
		at := -1 // the entry holding n's rack
		for i := range got {
			if r.rackOf[out[i]] == rack {
				at = i
				break
			}
		}
		switch {
		case at >= 0:
			if sc <= scores[at] {
				continue
			}
		case got < k:
			at = got
			got++
		default:
			if sc <= scores[got-1] {
				continue
			}
			at = got - 1
		}
		// Move n up from slot at to its place; earlier nodes win ties.
		for at > 0 && sc > scores[at-1] {
			out[at], scores[at] = out[at-1], scores[at-1]
			at--
		}
		out[at], scores[at] = n, sc
	}
	for got < want {
		// Every rack is used: the best node not yet taken.
		best, bestScore := -1, uint64(0)
		for n := range uint32(len(r.nodes)) {
			if slices.Contains(out[:got], n) {
				continue
			}
			if sc := mix64(r.nodeHash[n] ^ t); best < 0 || sc > bestScore {
				best, bestScore = int(n), sc
			}
		}
		out[got] = uint32(best)
		got++
	}
	return got
}

// walkFrom is the token walk starting at token index i: clockwise, and once
// every rack is used the next distinct nodes as they come (a second lap
// takes the nodes skipped for their rack if replicas are still short).
func (r *Ring) walkFrom(i, rf int, out *[MaxReplicas]uint32) int {
	want := min(rf, len(r.nodes), MaxReplicas)
	if want <= 0 {
		return 0
	}
	n := len(r.tokens)
	got, usedRacks, racks := 0, 0, len(r.racks)
	// Every rack is used by the end of the first lap; a second lap takes the
	// nodes skipped for their rack if the replicas are still short.
	for step := 0; step < 2*n && got < want; step++ {
		node := r.owner[i]
		if i++; i == n {
			i = 0
		}
		dup, rackTaken := false, false
		rack := r.rackOf[node]
		for _, c := range out[:got] {
			if c == node {
				dup = true
				break
			}
			if r.rackOf[c] == rack {
				rackTaken = true
			}
		}
		if dup || (rackTaken && usedRacks < racks) {
			continue
		}
		if !rackTaken {
			usedRacks++
		}
		out[got] = node
		got++
	}
	return got
}

// Replicas appends the node ids of a shard's replicas to dst in walk order
// and returns the extended slice: min(rf, members,
// MaxReplicas) distinct nodes spread over as many racks as possible. It
// allocates nothing when dst has room.
func (r *Ring) Replicas(shard uint32, rf int, dst []string) []string {
	var out [MaxReplicas]uint32
	k := r.walk(shard, rf, &out)
	for _, n := range out[:k] {
		dst = append(dst, r.nodes[n].ID)
	}
	return dst
}

// ReplicaIndexes is Replicas returning member indexes (see Member).
func (r *Ring) ReplicaIndexes(shard uint32, rf int, dst []int) []int {
	var out [MaxReplicas]uint32
	k := r.walk(shard, rf, &out)
	for _, n := range out[:k] {
		dst = append(dst, int(n))
	}
	return dst
}

// WalkLeader returns the first replica of a shard's walk, or "" on an empty
// ring. The preferred leader is Placement's, which balances leaderships.
func (r *Ring) WalkLeader(shard uint32) string {
	var out [MaxReplicas]uint32
	if r.walk(shard, 1, &out) == 0 {
		return ""
	}
	return r.nodes[out[0]].ID
}

// LeaderSlack is how far above the mean a node's count of preferred
// leaderships may go before Placement hands a shard's leadership to another
// of its replicas.
const LeaderSlack = 0.05

// Placement is the replica table of every shard of a cluster for one ring:
// the replica sets of the walk, each ordered preferred leader first.
//
// The walk leader of a shard is its first replica, but which node a walk
// puts first is a sample, and with a few hundred shards per node
// the sampling noise alone puts the busiest node 10–20% above the mean. So
// leaders are balanced with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
// "Consistent Hashing with Bounded Loads"), applied to the choice of leader
// among a shard's replicas only: shards are taken in id order and each keeps
// its walk leader unless that node already leads ceil((1+LeaderSlack)*mean)
// shards, in which case the next replica in walk order under the bound leads
// (or, if all are at the bound, the least loaded). A node still far below
// the mean then takes the leadership of some of the busier nodes' shards it
// holds a replica of (evenOut). Replica sets are the walk's and are
// untouched, so the movement of data on a membership change
// stays minimal; only leaderships shift, which costs a leadership transfer.
type Placement struct {
	ring   *Ring
	shards uint32
	width  int      // replicas per shard
	rows   []uint32 // a row of width node indexes per shard placed, leader first
	// pos is the row of each shard placed (PlacementOf); nil when the
	// rows are the base shards', in id order.
	pos    map[uint32]int32
	barred []bool // by member index: leads nothing (PlacementExcept)
}

// Placement computes the replicas of every shard in [0, shards) for
// replication factor rf (clamped as in Replicas).
func (r *Ring) Placement(shards uint32, rf int) *Placement {
	return r.PlacementExcept(shards, rf, nil)
}

// PlacementExcept is Placement with leaderships kept off the members named
// in noLead (drained nodes): they hold their replicas as in Placement, but
// a shard's preferred leader is the first of its other replicas under the
// bound (the bound counting only the other members), or, when every
// replica of the shard is in noLead, chosen as Placement would.
func (r *Ring) PlacementExcept(shards uint32, rf int, noLead []string) *Placement {
	return r.place(shards, nil, rf, noLead)
}

// PlacementOf is PlacementExcept for the live shards of a map: each of
// them placed by its own id, a split's children as the base shards, and
// the leaderships balanced over all of them. A shard the map does not
// hold but its space does (a shard that split, a child not learned yet)
// is placed by its walk alone (Replicas).
func (r *Ring) PlacementOf(m *ShardMap, rf int, noLead []string) *Placement {
	if m.Version() == 0 {
		return r.place(m.Base(), nil, rf, noLead)
	}
	ids := make([]uint32, 0, m.Len())
	for id := range m.Shards() {
		ids = append(ids, id)
	}
	return r.place(m.Base(), ids, rf, noLead)
}

// place builds the table of the shards ids (nil: the base shards
// 0..base-1) in the shard space of base.
func (r *Ring) place(base uint32, ids []uint32, rf int, noLead []string) *Placement {
	width := min(max(rf, 0), len(r.nodes), MaxReplicas)
	count := base
	if ids != nil {
		count = uint32(len(ids))
	}
	p := &Placement{ring: r, shards: base, width: width, rows: make([]uint32, int(count)*width)}
	if ids != nil {
		p.pos = make(map[uint32]int32, len(ids))
		for i, id := range ids {
			p.pos[id] = int32(i)
		}
	}
	barred := make([]bool, len(r.nodes))
	p.barred = barred
	if width == 0 {
		return p
	}
	leaders := len(r.nodes)
	for _, id := range noLead {
		if i, ok := r.Index(id); ok && !barred[i] {
			barred[i] = true
			leaders--
		}
	}
	bound := int(math.Ceil((1 + LeaderSlack) * float64(count) / float64(max(leaders, 1))))
	led := make([]int, len(r.nodes))
	var out [MaxReplicas]uint32
	var bl *boundedLoads
	if r.slack > 0 {
		bl = r.newBoundedLoads(count, width)
	}
	for i := range count {
		s := i
		if ids != nil {
			s = ids[i]
		}
		if bl != nil {
			bl.walk(s, width, &out)
		} else {
			r.walk(s, width, &out)
		}
		lead := -1
		for i, n := range out[:width] {
			if led[n] < bound && !barred[n] {
				lead = i
				break
			}
		}
		if lead < 0 {
			// Every replica at the bound (or barred): the least loaded
			// that may lead, else the least loaded.
			for i, n := range out[:width] {
				if !barred[n] && (lead < 0 || led[n] < led[out[lead]]) {
					lead = i
				}
			}
		}
		if lead < 0 {
			lead = 0
			for i, n := range out[:width] {
				if led[n] < led[out[lead]] {
					lead = i
				}
			}
		}
		led[out[lead]]++
		row := p.rows[int(i)*width : int(i+1)*width]
		row[0] = out[lead]
		copy(row[1:], out[:lead])
		copy(row[1+lead:], out[lead+1:width])
	}
	p.evenOut(led, barred, float64(count)/float64(max(leaders, 1)), bound)
	return p
}

// evenOut moves leaderships off the nodes that lead more than bound
// shards and onto those that lead fewer than floor((1-LeaderSlack)*mean).
// The bound caps the busiest while the leaders are chosen, save where
// every replica of a shard is at it, but a node that few walks put first
// can still lead far below the mean: at 15 nodes and 1,024 shards one led
// 50 against a mean of 68, leaving its share of the work to the others.
// Shards are taken in id order. One whose leader is over the bound, or
// above the mean while one of its replicas (not barred) is under the
// floor, is led by the replica that leads the fewest, if that one is
// under the floor or, for a leader over the bound, below the mean; the
// former leader comes second. Replica sets do not change.
func (p *Placement) evenOut(led []int, barred []bool, mean float64, bound int) {
	lower := int(math.Floor((1 - LeaderSlack) * mean))
	uneven := false
	for i, n := range led {
		uneven = uneven || n > bound || (!barred[i] && n < lower)
	}
	if !uneven || p.width < 2 {
		return
	}
	for s := range len(p.rows) / p.width {
		row := p.rows[s*p.width : (s+1)*p.width]
		over := led[row[0]] > bound
		if !over && float64(led[row[0]]) <= mean {
			continue
		}
		take := -1
		for i, n := range row[1:] {
			if !barred[n] && (take < 0 || led[n] < led[row[1+take]]) {
				take = i
			}
		}
		if take < 0 {
			continue
		}
		if n := led[row[1+take]]; n >= lower && !(over && float64(n+1) <= mean) {
			continue
		}
		led[row[0]]--
		led[row[1+take]]++
		n := row[1+take]
		copy(row[2:2+take], row[1:1+take])
		row[1], row[0] = row[0], n
	}
}

// Shards returns the number of shards in the table.
func (p *Placement) Shards() uint32 { return p.shards }

// Replicas appends the node ids of a shard's replicas to dst, preferred
// leader first; nothing for a shard outside the table's shard space. A
// split's child (ShardSpace, with the table's shards as the base) is
// placed by its own id, as a base shard is: the replicas of the walk
// (without the replica bound of RingConfig.ReplicaSlack), its preferred
// leader the first that may lead. So a shard's halves go where the ring
// puts them, and splits spread replicas, and the work of leading, over
// nodes that joined after the cluster's birth. It allocates nothing when
// dst has room.
func (p *Placement) Replicas(shard uint32, dst []string) []string {
	var out [MaxReplicas]uint32
	k, lead := p.place(shard, &out)
	if k == 0 {
		return dst
	}
	dst = append(dst, p.ring.nodes[out[lead]].ID)
	for i, n := range out[:k] {
		if i != lead {
			dst = append(dst, p.ring.nodes[n].ID)
		}
	}
	return dst
}

// Leader returns a shard's preferred leader (see Replicas), or "" for a
// shard outside the table's space or an empty ring.
func (p *Placement) Leader(shard uint32) string {
	var out [MaxReplicas]uint32
	k, lead := p.place(shard, &out)
	if k == 0 {
		return ""
	}
	return p.ring.nodes[out[lead]].ID
}

// place puts shard's replicas in out, in the table's order for a base
// shard and in walk order for a child, and returns how many and which of
// them is the preferred leader; 0 for a shard outside the table's space.
func (p *Placement) place(shard uint32, out *[MaxReplicas]uint32) (k, lead int) {
	if p.width == 0 {
		return 0, 0
	}
	if p.pos == nil && shard < p.shards {
		return copy(out[:], p.rows[int(shard)*p.width:int(shard+1)*p.width]), 0
	}
	if i, ok := p.pos[shard]; ok {
		return copy(out[:], p.rows[int(i)*p.width:int(i+1)*p.width]), 0
	}
	if !ShardSpace(p.shards).Valid(uint64(shard)) {
		return 0, 0
	}
	k = p.ring.walk(shard, p.width, out)
	for i, n := range out[:k] {
		if !p.barred[n] {
			return k, i
		}
	}
	return k, 0
}

// boundedLoads is the state of a Placement with RingConfig.ReplicaSlack:
// replicas held so far and the most each node may hold.
type boundedLoads struct {
	r      *Ring
	held   []int
	limit  []int
	order  []uint32 // scratch: the nodes in one shard's walk order
	scores []uint64 // scratch, rendezvous
}

func (r *Ring) newBoundedLoads(shards uint32, width int) *boundedLoads {
	b := &boundedLoads{r: r, held: make([]int, len(r.nodes)), limit: make([]int, len(r.nodes))}
	for n, share := range r.FairShares(shards, width) {
		b.limit[n] = int(math.Ceil((1 + r.slack) * share))
	}
	return b
}

// FairShares returns each member's replica count, indexed as Member, in the
// most even placement of shards × rf replicas (rf clamped as in Replicas)
// over distinct nodes in which every shard spans min(rf, racks) racks: a
// common per-node load t, water-filled, a rack's load being its node count
// × t clamped to what the rack rule allows (at most one replica of a shard
// per rack when racks ≥ rf, at least one when racks ≤ rf). With racks of
// unequal size the nodes of the smaller racks get more; the largest share
// over the mean is the floor of any rack-respecting placement's max/mean.
func (r *Ring) FairShares(shards uint32, rf int) []float64 {
	rf = min(max(rf, 0), len(r.nodes), MaxReplicas)
	out := make([]float64, len(r.nodes))
	if rf == 0 {
		return out
	}
	return r.fairShares(float64(shards), rf, out)
}

func (r *Ring) fairShares(shards float64, rf int, out []float64) []float64 {
	size := make([]int, len(r.racks))
	for _, rk := range r.rackOf {
		size[rk]++
	}
	k := len(r.racks)
	rackLoad := func(n int, t float64) float64 {
		lo, hi := 0.0, float64(min(n, rf))*shards
		if k >= rf {
			hi = shards
		}
		if k <= rf {
			lo = shards
			hi = float64(min(n, rf-k+1)) * shards
		}
		return min(max(float64(n)*t, lo), hi)
	}
	total := shards * float64(rf)
	lo, hi := 0.0, shards
	for range 100 {
		mid := (lo + hi) / 2
		sum := 0.0
		for _, n := range size {
			sum += rackLoad(n, mid)
		}
		if sum < total {
			lo = mid
		} else {
			hi = mid
		}
	}
	for n, rk := range r.rackOf {
		out[n] = rackLoad(size[rk], hi) / float64(size[rk])
	}
	return out
}

// walk is the shard's walk with bounded loads: each pick is the first node
// in walk order that the rack rule allows and that is under its limit, or,
// if every node the rack rule allows is at its limit, the first of those.
func (b *boundedLoads) walk(shard uint32, width int, out *[MaxReplicas]uint32) {
	r := b.r
	b.order = r.order(shard, b.order[:0], &b.scores)
	k := min(width, len(r.racks))
	got, usedRacks := 0, 0
	for got < width {
		pick := -1
		for _, n := range b.order {
			taken, rackTaken := false, false
			for _, c := range out[:got] {
				taken = taken || c == n
				rackTaken = rackTaken || r.rackOf[c] == r.rackOf[n]
			}
			if taken || rackTaken && usedRacks < k {
				continue
			}
			if pick < 0 {
				pick = int(n)
			}
			if b.held[n] < b.limit[n] {
				pick = int(n)
				break
			}
		}
		rackTaken := false
		for _, c := range out[:got] {
			rackTaken = rackTaken || r.rackOf[c] == r.rackOf[pick]
		}
		if !rackTaken {
			usedRacks++
		}
		out[got] = uint32(pick)
		b.held[pick]++
		got++
	}
}

// order appends every node in the shard's walk order, the rack rule not
// applied, to dst: by descending rendezvous score, or clockwise on the
// token ring from the shard's token, each node where its first token is.
func (r *Ring) order(shard uint32, dst []uint32, scores *[]uint64) []uint32 {
	t := ShardToken(shard)
	if r.kind == WalkRendezvous {
		*scores = (*scores)[:0]
		for n := range uint32(len(r.nodes)) {
			dst = append(dst, n)
			*scores = append(*scores, mix64(r.nodeHash[n]^t))
		}
		sc := *scores
		slices.SortFunc(dst, func(a, b uint32) int {
			if c := cmp.Compare(sc[b], sc[a]); c != 0 {
				return c
			}
			return cmp.Compare(a, b)
		})
		return dst
	}
	n := len(r.tokens)
	i := sort.Search(n, func(k int) bool { return r.tokens[k] >= t })
	for step := 0; step < n && len(dst) < len(r.nodes); step++ {
		if node := r.owner[(i+step)%n]; !slices.Contains(dst, node) {
			dst = append(dst, node)
		}
	}
	return dst
}
