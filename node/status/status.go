package status

import (
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/dispatch"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/metasync"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
)

// Status is what `shoalctl status` shows of a node (node.Status).
type Status struct {
	Node         string
	Generation   uint64
	MembersAlive int // live members this node knows, itself included
	ShardsHosted int
	ShardsLed    int
	TopicsOwned  int
	Ready        bool
}

// Stats are a node's counters, for metrics (node.Stats).
type Stats struct {
	Swim swim.DriverStats

	RaftCommits     uint64 // storage batches committed by raft rounds
	RaftFsyncs      uint64 // of which synced
	RaftFramesOut   uint64 // RaftBatch frames sent
	RaftSendErrors  uint64
	RaftInboundQLen int    // raft frames waiting to be decoded
	RaftBadFrames   uint64 // raft frames from peers that did not decode
	// Raft: peer input the raft host refused, replicas halted, snapshot
	// bytes buffered.
	Raft raftmux.Stats

	FramesIn, FramesOut uint64 // every TCP frame (netio)
	PeerSendDropped     uint64
	Overloaded          uint64
	ConnsRefused        uint64 // inbound connections closed at accept: a listener or address at its limit
	ClientsIdle         uint64 // client connections closed after the idle timeout

	Requests        uint64 // client and forwarded requests handled
	Forwarded       uint64 // requests this node forwarded to a shard leader
	ForwardsIn      uint64 // requests forwarded to this node
	ForwardDups     uint64 // copies of a forward already taken, dropped
	OwnershipDups   uint64 // copies of an OpenTopic or CloseTopic still waiting to be written, dropped
	NotLeader       uint64 // requests answered NotLeader/Unavailable for want of a leader
	TopicRejections uint64 // data requests answered NotLeaderForTopic
	RecordsProduced uint64
	RecordsFetched  uint64
	// ProducesRemoved: produces refused after their append, whose
	// records were removed again.
	ProducesRemoved uint64
	RequestsActive  int
	// Record handoffs (node/records): pulls started by this node as a new
	// owner, pulls that ended without every record (the previous owner
	// died, the timeout passed, the topic moved on), of these the pulls
	// from an owner the leader took for silent (OpenTopic.PrevSilent: one
	// short attempt), records pulled, and revoked topics whose records
	// this node deleted.
	HandoffsStarted uint64
	HandoffsCut     uint64
	HandoffsSilent  uint64
	HandoffRecords  uint64
	TopicsDeleted   uint64
	Watches         uint64 // Watch requests taken
	WatchEvents     uint64 // changes sent to watchers
	WatchCompacted  uint64 // watches answered that their position was compacted away
	WatchRefused    uint64 // watches answered at once because MaxWatchers were held
	WatchesWaiting  int    // watches held until a change

	Cache router.CacheStats

	TopicsOwned        int
	OwnershipPending   int // OpenTopic/CloseTopic not yet acknowledged
	OpensSent          uint64
	ClosesSent         uint64
	TopicsResent       uint64 // topics whose messages a new shard leader owed again
	OwnershipFences    int    // earlier owners of topics this node leads not yet fenced
	LeaseMessagesSent  uint64 // LeaseRound and LeaseReply frames sent to peers
	LeaseBytesSent     uint64 // their bytes, headers included
	LeaseGrants        uint64 // shard leases granted to owners
	LeaseRefusals      uint64 // shard leases refused (not the leader, or not confirmed yet)
	LeaseFramesDropped uint64 // lease frames dropped for want of room in the queue
	NotServedNoLease   uint64 // data requests refused because no lease covered the topic
	// OwnershipEventsFolded: ownership events an embedding program never
	// saw because it read too slowly (OwnershipEvents folds them).
	OwnershipEventsFolded uint64
	TopicsReassigned      uint64
	ConfChanges           uint64
	LeaderTransfers       uint64
	ShardsLed             int
	EventQueueLen         int
	ShardsLive            int    // shards of this node's shard map (docs/shards.md)
	ShardSplits           uint64 // splits this node's replicas applied
	LeadersKnown          int
	LeaderTableVersion    uint64 // local change counter of the table
	StrayReplicas         int    // confirmed strays not dropped yet (a drop failed)
	StraysDropped         uint64 // replicas dropped because their group no longer counts this node
	AutoSplits            uint64 // splits this node proposed on its own as a shard's leader, applied
	MembershipVersion     uint64 // see MetadataVersions
	RingVersion           uint64
	MetadataPulls         uint64 // metadata pulls sent (every kind)
	MetadataSyncs         uint64 // metadata pushes received and merged

	// The operators' marks (node/reconcile): Drained is 1 while this node is
	// drained; MembersRemoved counts the removals it knows.
	Drained        int
	MembersRemoved int

	Security security.Stats
}

// Parts is what a node's rooms, raft host, transport and SWIM counted, as
// the node gathers them; Stats lays them out. A part the node does not
// run (the transport and SWIM driver of a driven node, raft before the
// node started) is left zero, or nil.
type Parts struct {
	Dispatch  dispatch.Stats
	Serve     serve.Stats
	Lease     lease.Stats
	Records   records.Stats
	Watch     watch.Stats
	Reconcile reconcile.DriverStats
	Sync      metasync.Stats
	Storage   raftio.StorageStats
	// Transport is the raft transport's (nil before it is built).
	Transport *raftio.TransportStats
	// Net is netio's (nil when the caller carries the node's frames).
	Net  *netio.Counters
	Swim swim.DriverStats
	Raft raftmux.Stats
	// Inbound: the raft frames waiting to be decoded and the ones that
	// did not (zero before the inbound is built).
	Inbound struct {
		Len int
		Bad uint64
	}
	Cache router.CacheStats
	// The requests being served (serve.Admission) and the ones refused for
	// their token's role (security.Clients).
	RequestsActive      int
	RequestBytes        int64
	RequestBytesRefused uint64
	Unauthorized        uint64
	// The lease room's holdings now, and the ownership events an
	// embedding program never saw (node/feed).
	TopicsOwned, OwnershipPending, OwnershipFences int
	EventsFolded                                   uint64
	// Transfers: leaderships handed over by an operator's request or a
	// leaving node (the reconcile room counts its own).
	Transfers uint64
	// The event loop's.
	ShardsLed, EventQueueLen int
	// The operators' marks and the strays confirmed not dropped yet.
	Drained                       bool
	MembersRemoved, StrayReplicas int
	// The shard-leader table (and its shard map), the splits applied here
	// and the metadata versions.
	ShardsLive                     int
	ShardSplits                    uint64
	LeadersKnown                   int
	LeaderTableVersion             uint64
	MembershipVersion, RingVersion uint64
}

// Stats lays the parts out as a node's Stats.
func (p *Parts) Stats() Stats {
	ds, srv, ls, recs, ws, rc := &p.Dispatch, &p.Serve, &p.Lease, &p.Records, &p.Watch, &p.Reconcile
	s := Stats{
		Swim:                  p.Swim,
		RaftCommits:           p.Storage.Commits,
		RaftFsyncs:            p.Storage.Fsyncs,
		RaftInboundQLen:       p.Inbound.Len,
		RaftBadFrames:         p.Inbound.Bad,
		Raft:                  p.Raft,
		Requests:              ds.Requests,
		Forwarded:             srv.Forwarded,
		ForwardsIn:            srv.ForwardsIn,
		ForwardDups:           srv.ForwardDups,
		OwnershipDups:         ls.Dups,
		NotLeader:             srv.NotLeader,
		TopicRejections:       ds.TopicRejections,
		RecordsProduced:       recs.Produced,
		RecordsFetched:        recs.Fetched,
		ProducesRemoved:       recs.ProducesRemoved,
		HandoffsStarted:       recs.PullsStarted,
		HandoffsCut:           recs.PullsCut,
		HandoffsSilent:        recs.PullsSilent,
		HandoffRecords:        recs.PulledRecords,
		TopicsDeleted:         recs.TopicsDeleted,
		RequestsActive:        p.RequestsActive,
		Watches:               ws.Watches,
		WatchEvents:           ws.Events,
		WatchCompacted:        ws.Compacted,
		WatchRefused:          ws.Refused,
		WatchesWaiting:        ws.Waiting,
		Cache:                 p.Cache,
		TopicsOwned:           p.TopicsOwned,
		OwnershipPending:      p.OwnershipPending,
		OpensSent:             ls.OpensSent,
		ClosesSent:            ls.ClosesSent,
		TopicsResent:          ls.Resent,
		OwnershipFences:       p.OwnershipFences,
		LeaseMessagesSent:     ls.MessagesSent,
		LeaseBytesSent:        ls.BytesSent,
		LeaseGrants:           ls.Grants,
		LeaseRefusals:         ls.Refusals,
		LeaseFramesDropped:    ls.FramesDropped + ls.FramesBad,
		NotServedNoLease:      ds.NotServedNoLease,
		OwnershipEventsFolded: p.EventsFolded,
		TopicsReassigned:      rc.TopicsReassigned,
		ConfChanges:           rc.ConfChanges,
		LeaderTransfers:       p.Transfers + rc.LeaderTransfers,
		ShardsLed:             p.ShardsLed,
		EventQueueLen:         p.EventQueueLen,
		ShardsLive:            p.ShardsLive,
		ShardSplits:           p.ShardSplits,
		LeadersKnown:          p.LeadersKnown,
		LeaderTableVersion:    p.LeaderTableVersion,
		StrayReplicas:         p.StrayReplicas,
		StraysDropped:         rc.StraysDropped,
		AutoSplits:            rc.AutoSplits,
		MembershipVersion:     p.MembershipVersion,
		RingVersion:           p.RingVersion,
		MetadataPulls:         p.Sync.Pulls,
		MetadataSyncs:         p.Sync.Merges,
		MembersRemoved:        p.MembersRemoved,
		Security: security.Stats{
			Unauthorized:        p.Unauthorized,
			RequestBytes:        p.RequestBytes,
			RequestBytesRefused: p.RequestBytesRefused,
		},
	}
	if p.Drained {
		s.Drained = 1
	}
	if t := p.Transport; t != nil {
		s.RaftFramesOut, s.RaftSendErrors = t.FramesOut, t.SendErrors
	}
	if c := p.Net; c != nil {
		s.FramesIn, s.FramesOut = c.FramesIn.Load(), c.FramesOut.Load()
		s.PeerSendDropped, s.Overloaded = c.PeerSendDropped.Load(), c.Overloaded.Load()
		s.ConnsRefused, s.ClientsIdle = c.ConnsRefused.Load(), c.ClientsIdle.Load()
		s.Security.TokensRefused, s.Security.TLSHandshakesFailed = c.HandshakeBadToken.Load(), c.HandshakeTLS.Load()
	}
	return s
}
