package node

import (
	"fmt"
	"sync"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

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
		n.lat.requests.Refused(h.Kind, wire.CodeUnavailable, n.clock().Sub(start))
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
		n.lat.requests.Refused(h.Kind, wire.CodeUnauthorized, n.clock().Sub(start))
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
				var a wire.TopicAck
				if wire.DecodeTopicAck(payload, &a) == nil {
					n.lease.TakeAck(c.Node(), h.RequestID, &a)
				}
			}
			return true
		case wire.KindLeaseRound, wire.KindLeaseReply:
			n.lease.Offer(c.Node(), h, frame)
			return true
		case wire.KindForwardReply:
			n.srv.TakeReply(h, frame[wire.HeaderSize:])
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
		defer n.adm.Leave()
		n.serveFrame(c, h, frame, start, release)
		return true
	}
	if !n.spawn(func() {
		defer n.adm.Leave()
		n.serveFrame(c, h, frame, start, release)
	}) {
		n.adm.Leave()
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

// admitRequest takes a request slot and its bytes (serve.Admission),
// unless the node is closing or either runs out. The request's bytes are
// held until it is answered, which may be after serveFrame returns:
// release gives them back.
func (n *Node) admitRequest(h wire.Header, frame []byte) (release func(), ok bool) {
	n.lifeMu.RLock()
	defer n.lifeMu.RUnlock()
	if n.closing {
		return nil, false
	}
	return n.adm.Admit(h, frame)
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
		n.lat.requests.Request(h.Kind, serve.Answer{Kind: wire.KindAssignment}, n.clock().Sub(start))
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
	hosted, busy := false, false
	if n.answersLocally(shard) {
		hosted, busy = n.sm.TryHosted(shard, func(st *meta.State) { a, found = st.Get(m.Topic) })
	}
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
			n.lat.requests.Refused(h.Kind, wire.CodeBadRequest, n.clock().Sub(start))
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
		fw, ok := n.srv.TakeForward(c.Node(), h.RequestID, payload)
		if !ok {
			return // does not decode, or a copy of a forward already taken
		}
		async = true
		n.handle(fw.Kind, fw.Payload, int(fw.Hops), n.srv.Bounded(func(a serve.Answer) {
			defer release()
			if f, err := serve.ReplyFrame(h.RequestID, a); err == nil {
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
	n.handle(h.Kind, payload, 0, n.srv.Bounded(func(a serve.Answer) {
		defer release()
		n.lat.requests.Request(h.Kind, a, n.clock().Sub(start))
		n.reply(c, h.RequestID, a.Kind, a.Payload)
	}))
}

func (n *Node) reply(c Conn, reqID uint64, kind wire.Kind, payload []byte) {
	_ = c.Write(serve.Frame(reqID, kind, payload))
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
			n.lease.Take(lease.Message{Open: &m, Done: done, From: c.Node(), ReqID: reqID})
			return
		}
	} else {
		var m wire.CloseTopic
		if err := wire.DecodeCloseTopic(payload, &m); err == nil && m.Shard < uint64(n.cfg.Shards) {
			n.lease.Take(lease.Message{Close: &m, Done: done, From: c.Node(), ReqID: reqID})
			return
		}
	}
	release()
}

// handle answers one client request (kind, payload), arrived directly
// (hops 0) or forwarded, through done: at once, or when raft or the node
// it was forwarded to answers.
func (n *Node) handle(kind wire.Kind, payload []byte, hops int, done serve.Done) {
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
		done(serve.NewAnswer(wire.KindStatusInfo, wire.AppendStatusInfo(nil, &wire.StatusInfo{Node: []byte(st.Node), Generation: st.Generation,
			MembersAlive: uint32(st.MembersAlive), ShardsHosted: uint32(st.ShardsHosted), ShardsLed: uint32(st.ShardsLed),
			TopicsOwned: uint64(st.TopicsOwned), Ready: st.Ready})))
		return
	}
	if hops == 0 && !n.isReady() {
		// Not synced yet (or not born): the node's view of the cluster may
		// be older than any client's.
		done(serve.Unavailable("node starting: cluster metadata not synced yet"))
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
		done(serve.Unavailable("cluster not born yet"))
		return
	}
	if n.removedSelf() {
		done(serve.Unavailable(fmt.Sprintf("node %s was removed from the cluster", n.cfg.ID)))
		return
	}
	if kind.IsAdminRequest() {
		n.admin.Handle(kind, payload, hops, done)
		return
	}
	n.srv.Meta(kind, payload, hops, done)
}

func (n *Node) members() serve.Answer {
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
	return serve.NewAnswer(wire.KindMemberList, wire.AppendMemberList(nil, &ml))
}

func (n *Node) shardList(done serve.Done) {
	n.host.Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		if r.Err != nil {
			done(serve.Unavailable(r.Err.Error()))
			return
		}
		infos, _ := r.Value.([]raftmux.Info)
		done(n.shardListAnswer(infos))
	})
}

func (n *Node) shardListAnswer(infos []raftmux.Info) serve.Answer {
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
	return serve.NewAnswer(wire.KindShardList, wire.AppendShardList(nil, &sl))
}

func (n *Node) clientAddrOf(id string) string {
	if id == n.cfg.ID {
		return n.clientAddr
	}
	return n.view.Load().byID[id].ClientAddr
}

// leaderlessLookups: how long a replica may know no leader and still
// answer plain lookups from its state, in raft ticks (two election
// timeouts).
const leaderlessLookups = 20

// answersLocally reports whether plain lookups of shard may be answered
// from this node's replica: unless it has known no leader for longer than
// leaderlessLookups ticks. A replica cut off from its group, or one its
// group no longer sends to, keeps a state that may be far behind: the
// lookup goes to the cache or the leader instead.
func (n *Node) answersLocally(shard uint64) bool {
	since := n.events.LeaderlessSince(shard)
	return since == 0 || n.clock().UnixNano()-since <= int64(leaderlessLookups*n.cfg.RaftTickInterval)
}
