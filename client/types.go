package client

import "github.com/shoalmq/shoal/wire"

// The results of the client's methods. Unlike wire's decoded messages they
// own their memory: nothing aliases a network buffer.

// Assignment says who owns a topic: the answer to Assign, Lookup and
// UpdatePartitions.
type Assignment struct {
	Topic      string
	Owner      string // node id
	OwnerAddr  string // the owner's client address
	Epoch      uint64 // rises at every ownership change
	Partitions uint32
	Shard      uint64 // the metadata shard holding the topic
}

// AssignOptions are the optional parts of Assign.
type AssignOptions struct {
	// Owner is the node id to assign the topic to; empty lets the shard
	// leader choose among live nodes.
	Owner string
	// Partitions is the topic's partition count, at most
	// wire.MaxPartitions; 0 keeps the current count (1 for a new topic).
	Partitions uint32
}

// Revoked confirms a Revoke: the epoch the revocation committed at.
type Revoked struct {
	Topic string
	Epoch uint64
}

// ProduceResult confirms a Produce: the records got offsets Offset,
// Offset+1, … in order, from the owner at Epoch.
type ProduceResult struct {
	Topic  string
	Epoch  uint64
	Offset uint64 // offset of the first record
}

// Record is one fetched record, with the topic's epoch it was written at
// (0: written before records carried their epoch).
type Record struct {
	Offset uint64
	Epoch  uint64
	Value  []byte
}

// FetchResult is the answer to Fetch.
type FetchResult struct {
	Topic         string
	Epoch         uint64
	Records       []Record // ascending offsets; a move of the topic leaves a gap
	Next          uint64   // the offset to fetch from next
	HighWatermark uint64   // the lowest offset the topic's next record may get
}

// Member is one node as the answering node's membership shows it.
type Member struct {
	ID          string
	Generation  uint64
	Incarnation uint64
	State       wire.MemberState
	Rack        string
	SwimAddr    string
	ClientAddr  string
	PeerAddr    string
}

// ShardInfo is one metadata shard as the answering node knows it.
type ShardInfo struct {
	Shard    uint64
	Replicas []string // node ids of the shard's raft configuration
	Leader   string   // node id; empty if unknown
	Term     uint64
	// The shard's range of key hashes h: those with h mod Base = Base
	// shard, and, split Depth times since, (h / Base) mod 2^Depth = Path.
	// Base is 0 when the client does not know the cluster's base.
	Base      uint32
	BaseShard uint32
	Depth     uint8
	Path      uint64
}

// Status is one node's health.
type Status struct {
	Node         string
	Generation   uint64
	MembersAlive uint32
	ShardsHosted uint32
	ShardsLed    uint32
	TopicsOwned  uint64
	Ready        bool // the node has synced metadata and serves requests
}

func assignmentOf(m *wire.Assignment) Assignment {
	return Assignment{
		Topic: string(m.Topic), Owner: string(m.Owner), OwnerAddr: string(m.OwnerAddr),
		Epoch: m.Epoch, Partitions: m.Partitions, Shard: m.Shard,
	}
}

func fetchResultOf(m *wire.FetchResult) FetchResult {
	r := FetchResult{Topic: string(m.Topic), Epoch: m.Epoch, Next: m.Next, HighWatermark: m.HighWatermark}
	r.Records = make([]Record, len(m.Records))
	for i, rec := range m.Records {
		r.Records[i] = Record{Offset: rec.Offset, Epoch: rec.Epoch, Value: append([]byte(nil), rec.Value...)}
	}
	return r
}

func membersOf(m *wire.MemberList) []Member {
	out := make([]Member, len(m.Members))
	for i := range m.Members {
		e := &m.Members[i]
		out[i] = Member{
			ID: string(e.ID), Generation: e.Generation, Incarnation: e.Incarnation, State: e.State,
			Rack: string(e.Rack), SwimAddr: string(e.SwimAddr), ClientAddr: string(e.ClientAddr),
			PeerAddr: string(e.PeerAddr),
		}
	}
	return out
}

func shardsOf(m *wire.ShardList) []ShardInfo {
	out := make([]ShardInfo, len(m.Shards))
	for i := range m.Shards {
		e := &m.Shards[i]
		reps := make([]string, len(e.Replicas))
		for j, r := range e.Replicas {
			reps[j] = string(r)
		}
		out[i] = ShardInfo{Shard: e.Shard, Replicas: reps, Leader: string(e.Leader), Term: e.Term}
	}
	return out
}

func statusOf(m *wire.StatusInfo) Status {
	return Status{
		Node: string(m.Node), Generation: m.Generation, MembersAlive: m.MembersAlive,
		ShardsHosted: m.ShardsHosted, ShardsLed: m.ShardsLed, TopicsOwned: m.TopicsOwned, Ready: m.Ready,
	}
}
