package node

import (
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
)

// Status is what `shoalctl status` shows of a node.
type Status struct {
	Node         string
	Generation   uint64
	MembersAlive int // live members this node knows, itself included
	ShardsHosted int
	ShardsLed    int
	TopicsOwned  int
	Ready        bool
}

// Status reports the node's status.
func (n *Node) Status() Status {
	st := Status{Node: n.cfg.ID, Generation: n.gen, ShardsLed: n.events.Led(), TopicsOwned: n.lease.Owned(), Ready: n.isReady()}
	if v := n.view.Load(); v != nil {
		st.MembersAlive = len(v.live)
	}
	if ids, err := n.rs.Shards(); err == nil {
		st.ShardsHosted = len(ids)
	}
	return st
}

// ShardLeader reports the leader of shard as this node's shard-leader
// table names it, and its term; ok is false while it knows none.
func (n *Node) ShardLeader(shard uint32) (leader string, term uint64, ok bool) {
	return n.leaders.Get(shard)
}

// Stats are the node's counters, for metrics.
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
	LeadersKnown          int
	LeaderTableVersion    uint64 // local change counter of the table
	StrayReplicas         int    // confirmed strays not dropped yet (a drop failed)
	StraysDropped         uint64 // replicas dropped because their group no longer counts this node
	MembershipVersion     uint64 // see MetadataVersions
	RingVersion           uint64
	MetadataPulls         uint64 // metadata pulls sent (every kind)
	MetadataSyncs         uint64 // metadata pushes received and merged

	// The operators' marks (marks.go): Drained is 1 while this node is
	// drained; MembersRemoved counts the removals it knows.
	Drained        int
	MembersRemoved int

	Security SecurityStats
}

// Stats returns a snapshot of the counters.
func (n *Node) Stats() Stats {
	ws, recs, srv, ls, rc, ds := n.watch.Stats(), n.records.Stats(), n.srv.Stats(), n.lease.Stats(), n.reconciler.Stats(), n.disp.Stats()
	s := Stats{
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
		RequestsActive:        n.adm.Active(),
		Watches:               ws.Watches,
		WatchEvents:           ws.Events,
		WatchCompacted:        ws.Compacted,
		WatchRefused:          ws.Refused,
		WatchesWaiting:        ws.Waiting,
		Cache:                 n.cacheStats(),
		TopicsOwned:           n.lease.Owned(),
		OwnershipPending:      n.lease.Pending(),
		OpensSent:             ls.OpensSent,
		ClosesSent:            ls.ClosesSent,
		OwnershipFences:       n.lease.Fences(),
		LeaseMessagesSent:     ls.MessagesSent,
		LeaseBytesSent:        ls.BytesSent,
		LeaseGrants:           ls.Grants,
		LeaseRefusals:         ls.Refusals,
		LeaseFramesDropped:    ls.FramesDropped + ls.FramesBad,
		NotServedNoLease:      ds.NotServedNoLease,
		OwnershipEventsFolded: n.ownFeed.Folded(),
		TopicsReassigned:      rc.TopicsReassigned,
		ConfChanges:           rc.ConfChanges,
		LeaderTransfers:       n.counters.transfers.Load() + rc.LeaderTransfers,
		ShardsLed:             n.events.Led(),
		EventQueueLen:         n.events.Len(),
	}
	rs := n.rs.Stats()
	s.RaftCommits, s.RaftFsyncs = rs.Commits, rs.Fsyncs
	if n.in != nil {
		s.RaftInboundQLen = n.in.Len()
		s.RaftBadFrames = n.in.BadFrames()
	}
	ms := n.msync.Stats()
	s.MetadataPulls = ms.Pulls
	if n.marks.Drained() {
		s.Drained = 1
	}
	s.MembersRemoved = n.marks.Removals()
	s.StrayReplicas = len(n.rec.Strays())
	s.StraysDropped = rc.StraysDropped
	s.MetadataSyncs = ms.Merges
	s.Security = n.securityStats()
	var rows []router.ShardLeader
	rows, s.LeaderTableVersion = n.leaders.Snapshot(rows)
	vs := n.MetadataVersions()
	s.MembershipVersion, s.RingVersion = vs.Membership, vs.Ring
	s.LeadersKnown = len(rows)
	if n.rt != nil {
		ts := n.rt.Stats()
		s.RaftFramesOut, s.RaftSendErrors = ts.FramesOut, ts.SendErrors
	}
	if n.netio != nil {
		c := n.netio.Counters()
		s.FramesIn, s.FramesOut = c.FramesIn.Load(), c.FramesOut.Load()
		s.PeerSendDropped, s.Overloaded = c.PeerSendDropped.Load(), c.Overloaded.Load()
		s.ConnsRefused, s.ClientsIdle = c.ConnsRefused.Load(), c.ClientsIdle.Load()
	}
	if n.swimDrv != nil {
		s.Swim = n.swimDrv.Stats()
	}
	if n.host != nil {
		s.Raft = n.host.Stats()
	}
	return s
}
