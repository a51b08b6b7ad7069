package client

import (
	"context"
	"errors"
	"fmt"
	"github.com/shoalmq/shoal/internal/session"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Client talks to a Shoal cluster. It is safe for concurrent use; many
// goroutines share its connections, their requests pipelined.
type Client struct {
	cfg   Config
	log   *slog.Logger
	pool  *pool
	cache *router.Cache
	// leaders is the shard-leader table last pulled (nil before the first
	// pull); leadersPulling is set while a pull runs, leadersPulledAt is
	// when the last one started (unix ns).
	leaders         atomic.Pointer[leaderTable]
	leadersPulling  atomic.Bool
	leadersPulledAt atomic.Int64
	// avoid holds the leaders a request could not reach, each until when
	// leaderAddr skips it (unix ns); avoidN is its size, read without the
	// lock.
	avoidMu sync.Mutex
	avoid   map[string]int64
	avoidN  atomic.Int32
	// seed is the index in cfg.Servers of the seed that answered last:
	// metadata requests start there, so a dead seed costs one failed dial,
	// not one per request.
	seed atomic.Uint32
	// sess numbers the metadata writes, for exactly-once retries
	// (session.go), in as many sessions as the writes in flight need
	// (session.Window each); prod numbers the produces, in one session.
	sess, prod *session.Writer
	// follow is the route watch (follow.go); nil without
	// Config.FollowRoutes.
	follow *follower
}

// New validates cfg and returns a client. It does not connect: connections
// are made on first use, so New succeeds while the cluster is down.
func New(cfg Config) (*Client, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	cache, err := router.NewCache(router.CacheConfig{Capacity: cfg.CacheCapacity})
	if err != nil {
		return nil, fmt.Errorf("client: routing cache: %w: %w", ErrConfig, err)
	}
	c := &Client{cfg: cfg, log: cfg.Logger, cache: cache, sess: session.NewWindowed(), prod: session.New()}
	c.pool = newPool(&c.cfg)
	if cfg.FollowRoutes {
		c.startFollowing()
	}
	return c, nil
}

// Close closes every connection and waits for the goroutines reading them
// to exit. Calls in progress fail with ErrClosed; later calls too. Close is
// idempotent and always returns nil.
func (c *Client) Close() error {
	c.pool.close()
	if c.follow != nil {
		c.follow.done.Wait()
	}
	return nil
}

// Route returns the cached route of topic, if any: the owner, its client
// address and the epoch that data requests will carry.
func (c *Client) Route(topic string) (router.Route, bool) {
	return c.cache.Get([]byte(topic))
}

// request is one request's encoding and the decoding of its answer.
type request struct {
	kind   wire.Kind
	expect wire.Kind // the answer's kind
	encode func([]byte) []byte
	decode func([]byte) error
	// first is when a write with a session was first sent (zero for a
	// read): it is not retried past RetryWindow from then.
	first time.Time
}

// call names an operation for errors and logs: "produce", "topic-blue".
type call struct {
	op      string
	subject string // the topic, or empty
}

func (k call) String() string {
	if k.subject == "" {
		return k.op
	}
	return fmt.Sprintf("%s %q", k.op, k.subject)
}

// attempt sends req to addr once, within RequestTimeout.
func (c *Client) attempt(ctx context.Context, addr string, req *request) error {
	actx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	// The attempt's own deadline, not the caller's, means the node did not
	// answer in time: unreachable, for the retry loop.
	timedOut := func(err error) error {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, ErrUnreachable) {
			return fmt.Errorf("%w: no answer from %s within %v: %w", ErrUnreachable, addr, c.cfg.RequestTimeout, err)
		}
		return err
	}
	cn, err := c.pool.get(actx, addr)
	if err != nil {
		return timedOut(err)
	}
	kind, payload, err := cn.roundTrip(actx, req.kind, req.encode)
	if err != nil {
		return timedOut(err)
	}
	if kind != req.expect {
		err = fmt.Errorf("%w: %s answered %v with %v", ErrProtocol, addr, req.kind, kind)
		cn.fail(err)
		return err
	}
	if err := req.decode(payload); err != nil {
		err = fmt.Errorf("%w: %s sent a bad %v: %w", ErrProtocol, addr, kind, err)
		cn.fail(err)
		return err
	}
	return nil
}

// failure says what a failed attempt means for the next one.
type failure uint8

const (
	fatal      failure = iota // return the error
	connection                // the node is unreachable: try another at once
	busy                      // the node answered but cannot serve: back off, try another
	staleRoute                // NotLeaderForTopic: the route is stale
)

func classify(err error) failure {
	switch {
	case errors.Is(err, ErrClosed), errors.Is(err, ErrInvalidArgument), errors.Is(err, wire.ErrUnauthorized):
		// A credential the cluster refuses: every node refuses it alike.
		return fatal
	case errors.Is(err, wire.ErrNotLeaderForTopic):
		return staleRoute
	case errors.Is(err, wire.ErrUnavailable), errors.Is(err, wire.ErrNotLeader):
		return busy
	case errors.Is(err, ErrUnreachable), errors.Is(err, ErrProtocol), errors.Is(err, ErrHandshake):
		return connection
	}
	return fatal
}

// backoff returns the wait before retry number n (0 for the first), with
// jitter, raised to a node's RetryAfter hint within BackoffMax.
func (c *Client) backoff(n int, err error) time.Duration {
	d := c.cfg.BackoffMax
	if n < 30 {
		if b := c.cfg.BackoffBase << n; b > 0 && b < d {
			d = b
		}
	}
	d = d/2 + rand.N(d/2+1)
	var er *wire.ErrorResponse
	if errors.As(err, &er) && er.RetryAfter > d {
		d = min(er.RetryAfter, c.cfg.BackoffMax)
	}
	return d
}

// sleep waits d, or less if ctx ends or the client closes.
func (c *Client) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctxErr(ctx)
	case <-c.pool.closing.Done():
		return ErrClosed
	}
}

// stop wraps the error that ends a call. last is the failure of the
// attempt before (nil if none); cause, when the context or Close ended the
// call, is why.
func (k call) stop(attempts int, cause, last error) error {
	switch {
	case cause != nil && last != nil:
		return fmt.Errorf("client: %v: %w after %d attempts, last: %w", k, cause, attempts, last)
	case cause != nil:
		return fmt.Errorf("client: %v: %w", k, cause)
	case attempts > 1:
		return fmt.Errorf("client: %v: %d attempts failed, last: %w", k, attempts, last)
	}
	return fmt.Errorf("client: %v: %w", k, last)
}

// anyServer sends a metadata request to the seeds, starting with the one
// that answered last, until one answers or retries run out. Any node
// serves a metadata request (it forwards to the shard leader); a NotLeader
// answer naming the leader's address sends the next attempt there.
func (c *Client) anyServer(ctx context.Context, k call, req *request) error {
	return c.toServers(ctx, k, req, "", -1)
}

// toLeader sends a metadata request about topic to its shard's leader as
// the client's shard-leader table names it, or, with no leader known
// there, to the seeds as anyServer does; after a failure there the seeds
// take over, and the table is pulled again.
func (c *Client) toLeader(ctx context.Context, k call, topic []byte, req *request) error {
	addr, shard := c.leaderAddr(topic)
	return c.toServers(ctx, k, req, addr, shard)
}

// toServers is anyServer with a first address to try: leader, which the
// table names as the leader of shard (empty for none; shard -1 when the
// request is not routed by the table).
func (c *Client) toServers(ctx context.Context, k call, req *request, leader string, shard int64) error {
	n := len(c.cfg.Servers)
	seed := int(c.seed.Load())
	var last error
	hint := leader
	waits, sinceWait, seeds := 0, 0, 0
	for attempt := 0; attempt <= c.cfg.MaxRetries; attempt++ {
		if attempt > 0 && !req.first.IsZero() && time.Since(req.first) > RetryWindow {
			return k.stop(attempt, nil, fmt.Errorf("%w (retries end %v after the first attempt; the write may or may not have been applied)", last, RetryWindow))
		}
		if attempt > 0 && (classify(last) != connection || sinceWait >= n) {
			if err := c.sleep(ctx, c.backoff(waits, last)); err != nil {
				return k.stop(attempt, err, last)
			}
			waits, sinceWait = waits+1, 0
		}
		addr, idx := hint, -1
		if addr == "" {
			idx = (seed + seeds) % n
			addr = c.cfg.Servers[idx]
			seeds++
		}
		hint = ""
		sinceWait++
		err := c.attempt(ctx, addr, req)
		if err == nil {
			if idx >= 0 {
				c.seed.Store(uint32(idx))
			}
			return nil
		}
		if ctx.Err() != nil {
			return k.stop(attempt+1, ctxErr(ctx), last)
		}
		last = err
		f := classify(err)
		if addr == leader && leader != "" && f != fatal {
			// The table named a node that does not serve the shard now.
			if f == connection {
				c.avoidLeader(addr)
			}
			c.maybePullLeaders(minLeaderPullGap)
		}
		switch f {
		case fatal:
			return k.stop(attempt+1, nil, err)
		case busy:
			var er *wire.ErrorResponse
			if errors.As(err, &er) && er.Code == wire.CodeNotLeader && er.Addr != "" && er.Addr != addr &&
				ValidateAddr(er.Addr) == nil {
				hint = er.Addr
				if shard >= 0 && er.Shard == uint64(shard) {
					c.learnLeader(er.Shard, er.Addr)
				}
			}
		}
		c.log.Debug("client: retrying", "call", k.String(), "addr", addr, "attempt", attempt+1, "err", err)
	}
	return k.stop(c.cfg.MaxRetries+1, nil, last)
}

// toOwner sends a data request to the topic's owner at the epoch of its
// route: the cached one, or one looked up (and cached) on a miss. A
// NotLeaderForTopic answer invalidates the route and the next attempt
// follows the answer's owner hint when it names a newer epoch, else a
// linearizable lookup. The topic of an unreachable owner is looked up
// again too, since its topics move when it is declared dead: first at any
// node (a plain lookup, which a replica answers), and at the shard's
// leader only if that names the same owner. A write (a request with first
// set) is not retried past RetryWindow from its first attempt.
func (c *Client) toOwner(ctx context.Context, k call, topic []byte, build func(router.Route) *request) error {
	var last error
	linear, waited := false, true
	// askedAny: the route of an owner that could not be reached was looked
	// up once at any node (a plain lookup, answered from a replica); a
	// second such route is looked up at the shard's leader.
	askedAny := false
	waits := 0
	var first time.Time       // of the write, once an attempt was built
	var followSince time.Time // when it began to wait for the route watch
	for attempt := 0; attempt <= c.cfg.MaxRetries; attempt++ {
		if attempt > 0 && !first.IsZero() && time.Since(first) > RetryWindow {
			return k.stop(attempt, nil, fmt.Errorf("%w (retries end %v after the first attempt; the write may or may not have been applied)", last, RetryWindow))
		}
		// The first retry after a route change goes at once; later ones
		// back off, since the cluster may still be moving the topic.
		if attempt > 0 && waited {
			if err := c.sleep(ctx, c.backoff(waits, last)); err != nil {
				return k.stop(attempt, err, last)
			}
			waits++
		}
		waited = true
		cached := !linear
		route, err := c.route(ctx, topic, linear)
		switch {
		case err == nil && cached && c.pool.recentlyFailed(route.Addr):
			// The cached owner could not be reached a moment ago: it
			// may be dead and its topics moving. While the route watch
			// follows, wait for it to move the route, for a while;
			// else look again first, at once, rather than wait for a
			// dial that may time out.
			if c.trustWatch(&followSince) {
				if err := c.followWait(ctx); err != nil {
					return k.stop(attempt, err, last)
				}
				waited = false
				attempt--
				continue
			}
			c.cache.Invalidate(topic, route.Epoch)
			linear, askedAny = askedAny, true
			waited = false
			last = fmt.Errorf("%w: the last dial to %s failed", ErrUnreachable, route.Addr)
			attempt--
			continue
		case err == nil:
			req := build(route)
			first = req.first
			err = c.attempt(ctx, route.Addr, req)
		case errors.Is(err, errNoOwnerAddr):
			// The topic is between owners: ask again after a wait.
		default:
			// The lookup has spent its own retries.
			if ctx.Err() != nil {
				return k.stop(attempt+1, ctxErr(ctx), last)
			}
			return k.stop(attempt+1, nil, err)
		}
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return k.stop(attempt+1, ctxErr(ctx), last)
		}
		last = err
		switch classify(err) {
		case fatal:
			return k.stop(attempt+1, nil, err)
		case staleRoute:
			if er := (*wire.ErrorResponse)(nil); cached && (!errors.As(err, &er) || er.Epoch <= route.Epoch) && c.trustWatch(&followSince) {
				// The owner the watch named lags behind the route (its
				// open or lease is on the way): ask it again after a
				// backoff, without a lookup.
				break
			}
			c.cache.Invalidate(topic, route.Epoch)
			linear = true
			var er *wire.ErrorResponse
			if errors.As(err, &er) && er.Epoch > route.Epoch && er.NodeID != "" && ValidateAddr(er.Addr) == nil {
				c.cache.Put(topic, er.NodeID, er.Addr, er.Epoch, route.Partitions)
				linear = false
			}
			if attempt == 0 || !linear {
				waited = false
			}
		case connection, busy:
			if cached && c.trustWatch(&followSince) {
				// The route watch moves the route if the topic moves:
				// an owner that cannot be reached is waited on (the
				// next attempt finds its dial failed), one busy is
				// asked again after a backoff, without a lookup.
				if classify(err) == connection && c.pool.recentlyFailed(route.Addr) {
					waited = false
				}
				break
			}
			c.cache.Invalidate(topic, route.Epoch)
			linear = true
			if classify(err) == connection && !askedAny {
				linear, askedAny = false, true
			}
			if classify(err) == connection && cached {
				// An owner unreachable on a cached route may be dead,
				// its topics moved: look again at once.
				waited = false
			}
		}
		c.log.Debug("client: retrying", "call", k.String(), "owner", route.Owner, "addr", route.Addr,
			"epoch", route.Epoch, "attempt", attempt+1, "err", err)
	}
	return k.stop(c.cfg.MaxRetries+1, nil, last)
}

// route returns where to send a data request for topic: the cache's route
// unless fresh is set or it has none, else a lookup's answer, cached.
func (c *Client) route(ctx context.Context, topic []byte, fresh bool) (router.Route, error) {
	if !fresh {
		if r, ok := c.cache.Get(topic); ok {
			return r, nil
		}
	}
	a, err := c.lookup(ctx, topic, fresh)
	if err != nil {
		return router.Route{}, err
	}
	if a.Owner == "" || ValidateAddr(a.OwnerAddr) != nil {
		return router.Route{}, fmt.Errorf("client: lookup %q: owner %q has no usable client address %q: %w",
			topic, a.Owner, a.OwnerAddr, errNoOwnerAddr)
	}
	if !c.cache.Put(topic, a.Owner, a.OwnerAddr, a.Epoch, a.Partitions) {
		// The cache knows a newer epoch than this answer.
		if r, ok := c.cache.Get(topic); ok {
			return r, nil
		}
	}
	return router.Route{Owner: a.Owner, Addr: a.OwnerAddr, Epoch: a.Epoch}, nil
}

// ctxErr is why ctx ended: ctx.Err() (so errors.Is matches
// context.DeadlineExceeded or context.Canceled) with its cause, when one was
// given, wrapped as well.
func ctxErr(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		return fmt.Errorf("%w: %w", err, cause)
	}
	return err
}

// errNoOwnerAddr: a lookup named no owner, or one without a client address
// (the owner is not in the answering node's membership yet). It is
// Unavailable to callers: the cluster is moving the topic.
var errNoOwnerAddr = fmt.Errorf("no owner address: %w", wire.ErrUnavailable)

func validateTopic(topic string) error {
	switch {
	case topic == "":
		return fmt.Errorf("client: empty topic name: %w", ErrInvalidArgument)
	case len(topic) > wire.MaxTopicLen:
		return fmt.Errorf("client: topic name of %d bytes, at most %d: %w", len(topic), wire.MaxTopicLen, ErrInvalidArgument)
	}
	return nil
}

func assignmentRequest(kind wire.Kind, encode func([]byte) []byte, out *Assignment) *request {
	return &request{kind: kind, expect: wire.KindAssignment, encode: encode, decode: func(b []byte) error {
		var m wire.Assignment
		if err := wire.DecodeAssignment(b, &m); err != nil {
			return err
		}
		*out = assignmentOf(&m)
		return nil
	}}
}

// Assign assigns topic to an owner (opts.Owner, or one the shard leader
// chooses) and returns the assignment, which the routing cache keeps. It
// is idempotent: assigning a topic to its owner changes nothing.
func (c *Client) Assign(ctx context.Context, topic string, opts AssignOptions) (Assignment, error) {
	k := call{op: "assign", subject: topic}
	if err := validateTopic(topic); err != nil {
		return Assignment{}, err
	}
	if len(opts.Owner) > wire.MaxNodeIDLen {
		return Assignment{}, fmt.Errorf("client: owner id of %d bytes, at most %d: %w", len(opts.Owner), wire.MaxNodeIDLen, ErrInvalidArgument)
	}
	if opts.Partitions > wire.MaxPartitions {
		return Assignment{}, fmt.Errorf("client: %d partitions, at most %d: %w", opts.Partitions, wire.MaxPartitions, ErrInvalidArgument)
	}
	m := wire.Assign{Topic: []byte(topic), Owner: []byte(opts.Owner), Partitions: opts.Partitions}
	var a Assignment
	seq := c.sess.Begin()
	defer c.sess.Finish(seq)
	req := assignmentRequest(wire.KindAssign, func(b []byte) []byte {
		m.Session = c.sess.Stamp(seq)
		return wire.AppendAssign(b, &m)
	}, &a)
	req.first = time.Now()
	if err := c.toLeader(ctx, k, m.Topic, req); err != nil {
		return Assignment{}, err
	}
	c.remember(&a)
	return a, nil
}

// Lookup returns who owns topic. Any node answers from what it knows; with
// linearizable set, the shard leader answers after confirming its
// leadership, so the answer is at least as new as any completed Assign. A
// topic never assigned is wire.ErrNotFound. The answer fills the routing
// cache.
//
// Answers never go back in time: a node's answer older than a route this
// client already holds for the topic (from an earlier answer) is asked
// again of the shard leader. This holds for every topic whose route is in
// the routing cache (Config.CacheCapacity topics); a route the cache has
// evicted is forgotten.
func (c *Client) Lookup(ctx context.Context, topic string, linearizable bool) (Assignment, error) {
	if err := validateTopic(topic); err != nil {
		return Assignment{}, err
	}
	a, err := c.lookup(ctx, []byte(topic), linearizable)
	if err != nil {
		return Assignment{}, err
	}
	if r, ok := c.cache.Get([]byte(topic)); ok && r.Epoch > a.Epoch && !linearizable {
		if a, err = c.lookup(ctx, []byte(topic), true); err != nil {
			return Assignment{}, err
		}
	}
	c.remember(&a)
	return a, nil
}

func (c *Client) lookup(ctx context.Context, topic []byte, linearizable bool) (Assignment, error) {
	m := wire.Lookup{Topic: topic, Linearizable: linearizable}
	var a Assignment
	req := assignmentRequest(wire.KindLookup, func(b []byte) []byte { return wire.AppendLookup(b, &m) }, &a)
	k := call{op: "lookup", subject: string(topic)}
	if !linearizable {
		// Any node answers from its replica or its routing cache.
		return a, c.anyServer(ctx, k, req)
	}
	return a, c.toLeader(ctx, k, topic, req)
}

// remember caches an assignment's route when it names a usable address.
func (c *Client) remember(a *Assignment) {
	if a.Owner != "" && ValidateAddr(a.OwnerAddr) == nil {
		c.cache.Put([]byte(a.Topic), a.Owner, a.OwnerAddr, a.Epoch, a.Partitions)
	}
}

// Revoke removes topic's assignment and returns the epoch it committed at.
// The cached route is invalidated.
func (c *Client) Revoke(ctx context.Context, topic string) (Revoked, error) {
	if err := validateTopic(topic); err != nil {
		return Revoked{}, err
	}
	m := wire.Revoke{Topic: []byte(topic)}
	var out Revoked
	seq := c.sess.Begin()
	defer c.sess.Finish(seq)
	req := &request{kind: wire.KindRevoke, expect: wire.KindRevoked, first: time.Now(),
		encode: func(b []byte) []byte {
			m.Session = c.sess.Stamp(seq)
			return wire.AppendRevoke(b, &m)
		},
		decode: func(b []byte) error {
			var r wire.Revoked
			if err := wire.DecodeRevoked(b, &r); err != nil {
				return err
			}
			out = Revoked{Topic: string(r.Topic), Epoch: r.Epoch}
			return nil
		}}
	if err := c.toLeader(ctx, call{op: "revoke", subject: topic}, m.Topic, req); err != nil {
		return Revoked{}, err
	}
	c.cache.Invalidate(m.Topic, out.Epoch)
	return out, nil
}

// UpdatePartitions sets an assigned topic's partition count
// (1..wire.MaxPartitions) and returns the assignment.
func (c *Client) UpdatePartitions(ctx context.Context, topic string, partitions uint32) (Assignment, error) {
	if err := validateTopic(topic); err != nil {
		return Assignment{}, err
	}
	if partitions == 0 || partitions > wire.MaxPartitions {
		return Assignment{}, fmt.Errorf("client: %d partitions, want 1..%d: %w", partitions, wire.MaxPartitions, ErrInvalidArgument)
	}
	m := wire.UpdatePartition{Topic: []byte(topic), Partitions: partitions}
	var a Assignment
	seq := c.sess.Begin()
	defer c.sess.Finish(seq)
	req := assignmentRequest(wire.KindUpdatePartition, func(b []byte) []byte {
		m.Session = c.sess.Stamp(seq)
		return wire.AppendUpdatePartition(b, &m)
	}, &a)
	req.first = time.Now()
	if err := c.toLeader(ctx, call{op: "update partitions", subject: topic}, m.Topic, req); err != nil {
		return Assignment{}, err
	}
	c.remember(&a)
	return a, nil
}

// Produce appends records to topic at its owner and returns the offset of
// the first (the others follow in order). The request carries the epoch of
// the route it is sent on. Retries append once: the call takes a sequence
// number in the client's session and every attempt carries it, so an
// owner that appended the records (the answer was lost, the owner
// restarted, or the topic moved on to an owner that took over its records)
// answers a retry with the first answer: its epoch and offset, which may
// be an earlier epoch than the route's. A call that fails may or may not
// have appended them; it fails with wire.ErrSessionExpired when the owner
// no longer keeps the first answer of a retry (see the package doc).
func (c *Client) Produce(ctx context.Context, topic string, records [][]byte) (ProduceResult, error) {
	if err := validateTopic(topic); err != nil {
		return ProduceResult{}, err
	}
	if len(records) == 0 || len(records) > wire.MaxRecordsPerProduce {
		return ProduceResult{}, fmt.Errorf("client: %d records, want 1..%d: %w", len(records), wire.MaxRecordsPerProduce, ErrInvalidArgument)
	}
	size := wire.MaxTopicLen + 32
	for i, r := range records {
		if len(r) > wire.MaxRecordLen {
			return ProduceResult{}, fmt.Errorf("client: record %d of %d bytes, at most %d: %w", i, len(r), wire.MaxRecordLen, ErrInvalidArgument)
		}
		size += wire.ProduceRecordSize(len(r))
	}
	if size > wire.MaxFrame {
		return ProduceResult{}, fmt.Errorf("client: %d bytes of records, a frame holds at most %d: %w", size, wire.MaxFrame, ErrInvalidArgument)
	}
	tb := []byte(topic)
	var out ProduceResult
	seq := c.prod.Begin()
	defer c.prod.Finish(seq)
	first := time.Now()
	err := c.toOwner(ctx, call{op: "produce", subject: topic}, tb, func(r router.Route) *request {
		m := wire.Produce{Topic: tb, Epoch: r.Epoch, Records: records}
		return &request{kind: wire.KindProduce, expect: wire.KindProduceAck, first: first,
			encode: func(b []byte) []byte {
				m.Session = c.prod.Stamp(seq)
				return wire.AppendProduce(b, &m)
			},
			decode: func(b []byte) error {
				var a wire.ProduceAck
				if err := wire.DecodeProduceAck(b, &a); err != nil {
					return err
				}
				out = ProduceResult{Topic: string(a.Topic), Epoch: a.Epoch, Offset: a.Offset}
				return nil
			}}
	})
	if err != nil {
		return ProduceResult{}, err
	}
	return out, nil
}

// Fetch reads topic's records from offset from at its owner, at most
// maxBytes of record values (0: the node's default; at least one record
// if there is any).
func (c *Client) Fetch(ctx context.Context, topic string, from uint64, maxBytes uint32) (FetchResult, error) {
	if err := validateTopic(topic); err != nil {
		return FetchResult{}, err
	}
	tb := []byte(topic)
	var out FetchResult
	err := c.toOwner(ctx, call{op: "fetch", subject: topic}, tb, func(r router.Route) *request {
		m := wire.Fetch{Topic: tb, Epoch: r.Epoch, From: from, MaxBytes: maxBytes}
		return &request{kind: wire.KindFetch, expect: wire.KindFetchResult,
			encode: func(b []byte) []byte { return wire.AppendFetch(b, &m) },
			decode: func(b []byte) error {
				var f wire.FetchResult
				if err := wire.DecodeFetchResult(b, &f); err != nil {
					return err
				}
				out = fetchResultOf(&f)
				return nil
			}}
	})
	if err != nil {
		return FetchResult{}, err
	}
	return out, nil
}

// Members returns the cluster's members as one node sees them.
func (c *Client) Members(ctx context.Context) ([]Member, error) {
	var out []Member
	req := &request{kind: wire.KindMembers, expect: wire.KindMemberList, decode: func(b []byte) error {
		var m wire.MemberList
		if err := wire.DecodeMemberList(b, &m); err != nil {
			return err
		}
		out = membersOf(&m)
		return nil
	}}
	if err := c.anyServer(ctx, call{op: "members"}, req); err != nil {
		return nil, err
	}
	return out, nil
}

// Shards returns the metadata shards one node knows, with their replicas,
// leaders and ranges of key hashes.
func (c *Client) Shards(ctx context.Context) ([]ShardInfo, error) {
	var out []ShardInfo
	req := &request{kind: wire.KindShards, expect: wire.KindShardList, decode: func(b []byte) error {
		var m wire.ShardList
		if err := wire.DecodeShardList(b, &m); err != nil {
			return err
		}
		out = shardsOf(&m)
		return nil
	}}
	if err := c.anyServer(ctx, call{op: "shards"}, req); err != nil {
		return nil, err
	}
	if sp := c.shardSpace(ctx); sp != 0 {
		for i := range out {
			if base, depth, path, ok := sp.Range(uint32(out[i].Shard)); ok && out[i].Shard <= uint64(^uint32(0)) {
				out[i].Base, out[i].BaseShard, out[i].Depth, out[i].Path = sp.Base(), base, depth, path
			}
		}
	}
	return out, nil
}

// Status returns the status of the node at server (a client address,
// which need not be one of the seeds), or of any seed if server is empty.
// A specific node is retried, on connection failures and Unavailable, but
// never replaced by another.
func (c *Client) Status(ctx context.Context, server string) (Status, error) {
	var out Status
	req := &request{kind: wire.KindStatus, expect: wire.KindStatusInfo, decode: func(b []byte) error {
		var m wire.StatusInfo
		if err := wire.DecodeStatusInfo(b, &m); err != nil {
			return err
		}
		out = statusOf(&m)
		return nil
	}}
	if server == "" {
		if err := c.anyServer(ctx, call{op: "status"}, req); err != nil {
			return Status{}, err
		}
		return out, nil
	}
	if err := c.atServer(ctx, call{op: "status", subject: server}, server, req); err != nil {
		return Status{}, err
	}
	return out, nil
}

// atServer sends req to the node at server, retrying there only, until it
// answers or retries run out.
func (c *Client) atServer(ctx context.Context, k call, server string, req *request) error {
	if err := ValidateAddr(server); err != nil {
		return fmt.Errorf("client: %v: %w: %w", k, ErrInvalidArgument, err)
	}
	var last error
	for attempt := 0; attempt <= c.cfg.MaxRetries; attempt++ {
		if attempt > 0 {
			if err := c.sleep(ctx, c.backoff(attempt-1, last)); err != nil {
				return k.stop(attempt, err, last)
			}
		}
		err := c.attempt(ctx, server, req)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return k.stop(attempt+1, ctxErr(ctx), last)
		}
		last = err
		if f := classify(err); f == fatal || f == staleRoute {
			return k.stop(attempt+1, nil, err)
		}
	}
	return k.stop(c.cfg.MaxRetries+1, nil, last)
}
