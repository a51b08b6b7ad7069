package wire

// Operators' requests and their answer. Every one is answered by
// AdminResult (or Error). Drain, Undrain and RemoveNode are idempotent: a
// client repeats them to watch the work they started.

// AdminNode names a node (KindDrain, KindUndrain, KindRemoveNode).
type AdminNode struct {
	Node []byte // 1..MaxNodeIDLen bytes
	// Force: RemoveNode removes a node that is alive, or one the
	// membership does not know. Ignored by Drain and Undrain.
	Force bool
}

// AppendAdminNode appends m's payload.
func AppendAdminNode(dst []byte, m *AdminNode) []byte {
	dst = appendBytes(dst, m.Node)
	return appendBool(dst, m.Force)
}

// DecodeAdminNode decodes an AdminNode payload into m.
func DecodeAdminNode(b []byte, m *AdminNode) error {
	r := reader{b: b}
	m.Node = r.nodeID()
	m.Force = r.bool()
	return r.end()
}

// TransferLeader asks that a shard's leadership move to Node, which must be
// a voter of the shard (KindTransferLeader). Prepare is set only between
// nodes: the shard's leader tells Node to keep the leadership it is about
// to receive (the shard manager does not hand it back to the ring's
// preferred replica while the placement stays as it is).
type TransferLeader struct {
	Shard   uint64
	Node    []byte // 1..MaxNodeIDLen bytes
	Prepare bool
}

// AppendTransferLeader appends m's payload.
func AppendTransferLeader(dst []byte, m *TransferLeader) []byte {
	dst = appendUvarint(dst, m.Shard)
	dst = appendBytes(dst, m.Node)
	return appendBool(dst, m.Prepare)
}

// DecodeTransferLeader decodes a TransferLeader payload into m.
func DecodeTransferLeader(b []byte, m *TransferLeader) error {
	r := reader{b: b}
	m.Shard = r.uvarint()
	m.Node = r.nodeID()
	m.Prepare = r.bool()
	return r.end()
}

// SplitShard asks that a shard split in two (KindSplitShard): its leader
// proposes the split, and its topics go on in the two halves of its hash
// range.
type SplitShard struct {
	Shard uint64
}

// AppendSplitShard appends m's payload.
func AppendSplitShard(dst []byte, m *SplitShard) []byte { return appendUvarint(dst, m.Shard) }

// DecodeSplitShard decodes a SplitShard payload into m.
func DecodeSplitShard(b []byte, m *SplitShard) error {
	r := reader{b: b}
	m.Shard = r.uvarint()
	return r.end()
}

// AdminResult answers an admin request (KindAdminResult):
//
//   - Drain, Undrain: Node, Drained, and what the node still holds:
//     Topics it owns and Leaders (shards it leads);
//   - TransferLeader: Shard, Node (its leader now) and Term;
//   - SplitShard: Shard (the shard that split), Node (its leader, which
//     proposed the split) and Term (the split's term);
//   - RemoveNode: Node, and Shards: the shards the answering node leads
//     whose raft configuration still counts the removed node.
type AdminResult struct {
	Node    []byte
	Shard   uint64
	Term    uint64
	Topics  uint64
	Leaders uint64
	Shards  uint64
	Drained bool
}

// AppendAdminResult appends m's payload.
func AppendAdminResult(dst []byte, m *AdminResult) []byte {
	dst = appendBytes(dst, m.Node)
	dst = appendUvarint(dst, m.Shard)
	dst = appendUvarint(dst, m.Term)
	dst = appendUvarint(dst, m.Topics)
	dst = appendUvarint(dst, m.Leaders)
	dst = appendUvarint(dst, m.Shards)
	return appendBool(dst, m.Drained)
}

// DecodeAdminResult decodes an AdminResult payload into m.
func DecodeAdminResult(b []byte, m *AdminResult) error {
	r := reader{b: b}
	m.Node = r.nodeID()
	m.Shard = r.uvarint()
	m.Term = r.uvarint()
	m.Topics = r.uvarint()
	m.Leaders = r.uvarint()
	m.Shards = r.uvarint()
	m.Drained = r.bool()
	return r.end()
}
