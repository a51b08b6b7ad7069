package node

import "github.com/shoalmq/shoal/node/events"

// SWIM's membership events and what raft reports of the hosted replicas
// (leader changes, configurations) are the events room's (node/events):
// its queue, the events task's passes, and which shards the replicas lead
// and since when each has known no leader. Here the room is given the
// node's parts: the view it rebuilds, the raft host it tells of the
// members' liveness, the metadata sync it ticks, and the reconcile room's
// birth and the node's readiness it looks at.

// newEvents builds the node's events room.
func (n *Node) newEvents() (*events.Loop, error) {
	return events.New(events.Config{
		Self:      n.cfg.ID,
		RaftID:    RaftID,
		Shards:    n.cfg.Shards,
		Interval:  n.cfg.ReconcileInterval,
		Leaders:   n.leaders,
		Lease:     n.lease,
		Routes:    n.cache,
		RoutesFor: n.cfg.MetadataSyncInterval,
		Tick:      n.cfg.RaftTickInterval,
		Logger:    n.log,
		Env:       eventsEnv{parts{n}},
	})
}

// eventsEnv is what the events room touches of the node. It reads the
// node's raft host, peers and SWIM when called: they are set after New.
type eventsEnv struct{ parts }

func (e eventsEnv) Kick()                      { e.n.eventsTask.Kick() }
func (e eventsEnv) Host() events.Host          { return e.n.host }
func (e eventsEnv) RemovePeer(member string)   { e.n.net.RemovePeer(member) }
func (e eventsEnv) Removed(member string) bool { return e.n.view.Load().Removed(member) }
func (e eventsEnv) Rebuild()                   { e.n.rebuildView() }
func (e eventsEnv) Birth()                     { e.n.reconciler.Birth() }
func (e eventsEnv) Ready()                     { e.n.maybeReady() }

func (e eventsEnv) AnnounceLeader(shard, term uint64) {
	e.n.swim.AnnounceShardLeader(shard, e.n.cfg.ID, term)
}

func (e eventsEnv) Announced(kind uint64, from string, version uint64) {
	e.n.msync.Announced(kind, from, version)
}

func (e eventsEnv) SyncTick() {
	v := e.n.view.Load()
	e.n.msync.Tick(v.Live, v.Dead)
}
