package wire

// NodeMeta is what a Shoal node says of itself in its SWIM record's
// metadata (swim.Member.Meta): the operators' marks. A node with no mark
// to spread sends no metadata at all.
type NodeMeta struct {
	// Drained: the node takes no topics or shard leaderships.
	Drained bool
	// Origin is the generation of the node's life that created its store:
	// a node removed at time T whose store is older than T stays out.
	Origin uint64
	// Removed lists nodes removed from the cluster, by id (strictly
	// ascending), each with the time of its removal (unix ns).
	Removed []RemovedNode
}

// RemovedNode is one removal in NodeMeta.
type RemovedNode struct {
	Node []byte // aliases the input
	At   uint64
}

// nodeMetaDrained is NodeMeta's one flag bit.
const nodeMetaDrained = 1 << 0

// AppendNodeMeta encodes m:
//
//	u8 flags (bit 0 drained) · uvarint origin · uvarint count ·
//	count × ( bytes node · uvarint at )
//
// The caller keeps it within MaxMetaLen (NodeMetaLen says how long it is).
func AppendNodeMeta(dst []byte, m *NodeMeta) []byte {
	var flags byte
	if m.Drained {
		flags |= nodeMetaDrained
	}
	dst = append(dst, flags)
	dst = appendUvarint(dst, m.Origin)
	dst = appendUvarint(dst, uint64(len(m.Removed)))
	for _, r := range m.Removed {
		dst = appendBytes(dst, r.Node)
		dst = appendUvarint(dst, r.At)
	}
	return dst
}

// NodeMetaLen is the length of AppendNodeMeta's encoding of m.
func NodeMetaLen(m *NodeMeta) int {
	n := 1 + uvarintLen(m.Origin) + uvarintLen(uint64(len(m.Removed)))
	for _, r := range m.Removed {
		n += uvarintLen(uint64(len(r.Node))) + len(r.Node) + uvarintLen(r.At)
	}
	return n
}

// DecodeNodeMeta decodes node metadata into m (reusing m.Removed's array).
// Unknown flag bits, empty or unordered ids, and more than MaxMetaLen
// bytes are ErrMalformed.
func DecodeNodeMeta(b []byte, m *NodeMeta) error {
	if len(b) > MaxMetaLen {
		return ErrMalformed
	}
	r := reader{b: b}
	flags := r.u8()
	if r.err == nil && flags&^nodeMetaDrained != 0 {
		r.fail(ErrMalformed)
	}
	m.Drained = flags&nodeMetaDrained != 0
	m.Origin = r.uvarint()
	// A removal takes at least 3 bytes (a length, an id byte, a varint).
	n := r.count(MaxMetaLen/3, 3)
	m.Removed = grow(m.Removed[:0], n)
	for i := range m.Removed {
		e := &m.Removed[i]
		e.Node = r.nodeID()
		e.At = r.uvarint()
		if r.err != nil {
			break
		}
		if i > 0 && string(m.Removed[i-1].Node) >= string(e.Node) {
			r.fail(ErrMalformed)
			break
		}
	}
	if err := r.end(); err != nil {
		m.Removed = m.Removed[:0]
		return err
	}
	return nil
}
