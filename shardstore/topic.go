package shardstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"
	"github.com/shoalmq/shoal/wire"
)

// topicLog is the in-memory position of one topic's record log.
type topicLog struct {
	mu     sync.Mutex // serialises appends so offsets are dense
	loaded bool
	start  uint64 // first retained offset
	next   uint64 // high watermark: offset of the next record
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
	if err := s.getValue(meta, func(k, v []byte) (err error) {
		t.start, err = decodeUint64Value(k, v)
		return err
	}); err != nil {
		return err
	}
	t.next = t.start
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
	return nil
}

// AppendRecords appends records to topic's log and returns the offset of the
// first; offsets are dense and start at 0. With sync the records are durable
// when it returns; appends of different topics share fsyncs through
// Pebble's commit pipeline.
func (s *Store) AppendRecords(topic []byte, records [][]byte, sync bool) (firstOffset uint64, err error) {
	if len(records) == 0 || len(records) > wire.MaxRecordsPerProduce {
		return 0, fmt.Errorf("shardstore: topic %q: %d records, want 1..%d: %w", topic, len(records), wire.MaxRecordsPerProduce, ErrInvalid)
	}
	for i, r := range records {
		if len(r) > wire.MaxRecordLen {
			return 0, fmt.Errorf("shardstore: topic %q: record %d of %d bytes over %d: %w", topic, i, len(r), wire.MaxRecordLen, ErrInvalid)
		}
	}
	t, err := s.topicLocked(topic)
	if err != nil {
		return 0, err
	}
	defer t.mu.Unlock()
	b := s.db.NewBatch()
	defer b.Close()
	key := make([]byte, 0, 2+len(topic)+8)
	for i, r := range records {
		key = appendTopicKey(key[:0], topic, t.next+uint64(i))
		if err := b.Set(key, r, nil); err != nil {
			return 0, fmt.Errorf("shardstore: topic %q: append: %w", topic, err)
		}
	}
	wo := pebble.NoSync
	if sync {
		wo = pebble.Sync
	}
	if err := b.Commit(wo); err != nil {
		return 0, fmt.Errorf("shardstore: topic %q: append: %w", topic, err)
	}
	first := t.next
	t.next += uint64(len(records))
	return first, nil
}

// ReadRecords calls fn for the records of topic from offset from on, in
// order, until fn returns false, the high watermark is reached or the next
// record would take the values passed past maxBytes (the first record is
// passed whatever its size). It returns the offset to read next. value is valid only during the
// call. Reading from the high watermark returns at once; from before the
// first retained offset or beyond the high watermark fails with
// ErrOffsetOutOfRange.
func (s *Store) ReadRecords(topic []byte, from uint64, maxBytes int, fn func(offset uint64, value []byte) bool) (next uint64, err error) {
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
	next = from
	read := 0
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		off := binary.BigEndian.Uint64(k[len(k)-8:])
		if off != next {
			// Trimmed under us: report where the log now starts.
			break
		}
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return next, fmt.Errorf("shardstore: %s: %w", keyString(k), err)
		}
		if read > 0 && read+len(v) > maxBytes {
			break
		}
		next++
		read += len(v)
		if !fn(off, v) || read >= maxBytes {
			break
		}
	}
	if err := it.Close(); err != nil {
		return next, fmt.Errorf("shardstore: topic %q: read: %w", topic, err)
	}
	if next == from {
		return from, fmt.Errorf("shardstore: topic %q: offset %d no longer retained: %w", topic, from, ErrOffsetOutOfRange)
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
		b.Set(appendTopicPrefix(nil, topic), appendUint64Value(nil, before), nil),
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

// DeleteTopic removes topic's log; a later append starts again at offset 0.
func (s *Store) DeleteTopic(topic []byte) error {
	t, err := s.topicLocked(topic)
	if err != nil {
		return err
	}
	defer t.mu.Unlock()
	p := appendTopicPrefix(nil, topic)
	if err := s.db.DeleteRange(p, prefixEnd(p), pebble.Sync); err != nil {
		return fmt.Errorf("shardstore: topic %q: delete: %w", topic, err)
	}
	t.start, t.next = 0, 0
	return nil
}
