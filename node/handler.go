package node

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// overloaded answers a client request the node had no room for.
func overloaded(_ *netio.Conn, h wire.Header) []byte {
	f, _ := errorFrame(h.RequestID, &wire.ErrorResponse{Code: wire.CodeUnavailable, Message: "node overloaded", RetryAfter: 50 * time.Millisecond})
	return f
}

func errorFrame(reqID uint64, e *wire.ErrorResponse) ([]byte, error) {
	f, start := wire.BeginFrame(nil, wire.KindError, reqID)
	f = wire.AppendErrorResponse(f, e)
	return wire.EndFrame(f, start)
}

// deliver runs where netio reads the frame (a connection's reader
// goroutine, or an event loop with Config.NetLoops): it copies what it
// keeps and returns.
func (n *Node) deliver(c *netio.Conn, h wire.Header, frame []byte) bool {
	if h.Kind == wire.KindKeepalive {
		return true
	}
	if !n.serving.Load() {
		return false
	}
	if c.Role() == wire.RolePeer && n.cfg.testHooks.peerIn != nil {
		return n.deliverUnderFaults(c, h, frame)
	}
	if c.Role() == wire.RolePeer {
		return n.deliverFrame(c, h, frame, time.Time{})
	}
	start := n.clock()
	if !n.deliverFrame(c, h, frame, start) {
		// netio answers it "overloaded" (Unavailable).
		n.lat.requestRefused(h.Kind, wire.CodeUnavailable, n.clock().Sub(start))
		return false
	}
	return true
}

// deliverUnderFaults delivers a peer frame as a test's faults decide:
// dropped, delayed, duplicated, or held while a node is paused.
func (n *Node) deliverUnderFaults(c Conn, h wire.Header, frame []byte) bool {
	fate := n.cfg.testHooks.peerIn(c.Node(), h.Kind)
	if fate.hold == nil && len(fate.delays) == 1 && fate.delays[0] == 0 {
		return n.deliverFrame(c, h, frame, time.Time{})
	}
	cp := append([]byte(nil), frame...)
	if fate.hold != nil {
		go func() {
			select {
			case <-fate.hold:
				n.deliverUnderFaults(c, h, cp)
			case <-n.ctx.Done():
			}
		}()
		return true
	}
	for _, d := range fate.delays {
		time.AfterFunc(d, func() {
			if n.ctx.Err() == nil {
				n.deliverFrame(c, h, cp, time.Time{})
			}
		})
	}
	return true
}

// deliverFrame hands one frame to its handler; start is when a client's
// request arrived (zero for a peer's frame).
func (n *Node) deliverFrame(c Conn, h wire.Header, frame []byte, start time.Time) bool {
	if c.Role() != wire.RolePeer && !n.authorize(c, h) {
		n.lat.requestRefused(h.Kind, wire.CodeUnauthorized, n.clock().Sub(start))
		return true // answered Unauthorized
	}
	if c.Role() == wire.RolePeer {
		switch h.Kind {
		case wire.KindRaftBatch, wire.KindSnapshotChunk:
			if !n.in.Offer(c.Node(), h, frame) {
				return false
			}
			n.raftInTask.kick()
			return true
		case wire.KindTopicAck:
			if payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil); err == nil {
				n.takeTopicAck(c.Node(), h, payload)
			}
			return true
		case wire.KindLeaseRound, wire.KindLeaseReply:
			n.offerLeaseFrame(c.Node(), h, frame)
			return true
		case wire.KindForwardReply:
			n.fwd.answer(c.Node(), h, frame[wire.HeaderSize:])
			return true
		case wire.KindRecordsChunk:
			n.takeRecordsChunk(c.Node(), h, frame)
			return true
		}
	}
	if n.serveFast(c, h, frame, start) {
		return true
	}
	// A lookup the fast path could not answer (linearizable, or not known
	// here) never waits: a read index, the leader's state or a forward
	// answers it through a callback. Served where it was read it spares a
	// goroutine and two hand-offs, a fifth of a linearizable lookup's CPU
	// (docs/decisions/node-lin-lookups-on-event-loop.md). Every other
	// request may block: it is served on its own (Node.spawn).
	inline := h.Kind == wire.KindLookup
	release, ok := n.admitRequest(h, frame)
	if !ok {
		return false
	}
	// Answers may come after this returns, when the loop has reused
	// frame's bytes.
	frame = append([]byte(nil), frame...)
	if inline {
		defer func() { <-n.reqSem }()
		n.serveFrame(c, h, frame, start, release)
		return true
	}
	if !n.spawn(func() {
		defer func() { <-n.reqSem }()
		n.serveFrame(c, h, frame, start, release)
	}) {
		<-n.reqSem
		release()
		return false
	}
	return true
}

// takeRaftFrames is the raft frames' task: it decodes the frames peers
// sent and hands them to the raft host.
func (n *Node) takeRaftFrames(time.Time) time.Time {
	n.in.Drain()
	return time.Time{}
}

// admitRequest takes a request slot (reqSem) and its bytes, unless the
// node is closing or either runs out. The request's bytes are held until it is
// answered, which may be after serveFrame returns: release gives them
// back.
func (n *Node) admitRequest(h wire.Header, frame []byte) (release func(), ok bool) {
	n.lifeMu.RLock()
	defer n.lifeMu.RUnlock()
	if n.closing {
		return nil, false
	}
	select {
	case n.reqSem <- struct{}{}:
	default:
		return nil, false
	}
	cost, ok := n.takeRequestBytes(h, frame)
	if !ok {
		<-n.reqSem
		return nil, false
	}
	return sync.OnceFunc(func() { n.giveRequestBytes(cost) }), true
}

// fastBufs holds the answer buffers of serveFast (about one per
// connection reading at a time).
var fastBufs = sync.Pool{New: func() any { b := make([]byte, 0, 256); return &b }}

// serveFast answers, where the request was read and without allocating, a
// client's plain Lookup that needs no wait: the topic is active in this
// node's own replica of its shard, or cached with a live owner. Anything else (not
// ready, compressed, linearizable, unknown here) takes the request path.
func (n *Node) serveFast(c Conn, h wire.Header, frame []byte, start time.Time) bool {
	if h.Kind != wire.KindLookup || h.Flags&wire.FlagCompressed != 0 || c.Role() == wire.RolePeer || !n.isReady() {
		return false
	}
	bp := fastBufs.Get().(*[]byte)
	f, ok := n.appendFastLookup((*bp)[:0], h.RequestID, frame[wire.HeaderSize:])
	if ok {
		n.counters.requests.Add(1)
		// Counted before the answer leaves: a client that reads the
		// metrics once answered finds its request there.
		n.lat.request(h.Kind, answer{kind: wire.KindAssignment}, n.clock().Sub(start))
		_ = c.Write(f) // copies
	}
	*bp = f[:0]
	fastBufs.Put(bp)
	return ok
}

// appendFastLookup appends to dst the answer frame to a plain Lookup with
// payload, when this node can give it at once (see serveFast).
func (n *Node) appendFastLookup(dst []byte, reqID uint64, payload []byte) ([]byte, bool) {
	var m wire.Lookup
	if wire.DecodeLookup(payload, &m) != nil || m.Linearizable || !n.born.Load() {
		return dst, false
	}
	shard := uint64(router.ShardOf(m.Topic, n.cfg.Shards))
	var a meta.Assignment
	var found bool
	hosted, busy := n.sm.tryHosted(shard, func(st *meta.State) { a, found = st.Get(m.Topic) })
	if busy {
		return dst, false // a shard being applied or loaded: the request path waits
	}
	if hosted {
		if !found || a.State != meta.Active {
			return dst, false // NotFound, with its message: the request path
		}
	} else {
		r, ok := n.routes().Get(m.Topic)
		if !ok || !n.view.Load().alive(r.Owner) {
			return dst, false
		}
		a = meta.Assignment{Owner: r.Owner, Epoch: r.Epoch, Partitions: r.Partitions}
	}
	ans := wire.Assignment{Topic: m.Topic, Owner: []byte(a.Owner), OwnerAddr: []byte(n.clientAddrOf(a.Owner)), Epoch: a.Epoch, Partitions: a.Partitions, Shard: shard}
	f, start := wire.BeginFrame(dst, wire.KindAssignment, reqID)
	f = wire.AppendAssignment(f, &ans)
	f, err := wire.EndFrame(f, start)
	return f, err == nil
}

// serveFrame serves one request frame and calls release, once, when it
// has answered it (or decided not to): at return, or, for a request
// answered through a callback, once the answer is written. start is when
// a client's request arrived.
func (n *Node) serveFrame(c Conn, h wire.Header, frame []byte, start time.Time, release func()) {
	async := false // answered through a callback, which releases
	defer func() {
		if !async {
			release()
		}
	}()
	if hook := n.cfg.testHooks.beforeServe; hook != nil && c.Role() != wire.RolePeer {
		hook()
	}
	payload, _, err := wire.FramePayload(&h, frame[wire.HeaderSize:], nil)
	if err != nil {
		n.reply(c, h.RequestID, wire.KindError, wire.AppendErrorResponse(nil, &wire.ErrorResponse{Code: wire.CodeBadRequest, Message: err.Error()}))
		if c.Role() != wire.RolePeer {
			n.lat.requestRefused(h.Kind, wire.CodeBadRequest, n.clock().Sub(start))
		}
		return
	}
	switch h.Kind {
	case wire.KindOpenTopic, wire.KindCloseTopic:
		if c.Role() != wire.RolePeer {
			break
		}
		async = true
		n.serveOwnership(c, h, payload, release)
		return
	case wire.KindRecordsPull:
		if c.Role() != wire.RolePeer {
			break
		}
		n.answerRecordsPull(c, h, payload)
		return
	case wire.KindMetadataPull, wire.KindMetadataPush:
		if c.Role() != wire.RolePeer {
			break
		}
		if h.Kind == wire.KindMetadataPull {
			if f := n.msync.AnswerPull(h.RequestID, payload); f != nil {
				_ = c.Write(f)
			}
		} else {
			n.msync.MergePush(c.Node(), payload)
		}
		return
	case wire.KindForward:
		if c.Role() != wire.RolePeer {
			break
		}
		var fw wire.Forward
		if err := wire.DecodeForward(payload, &fw); err != nil {
			return
		}
		if !n.fwdSeen.first(c.Node(), h.RequestID, n.clock(), n.cfg.RequestTimeout) {
			// A copy of a forward already taken: served again later, a
			// change refused the first time could still be made, after
			// its origin had answered that it was refused.
			n.counters.forwardDups.Add(1)
			return
		}
		n.counters.forwardsIn.Add(1)
		async = true
		n.handle(fw.Kind, fw.Payload, int(fw.Hops), n.bounded(func(a answer) {
			defer release()
			f, start := wire.BeginFrame(nil, wire.KindForwardReply, h.RequestID)
			f = wire.AppendForwardReply(f, &wire.ForwardReply{Kind: a.kind, Payload: a.payload})
			if f, err := wire.EndFrame(f, start); err == nil {
				_ = c.Write(f)
			}
		}))
		return
	}
	if !h.Kind.IsClientRequest() {
		n.reply(c, h.RequestID, wire.KindError, wire.AppendErrorResponse(nil, &wire.ErrorResponse{Code: wire.CodeBadRequest, Message: fmt.Sprintf("unexpected %v frame", h.Kind)}))
		return
	}
	async = true
	n.handle(h.Kind, payload, 0, n.bounded(func(a answer) {
		defer release()
		n.lat.request(h.Kind, a, n.clock().Sub(start))
		n.reply(c, h.RequestID, a.kind, a.payload)
	}))
}

// answerFunc takes the answer to a request.
type answerFunc func(a answer)

// bounded returns done, called at most once: with the request's answer,
// or, if none comes within Config.RequestTimeout, with Unavailable (a
// proposal or read raft never answered, a forward never returned).
func (n *Node) bounded(done answerFunc) answerFunc {
	var once sync.Once
	stop := n.after(n.cfg.RequestTimeout, func() {
		once.Do(func() { done(unavailable("request timed out")) })
	})
	return func(a answer) {
		once.Do(func() {
			stop()
			done(a)
		})
	}
}

func (n *Node) reply(c Conn, reqID uint64, kind wire.Kind, payload []byte) {
	f, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+len(payload)), kind, reqID)
	f = append(f, payload...)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		f, _ = errorFrame(reqID, &wire.ErrorResponse{Code: wire.CodeTooLarge, Message: "answer too large"})
	}
	_ = c.Write(f)
}

// serveOwnership takes an OpenTopic or CloseTopic from a shard leader
// and acks it once it is durable; release gives the frame's bytes back
// then, or at once for a message that does not decode.
func (n *Node) serveOwnership(c Conn, h wire.Header, payload []byte, release func()) {
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
		if err := wire.DecodeOpenTopic(payload, &m); err == nil && m.Shard < uint64(n.cfg.Shards) {
			n.takeOwnershipMsgs(ownershipMsg{open: &m, done: done, from: c.Node(), reqID: reqID})
			return
		}
	} else {
		var m wire.CloseTopic
		if err := wire.DecodeCloseTopic(payload, &m); err == nil && m.Shard < uint64(n.cfg.Shards) {
			n.takeOwnershipMsgs(ownershipMsg{closeMsg: &m, done: done, from: c.Node(), reqID: reqID})
			return
		}
	}
	release()
}

// handle answers one client request (kind, payload), arrived directly
// (hops 0) or forwarded, through done: at once, or when raft or the node
// it was forwarded to answers.
func (n *Node) handle(kind wire.Kind, payload []byte, hops int, done answerFunc) {
	n.counters.requests.Add(1)
	switch kind {
	case wire.KindMembers:
		done(n.members())
		return
	case wire.KindShards:
		n.shardList(done)
		return
	case wire.KindShardLeaders:
		done(n.leaderTableAnswer())
		return
	case wire.KindStatus:
		st := n.Status()
		done(newAnswer(wire.KindStatusInfo, wire.AppendStatusInfo(nil, &wire.StatusInfo{Node: []byte(st.Node), Generation: st.Generation,
			MembersAlive: uint32(st.MembersAlive), ShardsHosted: uint32(st.ShardsHosted), ShardsLed: uint32(st.ShardsLed),
			TopicsOwned: uint64(st.TopicsOwned), Ready: st.Ready})))
		return
	}
	if hops == 0 && !n.isReady() {
		// Not synced yet (or not born): the node's view of the cluster may
		// be older than any client's.
		done(unavailable("node starting: cluster metadata not synced yet"))
		return
	}
	switch kind {
	case wire.KindProduce:
		n.produce(payload, done)
		return
	case wire.KindFetch:
		done(n.fetch(payload))
		return
	case wire.KindWatch:
		n.serveWatch(payload, done)
		return
	case wire.KindListTopics:
		n.serveListTopics(payload, done)
		return
	}
	if !n.born.Load() {
		done(unavailable("cluster not born yet"))
		return
	}
	if n.removedSelf() {
		done(unavailable(fmt.Sprintf("node %s was removed from the cluster", n.cfg.ID)))
		return
	}
	if kind.IsAdminRequest() {
		n.handleAdmin(kind, payload, hops, done)
		return
	}
	req, err := decodeMetaRequest(kind, payload)
	if err != nil {
		done(errAnswer(wire.CodeBadRequest, err.Error()))
		return
	}
	if req.write() && hops == 0 && req.session.IsZero() {
		var s wire.Session
		s, done = n.ownSession(done)
		req.setSession(s)
	}
	if req.kind == wire.KindLookup && !req.linearizable {
		if a, ok := n.localLookup(req.topic); ok {
			done(a)
			return
		}
	}
	shard := router.ShardOf(req.topic, n.cfg.Shards)
	if !n.led[shard].Load() {
		n.forwardToLeader(req.kind, req.payload, hops, shard, done)
		return
	}
	n.serveLeader(&req, uint64(shard), func(a answer) {
		if a.is(wire.CodeNotLeader) {
			// Not the leader any more: as if it had never been.
			n.forwardToLeader(req.kind, req.payload, hops, shard, done)
			return
		}
		done(a)
	})
}

// forwardToLeader forwards a request to the shard's leader as this node's
// table knows it, or answers NotLeader (Unavailable with no leader known,
// or no hop left).
func (n *Node) forwardToLeader(kind wire.Kind, payload []byte, hops int, shard uint32, done answerFunc) {
	leader, _, ok := n.leaders.Get(shard)
	if !ok || leader == n.cfg.ID || hops >= wire.MaxForwardHops {
		n.counters.notLeader.Add(1)
		done(n.notLeader(uint64(shard), leader))
		return
	}
	n.counters.forwarded.Add(1)
	n.fwd.forward(n, leader, kind, payload, hops+1, func(a answer, err error) {
		if err != nil {
			done(unavailable(fmt.Sprintf("forward to shard %d leader %s: %v", shard, leader, err)))
			return
		}
		if a.kind == wire.KindAssignment {
			var m wire.Assignment
			if wire.DecodeAssignment(a.payload, &m) == nil && len(m.Owner) > 0 {
				n.routes().Put(m.Topic, string(m.Owner), string(m.OwnerAddr), m.Epoch, m.Partitions)
			}
		}
		done(a)
	})
}

// localLookup answers a non-linearizable lookup without asking the shard
// leader: from this node's replica of the shard when it hosts one (behind
// the leader by the replication lag at most), else from the routing cache
// while the cached owner is alive. A stale answer is fenced by its epoch.
// Only the leader answers that a topic is not assigned.
func (n *Node) localLookup(topic []byte) (answer, bool) {
	shard := uint64(router.ShardOf(topic, n.cfg.Shards))
	var a meta.Assignment
	var found bool
	if n.sm.hosted(shard, func(st *meta.State) { a, found = st.Get(topic) }) {
		if !found || a.State != meta.Active {
			if !n.led[shard].Load() {
				// A follower may not have applied an assignment its leader
				// already acknowledged: "not assigned" is the leader's to
				// say, or a client that assigned a topic and then looks it
				// up is told it does not exist.
				return answer{}, false
			}
			return errAnswer(wire.CodeNotFound, fmt.Sprintf("topic %q is not assigned", topic)), true
		}
		return n.assignmentAnswer(topic, a.Owner, a.Epoch, a.Partitions, shard, false), true
	}
	if r, ok := n.routes().Get(topic); ok && n.view.Load().alive(r.Owner) {
		return n.assignmentAnswer(topic, r.Owner, r.Epoch, r.Partitions, shard, true), true
	}
	return answer{}, false
}

func (n *Node) notLeader(shard uint64, leader string) answer {
	e := &wire.ErrorResponse{Code: wire.CodeNotLeader, Message: fmt.Sprintf("shard %d is led elsewhere", shard), Shard: shard}
	if leader != "" && leader != n.cfg.ID {
		e.NodeID = leader
		if m, ok := n.view.Load().byID[leader]; ok {
			e.Addr = m.ClientAddr
		}
	} else {
		e.Code = wire.CodeUnavailable
		e.Message = fmt.Sprintf("shard %d has no known leader", shard)
		e.RetryAfter = 100 * time.Millisecond
	}
	return errorAnswer(e)
}

func (n *Node) clientAddrOf(id string) string {
	if id == n.cfg.ID {
		return n.clientAddr
	}
	return n.view.Load().byID[id].ClientAddr
}

func (n *Node) assignmentAnswer(topic []byte, owner string, epoch uint64, partitions uint32, shard uint64, cached bool) answer {
	addr := n.clientAddrOf(owner)
	if !cached && owner != "" {
		n.routes().Put(topic, owner, addr, epoch, partitions)
	}
	return newAnswer(wire.KindAssignment, wire.AppendAssignment(nil, &wire.Assignment{Topic: topic, Owner: []byte(owner), OwnerAddr: []byte(addr), Epoch: epoch, Partitions: partitions, Shard: shard}))
}

// serveLeader serves a metadata request on the shard's leader, through
// done.
func (n *Node) serveLeader(req *metaRequest, shard uint64, done answerFunc) {
	n.serveLeaderAt(req, shard, done, false)
}

// serveLeaderAt is serveLeader; current says a read index has just shown
// this node's state to hold every committed command.
func (n *Node) serveLeaderAt(req *metaRequest, shard uint64, done answerFunc, current bool) {
	v := n.view.Load()
	var cmd meta.Command
	var perr error
	sess := req.session
	switch req.kind {
	case wire.KindLookup:
		if !req.linearizable {
			done(n.leaderLookup(shard, req.topic))
			return
		}
		term, led := n.leadsAt(shard)
		start := n.clock()
		n.host.Submit(raftmux.Op{Kind: raftmux.OpReadIndex, Shard: shard}, func(r raftmux.Result) {
			if r.Err != nil {
				done(n.raftError(shard, r.Err))
				return
			}
			if led {
				n.leaderProof(shard, term, start)
			}
			// A move or revoke is visible to a linearizable read only once
			// settled, as to its own client: until then the old owner may
			// still acknowledge writes at its epoch.
			var a meta.Assignment
			var found bool
			_ = n.sm.with(shard, func(st *meta.State) { a, found = st.Get(req.topic) })
			fresh := found && a.State == meta.Active && a.Epoch == 1 && a.Previous == ""
			n.whenSettled(shard, req.topic, math.MaxUint64, fresh, func(settled bool) {
				if !settled {
					l, _ := n.leaderOfShard(shard)
					done(n.notLeader(shard, l))
					return
				}
				done(n.leaderLookup(shard, req.topic))
			})
		})
		return
	case wire.KindAssign:
		var refusal meta.Refusal
		switch {
		case len(req.owner) > 0 && !v.alive(string(req.owner)):
			refusal = meta.RefuseOwnerNotLive
		case len(req.owner) > 0 && v.drained[string(req.owner)]:
			refusal = meta.RefuseOwnerDrained
		}
		if refusal != meta.RefuseNone && sess.IsZero() {
			done(metaError(refusalErr(refusal, req.owner)))
			return
		}
		if refusal != meta.RefuseNone {
			// Through the log, as the write's answer (see below).
			cmd = meta.Command{Op: meta.OpAssign, Topic: req.topic, Owner: string(req.owner), Partitions: req.partitions, Refusal: refusal}
			break
		}
		if err := n.sm.with(shard, func(st *meta.State) {
			cmd, perr = st.PrepareAssign(req.topic, string(req.owner), req.partitions, liveNodes(v, st))
		}); err != nil {
			done(errAnswer(wire.CodeInternal, err.Error()))
			return
		}
	case wire.KindRevoke:
		cmd = meta.Command{Op: meta.OpRevoke, Topic: req.topic}
		_ = n.sm.with(shard, func(st *meta.State) { perr = st.Check(&cmd) })
	case wire.KindUpdatePartition:
		cmd = meta.Command{Op: meta.OpUpdatePartition, Topic: req.topic, Partitions: req.partitions}
		_ = n.sm.with(shard, func(st *meta.State) { perr = st.Check(&cmd) })
	}
	if !sess.IsZero() {
		// A write of a session is proposed even if the state refuses it
		// now: the refusal, applied, is its answer to every retry. Refused
		// here, a copy of it still on its way (an earlier forward, a
		// proposal of a deposed leader) could apply after the answer.
		cmd.Session = meta.SessionRef{ID: sess.ID, Seq: sess.Seq, Floor: sess.Floor}
		cmd.Clock = n.stamp(shard)
		perr = nil
	}
	if perr != nil && !current {
		// A refusal is an answer too: it must come from a state that holds
		// every committed command, which a leader that is new, or deposed
		// without knowing it, may not have yet.
		n.host.Submit(raftmux.Op{Kind: raftmux.OpReadIndex, Shard: shard}, func(r raftmux.Result) {
			if r.Err != nil {
				done(n.raftError(shard, r.Err))
				return
			}
			n.serveLeaderAt(req, shard, done, true)
		})
		return
	}
	if perr != nil {
		done(metaError(perr))
		return
	}
	data, err := meta.AppendCommand(nil, &cmd)
	if err != nil {
		done(metaError(err))
		return
	}
	topic := cmd.Topic
	n.propose(shard, data, func(res any, err error) {
		if err != nil {
			done(n.raftError(shard, err))
			return
		}
		ar, _ := res.(*applyResult)
		switch {
		case ar == nil:
			done(errAnswer(wire.CodeInternal, "no apply result"))
		case ar.err != nil:
			done(metaError(ar.err))
		case req.kind == wire.KindRevoke:
			n.routes().Invalidate(topic, ar.a.Epoch)
			n.whenSettled(shard, topic, ar.a.Epoch, ar.a.Epoch == 1 && ar.a.Previous == "", func(settled bool) {
				if !settled {
					l, _ := n.leaderOfShard(shard)
					done(n.notLeader(shard, l))
					return
				}
				done(newAnswer(wire.KindRevoked, wire.AppendRevoked(nil, &wire.Revoked{Topic: topic, Epoch: ar.a.Epoch})))
			})
		default:
			n.whenSettled(shard, topic, ar.a.Epoch, ar.a.Epoch == 1 && ar.a.Previous == "", func(settled bool) {
				if !settled {
					l, _ := n.leaderOfShard(shard)
					done(n.notLeader(shard, l))
					return
				}
				done(n.assignmentAnswer(topic, ar.a.Owner, ar.a.Epoch, ar.a.Partitions, shard, false))
			})
		}
	})
}

// refusalErr is the error of a refusal decided outside the state.
func refusalErr(r meta.Refusal, owner []byte) error {
	if r == meta.RefuseOwnerDrained {
		return fmt.Errorf("owner %q: %w", owner, meta.ErrOwnerDrained)
	}
	return fmt.Errorf("owner %q: %w", owner, meta.ErrOwnerNotLive)
}

// leaderLookup answers a lookup from the leader's state.
func (n *Node) leaderLookup(shard uint64, topic []byte) answer {
	var a meta.Assignment
	var ok bool
	if err := n.sm.with(shard, func(st *meta.State) { a, ok = st.Get(topic) }); err != nil {
		return errAnswer(wire.CodeInternal, err.Error())
	}
	if !ok || a.State != meta.Active {
		return errAnswer(wire.CodeNotFound, fmt.Sprintf("topic %q is not assigned", topic))
	}
	return n.assignmentAnswer(topic, a.Owner, a.Epoch, a.Partitions, shard, false)
}

func metaError(err error) answer {
	switch {
	case errors.Is(err, meta.ErrUnknownTopic):
		return errAnswer(wire.CodeNotFound, err.Error())
	case errors.Is(err, meta.ErrNoOwner), errors.Is(err, meta.ErrTooManySessions):
		return unavailable(err.Error())
	case errors.Is(err, meta.ErrOwnerNotLive), errors.Is(err, meta.ErrOwnerDrained):
		return errAnswer(wire.CodeBadRequest, err.Error())
	case errors.Is(err, meta.ErrSessionStale):
		return errAnswer(wire.CodeSessionExpired, err.Error())
	default:
		return errAnswer(wire.CodeBadRequest, err.Error())
	}
}

func (n *Node) raftError(shard uint64, err error) answer {
	var nl *raftmux.NotLeaderError
	if errors.As(err, &nl) {
		n.led[shard].Store(false)
		name, _ := n.nameOf(nl.Leader)
		if name != "" && nl.Leader != 0 {
			_, _ = n.leaders.Update(uint32(shard), name, nl.Term)
		}
		return n.notLeader(shard, name)
	}
	return unavailable(fmt.Sprintf("shard %d: %v", shard, err))
}

func (n *Node) members() answer {
	var ml wire.MemberList
	v := n.view.Load()
	for _, m := range n.swim.Members() {
		st := wire.MemberState(m.State)
		if v.removed[m.ID] {
			st = wire.MemberLeft // out for good (marks.go), whatever SWIM says
		}
		ml.Members = append(ml.Members, wire.Member{ID: []byte(m.ID), Generation: m.Generation, Incarnation: m.Incarnation,
			State: st, Rack: []byte(m.Rack), SwimAddr: []byte(m.SwimAddr), ClientAddr: []byte(m.ClientAddr), PeerAddr: []byte(m.PeerAddr)})
	}
	return newAnswer(wire.KindMemberList, wire.AppendMemberList(nil, &ml))
}

func (n *Node) shardList(done answerFunc) {
	n.host.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		if r.Err != nil {
			done(unavailable(r.Err.Error()))
			return
		}
		infos, _ := r.Value.([]raftmux.Info)
		done(n.shardListAnswer(infos))
	})
}

func (n *Node) shardListAnswer(infos []raftmux.Info) answer {
	hosted := make(map[uint64]raftmux.Info, len(infos))
	for _, in := range infos {
		hosted[in.Shard] = in
	}
	v := n.view.Load()
	var sl wire.ShardList
	var reps []string
	for s := range n.cfg.Shards {
		si := wire.ShardInfo{Shard: uint64(s)}
		if in, ok := hosted[uint64(s)]; ok {
			for _, id := range in.Voters {
				if name, ok := n.nameOf(id); ok {
					si.Replicas = append(si.Replicas, []byte(name))
				}
			}
		} else {
			for _, r := range v.placement.Replicas(s, reps[:0]) {
				si.Replicas = append(si.Replicas, []byte(r))
			}
		}
		if l, t, ok := n.leaders.Get(s); ok {
			si.Leader, si.Term = []byte(l), t
		}
		sl.Shards = append(sl.Shards, si)
	}
	return newAnswer(wire.KindShardList, wire.AppendShardList(nil, &sl))
}

// forwarder matches ForwardReply frames to the requests waiting for them.
type forwarder struct {
	mu      sync.Mutex
	waiting map[uint64]fwdWait
	next    uint64
	// clock and hops time each forward that is answered.
	clock func() time.Time
	hops  *histogram.Histogram
}

// fwdFunc takes a forwarded request's answer, or why there is none.
type fwdFunc func(a answer, err error)

type fwdWait struct {
	done fwdFunc
	node string
	stop func() bool
	sent time.Time
}

// errPeerDown: the node a request was forwarded to became unreachable.
var errPeerDown = errors.New("node: forward target unreachable")

// errForwardTimeout: the node a request was forwarded to did not answer in
// time.
var errForwardTimeout = errors.New("node: forwarded request not answered in time")

// init readies f; its request ids start at start, different in each life
// of the node so that a peer does not take a new request for a copy of an
// old one (see forwardDedup).
func (f *forwarder) init(start uint64, clock func() time.Time, hops *histogram.Histogram) {
	f.waiting = make(map[uint64]fwdWait)
	f.next = start
	f.clock, f.hops = clock, hops
}

// forwardDedup remembers the forwards this node took in the last window
// (the request timeout, after which their origin has stopped waiting), by
// sender and request id, so that a duplicated frame is served once.
type forwardDedup struct {
	mu   sync.Mutex
	seen map[fwdKey]bool
	// ring holds the forwards of seen, n of them, the oldest at head: a
	// ring, so that forgetting the oldest costs the same however many
	// are remembered.
	ring    []fwdSeenAt
	head, n int
}

type fwdKey struct {
	from string
	id   uint64
}

type fwdSeenAt struct {
	key fwdKey
	at  time.Time
}

// maxForwardsSeen bounds the memory of forwardDedup under any load.
const maxForwardsSeen = 1 << 16

// first records the forward id from node from at now and reports whether
// it is the first copy seen within window.
func (d *forwardDedup) first(from string, id uint64, now time.Time, window time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = make(map[fwdKey]bool)
	}
	for d.n > 0 {
		old := &d.ring[d.head]
		if now.Sub(old.at) <= window && d.n < maxForwardsSeen {
			break
		}
		delete(d.seen, old.key)
		*old = fwdSeenAt{}
		d.head = (d.head + 1) % len(d.ring)
		d.n--
	}
	k := fwdKey{from, id}
	if d.seen[k] {
		return false
	}
	d.seen[k] = true
	if d.n == len(d.ring) {
		grown := make([]fwdSeenAt, min(max(16, 2*len(d.ring)), maxForwardsSeen))
		for i := range d.n {
			grown[i] = d.ring[(d.head+i)%len(d.ring)]
		}
		d.ring, d.head = grown, 0
	}
	d.ring[(d.head+d.n)%len(d.ring)] = fwdSeenAt{k, now}
	d.n++
	return true
}

// take removes and returns the waiter of request id.
func (f *forwarder) take(id uint64) (fwdWait, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w, ok := f.waiting[id]
	delete(f.waiting, id)
	return w, ok
}

// peerDown fails at once every request waiting on node.
func (f *forwarder) peerDown(node string) {
	f.mu.Lock()
	var ids []uint64
	for id, w := range f.waiting {
		if w.node == node {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // fail them in the order they were sent
	down := make([]fwdWait, len(ids))
	for i, id := range ids {
		down[i] = f.waiting[id]
		delete(f.waiting, id)
	}
	f.mu.Unlock()
	for _, w := range down {
		w.stop()
		w.done(answer{}, errPeerDown)
	}
}

func (f *forwarder) answer(_ string, h wire.Header, payload []byte) {
	w, ok := f.take(h.RequestID)
	if !ok {
		return
	}
	w.stop()
	f.hops.Observe(f.clock().Sub(w.sent))
	plain, _, err := wire.FramePayload(&h, payload, nil)
	if err != nil {
		w.done(answer{}, err)
		return
	}
	var r wire.ForwardReply
	if err := wire.DecodeForwardReply(plain, &r); err != nil {
		w.done(answer{}, err)
		return
	}
	w.done(relayed(r.Kind, append([]byte(nil), r.Payload...)), nil)
}

// forward sends a request to node to and hands its answer to done, or an
// error if it cannot be sent or is not answered within three quarters of
// the request timeout (so that the asking client hears back before it
// gives up on this node).
func (f *forwarder) forward(n *Node, to string, kind wire.Kind, payload []byte, hops int, done fwdFunc) {
	f.mu.Lock()
	f.next++
	id := f.next
	f.mu.Unlock()
	fr, start := wire.BeginFrame(nil, wire.KindForward, id)
	fr = wire.AppendForward(fr, &wire.Forward{Hops: uint8(hops), Origin: []byte(n.cfg.ID), Kind: kind, Payload: payload})
	fr, err := wire.EndFrame(fr, start)
	if err != nil {
		done(answer{}, err)
		return
	}
	f.mu.Lock()
	w := fwdWait{done: done, node: to, sent: n.clock()}
	w.stop = n.after(n.cfg.RequestTimeout*3/4, func() {
		if w, ok := f.take(id); ok {
			w.done(answer{}, errForwardTimeout)
		}
	})
	f.waiting[id] = w
	f.mu.Unlock()
	if err := n.net.Send(to, fr); err != nil {
		if w, ok := f.take(id); ok {
			w.stop()
			w.done(answer{}, err)
		}
	}
}
