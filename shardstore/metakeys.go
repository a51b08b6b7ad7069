package shardstore

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Keys of the metadata state machine's data in each shard's slot (the
// values are meta's record and floor encodings):
//
//	"t" + topic → the topic's record
//	"f"         → the shard's epoch floor (uvarint)
//	"meta"      → the whole state, as versions before per-topic records
//	              wrote it; read when present, replaced by records at the
//	              next apply
var (
	TopicRecordPrefix = []byte("t")
	EpochFloorKey     = []byte("f")
	LegacyMetaKey     = []byte("meta")
)

// TopicRecordKey appends topic's record key to dst.
func TopicRecordKey(dst []byte, topic string) []byte {
	return append(append(dst, TopicRecordPrefix...), topic...)
}

// bornKey, in the node slot, marks that the node has seen its cluster born.
var bornKey = []byte("born")

// PutBorn records that the node has seen its cluster born: a restart never
// bootstraps again.
func (b *Batch) PutBorn() { b.Put(NodeSlot, bornKey, []byte{1}) }

// Born reports whether PutBorn was committed.
func (s *Store) Born() (bool, error) {
	v, err := s.Get(NodeSlot, bornKey)
	return v != nil, err
}

// Keys of a shard's change log, the last changes of topic assignments that
// watchers read (node/changelog.go); values are meta's change encoding:
//
//	"c" + u64 raft index + u32 sequence (big-endian) → one change
//	"g"                                             → the trim mark (uvarint): changes at
//	                                                  indexes up to it may be gone
var (
	ChangePrefix    = []byte("c")
	ChangeTrimKey   = []byte("g")
	changeKeyLen    = len(ChangePrefix) + 8 + 4
	errBadChangeKey = errors.New("shardstore: bad change key")
)

// ChangeKey appends the key of the seq-th change committed at raft index
// index to dst.
func ChangeKey(dst []byte, index uint64, seq uint32) []byte {
	dst = append(dst, ChangePrefix...)
	dst = binary.BigEndian.AppendUint64(dst, index)
	return binary.BigEndian.AppendUint32(dst, seq)
}

// ParseChangeKey returns the raft index and sequence of a change key.
func ParseChangeKey(key []byte) (index uint64, seq uint32, err error) {
	if len(key) != changeKeyLen || string(key[:len(ChangePrefix)]) != string(ChangePrefix) {
		return 0, 0, fmt.Errorf("%w: %x", errBadChangeKey, key)
	}
	k := key[len(ChangePrefix):]
	return binary.BigEndian.Uint64(k), binary.BigEndian.Uint32(k[8:]), nil
}
