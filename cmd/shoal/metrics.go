package main

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/internal/version"
	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/status"
)

// metric exports one field of status.Stats.
type metric struct {
	field  string // path in status.Stats, e.g. "Swim.Core.Probes"
	name   string // without the shoal_ prefix
	help   string
	kind   prometheus.ValueType
	reason string // value of the "reason" label, for the families split by one
}

const (
	counter = prometheus.CounterValue
	gauge   = prometheus.GaugeValue
)

// metrics is every counter of status.Stats, by area. Names follow the
// Prometheus conventions: _total for counters, base units.
var metrics = []metric{
	// SWIM membership.
	{"Swim.PacketsIn", "swim_packets_received_total", "SWIM datagrams received.", counter, ""},
	{"Swim.PacketsOut", "swim_packets_sent_total", "SWIM datagrams sent.", counter, ""},
	{"Swim.BytesIn", "swim_received_bytes_total", "SWIM bytes received.", counter, ""},
	{"Swim.BytesOut", "swim_sent_bytes_total", "SWIM bytes sent.", counter, ""},
	{"Swim.ReadErrors", "swim_socket_errors_total", "SWIM socket errors, by direction.", counter, "read"},
	{"Swim.WriteErrors", "swim_socket_errors_total", "SWIM socket errors, by direction.", counter, "write"},
	{"Swim.PushPullsServed", "swim_push_pulls_served_total", "Push-pull state exchanges answered for other nodes.", counter, ""},
	{"Swim.PushPullsSent", "swim_push_pulls_started_total", "Push-pull state exchanges this node started.", counter, ""},
	{"Swim.Core.PushPulls", "swim_push_pulls_total", "Push-pull exchanges completed, both sides.", counter, ""},
	{"Swim.Core.PushPullFailures", "swim_push_pull_failures_total", "Push-pull exchanges that failed.", counter, ""},
	{"Swim.Core.PushPullsInSync", "swim_push_pulls_in_sync_total", "Push-pull exchanges by digests that found both states equal.", counter, ""},
	{"Swim.Core.Probes", "swim_probes_total", "Direct pings of a failure-detector probe.", counter, ""},
	{"Swim.Core.PingReqs", "swim_ping_reqs_total", "Indirect ping requests sent.", counter, ""},
	{"Swim.Core.ProbeFailures", "swim_probe_failures_total", "Probes that ended with no ack.", counter, ""},
	{"Swim.Core.Suspicions", "swim_suspicions_total", "Members this node suspected.", counter, ""},
	{"Swim.Core.Refutations", "swim_refutations_total", "Suspicions of this node it refuted.", counter, ""},
	{"Swim.Core.Rejoins", "swim_rejoins_total", "Times this node took a new generation after being declared dead.", counter, ""},
	{"Swim.Core.DeadDeclared", "swim_dead_declared_total", "Members this node declared dead.", counter, ""},
	{"Swim.Core.QueueDropped", "swim_broadcasts_dropped_total", "Gossip events evicted from a full broadcast queue.", counter, ""},
	{"Swim.BadAddress", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "bad_address"},
	{"Swim.Core.DropMalformed", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "malformed"},
	{"Swim.Core.DropClusterID", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "cluster_id"},
	{"Swim.Core.DropAuth", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "auth"},
	{"Swim.Core.DropWrongTarget", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "wrong_target"},
	{"Swim.Core.DropSelf", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "self"},
	{"Swim.Core.DropGeneration", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "generation"},
	{"Swim.Core.DropAck", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "ack"},
	{"Swim.Core.DropRelay", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "relay"},
	{"Swim.Core.DropReplay", "swim_dropped_total", "SWIM datagrams dropped, by reason.", counter, "replay"},
	{"Swim.PushPullsRefused", "swim_push_pulls_refused_total", "Push-pull connections closed at accept: the most exchanges were being served.", counter, ""},
	{"Swim.PushPullHandshakeFailures", "swim_push_pull_handshakes_failed_total", "Push-pull exchanges whose handshake or state frame was refused or timed out.", counter, ""},

	// Raft rounds, storage and transport.
	{"RaftCommits", "raft_storage_commits_total", "Storage batches committed by raft rounds (one per round that wrote).", counter, ""},
	{"RaftFsyncs", "raft_fsyncs_total", "Raft storage batches committed with an fsync.", counter, ""},
	{"RaftFramesOut", "raft_frames_sent_total", "Raft batch frames sent to peers.", counter, ""},
	{"RaftSendErrors", "raft_send_errors_total", "Raft messages that could not be sent.", counter, ""},
	{"RaftInboundQLen", "raft_inbound_queue_length", "Raft frames received and waiting to be decoded.", gauge, ""},
	{"RaftBadFrames", "raft_frames_undecodable_total", "Raft frames from peers that did not decode.", counter, ""},
	{"Raft.RefusedType", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "type"},
	{"Raft.RefusedAddress", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "address"},
	{"Raft.RefusedMalformed", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "malformed"},
	{"Raft.RefusedNonMember", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "non_member"},
	{"Raft.RefusedUnplaced", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "unplaced"},
	{"Raft.RefusedBeyondLog", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "beyond_log"},
	{"Raft.RefusedHalted", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "halted"},
	{"Raft.RefusedSnapshots", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "snapshot"},
	{"Raft.RefusedNonVoter", "raft_refused_total", "Raft input from peers refused before raft saw it, by reason.", counter, "non_voter"},
	{"Raft.ClampedCommits", "raft_commits_clamped_total", "Heartbeats whose commit index was lowered to what the replica's log holds.", counter, ""},
	{"Raft.HaltedReplicas", "raft_halted_replicas", "Shard replicas halted at an entry they could not apply (or a snapshot without its data).", gauge, ""},
	{"Raft.SnapshotBytes", "raft_snapshot_buffer_bytes", "Bytes buffered for incoming snapshots.", gauge, ""},
	{"ConfChanges", "raft_conf_changes_total", "Raft configuration changes proposed by this node.", counter, ""},
	{"LeaderTransfers", "raft_leader_transfers_total", "Shard leaderships this node handed to another replica.", counter, ""},
	{"ShardsLed", "shards_led", "Shards this node leads.", gauge, ""},
	{"ShardsLive", "shards", "Shards of this node's shard map: those the cluster was born with, each split one replaced by its halves.", gauge, ""},
	{"ShardSplits", "shard_splits_total", "Shard splits this node's replicas applied.", counter, ""},
	{"AutoSplits", "shard_auto_splits_total", "Shard splits this node proposed on its own as the shard's leader (topics, request rate, or too few shards for the members), applied.", counter, ""},
	{"LeadersKnown", "shard_leaders_known", "Shards whose leader this node knows.", gauge, ""},
	{"LeaderTableVersion", "shard_leader_table_version", "Version of this node's shard-leader table.", gauge, ""},
	{"StrayReplicas", "stray_replicas", "Replicas whose group no longer counts this node (confirmed with the shard's leader) that could not be dropped yet.", gauge, ""},
	{"StraysDropped", "stray_replicas_dropped_total", "Replicas dropped with their data because their group no longer counts this node.", counter, ""},
	{"MembershipVersion", "membership_version", "Version of this node's membership (rises with every change it learns).", gauge, ""},
	{"RingVersion", "ring_version", "Version of this node's placement ring (rises when the live member set changes).", gauge, ""},
	{"MetadataPulls", "metadata_pulls_total", "Cluster metadata pulls (membership, ring, shard-leader table) this node sent to a peer.", counter, ""},
	{"MetadataSyncs", "metadata_syncs_total", "Cluster metadata pushes received from peers and merged.", counter, ""},
	{"EventQueueLen", "event_queue_length", "Membership and leadership events waiting to be handled.", gauge, ""},

	// Frames and requests.
	{"FramesIn", "frames_received_total", "TCP frames received, clients and peers.", counter, ""},
	{"FramesOut", "frames_sent_total", "TCP frames queued for sending, clients and peers.", counter, ""},
	{"PeerSendDropped", "peer_frames_dropped_total", "Outbound peer frames dropped (queue full, peer gone).", counter, ""},
	{"ConnsRefused", "connections_refused_total", "Inbound TCP connections closed at accept: a listener or remote address at its limit.", counter, ""},
	{"ClientsIdle", "client_connections_idle_closed_total", "Client connections closed after sending nothing for the idle timeout.", counter, ""},
	{"Overloaded", "requests_overloaded_total", "Client requests refused because the request queue was full.", counter, ""},
	{"Requests", "requests_total", "Client and forwarded requests handled.", counter, ""},
	{"Forwarded", "requests_forwarded_total", "Requests this node forwarded to a shard leader.", counter, ""},
	{"ForwardsIn", "requests_forwarded_in_total", "Requests other nodes forwarded to this node.", counter, ""},
	{"ForwardDups", "requests_forwarded_duplicate_total", "Copies of a forwarded request already taken, dropped.", counter, ""},
	{"OwnershipDups", "ownership_messages_duplicate_total", "Copies of an OpenTopic or CloseTopic still waiting to be written, dropped.", counter, ""},
	{"NotLeader", "requests_not_leader_total", "Requests answered NotLeader or Unavailable for want of a shard leader.", counter, ""},
	{"TopicRejections", "requests_not_leader_for_topic_total", "Data requests answered NotLeaderForTopic (wrong owner or epoch).", counter, ""},
	{"RequestsActive", "requests_in_flight", "Requests being served.", gauge, ""},
	{"RecordsProduced", "records_produced_total", "Records appended to topics this node owns.", counter, ""},
	{"RecordsFetched", "records_fetched_total", "Records returned by fetches.", counter, ""},
	{"ProducesRemoved", "produces_removed_total", "Produces refused after their append (the lease ran out), whose records were removed again.", counter, ""},
	{"HandoffsStarted", "handoffs_started_total", "Pulls of a moved topic's records from its previous owner, started by this node as the new owner.", counter, ""},
	{"HandoffsCut", "handoffs_cut_total", "Record pulls that ended without every record: the previous owner died, the handoff timeout passed, or the topic moved on.", counter, ""},
	{"HandoffsSilent", "handoffs_silent_total", "Record pulls started from a previous owner the shard leader took for silent or dead, which get one short attempt.", counter, ""},
	{"HandoffRecords", "handoff_records_total", "Records pulled from previous owners of topics.", counter, ""},
	{"TopicsDeleted", "topics_deleted_total", "Revoked topics whose records this node deleted.", counter, ""},
	{"Watches", "watch_requests_total", "Watch requests taken.", counter, ""},
	{"WatchEvents", "watch_events_total", "Assignment changes sent to watchers.", counter, ""},
	{"WatchCompacted", "watch_compacted_total", "Watches answered that their position is older than the change log keeps.", counter, ""},
	{"WatchRefused", "watch_refused_total", "Watches answered at once because the node held its most.", counter, ""},
	{"WatchesWaiting", "watches_waiting", "Watches held until a change.", gauge, ""},

	// The routing cache.
	{"Cache.Hits", "route_cache_hits_total", "Routing cache hits.", counter, ""},
	{"Cache.Misses", "route_cache_misses_total", "Routing cache misses.", counter, ""},
	{"Cache.Evictions", "route_cache_evictions_total", "Routing cache evictions.", counter, ""},
	{"Cache.Len", "route_cache_entries", "Routing cache entries, invalidated fences included.", gauge, ""},

	// Topic ownership.
	{"TopicsOwned", "topics_owned", "Topics this node owns.", gauge, ""},
	{"OwnershipPending", "ownership_messages_pending", "OpenTopic/CloseTopic messages not yet acknowledged.", gauge, ""},
	{"OpensSent", "topic_opens_sent_total", "OpenTopic messages sent to new owners.", counter, ""},
	{"ClosesSent", "topic_closes_sent_total", "CloseTopic messages sent to old owners.", counter, ""},
	{"TopicsResent", "topics_resent_total", "Topics whose OpenTopic or CloseTopic a new shard leader owed again, their owners not having shown they hold them.", counter, ""},
	{"TopicsReassigned", "topics_reassigned_total", "Topics this node moved off a dead, departed, silent or drained owner.", counter, ""},
	{"OwnershipFences", "ownership_fences_pending", "Earlier owners of topics this node leads that may still hold a lease (their next owner waits).", gauge, ""},
	{"LeaseMessagesSent", "lease_messages_sent_total", "Lease rounds and their replies sent to peers.", counter, ""},
	{"LeaseBytesSent", "lease_sent_bytes_total", "Bytes of the lease rounds and replies sent to peers.", counter, ""},
	{"LeaseGrants", "lease_grants_total", "Shard leases granted to topic owners.", counter, ""},
	{"LeaseRefusals", "lease_refusals_total", "Shard leases refused: not the shard's leader, or its leadership not confirmed yet.", counter, ""},
	{"LeaseFramesDropped", "lease_frames_dropped_total", "Lease frames dropped: queue full or undecodable.", counter, ""},
	{"NotServedNoLease", "requests_without_lease_total", "Data requests refused because no unexpired lease covered the topic.", counter, ""},
	{"OwnershipEventsFolded", "ownership_events_folded_total", "Ownership events an embedding program did not read in time, folded into the net change.", counter, ""},

	// The operators' marks.
	{"Drained", "drained", "1 while this node is drained (shoalctl drain): it takes no topics or shard leaderships.", gauge, ""},
	{"MembersRemoved", "members_removed", "Nodes removed from the cluster for good (shoalctl remove) that this node knows of.", gauge, ""},

	// Credentials and request limits.
	{"Security.Unauthorized", "requests_unauthorized_total", "Client requests refused Unauthorized: the role of their token does not allow them, or the token was removed.", counter, ""},
	{"Security.TokensRefused", "client_tokens_refused_total", "Client handshakes refused for a missing or unknown token.", counter, ""},
	{"Security.TLSHandshakesFailed", "tls_handshakes_failed_total", "TLS handshakes that failed: no certificate, one the CA did not sign, or not TLS.", counter, ""},
	{"Security.RequestBytes", "request_bytes", "Bytes held by the requests not yet answered, decompressed payloads included.", gauge, ""},
	{"Security.RequestBytesRefused", "requests_over_byte_budget_total", "Requests answered Unavailable because their bytes would pass the node's request byte budget.", counter, ""},
}

// notExported are status.Stats fields left out on purpose, with the reason.
var notExported = map[string]string{
	"Swim.Core.PacketsIn":  "the driver's Swim.PacketsIn counts the same datagrams",
	"Swim.Core.PacketsOut": "the driver's Swim.PacketsOut counts the same datagrams",
	"Swim.Core.BytesIn":    "the driver's Swim.BytesIn counts the same bytes",
	"Swim.Core.BytesOut":   "the driver's Swim.BytesOut counts the same bytes",
}

// nodeCollector reads one node's Stats and Status at each scrape.
type nodeCollector struct {
	n     *node.Node
	descs map[string]*prometheus.Desc // by metric name

	generation, membersAlive, shardsHosted, ready *prometheus.Desc
	hists                                         histDescs
}

// histDescs are the latency histograms of a node (node.Node.Latencies).
type histDescs struct {
	requests, requestsTotal        *prometheus.Desc // by op and code
	forward, raftCommit, storeSync *prometheus.Desc
	leaseRound, snapshot           *prometheus.Desc // snapshot: by direction
}

// Names of the histogram families, for docs/operations.md and the dashboard test.
const (
	metricRequestDuration  = "shoal_client_request_duration_seconds"
	metricRequestsByCode   = "shoal_client_requests_total"
	metricForwardDuration  = "shoal_forward_duration_seconds"
	metricRaftCommit       = "shoal_raft_commit_duration_seconds"
	metricStorageSync      = "shoal_storage_sync_duration_seconds"
	metricLeaseRoundTrip   = "shoal_lease_round_trip_seconds"
	metricSnapshotDuration = "shoal_raft_snapshot_duration_seconds"
)

func newHistDescs(labels prometheus.Labels) histDescs {
	return histDescs{
		requests: prometheus.NewDesc(metricRequestDuration,
			"Client requests from arrival to answer, by op (assign, lookup, produce, ...) and code (OK or the error code answered).",
			[]string{"op", "code"}, labels),
		requestsTotal: prometheus.NewDesc(metricRequestsByCode,
			"Client requests answered, by op and code (OK or the error code answered).", []string{"op", "code"}, labels),
		forward: prometheus.NewDesc(metricForwardDuration,
			"Requests this node forwarded to a shard leader, from sending to the answer (one hop and the leader's work).", nil, labels),
		raftCommit: prometheus.NewDesc(metricRaftCommit,
			"Metadata commands this node proposed as a shard leader, from proposal to apply.", nil, labels),
		storeSync: prometheus.NewDesc(metricStorageSync,
			"Synced raft storage commits: the write, the WAL's fsync and the wait for it.", nil, labels),
		leaseRound: prometheus.NewDesc(metricLeaseRoundTrip,
			"Lease rounds sent to a peer, until its reply was taken.", nil, labels),
		snapshot: prometheus.NewDesc(metricSnapshotDuration,
			"Raft snapshots streamed to a peer (direction send) or taken in (receive), first chunk to last.", []string{"direction"}, labels),
	}
}

// collect sends the histograms of l.
func (d *histDescs) collect(ch chan<- prometheus.Metric, l status.Latencies) {
	hist := func(desc *prometheus.Desc, s histogram.Snapshot, labels ...string) {
		ch <- prometheus.MustNewConstHistogram(desc, s.Count, s.SumSeconds, s.Buckets(), labels...)
	}
	for _, r := range l.Requests {
		hist(d.requests, r.Hist, r.Op, r.Code)
		ch <- prometheus.MustNewConstMetric(d.requestsTotal, counter, float64(r.Hist.Count), r.Op, r.Code)
	}
	hist(d.forward, l.Forward)
	hist(d.raftCommit, l.RaftCommit)
	hist(d.storeSync, l.StorageSync)
	hist(d.leaseRound, l.LeaseRound)
	hist(d.snapshot, l.SnapshotSend, "send")
	hist(d.snapshot, l.SnapshotReceive, "receive")
}

func (d *histDescs) describe(ch chan<- *prometheus.Desc) {
	for _, desc := range []*prometheus.Desc{d.requests, d.requestsTotal, d.forward, d.raftCommit, d.storeSync, d.leaseRound, d.snapshot} {
		ch <- desc
	}
}

// buildInfo is shoal_build_info, one per process.
func newBuildInfo() prometheus.Collector {
	in := version.Get()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "shoal_build_info",
		Help:        "Always 1; the labels say which build runs: its module version, commit and Go version.",
		ConstLabels: prometheus.Labels{"version": in.Version, "commit": in.Commit, "goversion": in.GoVersion},
	})
	g.Set(1)
	return g
}

func newNodeCollector(n *node.Node) *nodeCollector {
	labels := prometheus.Labels{"node": n.ID()}
	c := &nodeCollector{n: n, descs: make(map[string]*prometheus.Desc)}
	for _, m := range metrics {
		if c.descs[m.name] != nil {
			continue
		}
		var variable []string
		if m.reason != "" {
			variable = []string{"reason"}
		}
		c.descs[m.name] = prometheus.NewDesc("shoal_"+m.name, m.help, variable, labels)
	}
	c.generation = prometheus.NewDesc("shoal_generation", "This life's generation of the node; it rises at every start.", nil, labels)
	c.membersAlive = prometheus.NewDesc("shoal_members_alive", "Live cluster members this node knows, itself included.", nil, labels)
	c.shardsHosted = prometheus.NewDesc("shoal_shards_hosted", "Shard replicas this node hosts.", nil, labels)
	c.ready = prometheus.NewDesc("shoal_ready", "1 once the node serves requests.", nil, labels)
	c.hists = newHistDescs(labels)
	return c
}

// Describe implements prometheus.Collector.
func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
	ch <- c.generation
	ch <- c.membersAlive
	ch <- c.shardsHosted
	ch <- c.ready
	c.hists.describe(ch)
}

// Collect implements prometheus.Collector.
func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	stats := reflect.ValueOf(c.n.Stats())
	for _, m := range metrics {
		v, err := statsField(stats, m.field)
		if err != nil {
			// The table and status.Stats disagree; TestMetricsCoverStats
			// catches this before a build ships.
			ch <- prometheus.NewInvalidMetric(c.descs[m.name], err)
			continue
		}
		var labels []string
		if m.reason != "" {
			labels = []string{m.reason}
		}
		ch <- prometheus.MustNewConstMetric(c.descs[m.name], m.kind, v, labels...)
	}
	st := c.n.Status()
	ready := 0.0
	if st.Ready {
		ready = 1
	}
	ch <- prometheus.MustNewConstMetric(c.generation, gauge, float64(st.Generation))
	ch <- prometheus.MustNewConstMetric(c.membersAlive, gauge, float64(st.MembersAlive))
	ch <- prometheus.MustNewConstMetric(c.shardsHosted, gauge, float64(st.ShardsHosted))
	ch <- prometheus.MustNewConstMetric(c.ready, gauge, ready)
	c.hists.collect(ch, c.n.Latencies())
}

// statsField reads the numeric field at a dotted path of a Stats value.
func statsField(v reflect.Value, path string) (float64, error) {
	for part := range strings.SplitSeq(path, ".") {
		if v.Kind() != reflect.Struct {
			return 0, fmt.Errorf("metrics: %s: %s is not a struct", path, v.Type())
		}
		v = v.FieldByName(part)
		if !v.IsValid() {
			return 0, fmt.Errorf("metrics: %s: no field %s", path, part)
		}
	}
	switch v.Kind() {
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return float64(v.Uint()), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(v.Int()), nil
	}
	return 0, fmt.Errorf("metrics: %s is a %s, not a number", path, v.Type())
}
