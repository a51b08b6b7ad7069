package wire

// Peer messages (node ↔ node), other than RaftBatch (raft.go). []byte
// fields alias the input.

// OpenTopic tells a node it owns topic from epoch Epoch on (KindOpenTopic),
// sent by the topic's shard leader after the assignment committed, and again
// by every new shard leader. Term is the sender's raft term as leader of
// Shard: a node refuses ownership messages of a shard from a lower term
// than the highest it has seen, so a deposed leader cannot reorder a stale
// open past a newer close. Prev, when not empty, is the owner the topic
// moved from, whose records the new owner pulls (RecordsPull) before it
// serves. PrevSilent says the sender takes Prev for unable to answer (no
// lease round of it reached the sender for three lease lengths, or SWIM
// declared it dead): the new owner asks it once, briefly, instead of
// waiting out unanswered pulls. Answered by TopicAck.
type OpenTopic struct {
	Topic      []byte
	Epoch      uint64
	Partitions uint32
	Shard      uint64
	Term       uint64
	Prev       []byte
	PrevSilent bool
}

// AppendOpenTopic appends m's payload.
func AppendOpenTopic(dst []byte, m *OpenTopic) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	dst = appendUvarint(dst, uint64(m.Partitions))
	dst = appendU64(dst, m.Shard)
	dst = appendUvarint(dst, m.Term)
	dst = appendBytes(dst, m.Prev)
	return appendBool(dst, m.PrevSilent)
}

// DecodeOpenTopic decodes an OpenTopic payload into m.
func DecodeOpenTopic(b []byte, m *OpenTopic) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.Partitions = uint32(r.uvarintMax(MaxPartitions))
	m.Shard = r.u64()
	m.Term = r.uvarint()
	m.Prev = r.bytes(MaxNodeIDLen)
	m.PrevSilent = r.bool()
	return r.end()
}

// CloseTopic tells a node it no longer owns topic (KindCloseTopic): any
// epoch up to and including Epoch is closed, for good. Term is as for
// OpenTopic. Revoked says the topic was revoked, not moved: its records
// are deleted. Answered by TopicAck.
type CloseTopic struct {
	Topic   []byte
	Epoch   uint64
	Shard   uint64
	Term    uint64
	Revoked bool
}

// AppendCloseTopic appends m's payload.
func AppendCloseTopic(dst []byte, m *CloseTopic) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	dst = appendU64(dst, m.Shard)
	dst = appendUvarint(dst, m.Term)
	return appendBool(dst, m.Revoked)
}

// DecodeCloseTopic decodes a CloseTopic payload into m.
func DecodeCloseTopic(b []byte, m *CloseTopic) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.Shard = r.u64()
	m.Term = r.uvarint()
	m.Revoked = r.bool()
	return r.end()
}

// TopicStatus is how a node took an OpenTopic or CloseTopic.
type TopicStatus uint8

const (
	// TopicDone: the message took effect (or an equal or newer one already
	// had): Epoch is the epoch held (an open) or closed up to (a close).
	TopicDone TopicStatus = 0
	// TopicStaleTerm: refused, the node has seen a newer leader of the
	// shard; the sender should stop sending it.
	TopicStaleTerm TopicStatus = 1
	// TopicBelowFloor: an open refused because the node has closed that
	// epoch or a later one (Epoch is the floor).
	TopicBelowFloor TopicStatus = 2
)

// TopicAck answers an OpenTopic or CloseTopic (KindTopicAck; the request
// id says which). The sender checks that the ack comes from the node it
// asked, for the topic it asked about.
type TopicAck struct {
	Topic  []byte
	Epoch  uint64
	Status TopicStatus
}

// AppendTopicAck appends m's payload.
func AppendTopicAck(dst []byte, m *TopicAck) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	return append(dst, byte(m.Status))
}

// DecodeTopicAck decodes a TopicAck payload into m.
func DecodeTopicAck(b []byte, m *TopicAck) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.Status = TopicStatus(r.u8())
	if err := r.end(); err != nil {
		return err
	}
	if m.Status > TopicBelowFloor {
		return ErrMalformed
	}
	return nil
}

// Forward carries a client request to another node (KindForward): the
// node a client asked is not the one that can answer (shard leader, topic
// owner). The receiver handles Payload as a frame of kind Kind and answers
// with ForwardReply under the Forward's request id. Each forwarding hop
// increments Hops; a node receiving Hops == MaxForwardHops answers instead
// of forwarding again, so routing loops during view changes end.
type Forward struct {
	Hops    uint8
	Origin  []byte // node id of the node the client is connected to
	Kind    Kind   // a client request kind
	Payload []byte // the request's payload; aliases the input
}

// AppendForward appends m's payload.
func AppendForward(dst []byte, m *Forward) []byte {
	dst = append(dst, m.Hops)
	dst = appendBytes(dst, m.Origin)
	dst = append(dst, byte(m.Kind))
	return appendBytes(dst, m.Payload)
}

// DecodeForward decodes a Forward payload into m. Hops above MaxForwardHops
// is ErrTooLarge; an inner kind that is not a client request is
// ErrUnknownKind.
func DecodeForward(b []byte, m *Forward) error {
	r := reader{b: b}
	m.Hops = r.u8()
	m.Origin = r.nodeID()
	m.Kind = Kind(r.u8())
	m.Payload = r.bytes(MaxFrame)
	if err := r.end(); err != nil {
		return err
	}
	if m.Hops > MaxForwardHops {
		return ErrTooLarge
	}
	if !m.Kind.IsClientRequest() {
		return ErrUnknownKind
	}
	return nil
}

// ForwardReply carries the answer to a Forward back (KindForwardReply).
type ForwardReply struct {
	Kind    Kind   // a client response kind or KindError
	Payload []byte // aliases the input
}

// AppendForwardReply appends m's payload.
func AppendForwardReply(dst []byte, m *ForwardReply) []byte {
	dst = append(dst, byte(m.Kind))
	return appendBytes(dst, m.Payload)
}

// DecodeForwardReply decodes a ForwardReply payload into m. An inner kind
// that is not a client response is ErrUnknownKind.
func DecodeForwardReply(b []byte, m *ForwardReply) error {
	r := reader{b: b}
	m.Kind = Kind(r.u8())
	m.Payload = r.bytes(MaxFrame)
	if err := r.end(); err != nil {
		return err
	}
	if !m.Kind.IsClientResponse() {
		return ErrUnknownKind
	}
	return nil
}

// SnapshotChunk carries part of a shard's raft snapshot
// (KindSnapshotChunk). A snapshot (Shard, Index, Term) is sent as chunks at
// increasing Offset into the snapshot's bytes; the chunk with Last set ends
// it. Each chunk is answered by SnapshotAck.
type SnapshotChunk struct {
	Shard  uint64
	Index  uint64
	Term   uint64
	Offset uint64
	Last   bool
	Data   []byte // aliases the input
}

// AppendSnapshotChunk appends m's payload.
func AppendSnapshotChunk(dst []byte, m *SnapshotChunk) []byte {
	dst = appendU64(dst, m.Shard)
	dst = appendU64(dst, m.Index)
	dst = appendU64(dst, m.Term)
	dst = appendU64(dst, m.Offset)
	dst = appendBool(dst, m.Last)
	return appendBytes(dst, m.Data)
}

// DecodeSnapshotChunk decodes a SnapshotChunk payload into m.
func DecodeSnapshotChunk(b []byte, m *SnapshotChunk) error {
	r := reader{b: b}
	m.Shard = r.u64()
	m.Index = r.u64()
	m.Term = r.u64()
	m.Offset = r.u64()
	m.Last = r.bool()
	m.Data = r.bytes(MaxFrame)
	return r.end()
}

// SnapshotAck answers a SnapshotChunk (KindSnapshotAck). Offset is the
// number of snapshot bytes the receiver holds (where the next chunk must
// start); Reject asks the sender to abort the snapshot (a newer one was
// applied, or the chunk did not start at Offset).
type SnapshotAck struct {
	Shard  uint64
	Index  uint64
	Offset uint64
	Reject bool
}

// AppendSnapshotAck appends m's payload.
func AppendSnapshotAck(dst []byte, m *SnapshotAck) []byte {
	dst = appendU64(dst, m.Shard)
	dst = appendU64(dst, m.Index)
	dst = appendU64(dst, m.Offset)
	return appendBool(dst, m.Reject)
}

// DecodeSnapshotAck decodes a SnapshotAck payload into m.
func DecodeSnapshotAck(b []byte, m *SnapshotAck) error {
	r := reader{b: b}
	m.Shard = r.u64()
	m.Index = r.u64()
	m.Offset = r.u64()
	m.Reject = r.bool()
	return r.end()
}

// MetaKind names a versioned piece of cluster metadata (DESIGN §8).
type MetaKind uint8

const (
	MetaMembership   MetaKind = 1 // the member list
	MetaRing         MetaKind = 2 // the consistent-hash ring
	MetaShardLeaders MetaKind = 3 // the shard-leader table
)

// Valid reports whether k is one of the MetaKind constants.
func (k MetaKind) Valid() bool { return k >= MetaMembership && k <= MetaShardLeaders }

// MetadataPull asks a peer for its copy of one kind of cluster metadata
// (KindMetadataPull), when SWIM says the peer has a newer version than
// Have, or to bound staleness. Answered by MetadataPush, which sends only
// what the asker lacks: nothing when Digest matches the peer's copy, only
// the buckets whose digest differs when Buckets is given, the whole copy
// otherwise.
type MetadataPull struct {
	Kind MetaKind
	Have uint64 // the version the asker holds
	// Digest is MetaDigest of the asker's copy, encoded as a push's Data.
	Digest uint64
	// Buckets, when not empty, are the digests of the asker's copy split
	// into len(Buckets) buckets (the package that owns the metadata says
	// how); at most MaxMetaBuckets.
	Buckets []uint64
}

// MaxMetaBuckets bounds MetadataPull.Buckets: 1<<12.
const MaxMetaBuckets = 1 << 12

// AppendMetadataPull appends m's payload:
//
//	u8 kind · u64 have · u64 digest · uvarint n · n × u64 bucket digest
func AppendMetadataPull(dst []byte, m *MetadataPull) []byte {
	dst = append(dst, byte(m.Kind))
	dst = appendU64(dst, m.Have)
	dst = appendU64(dst, m.Digest)
	dst = appendUvarint(dst, uint64(len(m.Buckets)))
	for _, d := range m.Buckets {
		dst = appendU64(dst, d)
	}
	return dst
}

// DecodeMetadataPull decodes a MetadataPull payload into m (reusing
// m.Buckets' array).
func DecodeMetadataPull(b []byte, m *MetadataPull) error {
	r := reader{b: b}
	m.Kind = MetaKind(r.u8())
	m.Have = r.u64()
	m.Digest = r.u64()
	n := r.count(MaxMetaBuckets, 8)
	m.Buckets = grow(m.Buckets[:0], n)
	for i := range m.Buckets {
		m.Buckets[i] = r.u64()
	}
	if err := r.end(); err != nil {
		return err
	}
	if !m.Kind.Valid() {
		return ErrMalformed
	}
	return nil
}

// PushForm says what a MetadataPush's Data holds.
type PushForm uint8

const (
	// PushFull: the whole copy.
	PushFull PushForm = 0
	// PushSame: nothing; the copy is the one the pull's Digest named.
	PushSame PushForm = 1
	// PushDelta: the records of the buckets whose digest differed from
	// the pull's.
	PushDelta PushForm = 2
)

// MetadataPush carries one kind of cluster metadata at a version
// (KindMetadataPush): the answer to MetadataPull. Data's format belongs to
// the package that owns that metadata; Digest is that package's digest of
// the whole copy (the membership's or the ring's for a member list), so
// that an answer of part of it, or of none, can be merged.
type MetadataPush struct {
	Kind    MetaKind
	Version uint64
	Form    PushForm
	Digest  uint64
	Data    []byte // aliases the input
}

// AppendMetadataPush appends m's payload:
//
//	u8 kind · u64 version · u8 form · u64 digest · bytes data
func AppendMetadataPush(dst []byte, m *MetadataPush) []byte {
	dst = append(dst, byte(m.Kind))
	dst = appendU64(dst, m.Version)
	dst = append(dst, byte(m.Form))
	dst = appendU64(dst, m.Digest)
	return appendBytes(dst, m.Data)
}

// DecodeMetadataPush decodes a MetadataPush payload into m. A PushSame
// carries no data.
func DecodeMetadataPush(b []byte, m *MetadataPush) error {
	r := reader{b: b}
	m.Kind = MetaKind(r.u8())
	m.Version = r.u64()
	m.Form = PushForm(r.u8())
	m.Digest = r.u64()
	m.Data = r.bytes(MaxFrame)
	if err := r.end(); err != nil {
		return err
	}
	if !m.Kind.Valid() || m.Form > PushDelta || (m.Form == PushSame && len(m.Data) > 0) {
		return ErrMalformed
	}
	return nil
}
