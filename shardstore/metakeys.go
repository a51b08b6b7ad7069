package shardstore

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
