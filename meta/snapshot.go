package meta

import (
	"bytes"
	"fmt"
)

// Snapshot format, version 2. Every integer is a canonical uvarint, every
// string a uvarint length then its bytes; records are in strictly
// ascending topic order and sessions in strictly ascending id order, so
// one state has exactly one encoding.
//
//	"SHMS" · u8 version (2) · floor · count ·
//	count × ( topic · u8 state · epoch · previous owner (may be empty) ·
//	          [active: owner · partitions] ) ·
//	sessions (> 0) · sessions × ( id · session record (State.AppendSession) )
//
// A state without sessions is written as version 1, which ends after the
// records.
var snapshotMagic = [4]byte{'S', 'H', 'M', 'S'}

const (
	snapshotVersion   = 2
	snapshotVersionV1 = 1
)

// minRecordSize is the smallest encoded record: a one-byte topic behind its
// length, the state, a one-byte epoch and an empty previous owner.
const minRecordSize = 5

// AppendSnapshot appends the encoding of the whole state to b. Equal states
// encode to equal bytes.
func (s *State) AppendSnapshot(b []byte) []byte {
	b = append(b, snapshotMagic[:]...)
	if len(s.sessions) == 0 {
		b = append(b, snapshotVersionV1)
	} else {
		b = append(b, snapshotVersion)
	}
	b = appendUvarint(b, s.floor)
	b = appendUvarint(b, uint64(len(s.topics)))
	for _, r := range s.sortedRecords() {
		b = appendString(b, r.topic)
		b = append(b, byte(r.state))
		b = appendUvarint(b, r.epoch)
		b = appendString(b, r.prev)
		if r.state == Active {
			b = appendString(b, r.owner)
			b = appendUvarint(b, uint64(r.partitions))
		}
	}
	if len(s.sessions) == 0 {
		return b
	}
	return s.appendSessions(b)
}

// DecodeSnapshot decodes a snapshot into a new State. Input that
// AppendSnapshot would not produce is an error wrapping ErrBadSnapshot or
// ErrSnapshotVersion; no input panics. The state's strings share one copy
// of b, which lives as long as any of them does: at most one snapshot's
// worth of memory.
func DecodeSnapshot(b []byte) (*State, error) {
	r := newReader(b)
	if m := r.Fixed(len(snapshotMagic)); r.Err() == nil && !bytes.Equal(m, snapshotMagic[:]) {
		return nil, fmt.Errorf("%w: bad magic %q", ErrBadSnapshot, m)
	}
	v := r.U8()
	if r.Err() == nil && v != snapshotVersion && v != snapshotVersionV1 {
		return nil, fmt.Errorf("%w: version %d", ErrSnapshotVersion, v)
	}
	s := New()
	s.floor = r.Uvarint()
	n := r.Count(int(^uint(0)>>1), minRecordSize)
	if r.Err() == nil {
		// Three allocations carry every record: the map, one slab of
		// records, and one copy of the input that every topic and owner
		// string points into.
		s.topics = make(map[string]*record, n)
		s.order = make([]*record, 0, n)
	}
	slab := make([]record, n)
	str := string(b)
	var prev []byte
	for i := 0; i < n && r.Err() == nil; i++ {
		topic := r.Bytes(MaxTopicLen)
		topicEnd := r.Offset()
		state := TopicState(r.U8())
		epoch := r.Uvarint()
		prevOwner := r.Bytes(MaxNodeIDLen)
		prevEnd := r.Offset()
		// topicEnd, prevEnd and ownerEnd locate the strings' bytes in str.
		var owner []byte
		var parts uint64
		var ownerEnd int
		if state == Active {
			owner = r.Bytes(MaxNodeIDLen)
			ownerEnd = r.Offset()
			parts = r.Uvarint()
		}
		if r.Err() != nil {
			break
		}
		switch {
		case len(topic) == 0:
			r.Fail(fmt.Errorf("record %d: %w", i, ErrEmptyTopic))
		case i > 0 && bytes.Compare(prev, topic) >= 0:
			r.Fail(fmt.Errorf("record %d: %w", i, errNotSorted))
		case state != Active && state != Revoked:
			r.Fail(fmt.Errorf("record %d: state %d: %w", i, state, errDomain))
		case epoch == 0:
			r.Fail(fmt.Errorf("record %d: epoch 0: %w", i, errDomain))
		case state == Active && len(owner) == 0:
			r.Fail(fmt.Errorf("record %d: %w", i, ErrBadNodeID))
		case state == Active && (parts == 0 || parts > MaxPartitions):
			r.Fail(fmt.Errorf("record %d: %w", i, ErrBadPartitions))
		case state == Active && bytes.Equal(prevOwner, owner):
			r.Fail(fmt.Errorf("record %d: previous owner is the owner: %w", i, errDomain))
		}
		if r.Err() != nil {
			break
		}
		prev = topic
		rec := &slab[i]
		*rec = record{topic: str[topicEnd-len(topic) : topicEnd], epoch: epoch, state: state}
		if state == Active {
			rec.owner = s.acquire(s.intern(owner, str[ownerEnd-len(owner):ownerEnd]), rec)
			rec.partitions = uint32(parts)
			s.active++
		}
		if len(prevOwner) > 0 {
			rec.prev = s.intern(prevOwner, str[prevEnd-len(prevOwner):prevEnd])
		}
		s.topics[rec.topic] = rec
		s.order = append(s.order, rec)
		s.names += len(rec.topic)
	}
	if v == snapshotVersion {
		s.readSessions(&r)
		if r.Err() == nil && len(s.sessions) == 0 {
			r.Fail(fmt.Errorf("version %d without sessions: %w", v, errDomain))
		}
	}
	if err := r.End(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
	return s, nil
}

// intern returns the string an owner of id already holds, or fresh, which
// holds the same bytes.
func (s *State) intern(id []byte, fresh string) string {
	if st := s.owners[string(id)]; st != nil {
		return st.id
	}
	return fresh
}

// Restore replaces the whole state with the decoded snapshot. On error the
// state is unchanged. A tracking state keeps tracking, and forgets the
// changes not drained: the caller rewrites the whole state anyway.
func (s *State) Restore(snapshot []byte) error {
	t, err := DecodeSnapshot(snapshot)
	if err != nil {
		return err
	}
	t.track = s.track
	*s = *t
	return nil
}
