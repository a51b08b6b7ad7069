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
//	"s" + u64 id (big-endian) → a client session's record (meta.State.AppendSession)
//	"meta"      → the whole state, as versions before per-topic records
//	              wrote it; read when present, replaced by records at the
//	              next apply
//	"x"         → present once the shard split (uvarint: the raft index
//	              of the split entry, where its halves' logs start): it
//	              applies nothing more
var (
	TopicRecordPrefix = []byte("t")
	EpochFloorKey     = []byte("f")
	LegacyMetaKey     = []byte("meta")
	SessionPrefix     = []byte("s")
	SplitMarkKey      = []byte("x")
)

// SessionKey appends session id's record key to dst.
func SessionKey(dst []byte, id uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, SessionPrefix...), id)
}

// ParseSessionKey returns the session id of a session key.
func ParseSessionKey(key []byte) (uint64, error) {
	if len(key) != len(SessionPrefix)+8 || string(key[:len(SessionPrefix)]) != string(SessionPrefix) {
		return 0, fmt.Errorf("shardstore: bad session key %x", key)
	}
	return binary.BigEndian.Uint64(key[len(SessionPrefix):]), nil
}

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

// baseShardsKey, in the node slot, holds the shard count the node's
// cluster was born with (uvarint), recorded at the node's first start.
var baseShardsKey = []byte("base-shards")

// PutBaseShards records the shard count the node's cluster was born with.
func (b *Batch) PutBaseShards(n uint32) {
	b.Put(NodeSlot, baseShardsKey, binary.AppendUvarint(nil, uint64(n)))
}

// BaseShards returns the count PutBaseShards committed; ok is false when
// none was.
func (s *Store) BaseShards() (n uint32, ok bool, err error) {
	v, err := s.Get(NodeSlot, baseShardsKey)
	if err != nil || v == nil {
		return 0, false, err
	}
	u, k := binary.Uvarint(v)
	if k != len(v) || u == 0 || u > 1<<32-1 {
		return 0, false, fmt.Errorf("shardstore: bad base shard count %x", v)
	}
	return uint32(u), true, nil
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

// Keys in the node slot for the operators' marks:
//
//	"m/drained"          → 1 byte (1): the node is drained (shoalctl drain)
//	"m/origin"           → u64 (big-endian): the generation of the life
//	                       that created this store
//	"m/removed/" + node  → u64 (big-endian): node was removed from the
//	                       cluster at that time (unix ns); a member of that
//	                       id whose store was created before it stays out
//
// (Their "m/" keeps them clear of the owned topics' and floors' prefixes.)
var (
	drainedKey    = []byte("m/drained")
	originKey     = []byte("m/origin")
	removedPrefix = []byte("m/removed/")
)

// PutDrained records whether the node is drained.
func (b *Batch) PutDrained(drained bool) {
	if drained {
		b.Put(NodeSlot, drainedKey, []byte{1})
		return
	}
	b.Delete(NodeSlot, drainedKey)
}

// Drained reports whether PutDrained(true) was committed last.
func (s *Store) Drained() (bool, error) {
	v, err := s.Get(NodeSlot, drainedKey)
	return v != nil, err
}

// PutOrigin records the generation of the life that created the store.
func (b *Batch) PutOrigin(gen uint64) {
	b.Put(NodeSlot, originKey, binary.BigEndian.AppendUint64(nil, gen))
}

// Origin returns what PutOrigin recorded; ok is false when it never ran.
func (s *Store) Origin() (gen uint64, ok bool, err error) {
	v, err := s.Get(NodeSlot, originKey)
	switch {
	case err != nil:
		return 0, false, fmt.Errorf("shardstore: origin: %w", err)
	case v == nil:
		return 0, false, nil
	case len(v) != 8:
		return 0, false, fmt.Errorf("shardstore: origin: %w", ErrCorrupt)
	}
	return binary.BigEndian.Uint64(v), true, nil
}

// PutRemoved records that node was removed from the cluster at.
func (b *Batch) PutRemoved(node string, at uint64) {
	b.Put(NodeSlot, slotKey(removedPrefix, node), binary.BigEndian.AppendUint64(nil, at))
}

// Removed calls fn for every node recorded by PutRemoved, in id order.
func (s *Store) Removed(fn func(node string, at uint64)) error {
	var bad error
	err := s.Iterate(NodeSlot, removedPrefix, func(k, v []byte) bool {
		if len(v) != 8 {
			bad = fmt.Errorf("shardstore: removed node %q: %w", k[len(removedPrefix):], ErrCorrupt)
			return false
		}
		fn(string(k[len(removedPrefix):]), binary.BigEndian.Uint64(v))
		return true
	})
	if err != nil {
		return fmt.Errorf("shardstore: removed nodes: %w", err)
	}
	return bad
}
