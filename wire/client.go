package wire

// Client requests and their responses. Every decoder fills a caller-owned
// struct: []byte fields alias the input, and slices in the struct are
// reused (truncated and appended to), so decoding into the same struct
// again allocates nothing once its slices have grown.

// IsClientRequest reports whether k is a request a client sends: a known
// kind from 10 to 29.
func (k Kind) IsClientRequest() bool { return k >= KindAssign && k < KindAssignment && k.Known() }

// IsAdminRequest reports whether k is one of the operators' requests
// (Drain, Undrain, TransferLeader, RemoveNode, SplitShard).
func (k Kind) IsAdminRequest() bool {
	return (k >= KindDrain && k <= KindRemoveNode) || k == KindSplitShard
}

// IsClientResponse reports whether k answers a client request: KindError,
// or a known kind from 30 to 49.
func (k Kind) IsClientResponse() bool {
	return k == KindError || (k >= KindAssignment && k < KindRaftBatch && k.Known())
}

// IsPeer reports whether k is a message only nodes send each other.
func (k Kind) IsPeer() bool { return k >= KindRaftBatch && k <= KindRecordsChunk }

// Assign asks the topic's shard leader to assign topic to an owner
// (KindAssign). It is idempotent: assigning a topic to its current owner
// changes nothing. Answered by Assignment.
type Assign struct {
	Topic      []byte // 1..MaxTopicLen bytes
	Owner      []byte // node id; empty lets the shard leader choose
	Partitions uint32 // 0 keeps the current count (1 for a new topic)
	Session    Session
}

// AppendAssign appends m's payload.
func AppendAssign(dst []byte, m *Assign) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendBytes(dst, m.Owner)
	dst = appendUvarint(dst, uint64(m.Partitions))
	return appendSession(dst, m.Session)
}

// DecodeAssign decodes an Assign payload into m.
func DecodeAssign(b []byte, m *Assign) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Owner = r.bytes(MaxNodeIDLen)
	m.Partitions = uint32(r.uvarintMax(MaxPartitions))
	m.Session = r.session()
	return r.end()
}

// Revoke removes a topic's assignment (KindRevoke). Answered by Revoked.
type Revoke struct {
	Topic   []byte
	Session Session
}

// AppendRevoke appends m's payload.
func AppendRevoke(dst []byte, m *Revoke) []byte {
	return appendSession(appendBytes(dst, m.Topic), m.Session)
}

// DecodeRevoke decodes a Revoke payload into m.
func DecodeRevoke(b []byte, m *Revoke) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Session = r.session()
	return r.end()
}

// UpdatePartition changes an assigned topic's partition count
// (KindUpdatePartition). Answered by Assignment.
type UpdatePartition struct {
	Topic      []byte
	Partitions uint32 // 1..MaxPartitions
	Session    Session
}

// AppendUpdatePartition appends m's payload.
func AppendUpdatePartition(dst []byte, m *UpdatePartition) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendUvarint(dst, uint64(m.Partitions))
	return appendSession(dst, m.Session)
}

// DecodeUpdatePartition decodes an UpdatePartition payload into m. A zero
// partition count is ErrMalformed.
func DecodeUpdatePartition(b []byte, m *UpdatePartition) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Partitions = uint32(r.uvarintMax(MaxPartitions))
	m.Session = r.session()
	if err := r.end(); err != nil {
		return err
	}
	if m.Partitions == 0 {
		return ErrMalformed
	}
	return nil
}

// Lookup asks who owns a topic (KindLookup). Any node answers from its
// routing cache unless Linearizable is set, in which case the shard leader
// answers after a raft read index. Answered by Assignment, or Error with
// CodeNotFound.
type Lookup struct {
	Topic        []byte
	Linearizable bool
}

// AppendLookup appends m's payload.
func AppendLookup(dst []byte, m *Lookup) []byte {
	dst = appendBytes(dst, m.Topic)
	return appendBool(dst, m.Linearizable)
}

// DecodeLookup decodes a Lookup payload into m.
func DecodeLookup(b []byte, m *Lookup) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Linearizable = r.bool()
	return r.end()
}

// Produce appends records to a topic at its owner (KindProduce). Epoch is
// the ownership epoch the client believes in; an owner at another epoch
// answers CodeNotLeaderForTopic. Answered by ProduceAck.
type Produce struct {
	Topic   []byte
	Epoch   uint64
	Records [][]byte // 1..MaxRecordsPerProduce values of at most MaxRecordLen; alias the input
	// Session makes a retried produce append once (an idempotent
	// producer); zero: at least once.
	Session Session
}

// AppendProduce appends m's payload.
func AppendProduce(dst []byte, m *Produce) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	dst = appendUvarint(dst, uint64(len(m.Records)))
	for _, rec := range m.Records {
		dst = appendBytes(dst, rec)
	}
	return appendSession(dst, m.Session)
}

// ProduceRecordSize is the number of bytes a record value of n bytes adds
// to a Produce payload, for a producer that fills frames up to a size.
func ProduceRecordSize(n int) int { return uvarintLen(uint64(n)) + n }

// DecodeProduce decodes a Produce payload into m, reusing m.Records. A
// Produce without records is ErrMalformed.
func DecodeProduce(b []byte, m *Produce) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	n := r.count(MaxRecordsPerProduce, 1)
	m.Records = grow(m.Records[:0], n)
	for i := range m.Records {
		m.Records[i] = r.bytes(MaxRecordLen)
	}
	m.Session = r.session()
	if err := r.end(); err != nil {
		m.Records = m.Records[:0]
		return err
	}
	if n == 0 {
		return ErrMalformed
	}
	return nil
}

// Fetch reads records of a topic from its owner (KindFetch), starting at
// offset From, at most MaxBytes of record values (at least one record is
// returned if any is there, whatever its size). Answered by FetchResult.
type Fetch struct {
	Topic    []byte
	Epoch    uint64
	From     uint64
	MaxBytes uint32 // 0: the server's default
}

// AppendFetch appends m's payload.
func AppendFetch(dst []byte, m *Fetch) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	dst = appendU64(dst, m.From)
	return appendU32(dst, m.MaxBytes)
}

// DecodeFetch decodes a Fetch payload into m.
func DecodeFetch(b []byte, m *Fetch) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.From = r.u64()
	m.MaxBytes = r.u32()
	return r.end()
}

// DecodeEmpty checks that the payload of a message without fields (Members,
// Shards, Status, Keepalive) is empty. Those messages have no Append
// function: their frame is a header with Length 0.
func DecodeEmpty(b []byte) error {
	if len(b) != 0 {
		return ErrTrailing
	}
	return nil
}

// Assignment says who owns a topic (KindAssignment): the answer to Assign,
// Lookup and UpdatePartition.
type Assignment struct {
	Topic      []byte
	Owner      []byte // node id
	OwnerAddr  []byte // the owner's client address
	Epoch      uint64 // rises at every ownership change
	Partitions uint32
	Shard      uint64 // the metadata shard holding the topic
}

// AppendAssignment appends m's payload.
func AppendAssignment(dst []byte, m *Assignment) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendBytes(dst, m.Owner)
	dst = appendBytes(dst, m.OwnerAddr)
	dst = appendU64(dst, m.Epoch)
	dst = appendUvarint(dst, uint64(m.Partitions))
	return appendU64(dst, m.Shard)
}

// DecodeAssignment decodes an Assignment payload into m.
func DecodeAssignment(b []byte, m *Assignment) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Owner = r.bytes(MaxNodeIDLen)
	m.OwnerAddr = r.bytes(MaxAddrLen)
	m.Epoch = r.u64()
	m.Partitions = uint32(r.uvarintMax(MaxPartitions))
	m.Shard = r.u64()
	return r.end()
}

// Revoked confirms a Revoke (KindRevoked). Epoch is the epoch the revoke
// committed at.
type Revoked struct {
	Topic []byte
	Epoch uint64
}

// AppendRevoked appends m's payload.
func AppendRevoked(dst []byte, m *Revoked) []byte {
	dst = appendBytes(dst, m.Topic)
	return appendU64(dst, m.Epoch)
}

// DecodeRevoked decodes a Revoked payload into m.
func DecodeRevoked(b []byte, m *Revoked) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	return r.end()
}

// ProduceAck confirms a Produce (KindProduceAck): its records got offsets
// Offset, Offset+1, … in order.
type ProduceAck struct {
	Topic  []byte
	Epoch  uint64
	Offset uint64 // offset of the first record
}

// AppendProduceAck appends m's payload.
func AppendProduceAck(dst []byte, m *ProduceAck) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	return appendU64(dst, m.Offset)
}

// DecodeProduceAck decodes a ProduceAck payload into m.
func DecodeProduceAck(b []byte, m *ProduceAck) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.Offset = r.u64()
	return r.end()
}

// Record is one record of a FetchResult: its offset, the epoch of the
// topic it was written at, and its value.
type Record struct {
	Offset uint64
	Epoch  uint64
	Value  []byte // aliases the input
}

// FetchResult answers a Fetch (KindFetchResult).
type FetchResult struct {
	Topic         []byte
	Epoch         uint64
	Records       []Record // ascending offsets (not dense), at most MaxRecordsPerProduce
	Next          uint64   // the offset to fetch from next
	HighWatermark uint64   // the lowest offset the topic's next record may get
}

// AppendFetchResult appends m's payload.
func AppendFetchResult(dst []byte, m *FetchResult) []byte {
	dst = appendBytes(dst, m.Topic)
	dst = appendU64(dst, m.Epoch)
	dst = appendU64(dst, m.Next)
	dst = appendU64(dst, m.HighWatermark)
	return appendRecords(dst, m.Records)
}

// appendRecords appends a record list: uvarint count · {u64 offset ·
// uvarint epoch · bytes value}.
func appendRecords(dst []byte, recs []Record) []byte {
	dst = appendUvarint(dst, uint64(len(recs)))
	for i := range recs {
		dst = appendU64(dst, recs[i].Offset)
		dst = appendUvarint(dst, recs[i].Epoch)
		dst = appendBytes(dst, recs[i].Value)
	}
	return dst
}

// DecodeFetchResult decodes a FetchResult payload into m, reusing
// m.Records.
func DecodeFetchResult(b []byte, m *FetchResult) error {
	r := reader{b: b}
	m.Topic = r.topic()
	m.Epoch = r.u64()
	m.Next = r.u64()
	m.HighWatermark = r.u64()
	m.Records = r.records(m.Records)
	if err := r.end(); err != nil {
		m.Records = m.Records[:0]
		return err
	}
	return nil
}

// records reads a record list (appendRecords) into recs[:0]: at most
// MaxRecordsPerProduce records, values aliasing the input.
func (r *reader) records(recs []Record) []Record {
	n := r.count(MaxRecordsPerProduce, 10)
	recs = grow(recs[:0], n)
	for i := range recs {
		recs[i].Offset = r.u64()
		recs[i].Epoch = r.uvarint()
		recs[i].Value = r.bytes(MaxRecordLen)
	}
	return recs
}

// MemberState is a member's SWIM state as a listing shows it.
type MemberState uint8

const (
	MemberAlive   MemberState = 1
	MemberSuspect MemberState = 2
	MemberDead    MemberState = 3
	MemberLeft    MemberState = 4
)

var memberStateNames = [...]string{MemberAlive: "alive", MemberSuspect: "suspect", MemberDead: "dead", MemberLeft: "left"}

// Valid reports whether s is one of the MemberState constants.
func (s MemberState) Valid() bool { return s >= MemberAlive && s <= MemberLeft }

func (s MemberState) String() string {
	if s.Valid() {
		return memberStateNames[s]
	}
	return "MemberState(" + itoa(uint64(s)) + ")"
}

// Member is one entry of a MemberList.
type Member struct {
	ID          []byte
	Generation  uint64
	Incarnation uint64
	State       MemberState
	Rack        []byte
	SwimAddr    []byte
	ClientAddr  []byte
	PeerAddr    []byte
}

// MemberList answers Members (KindMemberList): the answering node's view.
type MemberList struct {
	Members []Member
}

// minMemberSize is the smallest encoding of a Member: a one-byte id, two
// u64s, the state and four empty strings.
const minMemberSize = 2 + 8 + 8 + 1 + 4

// AppendMemberList appends m's payload.
func AppendMemberList(dst []byte, m *MemberList) []byte {
	dst = appendUvarint(dst, uint64(len(m.Members)))
	for i := range m.Members {
		e := &m.Members[i]
		dst = appendBytes(dst, e.ID)
		dst = appendU64(dst, e.Generation)
		dst = appendU64(dst, e.Incarnation)
		dst = append(dst, byte(e.State))
		dst = appendBytes(dst, e.Rack)
		dst = appendBytes(dst, e.SwimAddr)
		dst = appendBytes(dst, e.ClientAddr)
		dst = appendBytes(dst, e.PeerAddr)
	}
	return dst
}

// DecodeMemberList decodes a MemberList payload into m, reusing m.Members.
// An empty id or an unknown state is ErrMalformed.
func DecodeMemberList(b []byte, m *MemberList) error {
	r := reader{b: b}
	n := r.count(MaxListEntries, minMemberSize)
	m.Members = grow(m.Members[:0], n)
	for i := range m.Members {
		e := &m.Members[i]
		e.ID = r.nodeID()
		e.Generation = r.u64()
		e.Incarnation = r.u64()
		e.State = MemberState(r.u8())
		e.Rack = r.bytes(MaxRackLen)
		e.SwimAddr = r.bytes(MaxAddrLen)
		e.ClientAddr = r.bytes(MaxAddrLen)
		e.PeerAddr = r.bytes(MaxAddrLen)
		if r.err == nil && !e.State.Valid() {
			r.fail(ErrMalformed)
		}
	}
	if err := r.end(); err != nil {
		m.Members = m.Members[:0]
		return err
	}
	return nil
}

// ShardInfo is one entry of a ShardList.
type ShardInfo struct {
	Shard    uint64
	Replicas [][]byte // node ids in the shard's raft configuration, at most MaxReplicas
	Leader   []byte   // node id; empty if unknown
	Term     uint64
}

// ShardList answers Shards (KindShardList): the shards the answering node
// knows, with their replicas and leaders.
type ShardList struct {
	Shards []ShardInfo
}

const minShardInfoSize = 8 + 1 + 1 + 8

// AppendShardList appends m's payload.
func AppendShardList(dst []byte, m *ShardList) []byte {
	dst = appendUvarint(dst, uint64(len(m.Shards)))
	for i := range m.Shards {
		e := &m.Shards[i]
		dst = appendU64(dst, e.Shard)
		dst = appendUvarint(dst, uint64(len(e.Replicas)))
		for _, id := range e.Replicas {
			dst = appendBytes(dst, id)
		}
		dst = appendBytes(dst, e.Leader)
		dst = appendU64(dst, e.Term)
	}
	return dst
}

// DecodeShardList decodes a ShardList payload into m, reusing m.Shards and
// each entry's Replicas.
func DecodeShardList(b []byte, m *ShardList) error {
	r := reader{b: b}
	n := r.count(MaxListEntries, minShardInfoSize)
	m.Shards = grow(m.Shards[:0], n)
	for i := range m.Shards {
		e := &m.Shards[i]
		e.Shard = r.u64()
		nr := r.count(MaxReplicas, 2)
		e.Replicas = grow(e.Replicas[:0], nr)
		for j := range e.Replicas {
			e.Replicas[j] = r.nodeID()
		}
		e.Leader = r.bytes(MaxNodeIDLen)
		e.Term = r.u64()
	}
	if err := r.end(); err != nil {
		m.Shards = m.Shards[:0]
		return err
	}
	return nil
}

// StatusInfo answers Status (KindStatusInfo): the answering node's health.
type StatusInfo struct {
	Node         []byte
	Generation   uint64
	MembersAlive uint32
	ShardsHosted uint32
	ShardsLed    uint32
	TopicsOwned  uint64
	Ready        bool // the node has synced metadata and serves requests
}

// AppendStatusInfo appends m's payload.
func AppendStatusInfo(dst []byte, m *StatusInfo) []byte {
	dst = appendBytes(dst, m.Node)
	dst = appendU64(dst, m.Generation)
	dst = appendUvarint(dst, uint64(m.MembersAlive))
	dst = appendUvarint(dst, uint64(m.ShardsHosted))
	dst = appendUvarint(dst, uint64(m.ShardsLed))
	dst = appendUvarint(dst, m.TopicsOwned)
	return appendBool(dst, m.Ready)
}

// DecodeStatusInfo decodes a StatusInfo payload into m.
func DecodeStatusInfo(b []byte, m *StatusInfo) error {
	r := reader{b: b}
	m.Node = r.nodeID()
	m.Generation = r.u64()
	m.MembersAlive = r.u32v()
	m.ShardsHosted = r.u32v()
	m.ShardsLed = r.u32v()
	m.TopicsOwned = r.uvarint()
	m.Ready = r.bool()
	return r.end()
}

// topic reads a topic name: 1..MaxTopicLen bytes.
func (r *reader) topic() []byte {
	t := r.bytes(MaxTopicLen)
	if r.err == nil && len(t) == 0 {
		r.fail(ErrMalformed)
	}
	return t
}

// nodeID reads a node id: 1..MaxNodeIDLen bytes.
func (r *reader) nodeID() []byte {
	t := r.bytes(MaxNodeIDLen)
	if r.err == nil && len(t) == 0 {
		r.fail(ErrMalformed)
	}
	return t
}
