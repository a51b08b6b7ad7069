// Package client is Shoal's native Go client: it assigns, looks up and
// revokes topics, produces and fetches records, lists members, shards and
// node status, and takes nodes out of service (Drain, Undrain,
// TransferLeader, RemoveNode: admin.go).
//
// # Connections
//
// A Client keeps Config.ConnsPerServer TCP connections to each node it
// talks to, dialled on first use (TLS 1.3 first when Config.TLS is set, then
// the handshake of docs/wire.md: Hello, carrying Config.Token when set, and
// HelloAuth when Config.Secret is set) and replaced when they break.
// Requests are pipelined: each carries a request id in its frame header, a
// reader goroutine per connection hands every answer to the caller waiting
// for that id, in whatever order the node answers, and at most
// Config.MaxInFlight requests are outstanding per connection. Close stops
// every goroutine the client started.
//
// # Routing
//
// Metadata requests (Assign, Lookup, Revoke, UpdatePartitions, Members,
// Shards, Status) go to any seed of Config.Servers; the node forwards them to
// the shard leader. Assign, Revoke, UpdatePartitions and linearizable
// Lookups go straight to the shard's leader instead when the client's copy
// of the shard-leader table (pulled from a seed in the background, again
// every Config.LeaderTableRefresh while in use) names one: one hop and one
// node's CPU fewer per request. The table is a hint: a NotLeader answer
// replaces its entry, a failure there pulls it again, and the seeds take
// the request over. Drain, Undrain and TransferLeader go to any seed too
// (which forwards them to the node named, or the shard's leader);
// RemoveNode asks every live member. Data requests (Produce, Fetch) go to the topic's owner,
// carrying the ownership epoch of the route they were sent on. Routes come
// from a router.Cache: on a miss the client looks the topic up and caches the
// answer (Assign and Lookup answers are cached too).
//
// With Config.FollowRoutes the client also watches every assignment change
// in the cluster and moves the routes it has cached as the changes commit
// (follow.go). A data request whose owner cannot be reached, or answers
// that it does not serve the topic yet at the route's epoch, then waits
// for the watch (up to two seconds) instead of looking the topic up: when
// an owner dies, its topics' new owners reach the cache from one stream
// rather than from one lookup per topic.
//
// # Retries
//
// A failure a retry can fix is retried up to Config.MaxRetries times with
// exponential backoff and jitter, within the caller's context:
//
//   - node unreachable (dial, broken connection, no answer within
//     Config.RequestTimeout): the next seed at once, backing off once every
//     seed has failed; for a data request, the route is invalidated and the
//     topic looked up again at once, since a dead owner's topics move; and
//     for two seconds after a dial to an owner failed, a cached route to
//     that owner is looked up again before any dial there;
//   - wire.ErrUnavailable, wire.ErrNotLeader: back off and try another node
//     (the leader a NotLeader answer names, if it names one);
//   - wire.ErrNotLeaderForTopic on a data request: the route is invalidated
//     at its epoch; the next attempt follows the answer's owner hint if it
//     names a newer epoch, else a linearizable lookup.
//
// Other answers (wire.ErrNotFound, wire.ErrBadRequest, wire.ErrUnauthorized:
// a token refused at the handshake or a request its role does not allow,
// …) are returned at once. Errors are never hidden: the error a call returns wraps the last
// failure, so errors.Is matches the wire sentinels, this package's
// ErrUnreachable / ErrHandshake / ErrProtocol / ErrInvalidArgument /
// ErrClosed, and context.DeadlineExceeded when the context ended the call;
// errors.As gives the *wire.ErrorResponse with the node's hints.
//
// Assign, Revoke and UpdatePartitions are exactly-once across retries:
// each call takes a sequence number in one of the client's sessions
// (random IDs; a session hands out at most 32 numbers from
// its oldest write in flight, so a write held up on its way never finds
// its shard has forgotten room for it, and more writes in flight take
// more sessions) and every attempt carries it, so a shard that applied the
// write answers a retry with the first answer, and a retry never applies
// it again. A write is retried for RetryWindow (a minute) at most; the
// cluster keeps its answer for five minutes after the session's last
// write. wire.ErrSessionExpired means the answer is gone: the write may or
// may not have been applied, and was not applied again.
//
// Produce is exactly-once across retries too (an idempotent producer): its
// attempts carry one sequence number, and the topic's owner answers a
// retry of a produce it appended with the first answer. An owner keeps the
// answers of at most wire.MaxProducers sessions per topic, the least
// recently used dropped first: a retry that comes after its session was
// dropped is appended again, and one whose answer alone was dropped (more
// than wire.MaxProducerAnswers of the session's produces to the topic in
// flight) fails with wire.ErrSessionExpired.
package client
