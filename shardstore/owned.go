package shardstore

import (
	"encoding/binary"
	"fmt"
)

// NodeSlot is the store's slot for what belongs to the node rather than to
// a raft group: the topics it was told to own, the epochs it closed, its
// birth marker. It is never a shard id (shard ids are below 1<<20).
const NodeSlot = ^uint64(0)

// Keys in the node slot:
//
//	"o" + topic → OwnedTopic: u64 epoch · u32 partitions · u64 shard (big-endian)
//	"c" + topic → u64 epoch floor (big-endian): the topic was closed up
//	              to this epoch, and no open at or below it is taken again
var (
	ownedPrefix = []byte("o")
	floorPrefix = []byte("c")
)

const ownedLen = 20

// OwnedTopic is a topic the node was told to own, at an epoch.
type OwnedTopic struct {
	Epoch      uint64
	Partitions uint32
	Shard      uint64
}

func slotKey(prefix []byte, topic string) []byte {
	return append(append(make([]byte, 0, len(prefix)+len(topic)), prefix...), topic...)
}

// PutOwnedTopic records that the node owns topic as t.
func (b *Batch) PutOwnedTopic(topic string, t OwnedTopic) {
	v := make([]byte, 0, ownedLen)
	v = binary.BigEndian.AppendUint64(v, t.Epoch)
	v = binary.BigEndian.AppendUint32(v, t.Partitions)
	v = binary.BigEndian.AppendUint64(v, t.Shard)
	b.Put(NodeSlot, slotKey(ownedPrefix, topic), v)
}

// DeleteOwnedTopic records that the node no longer owns topic.
func (b *Batch) DeleteOwnedTopic(topic string) { b.Delete(NodeSlot, slotKey(ownedPrefix, topic)) }

// PutTopicFloor records topic's epoch floor. The caller never lowers it.
func (b *Batch) PutTopicFloor(topic string, epoch uint64) {
	b.s.floors.add([]byte(topic)) // before the write can be read
	b.Put(NodeSlot, slotKey(floorPrefix, topic), binary.BigEndian.AppendUint64(nil, epoch))
}

// OwnedTopics calls fn for every topic the node owns, in topic order,
// until fn returns false. A record that does not decode is ErrCorrupt.
func (s *Store) OwnedTopics(fn func(topic string, t OwnedTopic) bool) error {
	var bad error
	err := s.Iterate(NodeSlot, ownedPrefix, func(k, v []byte) bool {
		if len(v) != ownedLen {
			bad = fmt.Errorf("shardstore: owned topic %q: %w", k[len(ownedPrefix):], ErrCorrupt)
			return false
		}
		return fn(string(k[len(ownedPrefix):]), OwnedTopic{
			Epoch:      binary.BigEndian.Uint64(v),
			Partitions: binary.BigEndian.Uint32(v[8:]),
			Shard:      binary.BigEndian.Uint64(v[12:]),
		})
	})
	if err != nil {
		return fmt.Errorf("shardstore: owned topics: %w", err)
	}
	return bad
}

// TopicFloor returns topic's epoch floor (0: never closed here).
func (s *Store) TopicFloor(topic string) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if !s.floors.mayHave([]byte(topic)) {
		return 0, nil
	}
	v, err := s.Get(NodeSlot, slotKey(floorPrefix, topic))
	if err != nil {
		return 0, fmt.Errorf("shardstore: topic floor: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("shardstore: topic floor of %q: %w", topic, ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), nil
}

// loadFloors fills the floor filter with the topics that have a floor.
func (s *Store) loadFloors() error {
	err := s.Iterate(NodeSlot, floorPrefix, func(k, _ []byte) bool {
		s.floors.add(k[len(floorPrefix):])
		return true
	})
	if err != nil {
		return fmt.Errorf("shardstore: topic floors: %w", err)
	}
	return nil
}
