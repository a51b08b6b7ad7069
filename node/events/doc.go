// Package events is a node's event loop: it takes SWIM's membership
// events and what the raft host reports of the node's replicas (leader
// changes and configurations), and handles them on the node's events
// task.
//
// # What it owns
//
//   - The queue between the goroutines that report (SWIM's driver, the
//     raft host's workers), which must not block, and the events task;
//     SWIM events past its bound are dropped, as the view is rebuilt from
//     SWIM's full member list at the next pass that reads it.
//   - What raft reported of the replicas: which shards they lead (Leads),
//     since when each has known no leader (LeaderlessSince), whether a
//     replica still answers plain lookups from its state
//     (AnswersLocally), and a count of their leadership and
//     configuration changes (ShardEvents). A
//     leader change is recorded where it arrives, and told to the lease
//     room, before raft sends anything of the round that made it.
//   - The passes (Run): the members' liveness told to raft, the
//     shard-leader table filled from SWIM's ShardLeader events and the
//     replicas' changes, this node's leaderships announced through SWIM
//     and handed to the lease room to take up, the view rebuilt on a
//     membership event (and every viewRefreshTicks quiet passes), the
//     metadata versions heard handed to the metadata sync after the
//     rebuild; then the sync's tick, the routing cache's rotation, birth
//     and readiness, in that order.
//
// # What it may touch
//
// It reaches the node only through its Env (the clock, the events task's
// kick, the raft host's liveness hints, the view, SWIM's announcements,
// the metadata sync, birth and readiness) and the parts its Config gives
// it: the shard-leader table, the lease room and the routing cache, which
// it empties every RoutesFor. It starts no goroutine,
// arms no timer and reads no clock of its own; the node runs its task.
// It builds no view and decides no membership: the node rebuilds the view
// from SWIM, which decides it.
package events
