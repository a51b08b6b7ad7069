package metasync

import (
	"github.com/zeebo/xxh3"

	"github.com/shoalmq/shoal/wire"
)

// A pull sends only what the asker lacks. The asker names its copy by
// digest (wire.MetaDigest of its encoding): a peer whose copy is the same
// answers with nothing (wire.PushSame), which is what almost every pull of
// a quiet cluster gets, whatever its size. A pull made because a peer
// announced a newer version also carries the digests of the asker's copy
// split into buckets; the peer answers with the records of the buckets
// that differ (wire.PushDelta), so that one leader change or one member's
// new incarnation costs a bucket, not the whole copy. Any other pull gets
// the whole copy: the first sync, and the recovery from a copy that
// differs when no change was announced.

// DefaultBucketRecords is Config.BucketRecords' default: the records of a
// copy per bucket of a pull.
const DefaultBucketRecords = 32

// bucketCount is the buckets a copy of n records is split into, per
// records in each: one at least, wire.MaxMetaBuckets at most.
func bucketCount(n, per int) int {
	return min(max((n+per-1)/per, 1), wire.MaxMetaBuckets)
}

// replica is one node's copy of a kind: its records, how a list of them
// is encoded (the push's Data), and which of n buckets a record falls in.
type replica[R any] struct {
	recs   []R
	encode func(dst []byte, rs []R) []byte
	bucket func(r *R, n int) int
}

func members(rs []wire.MemberRecord) replica[wire.MemberRecord] {
	return replica[wire.MemberRecord]{recs: rs, encode: wire.AppendMemberRecords,
		bucket: func(r *wire.MemberRecord, n int) int { return int(xxh3.Hash(r.ID) % uint64(n)) }}
}

func leaderTable(rows []wire.LeaderRow) replica[wire.LeaderRow] {
	return replica[wire.LeaderRow]{recs: rows, encode: wire.AppendLeaderTable,
		bucket: func(r *wire.LeaderRow, n int) int { return int(r.Shard % uint64(n)) }}
}

// buckets splits the copy into n buckets: each bucket's digest is the sum
// of xxh3 of its records, each encoded alone as a one-record copy.
func (c replica[R]) buckets(n int) []uint64 {
	out := make([]uint64, n)
	var buf []byte
	for i := range c.recs {
		buf = c.encode(buf[:0], c.recs[i:i+1])
		out[c.bucket(&c.recs[i], n)] += xxh3.Hash(buf)
	}
	return out
}

// pull is what a pull says of the copy: its digest, and when per > 0
// (and the copy is not empty) its buckets, one per per records.
func (c replica[R]) pull(k wire.MetaKind, have uint64, per int) wire.MetadataPull {
	m := wire.MetadataPull{Kind: k, Have: have, Digest: wire.MetaDigest(c.encode(nil, c.recs))}
	if per > 0 && len(c.recs) > 0 {
		m.Buckets = c.buckets(bucketCount(len(c.recs), per))
	}
	return m
}

// answer is what pull m lacks of the copy: nothing when its digest is the
// copy's, the records of the buckets whose digest differs when it has
// buckets, all of them otherwise.
func (c replica[R]) answer(m *wire.MetadataPull) (wire.PushForm, []byte) {
	data := c.encode(nil, c.recs)
	if wire.MetaDigest(data) == m.Digest {
		return wire.PushSame, nil
	}
	if len(m.Buckets) == 0 {
		return wire.PushFull, data
	}
	n := len(m.Buckets)
	mine := c.buckets(n)
	part := make([]R, 0, len(c.recs))
	for i := range c.recs {
		if b := c.bucket(&c.recs[i], n); mine[b] != m.Buckets[b] {
			part = append(part, c.recs[i])
		}
	}
	if len(part) == len(c.recs) {
		return wire.PushFull, data
	}
	return wire.PushDelta, c.encode(nil, part)
}
