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
}

// Ring is the immutable placement function of one member set: the walk
// (rendezvous by default, or a token ring of virtual nodes) and the rack of
// every node. Build a new one from the new member set on every membership
// change; the same member set
// gives the same Ring whatever order it is given in. A Ring is safe for
// concurrent use.
type Ring struct {
	tokens []uint64 // sorted ascending
	owner  []uint32 // node index of tokens[i]
	nodes  []Member // sorted by ID; a node's index is its position here
	rackOf []uint32 // node index -> rack index
	racks  []string // sorted distinct rack names
	vnodes int

	kind     Walk
	nodeHash []uint64 // xxh3(id), the rendezvous seeds
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
	r := &Ring{nodes: nodes, vnodes: v, kind: cfg.Walk, rackOf: make([]uint32, len(nodes))}
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

// Walk returns the ring's walk.
func (r *Ring) Walk() Walk { return r.kind }

// VNodes returns the number of tokens per node; 0 for WalkRendezvous.
func (r *Ring) VNodes() int { return r.vnodes }

// Racks returns the number of distinct racks.
func (r *Ring) Racks() int { return len(r.racks) }

// Member returns the member with index i (members are indexed in id order).
func (r *Ring) Member(i int) Member { return r.nodes[i] }

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

// ShardToken is the ring position a shard's walk starts from.
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
		return r.pickByScore(func(n uint32) uint64 { return mix64(r.nodeHash[n] ^ t) }, rf, out)
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

// pickByScore is the walk over nodes in descending score order (ties to
// the lower node index): each pick is the best-scoring node not yet taken
// whose rack is unused while an unused rack remains, and once every rack is
// used, the best-scoring node not yet taken. Each pick scans the members,
// so a walk costs O(members × rf) scores and allocates nothing.
func (r *Ring) pickByScore(score func(node uint32) uint64, rf int, out *[MaxReplicas]uint32) int {
	want := min(rf, len(r.nodes), MaxReplicas)
	got, usedRacks, racks := 0, 0, len(r.racks)
	for got < want {
		best, bestScore := -1, uint64(0)
		for n := range uint32(len(r.nodes)) {
			taken, rackTaken := false, false
			for _, c := range out[:got] {
				if c == n {
					taken = true
					break
				}
				if r.rackOf[c] == r.rackOf[n] {
					rackTaken = true
				}
			}
			if taken || (rackTaken && usedRacks < racks) {
				continue
			}
			if sc := score(n); best < 0 || sc > bestScore {
				best, bestScore = int(n), sc
			}
		}
		rackTaken := false
		for _, c := range out[:got] {
			if r.rackOf[c] == r.rackOf[best] {
				rackTaken = true
			}
		}
		if !rackTaken {
			usedRacks++
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
// The walk leader of a shard is its first replica, but which node's arc a
// shard's token falls on is a sample, and with a few hundred shards per node
// the sampling noise alone puts the busiest node 10–20% above the mean. So
// leaders are balanced with bounded loads (Mirrokni, Thorup, Zadimoghaddam,
// "Consistent Hashing with Bounded Loads"), applied to the choice of leader
// among a shard's replicas only: shards are taken in id order and each keeps
// its walk leader unless that node already leads ceil((1+LeaderSlack)*mean)
// shards, in which case the next replica in walk order under the bound leads
// (or, if all are at the bound, the least loaded). Replica sets are the
// walk's and are untouched, so the movement of data on a membership change
// stays minimal; only leaderships shift, which costs a leadership transfer.
type Placement struct {
	ring   *Ring
	shards uint32
	width  int      // replicas per shard
	rows   []uint32 // shards*width node indexes, leader first
}

// Placement computes the replicas of every shard in [0, shards) for
// replication factor rf (clamped as in Replicas).
func (r *Ring) Placement(shards uint32, rf int) *Placement {
	width := min(max(rf, 0), len(r.nodes), MaxReplicas)
	p := &Placement{ring: r, shards: shards, width: width, rows: make([]uint32, int(shards)*width)}
	if width == 0 {
		return p
	}
	bound := int(math.Ceil((1 + LeaderSlack) * float64(shards) / float64(len(r.nodes))))
	led := make([]int, len(r.nodes))
	var out [MaxReplicas]uint32
	for s := range shards {
		r.walk(s, width, &out)
		lead := -1
		for i, n := range out[:width] {
			if led[n] < bound {
				lead = i
				break
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
		row := p.rows[int(s)*width : int(s+1)*width]
		row[0] = out[lead]
		copy(row[1:], out[:lead])
		copy(row[1+lead:], out[lead+1:width])
	}
	return p
}

// Shards returns the number of shards in the table.
func (p *Placement) Shards() uint32 { return p.shards }

// Replicas appends the node ids of a shard's replicas to dst, preferred
// leader first; nothing for a shard outside the table. It allocates nothing
// when dst has room.
func (p *Placement) Replicas(shard uint32, dst []string) []string {
	if shard >= p.shards {
		return dst
	}
	for _, n := range p.rows[int(shard)*p.width : int(shard+1)*p.width] {
		dst = append(dst, p.ring.nodes[n].ID)
	}
	return dst
}

// Leader returns a shard's preferred leader, or "" for a shard outside the
// table or an empty ring.
func (p *Placement) Leader(shard uint32) string {
	if shard >= p.shards || p.width == 0 {
		return ""
	}
	return p.ring.nodes[p.rows[int(shard)*p.width]].ID
}
