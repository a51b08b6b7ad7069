package shardstore

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/shoalmq/shoal/wire"
)

// Producer sessions: a produce that names a wire.Session is appended once
// (an idempotent producer). Each topic keeps, per session, the answers of
// the produces the client may still retry (Seq above the session's
// Floor), and answers a retry with its first answer instead of appending
// again. The state is one key per topic and session,
//
//	0x04 len(1) topic id(8) → version · uvarint floor · uvarint forgot ·
//	                          uvarint used · uvarint n · n × {uvarint seq ·
//	                          uvarint epoch · uvarint offset · uvarint count}
//
// written in the batch of the records it answers for, so that it is as
// durable as they are across a restart; a handoff carries it to the
// topic's next owner with the records (Producers, PutRecords).
//
// Bounds: a topic keeps at most wire.MaxProducers (1,024) sessions: a new
// one beyond them drops the least recently used, preferring one with no
// answer left (its floor passed every produce it made here). A session
// keeps at most wire.MaxProducerAnswers (64) answers: beyond them the
// lowest is dropped and its Seq remembered as Forgot. In memory that is
// about 100 bytes per session with one produce in flight (100 KiB for a
// full topic), 2 MiB for a full topic whose sessions each have 64.
//
// A produce of a session is
//   - answered with its first answer when its Seq has one (a retry);
//   - refused with ErrProducerExpired when its Seq has none and is at or
//     below the session's Floor or Forgot: it may have been appended, and
//     its answer dropped;
//   - appended otherwise: the session is unknown to the topic, or the Seq
//     is above both bounds, where every answer is kept, so it never was.
//
// What this cannot tell apart: a session dropped as least recently used
// is unknown again, so a retry of one of its produces that arrives after
// wire.MaxProducers other sessions produced to the topic since the
// session's last produce is taken for a first attempt and appended a
// second time. So is a retry at a new owner that did not get the previous
// owner's sessions (the handoff was cut: the previous owner died or was
// silent), as it did not get the records it did not copy either.

// appendProducerPrefix appends the prefix of topic's producer keys.
func appendProducerPrefix(dst, topic []byte) []byte {
	dst = append(dst, prefixProducer, byte(len(topic)))
	return append(dst, topic...)
}

func appendProducerKey(dst, topic []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(appendProducerPrefix(dst, topic), id)
}

func appendProducerValue(dst []byte, p *wire.Producer) []byte {
	dst = append(dst, valueVersion)
	dst = binary.AppendUvarint(dst, p.Floor)
	dst = binary.AppendUvarint(dst, p.Forgot)
	dst = binary.AppendUvarint(dst, p.Used)
	dst = binary.AppendUvarint(dst, uint64(len(p.Answers)))
	for _, a := range p.Answers {
		dst = binary.AppendUvarint(dst, a.Seq)
		dst = binary.AppendUvarint(dst, a.Epoch)
		dst = binary.AppendUvarint(dst, a.Offset)
		dst = binary.AppendUvarint(dst, uint64(a.Count))
	}
	return dst
}

func decodeProducer(key, v []byte) (*wire.Producer, error) {
	d := decoder{b: v}
	d.version()
	p := &wire.Producer{ID: binary.BigEndian.Uint64(key[len(key)-8:]), Floor: d.uvarint(), Forgot: d.uvarint(), Used: d.uvarint()}
	n := d.uvarint()
	if d.err == nil && n > wire.MaxProducerAnswers {
		d.fail("too many answers")
	}
	for i := 0; d.err == nil && i < int(n); i++ {
		a := wire.ProducerAnswer{Seq: d.uvarint(), Epoch: d.uvarint(), Offset: d.uvarint()}
		count := d.uvarint()
		if d.err == nil && (count == 0 || count > wire.MaxRecordsPerProduce || a.Seq <= max(p.Floor, lastSeq(p))) {
			d.fail("bad answer")
		}
		a.Count = uint32(count)
		p.Answers = append(p.Answers, a)
	}
	d.end()
	if d.err == nil && p.ID == 0 {
		d.fail("zero session id")
	}
	if d.err != nil {
		return nil, corrupt(key, d.err)
	}
	return p, nil
}

// lastSeq is the highest Seq p keeps an answer of (0 for none).
func lastSeq(p *wire.Producer) uint64 {
	if len(p.Answers) == 0 {
		return 0
	}
	return p.Answers[len(p.Answers)-1].Seq
}

// loadProducers reads topic's producer sessions into t.
func (s *Store) loadProducers(topic []byte, t *topicLog) error {
	lo := appendProducerPrefix(nil, topic)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("shardstore: topic %q: producers: %w", topic, err)
	}
	t.producers = nil
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		v, err := it.ValueAndErr()
		if err == nil && len(k) != len(lo)+8 {
			err = corrupt(k, fmt.Errorf("key of %d bytes", len(k)))
		}
		var p *wire.Producer
		if err == nil {
			p, err = decodeProducer(k, v)
		}
		if err != nil {
			it.Close()
			return fmt.Errorf("shardstore: topic %q: producers: %w", topic, err)
		}
		if t.producers == nil {
			t.producers = make(map[uint64]*wire.Producer)
		}
		t.producers[p.ID] = p
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("shardstore: topic %q: producers: %w", topic, err)
	}
	return nil
}

// cloneProducer returns a copy of p that shares nothing with it.
func cloneProducer(p *wire.Producer) *wire.Producer {
	c := *p
	c.Answers = slices.Clone(p.Answers)
	return &c
}

// raiseFloor raises p's floor to floor: the session never asks again for
// the answers at or below it.
func raiseFloor(p *wire.Producer, floor uint64) {
	if floor > p.Floor {
		p.Floor = floor
		trimProducer(p)
	}
}

// addAnswer puts a into p's answers in Seq order.
func addAnswer(p *wire.Producer, a wire.ProducerAnswer) {
	i, _ := slices.BinarySearchFunc(p.Answers, a.Seq, bySeq)
	p.Answers = slices.Insert(p.Answers, i, a)
	trimProducer(p)
}

// trimProducer drops p's answers at or below its floor, and its lowest
// ones beyond wire.MaxProducerAnswers, remembered as Forgot.
func trimProducer(p *wire.Producer) {
	i := 0
	for i < len(p.Answers) && p.Answers[i].Seq <= p.Floor {
		i++
	}
	if n := len(p.Answers) - i - wire.MaxProducerAnswers; n > 0 {
		i += n
		p.Forgot = max(p.Forgot, p.Answers[i-1].Seq)
	}
	p.Answers = slices.Delete(p.Answers, 0, i)
	if p.Forgot <= p.Floor {
		p.Forgot = 0
	}
}

func bySeq(x wire.ProducerAnswer, seq uint64) int { return cmp.Compare(x.Seq, seq) }

// findAnswer returns p's answer of seq.
func findAnswer(p *wire.Producer, seq uint64) (wire.ProducerAnswer, bool) {
	i, ok := slices.BinarySearchFunc(p.Answers, seq, bySeq)
	if !ok {
		return wire.ProducerAnswer{}, false
	}
	return p.Answers[i], true
}

// dropFirst reports whether session a goes before b when one must make
// room: one with no answer left first, then the least recently used.
func dropFirst(a, b *wire.Producer) bool {
	aDone, bDone := len(a.Answers) == 0 && a.Forgot == 0, len(b.Answers) == 0 && b.Forgot == 0
	if aDone != bDone {
		return aDone
	}
	if a.Used != b.Used {
		return a.Used < b.Used
	}
	return a.ID < b.ID
}

// evictProducers removes from ps the sessions beyond keep, dropFirst's
// first, and returns their IDs.
func evictProducers(ps map[uint64]*wire.Producer, keep int) []uint64 {
	var gone []uint64
	for len(ps) > keep {
		var victim *wire.Producer
		for _, p := range ps {
			if victim == nil || dropFirst(p, victim) {
				victim = p
			}
		}
		delete(ps, victim.ID)
		gone = append(gone, victim.ID)
	}
	return gone
}

// AppendRecordsOnce is AppendRecords for a produce of producer session
// sess (see the top of producers.go): the first attempt of a Seq appends
// and keeps its answer, in the same batch as the records; a retry of it
// gets that answer again, with dup set, and appends nothing. A retry
// whose answer is no longer kept fails with ErrProducerExpired, one with
// another number of records than its first attempt with ErrInvalid. The
// check and the append are one step under the topic's lock.
func (s *Store) AppendRecordsOnce(topic []byte, epoch, atLeast uint64, records [][]byte, sess wire.Session, sync bool) (ans wire.ProducerAnswer, dup bool, err error) {
	if sess.ID == 0 || sess.Seq <= sess.Floor {
		return ans, false, fmt.Errorf("shardstore: topic %q: producer session %+v: %w", topic, sess, ErrInvalid)
	}
	if err := checkRecords(topic, records); err != nil {
		return ans, false, err
	}
	t, err := s.topicLocked(topic)
	if err != nil {
		return ans, false, err
	}
	defer t.mu.Unlock()
	old := t.producers[sess.ID]
	if old != nil {
		raiseFloor(old, sess.Floor)
		if a, ok := findAnswer(old, sess.Seq); ok {
			if int(a.Count) != len(records) {
				return ans, false, fmt.Errorf("shardstore: topic %q: produce %d of session %x retried with %d records, first with %d: %w",
					topic, sess.Seq, sess.ID, len(records), a.Count, ErrInvalid)
			}
			old.Used = max(old.Used, t.next)
			return a, true, nil
		}
		if sess.Seq <= old.Floor || sess.Seq <= old.Forgot {
			return ans, false, fmt.Errorf("shardstore: topic %q: produce %d of session %x: %w", topic, sess.Seq, sess.ID, ErrProducerExpired)
		}
	}
	b := s.db.NewBatch()
	defer b.Close()
	first, err := s.appendLocked(b, t, topic, epoch, atLeast, records)
	if err != nil {
		return ans, false, err
	}
	// The session's new state is built beside its old one, which stays
	// until the batch is committed; the old one is kept to build the next
	// in, so that an append of a session allocates nothing.
	p := t.spare
	t.spare = nil
	if p == nil {
		p = new(wire.Producer)
	}
	answers := p.Answers[:0]
	if old != nil {
		*p = *old
		p.Answers = append(answers, old.Answers...)
	} else {
		*p = wire.Producer{ID: sess.ID, Floor: sess.Floor, Answers: answers}
	}
	ans = wire.ProducerAnswer{Seq: sess.Seq, Epoch: epoch, Offset: first, Count: uint32(len(records))}
	addAnswer(p, ans)
	p.Used = first
	var gone []uint64
	if old == nil && len(t.producers) >= wire.MaxProducers {
		gone = evictProducers(maps.Clone(t.producers), wire.MaxProducers-1)
		for _, id := range gone {
			if err := b.Delete(appendProducerKey(nil, topic, id), nil); err != nil {
				return ans, false, fmt.Errorf("shardstore: topic %q: append: %w", topic, err)
			}
		}
	}
	var kb [2 + 255 + 8]byte
	var vb [64]byte
	if err := b.Set(appendProducerKey(kb[:0], topic, p.ID), appendProducerValue(vb[:0], p), nil); err != nil {
		t.spare = p
		return ans, false, fmt.Errorf("shardstore: topic %q: append: %w", topic, err)
	}
	if err := s.commitAppend(b, t, topic, first, len(records), sync); err != nil {
		t.spare = p
		return ans, false, err
	}
	if t.producers == nil {
		t.producers = make(map[uint64]*wire.Producer)
	}
	for _, id := range gone {
		delete(t.producers, id)
	}
	t.producers[p.ID] = p
	t.spare = old
	return ans, false, nil
}

// Producers returns a copy of topic's producer sessions in ascending ID
// order, for a handoff to its next owner.
func (s *Store) Producers(topic []byte) ([]wire.Producer, error) {
	t, err := s.topicLocked(topic)
	if err != nil {
		return nil, err
	}
	defer t.mu.Unlock()
	out := make([]wire.Producer, 0, len(t.producers))
	for _, p := range t.producers {
		out = append(out, *cloneProducer(p))
	}
	slices.SortFunc(out, func(a, b wire.Producer) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// mergeProducer returns the union of in (a previous owner's state of the
// session) and cur (this store's, or nil): the higher bounds, and the
// answers of both, in's where both have one.
func mergeProducer(cur, in *wire.Producer) *wire.Producer {
	m := cloneProducer(in)
	if cur != nil {
		m.Floor, m.Forgot, m.Used = max(m.Floor, cur.Floor), max(m.Forgot, cur.Forgot), max(m.Used, cur.Used)
		for _, a := range cur.Answers {
			if i, ok := slices.BinarySearchFunc(m.Answers, a.Seq, bySeq); !ok {
				m.Answers = slices.Insert(m.Answers, i, a)
			}
		}
	}
	trimProducer(m)
	return m
}

// putProducers merges producers into topic's sessions in b, and returns
// the sessions to keep once b is committed.
func putProducers(b *pebble.Batch, t *topicLog, topic []byte, producers []wire.Producer) (map[uint64]*wire.Producer, error) {
	ps := maps.Clone(t.producers)
	if ps == nil {
		ps = make(map[uint64]*wire.Producer)
	}
	for i := range producers {
		in := &producers[i]
		if in.ID == 0 {
			return nil, fmt.Errorf("shardstore: topic %q: producer session without an id: %w", topic, ErrInvalid)
		}
		ps[in.ID] = mergeProducer(ps[in.ID], in)
	}
	gone := evictProducers(ps, wire.MaxProducers)
	for _, id := range gone {
		if err := b.Delete(appendProducerKey(nil, topic, id), nil); err != nil {
			return nil, err
		}
	}
	for i := range producers {
		if p := ps[producers[i].ID]; p != nil {
			if err := b.Set(appendProducerKey(nil, topic, p.ID), appendProducerValue(nil, p), nil); err != nil {
				return nil, err
			}
		}
	}
	return ps, nil
}

// unanswer drops, in b, the answer of the append of n records at first
// (refused and removed), if a producer session holds one; it returns the
// session as it is once b is committed, or nil.
func unanswer(b *pebble.Batch, t *topicLog, topic []byte, first uint64, n int) (*wire.Producer, error) {
	for _, p := range t.producers {
		for i, a := range p.Answers {
			if a.Offset != first || int(a.Count) != n {
				continue
			}
			c := cloneProducer(p)
			c.Answers = slices.Delete(c.Answers, i, i+1)
			return c, b.Set(appendProducerKey(nil, topic, c.ID), appendProducerValue(nil, c), nil)
		}
	}
	return nil, nil
}
