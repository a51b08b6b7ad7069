package wire

import (
	"encoding/binary"
	"slices"
	"testing"

	"github.com/zeebo/xxh3"
)

// oldMembershipDigests is the digest computation as nodes have always
// done it, byte by byte: a node of this build and one of an older build
// must reach the same digests from the same list.
func oldMembershipDigests(rs []MemberRecord) (members, ring uint64) {
	var mb, rb []byte
	for _, r := range rs {
		if r.State != 1 && r.State != 2 { // alive, suspect
			continue
		}
		mb = binary.AppendUvarint(mb, uint64(len(r.ID)))
		mb = append(mb, r.ID...)
		mb = binary.AppendUvarint(mb, r.Generation)
		mb = binary.AppendUvarint(mb, r.Incarnation)
		mb = append(mb, byte(r.State))
		rb = binary.AppendUvarint(rb, uint64(len(r.ID)))
		rb = append(rb, r.ID...)
		rb = binary.AppendUvarint(rb, uint64(len(r.Rack)))
		rb = append(rb, r.Rack...)
	}
	return xxh3.Hash(mb), xxh3.Hash(rb)
}

func digestRecord(id, rack string, gen, inc uint64, st MemberState) MemberRecord {
	return MemberRecord{ID: []byte(id), Rack: []byte(rack), SwimAddr: []byte("127.0.0.1:1"), Generation: gen, Incarnation: inc, State: st}
}

func TestMembershipDigestsKeepTheirBytes(t *testing.T) {
	rs := []MemberRecord{
		digestRecord("n1", "a", 10, 2, MemberAlive),
		digestRecord("n2", "b", 11, 0, MemberDead),
		digestRecord("n3", "", 1<<40, 300, MemberSuspect),
		digestRecord("n4", "rack-4", 12, 1, MemberLeft),
	}
	m, r := MembershipDigests(rs)
	if om, or := oldMembershipDigests(rs); m != om || r != or {
		t.Fatalf("digests %x %x, the old layout gives %x %x", m, r, om, or)
	}
	// Pinned: the digests of this list as every earlier build computed
	// them.
	if m != 0x3d846aae99ca5d9a || r != 0x3326487e9249ba2d {
		t.Fatalf("digests %#x %#x changed", m, r)
	}
	if m, r := MembershipDigests(nil); m != xxh3.Hash(nil) || r != xxh3.Hash(nil) {
		t.Fatalf("empty list: %x %x", m, r)
	}
}

func TestMembershipAndRingDigests(t *testing.T) {
	rs := []MemberRecord{
		digestRecord("n1", "a", 10, 2, MemberAlive),
		digestRecord("n2", "b", 11, 0, MemberDead),
		digestRecord("n3", "", 12, 1, MemberSuspect),
	}
	m0, r0 := MembershipDigests(rs)
	// A refutation changes the membership, not the ring.
	rs2 := slices.Clone(rs)
	rs2[2].Incarnation, rs2[2].State = 2, MemberAlive
	m1, r1 := MembershipDigests(rs2)
	if m1 == m0 || r1 != r0 {
		t.Fatalf("refutation: membership %x→%x ring %x→%x", m0, m1, r0, r1)
	}
	// A dead member dropped from the list changes neither.
	m2, r2 := MembershipDigests([]MemberRecord{rs[0], rs[2]})
	if m2 != m0 || r2 != r0 {
		t.Fatal("forgetting a dead member changed a digest")
	}
	// A live member leaving the ring changes both.
	rs3 := slices.Clone(rs)
	rs3[0].State = MemberDead
	if m3, r3 := MembershipDigests(rs3); m3 == m0 || r3 == r0 {
		t.Fatal("a member's death left a digest unchanged")
	}
	// A rack move changes the ring.
	rs4 := slices.Clone(rs)
	rs4[0].Rack = []byte("z")
	if _, r4 := MembershipDigests(rs4); r4 == r0 {
		t.Fatal("a rack move left the ring digest unchanged")
	}
}

// FuzzMembershipDigests digests the member lists peers push (untrusted
// bytes, decoded first) and checks them against the old layout.
func FuzzMembershipDigests(f *testing.F) {
	f.Add(AppendMemberRecords(nil, []MemberRecord{
		digestRecord("n1", "a", 10, 2, MemberAlive),
		digestRecord("n2", "b", 11, 0, MemberDead),
		digestRecord("n3", "", 12, 1, MemberSuspect),
	}))
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := DecodeMemberRecords(b, nil)
		if err != nil {
			return
		}
		m, r := MembershipDigests(rs)
		if om, or := oldMembershipDigests(rs); m != om || r != or {
			t.Fatalf("digests %x %x, the old layout gives %x %x", m, r, om, or)
		}
	})
}
