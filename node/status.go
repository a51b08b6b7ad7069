package node

import (
	"github.com/shoalmq/shoal/node/status"
	"github.com/shoalmq/shoal/router"
)

// Status reports the node's status: what `shoalctl status` shows.
func (n *Node) Status() status.Status {
	st := status.Status{Node: n.cfg.ID, Generation: n.gen, ShardsLed: n.events.Led(), TopicsOwned: n.lease.Owned(), Ready: n.birth.IsReady()}
	if v := n.view.Load(); v != nil {
		st.MembersAlive = len(v.Live)
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

// ShardOf returns the shard holding topic in the shard map this node
// knows (a split's half, once the node learnt of the split).
func (n *Node) ShardOf(topic string) uint32 { return n.leaders.Map().OfString(topic) }

// Stats returns a snapshot of the node's counters, for metrics, gathered
// from the rooms, the raft host, the transport and SWIM (status.Parts lays
// them out).
func (n *Node) Stats() status.Stats {
	p := status.Parts{
		Dispatch:            n.disp.Stats(),
		Serve:               n.srv.Stats(),
		Lease:               n.lease.Stats(),
		Records:             n.records.Stats(),
		Watch:               n.watch.Stats(),
		Reconcile:           n.reconciler.Stats(),
		Sync:                n.msync.Stats(),
		Storage:             n.rs.Stats(),
		Cache:               n.cache.Stats(),
		RequestsActive:      n.adm.Active(),
		RequestBytes:        n.adm.Bytes(),
		RequestBytesRefused: n.adm.Refused(),
		Unauthorized:        n.sec.Unauthorized(),
		TopicsOwned:         n.lease.Owned(),
		OwnershipPending:    n.lease.Pending(),
		OwnershipFences:     n.lease.Fences(),
		EventsFolded:        n.ownFeed.Folded(),
		Transfers:           n.counters.transfers.Load(),
		ShardsLed:           n.events.Led(),
		EventQueueLen:       n.events.Len(),
		Drained:             n.marks.Drained(),
		MembersRemoved:      n.marks.Removals(),
		StrayReplicas:       len(n.rec.Strays()),
	}
	var rows []router.ShardLeader
	rows, p.LeaderTableVersion = n.leaders.Snapshot(rows)
	p.LeadersKnown = len(rows)
	p.ShardsLive = n.leaders.Map().Len()
	p.ShardSplits = n.sm.Splits()
	vs := n.MetadataVersions()
	p.MembershipVersion, p.RingVersion = vs.Membership, vs.Ring
	if n.in != nil {
		p.Inbound.Len, p.Inbound.Bad = n.in.Len(), n.in.BadFrames()
	}
	if n.rt != nil {
		ts := n.rt.Stats()
		p.Transport = &ts
	}
	if n.started != nil {
		p.Net = n.started.Net.Counters()
		if n.started.Swim != nil {
			p.Swim = n.started.Swim.Stats()
		}
	}
	if n.host != nil {
		p.Raft = n.host.Stats()
	}
	return p.Stats()
}
