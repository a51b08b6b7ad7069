package wire

import "encoding/binary"

// Kind identifies the message a TCP frame carries.
type Kind uint8

// Frame kinds. Requests and their responses share a request id in the
// header; a response kind is the answer to the request kind named beside it.
// Numbers are stable: they are on the wire.
const (
	KindHello     Kind = 1 // handshake, both directions
	KindHelloAuth Kind = 2 // handshake, proof of the shared secret
	KindError     Kind = 3 // answer to any request

	// Client requests (client → any node).
	KindAssign          Kind = 10
	KindRevoke          Kind = 11
	KindUpdatePartition Kind = 12
	KindLookup          Kind = 13
	KindProduce         Kind = 14
	KindFetch           Kind = 15
	KindMembers         Kind = 16
	KindShards          Kind = 17
	KindStatus          Kind = 18
	KindWatch           Kind = 19
	KindListTopics      Kind = 20
	KindDrain           Kind = 21 // admin: move a node's topics and leaderships away, and keep them away
	KindUndrain         Kind = 22 // admin: let a drained node take work again
	KindTransferLeader  Kind = 23 // admin: hand a shard's leadership to one of its replicas
	KindRemoveNode      Kind = 24 // admin: forget a node gone for good
	KindShardLeaders    Kind = 25
	KindSplitShard      Kind = 26 // admin: split a shard in two

	// Client responses.
	KindAssignment  Kind = 30 // answer to Assign, Lookup, UpdatePartition
	KindRevoked     Kind = 31 // answer to Revoke
	KindProduceAck  Kind = 32
	KindFetchResult Kind = 33
	KindMemberList  Kind = 34
	KindShardList   Kind = 35
	KindStatusInfo  Kind = 36
	KindWatchEvents Kind = 37 // answer to Watch
	KindTopicList   Kind = 38 // answer to ListTopics
	KindAdminResult Kind = 39 // answer to Drain, Undrain, TransferLeader, RemoveNode, SplitShard
	KindLeaderTable Kind = 40

	// Peer messages (node ↔ node).
	KindRaftBatch     Kind = 50
	KindOpenTopic     Kind = 51
	KindCloseTopic    Kind = 52
	KindTopicAck      Kind = 53 // answer to OpenTopic and CloseTopic
	KindForward       Kind = 54
	KindSnapshotChunk Kind = 55
	KindMetadataPull  Kind = 56
	KindMetadataPush  Kind = 57
	KindPushPull      Kind = 58 // SWIM full-state exchange over TCP
	KindSnapshotAck   Kind = 59
	KindForwardReply  Kind = 60 // answer to Forward, wrapping the reply frame
	KindKeepalive     Kind = 61
	KindLeaseRound    Kind = 62 // ownership leases and leadership vouches, node ↔ node
	KindLeaseReply    Kind = 63 // answer to LeaseRound
	KindRecordsPull   Kind = 64 // a topic's new owner asks the previous one for its records
	KindRecordsChunk  Kind = 65 // answer to RecordsPull
	maxKind           Kind = 127
)

var kindNames = [maxKind + 1]string{
	KindHello: "Hello", KindHelloAuth: "HelloAuth", KindError: "Error",
	KindAssign: "Assign", KindRevoke: "Revoke", KindUpdatePartition: "UpdatePartition",
	KindLookup: "Lookup", KindProduce: "Produce", KindFetch: "Fetch",
	KindMembers: "Members", KindShards: "Shards", KindStatus: "Status",
	KindWatch: "Watch", KindListTopics: "ListTopics",
	KindAssignment: "Assignment", KindRevoked: "Revoked", KindProduceAck: "ProduceAck",
	KindFetchResult: "FetchResult", KindMemberList: "MemberList", KindShardList: "ShardList",
	KindStatusInfo: "StatusInfo", KindWatchEvents: "WatchEvents", KindTopicList: "TopicList",
	KindShardLeaders: "ShardLeaders", KindLeaderTable: "LeaderTable",
	KindRaftBatch: "RaftBatch", KindOpenTopic: "OpenTopic", KindCloseTopic: "CloseTopic",
	KindTopicAck: "TopicAck", KindForward: "Forward", KindSnapshotChunk: "SnapshotChunk",
	KindMetadataPull: "MetadataPull", KindMetadataPush: "MetadataPush", KindPushPull: "PushPull",
	KindSnapshotAck: "SnapshotAck", KindForwardReply: "ForwardReply", KindKeepalive: "Keepalive",
	KindLeaseRound: "LeaseRound", KindLeaseReply: "LeaseReply",
	KindRecordsPull: "RecordsPull", KindRecordsChunk: "RecordsChunk",

	KindDrain: "Drain", KindUndrain: "Undrain", KindTransferLeader: "TransferLeader", KindRemoveNode: "RemoveNode",
	KindSplitShard: "SplitShard", KindAdminResult: "AdminResult",
}

// Known reports whether k is a kind this build understands.
func (k Kind) Known() bool { return k <= maxKind && kindNames[k] != "" }

func (k Kind) String() string {
	if k.Known() {
		return kindNames[k]
	}
	return "Kind(" + itoa(uint64(k)) + ")"
}

// Frame flags.
const (
	// FlagCompressed: the payload is S2-compressed (klauspost/compress);
	// Length is the compressed size.
	FlagCompressed uint16 = 1 << 0

	knownFlags = FlagCompressed
)

// Header is the fixed 16-byte header in front of every TCP frame:
//
//	offset size field
//	0      1    version    ProtocolVersion
//	1      1    kind       Kind
//	2      2    flags      Flag… bits; the others must be zero
//	4      4    length     payload bytes that follow the header
//	8      8    request id chosen by the requester, echoed in the answer
type Header struct {
	Version   uint8
	Kind      Kind
	Flags     uint16
	Length    uint32
	RequestID uint64
}

// AppendHeader appends h.
func AppendHeader(dst []byte, h *Header) []byte {
	dst = append(dst, h.Version, byte(h.Kind))
	dst = appendU16(dst, h.Flags)
	dst = appendU32(dst, h.Length)
	return appendU64(dst, h.RequestID)
}

// DecodeHeader decodes the header at the start of b (b may hold more: the
// payload, or the next frames). It checks the version, kind, flags and that
// Length is at most MaxFrame; it does not check that the payload is there.
// It allocates nothing.
func DecodeHeader(b []byte, h *Header) error {
	if len(b) < HeaderSize {
		return ErrTruncated
	}
	h.Version = b[0]
	h.Kind = Kind(b[1])
	h.Flags = binary.LittleEndian.Uint16(b[2:])
	h.Length = binary.LittleEndian.Uint32(b[4:])
	h.RequestID = binary.LittleEndian.Uint64(b[8:])
	switch {
	case h.Version != ProtocolVersion:
		return ErrVersion
	case !h.Kind.Known():
		return ErrUnknownKind
	case h.Flags&^knownFlags != 0:
		return ErrBadFlags
	case h.Length > MaxFrame:
		return ErrTooLarge
	}
	return nil
}

// BeginFrame appends a header for kind and request id with a zero length,
// and returns the buffer and the header's offset, for EndFrame to patch once
// the payload has been appended after it.
func BeginFrame(dst []byte, kind Kind, requestID uint64) ([]byte, int) {
	start := len(dst)
	h := Header{Version: ProtocolVersion, Kind: kind, RequestID: requestID}
	return AppendHeader(dst, &h), start
}

// EndFrame patches the length of the frame begun at start. It fails with
// ErrTooLarge, leaving dst as it was before BeginFrame, if the payload
// exceeds MaxFrame.
func EndFrame(dst []byte, start int) ([]byte, error) {
	n := len(dst) - start - HeaderSize
	if n < 0 {
		return dst, ErrMalformed
	}
	if n > MaxFrame {
		return dst[:start], ErrTooLarge
	}
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(n))
	return dst, nil
}

// itoa formats v without fmt (used in String methods on hot-path types).
func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			break
		}
	}
	return string(b[i:])
}
