package wire

// LeaderTable answers ShardLeaders (KindLeaderTable): the shard-leader
// table of the answering node, for a client that sends metadata writes and
// linearizable reads straight to each shard's leader. It is a hint: a
// leader may have changed since, and the node it names answers NotLeader
// or forwards.
type LeaderTable struct {
	// Shards bounds the ids of the cluster's live shards; Leaders has one
	// entry per id below it. It is the cluster's shard count while no
	// shard split.
	Shards uint64
	// Base is the number of shards the cluster was born with, which places
	// keys (router.ShardSpace): Shards while no shard split, else less. A
	// shard that split has no leader in the table: its keys go to its
	// children.
	Base uint64
	// Nodes are the leaders named, each once.
	Nodes []LeaderNode
	// Leaders[s] is shard s's leader: 0 unknown, else 1 + its index in
	// Nodes.
	Leaders []uint32
	// Terms[s] is the term Leaders[s] was learnt at (0 when unknown).
	Terms []uint64
}

// LeaderNode is a node a LeaderTable names.
type LeaderNode struct {
	ID   []byte // 1..MaxNodeIDLen
	Addr []byte // its client address, ≤ MaxAddrLen; empty if not known
}

// Bounds of a LeaderTable.
const (
	// MaxLeaderTableShards bounds LeaderTable.Shards: node.MaxShards.
	MaxLeaderTableShards = 1 << 20
	// MaxLeaderTableNodes bounds LeaderTable.Nodes: MaxPushedMembers.
	MaxLeaderTableNodes = MaxPushedMembers
)

// AppendLeaderTableAnswer appends m's payload:
//
//	uvarint shards · uvarint base · uvarint n · n × ( bytes id · bytes addr ) ·
//	shards × ( uvarint leader · uvarint term )
func AppendLeaderTableAnswer(dst []byte, m *LeaderTable) []byte {
	dst = appendUvarint(dst, m.Shards)
	dst = appendUvarint(dst, m.Base)
	dst = appendUvarint(dst, uint64(len(m.Nodes)))
	for i := range m.Nodes {
		dst = appendBytes(dst, m.Nodes[i].ID)
		dst = appendBytes(dst, m.Nodes[i].Addr)
	}
	for s := range m.Leaders {
		dst = appendUvarint(dst, uint64(m.Leaders[s]))
		dst = appendUvarint(dst, m.Terms[s])
	}
	return dst
}

// DecodeLeaderTableAnswer decodes a LeaderTable payload into m, reusing
// its slices. Every leader must name one of the nodes.
func DecodeLeaderTableAnswer(b []byte, m *LeaderTable) error {
	r := reader{b: b}
	m.Shards = r.uvarintMax(MaxLeaderTableShards)
	m.Base = r.uvarintMax(m.Shards)
	if r.err == nil && m.Base == 0 && m.Shards > 0 {
		r.fail(ErrMalformed)
	}
	// A node takes at least 2 bytes (id and address lengths, the id
	// non-empty), a shard 2 (leader and term).
	nn := r.count(MaxLeaderTableNodes, 3)
	m.Nodes = grow(m.Nodes[:0], nn)
	for i := range m.Nodes {
		m.Nodes[i].ID = r.nodeID()
		m.Nodes[i].Addr = r.bytes(MaxAddrLen)
	}
	shards := 0
	if r.err == nil {
		if m.Shards > uint64(r.remaining()/2) {
			r.fail(ErrTruncated)
		} else {
			shards = int(m.Shards)
		}
	}
	m.Leaders = grow(m.Leaders[:0], shards)
	m.Terms = grow(m.Terms[:0], shards)
	for s := range shards {
		m.Leaders[s] = uint32(r.uvarintMax(uint64(nn)))
		m.Terms[s] = r.uvarint()
		if r.err != nil {
			break
		}
	}
	if err := r.end(); err != nil {
		m.Shards, m.Base, m.Nodes, m.Leaders, m.Terms = 0, 0, m.Nodes[:0], m.Leaders[:0], m.Terms[:0]
		return err
	}
	return nil
}
