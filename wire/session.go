package wire

// Session names one write of a client for exactly-once delivery (the Raft
// thesis, §6.3): a client picks a random nonzero ID once, numbers its
// writes 1, 2, 3, ... with Seq, and sends a retry of a write with the Seq
// it had the first time. Floor is the client's promise that it will never
// send again any write with a Seq at or below it (it has its answer, or
// gave up on it): a shard may forget the answers of those.
//
// On the wire a Session ends a write request (Assign, Revoke,
// UpdatePartition, Produce): a u8 0 for none (the request is applied at
// least once), or
//
//	u8 1 · uvarint ID (nonzero) · uvarint Seq (nonzero) · uvarint Floor (< Seq)
type Session struct {
	ID    uint64
	Seq   uint64
	Floor uint64
}

// IsZero reports whether s names no session.
func (s Session) IsZero() bool { return s.ID == 0 }

// appendSession appends s's encoding.
func appendSession(dst []byte, s Session) []byte {
	if s.ID == 0 {
		return append(dst, 0)
	}
	dst = append(dst, 1)
	dst = appendUvarint(dst, s.ID)
	dst = appendUvarint(dst, s.Seq)
	return appendUvarint(dst, s.Floor)
}

// session reads a Session. A present one with ID or Seq zero, or a Floor
// not below Seq, is ErrMalformed; so is a presence byte other than 0 or 1.
func (r *reader) session() Session {
	if !r.bool() {
		return Session{}
	}
	s := Session{ID: r.uvarint(), Seq: r.uvarint(), Floor: r.uvarint()}
	if r.err == nil && (s.ID == 0 || s.Seq == 0 || s.Floor >= s.Seq) {
		r.fail(ErrMalformed)
	}
	return s
}
