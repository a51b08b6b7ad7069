package meta

import (
	"bytes"
	"fmt"
)

// Records: a shard's state stored one topic at a time, so that applying a
// command rewrites only the topics it changed (O(changed), not O(topics)).
// A record's value is the snapshot's record without the topic, which the
// caller keeps in the key:
//
//	u8 state · epoch · previous owner (may be empty) · [active: owner · partitions]
//
// The shard's epoch floor is stored apart ([State.Floor], [Loader.SetFloor]).

// TrackChanges makes the state remember which topics every later Apply
// changes (and whether the floor moved) until [State.DrainChanges] hands
// them over. A state that never drains must not track: the list grows.
func (s *State) TrackChanges() { s.track = true }

// DrainChanges calls fn for every topic changed since the last drain, in
// the order of the changes (a topic changed twice may be named twice),
// reports whether the floor changed, and forgets them. fn then reads the
// topic's record with [State.AppendRecord]; one it cannot find was
// dropped by a compaction.
func (s *State) DrainChanges(fn func(topic string)) (floorChanged bool) {
	for i, t := range s.changed {
		fn(t)
		s.changed[i] = ""
	}
	s.changed = s.changed[:0]
	floorChanged, s.floorChanged = s.floorChanged, false
	return floorChanged
}

func (s *State) touch(topic string) {
	if s.track {
		s.changed = append(s.changed, topic)
	}
}

// AppendRecord appends the encoding of topic's record to b; ok is false
// when the shard has no record of topic (never assigned, or compacted).
func (s *State) AppendRecord(b []byte, topic string) (out []byte, ok bool) {
	r := s.topics[topic]
	if r == nil {
		return b, false
	}
	return r.appendBody(b), true
}

func (r *record) appendBody(b []byte) []byte {
	b = append(b, byte(r.state))
	b = appendUvarint(b, r.epoch)
	b = appendString(b, r.prev)
	if r.state == Active {
		b = appendString(b, r.owner)
		b = appendUvarint(b, uint64(r.partitions))
	}
	return b
}

// recordBody is a decoded record value; its slices alias the input.
type recordBody struct {
	state      TopicState
	epoch      uint64
	prev       []byte
	owner      []byte
	partitions uint64
}

func (rb *recordBody) read(r *reader) {
	rb.state = TopicState(r.U8())
	rb.epoch = r.Uvarint()
	rb.prev = r.Bytes(MaxNodeIDLen)
	rb.owner, rb.partitions = nil, 0
	if rb.state == Active {
		rb.owner = r.Bytes(MaxNodeIDLen)
		rb.partitions = r.Uvarint()
	}
}

// check reports a record that Apply could never have produced.
func (rb *recordBody) check(topic []byte) error {
	switch {
	case len(topic) == 0:
		return ErrEmptyTopic
	case len(topic) > MaxTopicLen:
		return ErrTopicTooLong
	case rb.state != Active && rb.state != Revoked:
		return fmt.Errorf("state %d: %w", rb.state, errDomain)
	case rb.epoch == 0:
		return fmt.Errorf("epoch 0: %w", errDomain)
	case rb.state == Active && len(rb.owner) == 0:
		return ErrBadNodeID
	case rb.state == Active && (rb.partitions == 0 || rb.partitions > MaxPartitions):
		return ErrBadPartitions
	case rb.state == Active && bytes.Equal(rb.prev, rb.owner):
		return fmt.Errorf("previous owner is the owner: %w", errDomain)
	}
	return nil
}

// Loader rebuilds a State from its records, which must be added in
// strictly ascending topic order (the order of a sorted key-value store).
// The zero value is not usable; call NewLoader.
//
// A shard holds tens of thousands of topics and a restart loads every
// shard: the records are collected and the topic map made once at its
// final size (no growth rehashing every key), and the few node ids met
// are found by comparison rather than by hashing each record's owner.
type Loader struct {
	s     *State
	recs  []*record
	known []*ownerStat // owners met so far, at most maxKnownNodes
	names []string     // other node ids met (previous owners), as many
	last  string
	n     int
	err   error
}

// maxKnownNodes bounds Loader.known and Loader.names: past it, ids are
// looked up in the state's map.
const maxKnownNodes = 16

// NewLoader starts an empty state.
func NewLoader() *Loader { return &Loader{s: New()} }

// SetFloor sets the shard's epoch floor.
func (l *Loader) SetFloor(floor uint64) { l.s.floor = floor }

// SetSplit marks the shard split (State.Split).
func (l *Loader) SetSplit() { l.s.split = true }

// DrainSplit reports whether Apply split the shard since the last call,
// with TrackChanges set: the mark is then to be stored.
func (s *State) DrainSplit() bool {
	c := s.splitChanged
	s.splitChanged = false
	return c
}

// Add adds topic's record from its encoding (topic and value are copied).
// A record that does not decode, breaks an invariant or is out of order is
// an error wrapping ErrBadSnapshot; the loader then refuses everything.
func (l *Loader) Add(topic, value []byte) error {
	if l.err != nil {
		return l.err
	}
	r := newReader(value)
	var rb recordBody
	rb.read(&r)
	err := r.End()
	if err == nil {
		err = rb.check(topic)
	}
	if err == nil && l.n > 0 && l.last >= string(topic) {
		err = errNotSorted
	}
	if err != nil {
		l.err = fmt.Errorf("%w: record %d (%q): %w", ErrBadSnapshot, l.n, topic, err)
		return l.err
	}
	rec := &record{topic: string(topic), epoch: rb.epoch, state: rb.state}
	if rb.state == Active {
		st := l.owner(rb.owner)
		st.add(rec)
		rec.owner = st.id
		rec.partitions = uint32(rb.partitions)
		l.s.active++
	}
	rec.prev = l.name(rb.prev)
	l.recs = append(l.recs, rec)
	l.last = rec.topic
	l.n++
	return nil
}

// owner returns the entry of owner id, made on first use (State.acquire's,
// without the count).
func (l *Loader) owner(id []byte) *ownerStat {
	for _, st := range l.known {
		if st.id == string(id) {
			return st
		}
	}
	st := l.s.owners[string(id)]
	if st == nil {
		st = &ownerStat{id: string(id)}
		l.s.owners[st.id] = st
	}
	if len(l.known) < maxKnownNodes {
		l.known = append(l.known, st)
	}
	return st
}

// name returns node id as a string shared with the records that name it
// (State.nodeID's, for previous owners).
func (l *Loader) name(id []byte) string {
	if len(id) == 0 {
		return ""
	}
	for _, st := range l.known {
		if st.id == string(id) {
			return st.id
		}
	}
	for _, n := range l.names {
		if n == string(id) {
			return n
		}
	}
	n := l.s.nodeID(id)
	if len(l.names) < maxKnownNodes {
		l.names = append(l.names, n)
	}
	return n
}

// State returns the loaded state, or the first error Add met. The loader
// is spent.
func (l *Loader) State() (*State, error) {
	if l.err != nil {
		return nil, l.err
	}
	if l.recs != nil {
		s := l.s
		s.topics = make(map[string]*record, len(l.recs))
		s.order = make([]*record, len(l.recs))
		for i, r := range l.recs {
			s.topics[r.topic] = r
			s.order[i] = r
			s.names += len(r.topic)
		}
		l.recs = nil
	}
	return l.s, nil
}
