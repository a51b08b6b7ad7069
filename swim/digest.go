package swim

import (
	"encoding/binary"
	"slices"

	"github.com/zeebo/xxh3"

	"github.com/shoalmq/shoal/wire"
)

// Anti-entropy by digests. A periodic push-pull does not send the whole
// state: the asker sends its state summed up in DigestBuckets buckets (each
// entry falls in the bucket its key hashes to; a bucket's digest is the sum
// of its entries' hashes, so order does not count). The answerer sends
// back its own digests and its entries of the buckets that differ; the
// asker merges them, sums again, and pushes its entries of the buckets
// that still differ (it knows something the answerer does not). Two nodes
// that agree exchange two small frames whatever the size of the cluster.
// A join still exchanges whole states.

// DigestBuckets is how many buckets a node sums its state up in when it
// starts an anti-entropy push-pull: 512 bytes of digests each way.
const DigestBuckets = 64

// entryHasher hashes push-pull entries for the digests, reusing its
// buffer.
type entryHasher struct{ buf []byte }

// The three kinds of entries are told apart in their keys.
const (
	entryMember  = 'm'
	entryLeader  = 'l'
	entryVersion = 'v'
)

func (h *entryHasher) key(kind byte, id []byte, k uint64) uint64 {
	b := append(h.buf[:0], kind)
	b = binary.AppendUvarint(b, k)
	b = append(b, id...)
	h.buf = b
	return xxh3.Hash(b)
}

func (h *entryHasher) field(b, f []byte) []byte {
	return append(binary.AppendUvarint(b, uint64(len(f))), f...)
}

// member returns m's key hash (which picks its bucket) and the hash of
// all it carries.
func (h *entryHasher) member(m *wire.SwimPushPullMember) (key, sum uint64) {
	key = h.key(entryMember, m.Node, 0)
	b := binary.AppendUvarint(h.buf[:0], m.Generation)
	b = binary.AppendUvarint(b, m.Incarnation)
	b = append(b, byte(m.State))
	b = h.field(b, m.SwimAddr)
	b = h.field(b, m.ClientAddr)
	b = h.field(b, m.PeerAddr)
	b = h.field(b, m.Rack)
	b = h.field(b, m.Meta)
	h.buf = b
	return key, xxh3.HashSeed(b, key)
}

func (h *entryHasher) leader(l *wire.SwimShardLeaderEntry) (key, sum uint64) {
	key = h.key(entryLeader, nil, l.Shard)
	b := binary.AppendUvarint(h.buf[:0], l.Term)
	b = h.field(b, l.Leader)
	h.buf = b
	return key, xxh3.HashSeed(b, key)
}

func (h *entryHasher) version(v *wire.SwimVersionEntry) (key, sum uint64) {
	key = h.key(entryVersion, v.Node, v.MetaKind)
	h.buf = binary.AppendUvarint(h.buf[:0], v.Version)
	return key, xxh3.HashSeed(h.buf, key)
}

// digests sums p's entries up into len(sums) buckets.
func (h *entryHasher) digests(p *wire.SwimPushPull, sums []uint64) {
	clear(sums)
	nb := uint64(len(sums))
	for i := range p.Members {
		k, s := h.member(&p.Members[i])
		sums[k%nb] += s
	}
	for i := range p.Leaders {
		k, s := h.leader(&p.Leaders[i])
		sums[k%nb] += s
	}
	for i := range p.Versions {
		k, s := h.version(&p.Versions[i])
		sums[k%nb] += s
	}
}

// keep drops from p every entry whose bucket (of len(differ)) is not
// marked, and reports how many entries are left.
func (h *entryHasher) keep(p *wire.SwimPushPull, differ []bool) int {
	nb := uint64(len(differ))
	drop := func(key, _ uint64) bool { return !differ[key%nb] }
	p.Members = slices.DeleteFunc(p.Members, func(m wire.SwimPushPullMember) bool { return drop(h.member(&m)) })
	p.Leaders = slices.DeleteFunc(p.Leaders, func(l wire.SwimShardLeaderEntry) bool { return drop(h.leader(&l)) })
	p.Versions = slices.DeleteFunc(p.Versions, func(v wire.SwimVersionEntry) bool { return drop(h.version(&v)) })
	return len(p.Members) + len(p.Leaders) + len(p.Versions)
}
