package wire

// Limits enforced by the decoders (and by the encoders where a caller could
// exceed them). Each is the largest value accepted.
const (
	// ProtocolVersion is the version carried in every frame header, Hello
	// and SWIM datagram. A peer speaking another version is refused.
	ProtocolVersion = 11

	// HeaderSize is the size of a TCP frame header.
	HeaderSize = 16

	// MaxFrame is the largest TCP frame payload, after decompression: 16 MiB.
	// A raft batch or snapshot chunk larger than this is split by its
	// producer.
	MaxFrame = 16 << 20

	// MaxNodeIDLen bounds a node id ("n1", a host name): 64 bytes.
	MaxNodeIDLen = 64
	// MaxRackLen bounds a rack name: 64 bytes.
	MaxRackLen = 64
	// MaxAddrLen bounds a "host:port" address: 256 bytes.
	MaxAddrLen = 256
	// MaxTopicLen bounds a topic name: 255 bytes, as Kafka's 249 and NATS'
	// subjects are in that range.
	MaxTopicLen = 255
	// MaxTokenLen bounds a client token in a Hello: 256 bytes (a token is
	// a random string of a few dozen characters).
	MaxTokenLen = 256
	// MaxMessageLen bounds an error message text: 1 KiB.
	MaxMessageLen = 1024
	// MaxMetaLen bounds a member's opaque metadata blob: 512 bytes (it
	// rides in SWIM datagrams).
	MaxMetaLen = 512

	// MaxRecordsPerProduce bounds the records in one Produce: 10,000.
	MaxRecordsPerProduce = 10000
	// MaxRecordLen bounds one record value: 1 MiB.
	MaxRecordLen = 1 << 20
	// MaxPartitions bounds a topic's partition count: 65,536.
	MaxPartitions = 1 << 16
	// MaxReplicas bounds the replicas listed for one shard: 64 (a
	// replication factor of 3 to 7, plus learners and the outgoing half of
	// a joint configuration, stays far below).
	MaxReplicas = 64
	// MaxListEntries bounds entries in a listing (members, shards): 1<<20.
	MaxListEntries = 1 << 20

	// MaxRaftMessagesPerBatch bounds the raft messages in one RaftBatch.
	MaxRaftMessagesPerBatch = 1 << 16
	// MaxEntriesPerRaftMessage bounds the entries in one raft message.
	MaxEntriesPerRaftMessage = 1 << 16
	// MaxRaftEntriesPerBatch bounds the entries and nested responses of all
	// the messages of one RaftBatch together: 1<<18. An entry decodes into
	// 48 bytes and a response into 160 (304 with a snapshot), so this caps
	// what a 16 MiB frame of one-byte entries or three-byte responses can
	// make a decoder allocate (12 MiB, 76 MiB at worst).
	MaxRaftEntriesPerBatch = 1 << 18
	// MaxHeartbeatsPerBatch bounds the coalesced heartbeat tuples in one
	// RaftBatch: one per shard, so 1<<20 shards at most.
	MaxHeartbeatsPerBatch = 1 << 20

	// MaxRaftResponseDepth bounds the nesting of raft messages inside a
	// message's Responses (raft's async storage writes nest one level).
	MaxRaftResponseDepth = 4
	// MaxConfStateIDs bounds each node-id list of a snapshot's ConfState.
	MaxConfStateIDs = 1 << 10
	// MaxConfStateIDsPerBatch bounds the node ids of all the ConfStates in
	// one RaftBatch together: 1<<16, sixteen snapshots with four full
	// lists each (512 KiB decoded). Without it a 16 MiB frame of one-byte
	// ids would decode into 128 MiB.
	MaxConfStateIDsPerBatch = 1 << 16

	// MaxForwardHops bounds how often a client request is forwarded between
	// nodes before one answers it: 4.
	MaxForwardHops = 4

	// DatagramBudget is the default largest SWIM datagram: 1400 bytes,
	// under a 1500-byte Ethernet MTU with IP and UDP headers.
	DatagramBudget = 1400
	// MaxDatagram is the largest SWIM datagram a decoder accepts: 64 KiB,
	// so a peer configured with a larger budget is still understood.
	MaxDatagram = 65507
	// MaxEventsPerDatagram bounds the piggybacked events in one datagram.
	MaxEventsPerDatagram = 255
)
