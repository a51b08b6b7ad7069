package dispatch

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/node/admin"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/metasync"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Conn is the connection a frame arrived on (netio.Conn): the answer goes
// back on it.
type Conn interface {
	Write(frame []byte) error
	Role() wire.Role
	Node() string
}

// Env is what the Dispatcher reads of the rest of the node and does to
// it.
type Env interface {
	// Now is the node's clock.
	Now() time.Time
	// Spawn runs f soon, on its own, unless the node is closing; it
	// reports whether f will run.
	Spawn(f func()) bool
	// Admit takes a request slot and its bytes (serve.Admission) unless
	// the node is closing or either runs out; release gives the bytes
	// back.
	Admit(h wire.Header, frame []byte) (release func(), ok bool)
	// OfferRaft queues a peer's raft frame for the raft host; false when
	// the queue is full.
	OfferRaft(from string, h wire.Header, frame []byte) bool
	// Ready reports whether the node serves clients; Born whether its
	// cluster is born; RemovedSelf whether it found itself removed.
	Ready() bool
	Born() bool
	RemovedSelf() bool
	// AnswersLocally reports whether plain lookups of shard may be
	// answered from this node's replica.
	AnswersLocally(shard uint64) bool
	// ClientAddr is the client address of member id ("" when unknown).
	ClientAddr(id string) string
	// Members is the node's view of the membership, as it is now;
	// SwimMembers every member SWIM knows.
	Members() Members
	SwimMembers() []swim.Member
	// Submit hands op to the raft host; done gets its result.
	Submit(op raftmux.Op, done func(raftmux.Result))
	// NameOf returns the node id of a raft replica id, if the node knows
	// it.
	NameOf(raftID uint64) (string, bool)
	// Status is the node's status.
	Status() wire.StatusInfo
}

// Members is a view of the membership as the Dispatcher reads it.
type Members interface {
	// Alive reports whether id is a live member (alive or suspect).
	Alive(id string) bool
	// Removed reports whether id was removed for good.
	Removed(id string) bool
	// Placement is the ring's placement of the view.
	Placement() *router.Placement
}

// Config configures a Dispatcher. Every field but BeforeServe is
// required.
type Config struct {
	// Self is this node's id.
	Self string
	// Leaders is the node's shard-leader table, with the shard map that
	// places keys; Routes its routing cache.
	Leaders *router.LeaderTable
	Routes  *router.Cache
	// The rooms frames and requests are handed to.
	Machine   *shardsm.Machine
	Lease     *lease.Agent
	Server    *serve.Server
	Admission *serve.Admission
	Latency   *serve.Latency
	Records   *records.Keeper
	Watch     *watch.Server
	Sync      *metasync.Sync
	Admin     *admin.Handler
	Clients   *security.Clients
	// BeforeServe, when set, runs before every client request served off
	// the connection's reader (a test's seam).
	BeforeServe func()
	// PeerIn, when set, is handed every peer frame Deliver takes instead
	// of Frame (a test's faults, which deliver it later, or again, through
	// Frame).
	PeerIn func(c Conn, h wire.Header, frame []byte) bool
	// Env reaches the rest of the node.
	Env Env
}

// Dispatcher hands each frame a node receives to its room.
type Dispatcher struct {
	self        string
	leaders     *router.LeaderTable
	routes      *router.Cache
	sm          *shardsm.Machine
	lease       *lease.Agent
	srv         *serve.Server
	adm         *serve.Admission
	lat         *serve.Latency
	records     *records.Keeper
	watch       *watch.Server
	msync       *metasync.Sync
	admin       *admin.Handler
	sec         *security.Clients
	beforeServe func()
	peerIn      func(c Conn, h wire.Header, frame []byte) bool
	env         Env

	// serving: Deliver takes frames (Open).
	serving                              atomic.Bool
	requests, rejected, notServedNoLease atomic.Uint64
}

// New returns a Dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	if cfg.Self == "" || cfg.Leaders == nil || cfg.Routes == nil || cfg.Machine == nil || cfg.Lease == nil ||
		cfg.Server == nil || cfg.Admission == nil || cfg.Latency == nil || cfg.Records == nil || cfg.Watch == nil ||
		cfg.Sync == nil || cfg.Admin == nil || cfg.Clients == nil || cfg.Env == nil {
		return nil, errors.New("dispatch: incomplete config")
	}
	return &Dispatcher{self: cfg.Self, leaders: cfg.Leaders, routes: cfg.Routes, sm: cfg.Machine,
		lease: cfg.Lease, srv: cfg.Server, adm: cfg.Admission, lat: cfg.Latency, records: cfg.Records, watch: cfg.Watch,
		msync: cfg.Sync, admin: cfg.Admin, sec: cfg.Clients, beforeServe: cfg.BeforeServe, peerIn: cfg.PeerIn, env: cfg.Env}, nil
}

// Stats are the Dispatcher's counters.
type Stats struct {
	Requests         uint64 // client and forwarded requests handled
	TopicRejections  uint64 // data requests answered NotLeaderForTopic
	NotServedNoLease uint64 // data requests refused because no lease covered the topic
}

// Stats reads the counters.
func (d *Dispatcher) Stats() Stats {
	return Stats{Requests: d.requests.Load(), TopicRejections: d.rejected.Load(), NotServedNoLease: d.notServedNoLease.Load()}
}

// Frame hands one frame to its handler; start is when a client's request
// arrived (zero for a peer's frame). It copies what it keeps; false means
// the frame was not taken (netio answers a request "overloaded").
func (d *Dispatcher) Frame(c Conn, h wire.Header, frame []byte, start time.Time) bool {
	if c.Role() != wire.RolePeer && !d.authorize(c, h) {
		d.lat.Refused(h.Kind, wire.CodeUnauthorized, d.env.Now().Sub(start))
		return true // answered Unauthorized
	}
	if c.Role() == wire.RolePeer {
		switch h.Kind {
		case wire.KindRaftBatch, wire.KindSnapshotChunk:
			return d.env.OfferRaft(c.Node(), h, frame)
		case wire.KindTopicAck:
			if payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil); err == nil {
				var a wire.TopicAck
				if wire.DecodeTopicAck(payload, &a) == nil {
					d.lease.TakeAck(c.Node(), h.RequestID, &a)
				}
			}
			return true
		case wire.KindLeaseRound, wire.KindLeaseReply:
			d.lease.Offer(c.Node(), h, frame)
			return true
		case wire.KindForwardReply:
			d.srv.TakeReply(h, frame[wire.HeaderSize:])
			return true
		case wire.KindRecordsChunk:
			d.takeRecordsChunk(c.Node(), h, frame)
			return true
		}
	}
	if d.serveFast(c, h, frame, start) {
		return true
	}
	// A lookup the fast path could not answer (linearizable, or not known
	// here) never waits: a read index, the leader's state or a forward
	// answers it through a callback. Served where it was read it spares a
	// goroutine and two hand-offs, a fifth of a linearizable lookup's CPU
	// (docs/decisions/node-lin-lookups-on-event-loop.md). Every other
	// request may block: it is served on its own (Env.Spawn).
	inline := h.Kind == wire.KindLookup
	release, ok := d.env.Admit(h, frame)
	if !ok {
		return false
	}
	// Answers may come after this returns, when the loop has reused
	// frame's bytes.
	frame = append([]byte(nil), frame...)
	if inline {
		defer d.adm.Leave()
		d.serveFrame(c, h, frame, start, release)
		return true
	}
	if !d.env.Spawn(func() {
		defer d.adm.Leave()
		d.serveFrame(c, h, frame, start, release)
	}) {
		d.adm.Leave()
		release()
		return false
	}
	return true
}

// granted is a connection that carries what its handshake's credential
// granted (netio.Conn.Grant).
type granted interface {
	Grant() any
}

// authorize reports whether the client connection c may make request h;
// when not, it answers Unauthorized (the connection stays open).
func (d *Dispatcher) authorize(c Conn, h wire.Header) bool {
	var g any
	if gc, ok := c.(granted); ok {
		g = gc.Grant()
	}
	ok, why := d.sec.Authorize(g, h.Kind)
	if !ok {
		if f, err := serve.ErrorFrame(h.RequestID, &wire.ErrorResponse{Code: wire.CodeUnauthorized, Message: why}); err == nil {
			_ = c.Write(f)
		}
	}
	return ok
}

// serveFrame serves one request frame and calls release, once, when it
// has answered it (or decided not to): at return, or, for a request
// answered through a callback, once the answer is written. start is when
// a client's request arrived.
func (d *Dispatcher) serveFrame(c Conn, h wire.Header, frame []byte, start time.Time, release func()) {
	async := false // answered through a callback, which releases
	defer func() {
		if !async {
			release()
		}
	}()
	if hook := d.beforeServe; hook != nil && c.Role() != wire.RolePeer {
		hook()
	}
	payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil)
	if err != nil {
		reply(c, h.RequestID, wire.KindError, wire.AppendErrorResponse(nil, &wire.ErrorResponse{Code: wire.CodeBadRequest, Message: err.Error()}))
		if c.Role() != wire.RolePeer {
			d.lat.Refused(h.Kind, wire.CodeBadRequest, d.env.Now().Sub(start))
		}
		return
	}
	switch h.Kind {
	case wire.KindOpenTopic, wire.KindCloseTopic:
		if c.Role() != wire.RolePeer {
			break
		}
		async = true
		d.serveOwnership(c, h, payload, release)
		return
	case wire.KindRecordsPull:
		if c.Role() != wire.RolePeer {
			break
		}
		d.answerRecordsPull(c, h, payload)
		return
	case wire.KindMetadataPull, wire.KindMetadataPush:
		if c.Role() != wire.RolePeer {
			break
		}
		if h.Kind == wire.KindMetadataPull {
			if f := d.msync.AnswerPull(h.RequestID, payload); f != nil {
				_ = c.Write(f)
			}
		} else {
			d.msync.MergePush(c.Node(), payload)
		}
		return
	case wire.KindForward:
		if c.Role() != wire.RolePeer {
			break
		}
		fw, ok := d.srv.TakeForward(c.Node(), h.RequestID, payload)
		if !ok {
			return // does not decode, or a copy of a forward already taken
		}
		async = true
		d.Handle(fw.Kind, fw.Payload, int(fw.Hops), d.srv.Bounded(func(a serve.Answer) {
			defer release()
			if f, err := serve.ReplyFrame(h.RequestID, a); err == nil {
				_ = c.Write(f)
			}
		}))
		return
	}
	if !h.Kind.IsClientRequest() {
		reply(c, h.RequestID, wire.KindError, wire.AppendErrorResponse(nil, &wire.ErrorResponse{Code: wire.CodeBadRequest, Message: fmt.Sprintf("unexpected %v frame", h.Kind)}))
		return
	}
	async = true
	d.Handle(h.Kind, payload, 0, d.srv.Bounded(func(a serve.Answer) {
		defer release()
		d.lat.Request(h.Kind, a, d.env.Now().Sub(start))
		reply(c, h.RequestID, a.Kind, a.Payload)
	}))
}

func reply(c Conn, reqID uint64, kind wire.Kind, payload []byte) {
	_ = c.Write(serve.Frame(reqID, kind, payload))
}

// serveOwnership takes an OpenTopic or CloseTopic from a shard leader
// and acks it once it is durable; release gives the frame's bytes back
// then, or at once for a message that does not decode.
func (d *Dispatcher) serveOwnership(c Conn, h wire.Header, payload []byte, release func()) {
	reqID := h.RequestID
	done := func(ack wire.TopicAck, ok bool) {
		defer release()
		if !ok {
			return // no ack: the leader retries
		}
		f, start := wire.BeginFrame(nil, wire.KindTopicAck, reqID)
		f = wire.AppendTopicAck(f, &ack)
		if f, err := wire.EndFrame(f, start); err == nil {
			_ = c.Write(f)
		}
	}
	// Taken with the others arriving at the same time, in one synced
	// batch; the ack may be sent after this returns.
	if h.Kind == wire.KindOpenTopic {
		var m wire.OpenTopic
		if err := wire.DecodeOpenTopic(payload, &m); err == nil && d.leaders.Space().Valid(m.Shard) {
			d.lease.Take(lease.Message{Open: &m, Done: done, From: c.Node(), ReqID: reqID})
			return
		}
	} else {
		var m wire.CloseTopic
		if err := wire.DecodeCloseTopic(payload, &m); err == nil && d.leaders.Space().Valid(m.Shard) {
			d.lease.Take(lease.Message{Close: &m, Done: done, From: c.Node(), ReqID: reqID})
			return
		}
	}
	release()
}
