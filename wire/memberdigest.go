package wire

import "github.com/zeebo/xxh3"

// MembershipDigests returns the membership digest and the ring digest of
// a member list sorted by id (the list a MetadataPush of the membership
// carries, or a node's own view as one). A node compares the digests of
// its own view with those of a list a peer pushed, so every node must
// hash the same bytes:
//
//	membership: xxh3 of, for each live member in id order,
//	            uvarint len(id) · id · uvarint generation ·
//	            uvarint incarnation · u8 state
//	ring:       xxh3 of, for each live member in id order,
//	            uvarint len(id) · id · uvarint len(rack) · rack
//
// A member is live when it is MemberAlive or MemberSuspect; the others
// are left out of both. The ring digest covers exactly the input of the
// ring's placement.
func MembershipDigests(rs []MemberRecord) (members, ring uint64) {
	var mb, rb []byte
	for i := range rs {
		r := &rs[i]
		if r.State != MemberAlive && r.State != MemberSuspect {
			continue
		}
		mb = appendMemberDigest(mb, r)
		rb = appendRingDigest(rb, r)
	}
	return xxh3.Hash(mb), xxh3.Hash(rb)
}

// appendMemberDigest appends r's part of the membership digest's input.
func appendMemberDigest(dst []byte, r *MemberRecord) []byte {
	dst = appendBytes(dst, r.ID)
	dst = appendUvarint(dst, r.Generation)
	dst = appendUvarint(dst, r.Incarnation)
	return append(dst, byte(r.State))
}

// appendRingDigest appends r's part of the ring digest's input.
func appendRingDigest(dst []byte, r *MemberRecord) []byte {
	dst = appendBytes(dst, r.ID)
	return appendBytes(dst, r.Rack)
}

// MetaDigest is the digest of a copy of cluster metadata: xxh3 of its
// encoding (MetadataPull.Digest).
func MetaDigest(data []byte) uint64 { return xxh3.Hash(data) }
