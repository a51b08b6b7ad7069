package wire

// The payloads of MetadataPush (MetadataPush.Data) for the member list and
// the shard-leader table. []byte fields alias the input.

// MemberRecord is one member as a membership push carries it.
type MemberRecord struct {
	ID, Rack, SwimAddr      []byte
	Generation, Incarnation uint64
	State                   MemberState
}

// MaxPushedMembers bounds a pushed member list: 1<<16.
const MaxPushedMembers = 1 << 16

// AppendMemberRecords encodes a member list, which must be sorted by id:
//
//	uvarint count · count × ( bytes id · bytes rack · bytes swim address ·
//	uvarint generation · uvarint incarnation · u8 state )
func AppendMemberRecords(dst []byte, rs []MemberRecord) []byte {
	dst = appendUvarint(dst, uint64(len(rs)))
	for i := range rs {
		r := &rs[i]
		dst = appendBytes(dst, r.ID)
		dst = appendBytes(dst, r.Rack)
		dst = appendBytes(dst, r.SwimAddr)
		dst = appendUvarint(dst, r.Generation)
		dst = appendUvarint(dst, r.Incarnation)
		dst = append(dst, byte(r.State))
	}
	return dst
}

// DecodeMemberRecords decodes a member list into rs (reusing its array).
// Ids must be non-empty and strictly ascending, states valid.
func DecodeMemberRecords(b []byte, rs []MemberRecord) ([]MemberRecord, error) {
	r := reader{b: b}
	// A member takes at least 6 bytes (three lengths, two varints, state).
	n := r.count(MaxPushedMembers, 6)
	rs = grow(rs[:0], n)
	for i := range rs {
		m := &rs[i]
		m.ID = r.nodeID()
		m.Rack = r.bytes(MaxRackLen)
		m.SwimAddr = r.bytes(MaxAddrLen)
		m.Generation = r.uvarint()
		m.Incarnation = r.uvarint()
		m.State = MemberState(r.u8())
		if r.err != nil {
			break
		}
		if !m.State.Valid() || (i > 0 && string(rs[i-1].ID) >= string(m.ID)) {
			r.fail(ErrMalformed)
			break
		}
	}
	if err := r.end(); err != nil {
		return rs[:0], err
	}
	return rs, nil
}

// LeaderRow is one shard's leader at a term in a shard-leader table.
type LeaderRow struct {
	Shard  uint64
	Term   uint64
	Leader []byte
}

// AppendLeaderTable encodes a shard-leader table:
//
//	uvarint count · count × ( uvarint shard · uvarint term · bytes leader )
func AppendLeaderTable(dst []byte, rows []LeaderRow) []byte {
	dst = appendUvarint(dst, uint64(len(rows)))
	for _, row := range rows {
		dst = appendUvarint(dst, row.Shard)
		dst = appendUvarint(dst, row.Term)
		dst = appendBytes(dst, row.Leader)
	}
	return dst
}

// DecodeLeaderTable decodes a shard-leader table of at most maxShards rows
// into rows (reusing its array); every shard must be below maxShards and
// every leader non-empty.
func DecodeLeaderTable(b []byte, maxShards uint64, rows []LeaderRow) ([]LeaderRow, error) {
	r := reader{b: b}
	n := r.count(int(min(maxShards, MaxListEntries)), 4)
	rows = grow(rows[:0], n)
	for i := range rows {
		row := &rows[i]
		row.Shard = r.uvarint()
		row.Term = r.uvarint()
		row.Leader = r.nodeID()
		if r.err == nil && row.Shard >= maxShards {
			r.fail(ErrMalformed)
		}
		if r.err != nil {
			break
		}
	}
	if err := r.end(); err != nil {
		return rows[:0], err
	}
	return rows, nil
}
