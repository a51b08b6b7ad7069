package shardstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/wire"
)

// A topic's log: one key per record (topic, offset) whose value is the
// epoch the record was written at (uvarint) and then the record, and a
// meta key holding the first retained offset and, once records were
// removed from the end, a floor under the next offset (so that a restart
// never hands out again an offset whose record was removed).
//
// Offsets rise and are never handed out twice, but need not be dense: an
// append may start above the high watermark (AppendRecords' atLeast), and
// RemoveRecords leaves a gap. Reads skip gaps.
//
// Beside the log, the topic's producer sessions (producers.go).

// topicLog is the in-memory position of one topic's record log.
type topicLog struct {
	mu     sync.Mutex // serialises appends so offsets rise
	loaded bool
	start  uint64 // first retained offset
	next   uint64 // high watermark: the lowest offset the next record may get
	// producers: the topic's producer sessions by ID (producers.go).
	producers map[uint64]*wire.Producer
	// spare: a session's state the last append of a producer session
	// replaced, kept to build the next one in (producers.go).
	spare *wire.Producer
}

// appendTopicMeta encodes a topic's meta value; a zero floor is left out.
func appendTopicMeta(dst []byte, start, floor uint64) []byte {
	dst = appendUint64Value(dst, start)
	if floor != 0 {
		dst = binary.AppendUvarint(dst, floor)
	}
	return dst
}

func decodeTopicMeta(key, v []byte) (start, floor uint64, err error) {
	d := decoder{b: v}
	d.version()
	start = d.uvarint()
	if d.err == nil && len(d.b) > 0 {
		floor = d.uvarint()
	}
	d.end()
	if d.err != nil {
		return 0, 0, corrupt(key, d.err)
	}
	return start, floor, nil
}

func checkTopic(topic []byte) error {
	if len(topic) == 0 || len(topic) > wire.MaxTopicLen {
		return fmt.Errorf("shardstore: topic name of %d bytes, want 1..%d: %w", len(topic), wire.MaxTopicLen, ErrInvalid)
	}
	return nil
}

// topicLocked returns the locked log of topic, loading its bounds.
func (s *Store) topicLocked(topic []byte) (*topicLog, error) {
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if s.closed.Load() {
		return nil, ErrClosed
	}
	s.topicsMu.Lock()
	t := s.topics[string(topic)]
	if t == nil {
		t = &topicLog{}
		s.topics[string(topic)] = t
	}
	s.topicsMu.Unlock()
	t.mu.Lock()
	if t.loaded {
		return t, nil
	}
	if err := s.loadTopic(topic, t); err != nil {
		t.mu.Unlock()
		return nil, err
	}
	t.loaded = true
	return t, nil
}

func (s *Store) loadTopic(topic []byte, t *topicLog) error {
	meta := appendTopicPrefix(nil, topic)
	var floor uint64
	if err := s.getValue(meta, func(k, v []byte) (err error) {
		t.start, floor, err = decodeTopicMeta(k, v)
		return err
	}); err != nil {
		return err
	}
	t.next = max(t.start, floor)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: meta, UpperBound: prefixEnd(meta)})
	if err != nil {
		return fmt.Errorf("shardstore: topic %q: %w", topic, err)
	}
	if it.Last() && len(it.Key()) == len(meta)+8 {
		t.next = max(t.next, binary.BigEndian.Uint64(it.Key()[len(meta):])+1)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("shardstore: topic %q: %w", topic, err)
	}
	return s.loadProducers(topic, t)
}

// AppendRecords appends records written at epoch to topic's log and
// returns the offset of the first: the high watermark, or atLeast if that
// is higher; the others follow densely. With sync the records are durable
// when it returns; appends of different topics share fsyncs through
// Pebble's commit pipeline.
func (s *Store) AppendRecords(topic []byte, epoch, atLeast uint64, records [][]byte, sync bool) (firstOffset uint64, err error) {
	if err := checkRecords(topic, records); err != nil {
		return 0, err
	}
	t, err := s.topicLocked(topic)
	if err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	first, err := s.appendLocked(b, t, topic, epoch, atLeast, records)
	if err != nil {
		return 0, err
	}
	return first, s.commitAppend(b, t, topic, first, len(records), sync)
}

// checkRecords checks the bounds of the records of one append.
func checkRecords(topic []byte, records [][]byte) error {
	if len(records) == 0 || len(records) > wire.MaxRecordsPerProduce {
		return fmt.Errorf("shardstore: topic %q: %d records, want 1..%d: %w", topic, len(records), wire.MaxRecordsPerProduce, ErrInvalid)
	}
	for i, r := range records {
		if len(r) > wire.MaxRecordLen {
			return fmt.Errorf("shardstore: topic %q: record %d of %d bytes over %d: %w", topic, i, len(r), wire.MaxRecordLen, ErrInvalid)
		}
	}
	return nil
}

// appendLocked writes records at epoch into b from the high watermark on
// (or atLeast, if higher) and returns the first offset; t is locked.
func (s *Store) appendLocked(b *pebble.Batch, t *topicLog, topic []byte, epoch, atLeast uint64, records [][]byte) (uint64, error) {
	first := max(t.next, atLeast)
	if first > math.MaxUint64-uint64(len(records)) {
		return 0, fmt.Errorf("shardstore: topic %q: offset %d has no room for %d records: %w", topic, first, len(records), ErrInvalid)
	}
	key := make([]byte, 0, 2+len(topic)+8)
	prefix := binary.AppendUvarint(make([]byte, 0, binary.MaxVarintLen64), epoch)
	for i, r := range records {
		key = appendTopicKey(key[:0], topic, first+uint64(i))
		op := b.SetDeferred(len(key), len(prefix)+len(r))
		copy(op.Key, key)
		copy(op.Value[copy(op.Value, prefix):], r)
		if err := op.Finish(); err != nil {
			return 0, fmt.Errorf("shardstore: topic %q: append: %w", topic, err)
		}
	}
	return first, nil
}

// commitAppend commits b, holding n records from first on, and moves the
// high watermark past them; t is locked.
func (s *Store) commitAppend(b *pebble.Batch, t *topicLog, topic []byte, first uint64, n int, sync bool) error {
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	if invariants.Enabled {
		t.checkAppend(topic, first, n)
	}
	if err := b.Commit(wo); err != nil {
		return fmt.Errorf("shardstore: topic %q: append: %w", topic, err)
	}
	t.next = first + uint64(n)
	return nil
}

// Record is one record of a topic's log, as PutRecords takes it.
type Record struct {
	Offset, Epoch uint64
	Value         []byte
}

// PutRecords writes records of another log of topic (a handoff from its
// previous owner) at their own offsets and epochs, durably; the high
// watermark rises past the last. Records below the first retained offset
// are skipped, and records already there are overwritten with what
// should be the same. The previous owner's producer sessions of the
// topic, if given, are merged into this store's in the same batch
// (producers.go).
func (s *Store) PutRecords(topic []byte, records []Record, producers []wire.Producer) error {
	for i, r := range records {
		if len(r.Value) > wire.MaxRecordLen || r.Offset == math.MaxUint64 || (i > 0 && r.Offset <= records[i-1].Offset) {
			return fmt.Errorf("shardstore: topic %q: record %d at offset %d out of order or too large: %w", topic, i, r.Offset, ErrInvalid)
		}
	}
	t, err := s.topicLocked(topic)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	key := make([]byte, 0, 2+len(topic)+8)
	var prefix [binary.MaxVarintLen64]byte
	next := t.next
	for _, r := range records {
		if r.Offset < t.start {
			continue
		}
		key = appendTopicKey(key[:0], topic, r.Offset)
		p := binary.PutUvarint(prefix[:], r.Epoch)
		op := b.SetDeferred(len(key), p+len(r.Value))
		copy(op.Key, key)
		copy(op.Value[copy(op.Value, prefix[:p]):], r.Value)
		if err := op.Finish(); err != nil {
			return fmt.Errorf("shardstore: topic %q: put: %w", topic, err)
		}
		next = max(next, r.Offset+1)
	}
	ps := t.producers
	if len(producers) > 0 {
		if ps, err = putProducers(b, t, topic, producers); err != nil {
			return fmt.Errorf("shardstore: topic %q: put: %w", topic, err)
		}
	}
	if invariants.Enabled {
		t.checkWatermark(topic, next)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("shardstore: topic %q: put: %w", topic, err)
	}
	t.next, t.producers = next, ps
	return nil
}

// RemoveRecords removes the n records from offset first on (an append
// whose acknowledgement was refused). The offsets are not handed out
// again: when they were the last ones, the log's meta records the high
// watermark as a floor, in the same synced batch. A producer session's
// answer of that append goes with them, so that a retry appends again.
func (s *Store) RemoveRecords(topic []byte, first uint64, n int) error {
	t, err := s.topicLocked(topic)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	if n <= 0 || first < t.start || first+uint64(n) > t.next {
		return fmt.Errorf("shardstore: topic %q: remove %d records at %d outside [%d, %d): %w", topic, n, first, t.start, t.next, ErrInvalid)
	}
	b := s.db.NewBatch()
	defer b.Close()
	err = errors.Join(
		b.DeleteRange(appendTopicKey(nil, topic, first), appendTopicKey(nil, topic, first+uint64(n)), nil),
		b.Set(appendTopicPrefix(nil, topic), appendTopicMeta(nil, t.start, t.next), nil),
	)
	var p *wire.Producer
	if err == nil {
		p, err = unanswer(b, t, topic, first, n)
	}
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("shardstore: topic %q: remove: %w", topic, err)
	}
	if p != nil {
		t.producers[p.ID] = p
	}
	return nil
}

// ReadRecords calls fn for the records of topic from offset from on, in
// order, with the epoch each was written at, until fn returns false, the
// high watermark is reached or the next record would take the values
// passed past maxBytes (the first record is passed whatever its size);
// offsets with no record are skipped. It returns the offset to read next
// (the high watermark when no record is left). value is valid only during
// the call. Reading from the high watermark returns at once; from before
// the first retained offset or beyond the high watermark fails with
// ErrOffsetOutOfRange.
func (s *Store) ReadRecords(topic []byte, from uint64, maxBytes int, fn func(offset, epoch uint64, value []byte) bool) (next uint64, err error) {
	t, err := s.topicLocked(topic)
	if err != nil {
		return from, err
	}
	start, hwm := t.start, t.next
	t.mu.Unlock()
	if from < start || from > hwm {
		return from, fmt.Errorf("shardstore: topic %q: offset %d outside [%d, %d]: %w", topic, from, start, hwm, ErrOffsetOutOfRange)
	}
	if from == hwm {
		return from, nil
	}
	lo := appendTopicKey(nil, topic, from)
	hi := appendTopicKey(nil, topic, hwm)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return from, fmt.Errorf("shardstore: topic %q: read: %w", topic, err)
	}
	next = hwm
	read := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		off := binary.BigEndian.Uint64(k[len(k)-8:])
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return from, fmt.Errorf("shardstore: %s: %w", keyString(k), err)
		}
		epoch, n := binary.Uvarint(v)
		if n <= 0 {
			it.Close()
			return from, corrupt(k, errors.New("record without its epoch"))
		}
		v = v[n:]
		if read > 0 && read+len(v) > maxBytes {
			next = off
			break
		}
		read += len(v)
		if !fn(off, epoch, v) || read >= maxBytes {
			next = off + 1
			break
		}
	}
	if err := it.Close(); err != nil {
		return from, fmt.Errorf("shardstore: topic %q: read: %w", topic, err)
	}
	return next, nil
}

// HighWatermark returns the offset the next record of topic will get.
func (s *Store) HighWatermark(topic []byte) (uint64, error) {
	t, err := s.topicLocked(topic)
	if err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	return t.next, nil
}

// TrimTopic drops topic's records below offset before (retention); the
// high watermark is kept.
func (s *Store) TrimTopic(topic []byte, before uint64) error {
	t, err := s.topicLocked(topic)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	if before <= t.start {
		return nil
	}
	if before > t.next {
		return fmt.Errorf("shardstore: topic %q: trim to %d beyond high watermark %d: %w", topic, before, t.next, ErrInvalid)
	}
	b := s.db.NewBatch()
	defer b.Close()
	err = errors.Join(
		b.DeleteRange(appendTopicKey(nil, topic, t.start), appendTopicKey(nil, topic, before), nil),
		b.Set(appendTopicPrefix(nil, topic), appendTopicMeta(nil, before, t.next), nil),
	)
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("shardstore: topic %q: trim: %w", topic, err)
	}
	t.start = before
	return nil
}

// DeleteTopic removes topic's log and producer sessions; a later append
// starts again at offset 0, or at its atLeast.
func (s *Store) DeleteTopic(topic []byte) error {
	t, err := s.topicLocked(topic)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	p, pp := appendTopicPrefix(nil, topic), appendProducerPrefix(nil, topic)
	err = errors.Join(b.DeleteRange(p, prefixEnd(p), nil), b.DeleteRange(pp, prefixEnd(pp), nil))
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("shardstore: topic %q: delete: %w", topic, err)
	}
	t.start, t.next, t.producers = 0, 0, nil
	return nil
}

// DeleteRecordsBelow removes topic's records at offsets below end, and
// keeps the rest of its log, its bounds and its producer sessions: the
// records of a revoked incarnation of the topic, when records of a later
// one are there too.
func (s *Store) DeleteRecordsBelow(topic []byte, end uint64) error {
	t, err := s.topicLocked(topic)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	if end = min(end, t.next); end <= t.start {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	err = b.DeleteRange(appendTopicKey(nil, topic, t.start), appendTopicKey(nil, topic, end), nil)
	if err == nil {
		err = b.Commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("shardstore: topic %q: delete below %d: %w", topic, end, err)
	}
	return nil
}

// migrateRecords rewrites the records of a store of format version older
// (before 3, records had no epoch) with epoch 0 in front, in batches.
func (s *Store) migrateRecords(older uint64) error {
	if older >= 3 {
		return nil
	}
	lo := []byte{prefixTopic}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
	if err != nil {
		return fmt.Errorf("shardstore: migrate records: %w", err)
	}
	defer it.Close()
	const batchRecords = 4096
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }()
	n := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		if len(k) < 2 || len(k) != 2+int(k[1])+8 {
			continue // a topic's meta key
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("shardstore: migrate %s: %w", keyString(k), err)
		}
		if err := b.Set(k, append([]byte{0}, v...), nil); err != nil {
			return fmt.Errorf("shardstore: migrate records: %w", err)
		}
		if n++; n%batchRecords == 0 {
			if err := b.Commit(pebble.NoSync); err != nil {
				return fmt.Errorf("shardstore: migrate records: %w", err)
			}
			_ = b.Close()
			b = s.db.NewBatch()
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("shardstore: migrate records: %w", err)
	}
	return nil
}
