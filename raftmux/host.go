package raftmux

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/internal/histogram"
)

// Host runs every shard replica of one node.
type Host struct {
	cfg     Config
	workers []*worker
	stopc   chan struct{}
	wg      sync.WaitGroup
	snapSem chan struct{}
	zenc    *zstd.Encoder
	zdec    *zstd.Decoder

	stopOnce  sync.Once
	closeOnce sync.Once
	errMu     sync.Mutex
	err       error

	// What peers sent that was refused, and the replicas halted.
	counters counters
	debug    bool // the logger takes debug records: refusals are logged
	haltMu   sync.Mutex
	halted   map[uint64]*HaltedError
	// snapBuffered: bytes held for incoming snapshots by every worker,
	// bounded by Config.MaxSnapshotBufferBytes.
	snapBuffered atomic.Int64
	// snapSend, snapRecv time the snapshots streamed out and taken in.
	snapSend, snapRecv histogram.Histogram
}

// NewHost opens every shard found in cfg.Storage and starts the workers and
// the tick clock. Stop releases them.
func NewHost(cfg Config) (*Host, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h := &Host{
		cfg:     c,
		stopc:   make(chan struct{}),
		snapSem: make(chan struct{}, c.MaxConcurrentSnapshots),
		debug:   c.Logger.Enabled(context.Background(), slog.LevelDebug),
		halted:  make(map[uint64]*HaltedError),
	}
	if h.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1)); err != nil {
		return nil, fmt.Errorf("raftmux: snapshot encoder: %w", err)
	}
	if h.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(uint64(c.SnapshotChunkSize)*2+(1<<20))); err != nil {
		return nil, fmt.Errorf("raftmux: snapshot decoder: %w", err)
	}
	// Proposal ids start from the clock so a restarted host never reuses
	// the ids of entries its previous life left in the logs.
	seq := c.Seed
	if seq == 0 {
		seq = uint64(time.Now().UnixNano())
	}
	for i := 0; i < c.Workers; i++ {
		h.workers = append(h.workers, newWorker(h, i, seq))
	}
	shards, err := c.Storage.Shards()
	if err != nil {
		return nil, fmt.Errorf("raftmux: list shards: %w", err)
	}
	for _, s := range shards {
		w := h.worker(s)
		if _, err := w.openReplica(s); err != nil {
			return nil, err
		}
	}
	if c.Manual {
		return h, nil
	}
	for _, w := range h.workers {
		h.wg.Add(1)
		go w.run()
	}
	h.wg.Add(1)
	go h.clock()
	return h, nil
}

// Tick advances a Manual host's raft clock by one tick; the next Step
// runs it.
func (h *Host) Tick() {
	for _, w := range h.workers {
		w.ticks.Add(1)
	}
}

// Step runs, on the caller's goroutine, one round of every worker of a
// Manual host that has something to do (inbound messages, requests,
// ticks, groups with work left), and reports whether any had. Callbacks of
// Submit run during it. Call it until it reports false to settle the host.
func (h *Host) Step() bool {
	select {
	case <-h.stopc:
		return false
	default:
	}
	did := false
	now := h.cfg.Clock()
	for _, w := range h.workers {
		switch {
		case len(w.syncing) > 0:
			if now.Before(w.syncDue) {
				continue // in its fsync (Config.SyncLag)
			}
			w.endSync()
		case w.due() && !w.held(now):
			w.round()
		default:
			continue
		}
		if len(w.syncing) == 0 && w.awaitAcks {
			w.ackDeadline = now.Add(h.cfg.AckWait)
		}
		did = true
	}
	return did
}

// NextDue is when a Manual host's round held back for acks (Config.AckWait)
// runs without them, or a round in its fsync (Config.SyncLag) finishes,
// if one is: Step then has work even if nothing comes in. Zero if none
// is.
func (h *Host) NextDue() time.Time {
	var next time.Time
	for _, w := range h.workers {
		var t time.Time
		switch {
		case len(w.syncing) > 0:
			t = w.syncDue
		case w.awaitAcks:
			t = w.ackDeadline
		default:
			continue
		}
		if next.IsZero() || t.Before(next) {
			next = t
		}
	}
	return next
}

// ID is the host's node id.
func (h *Host) ID() uint64 { return h.cfg.NodeID }

// Stop halts the host abruptly (no leadership transfer): workers finish
// their current round, pending requests fail with ErrStopped.
func (h *Host) Stop() {
	h.stopOnce.Do(func() {
		h.closeOnce.Do(func() { close(h.stopc) })
		h.wg.Wait()
		for _, w := range h.workers {
			w.shutdown()
		}
		h.zenc.Close()
		h.zdec.Close()
	})
}

// halt stops the host after a storage failure: raft's durability contract
// cannot be kept past one. Err reports it.
func (h *Host) halt(err error) {
	h.cfg.Logger.Error("raftmux: host halted", "err", err)
	h.errMu.Lock()
	if h.err == nil {
		h.err = err
	}
	h.errMu.Unlock()
	h.closeOnce.Do(func() { close(h.stopc) })
}

// Err returns the error that halted the host, if any.
func (h *Host) Err() error {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	return h.err
}

func (h *Host) worker(shard uint64) *worker {
	return h.workers[shard%uint64(len(h.workers))]
}

func (h *Host) clock() {
	defer h.wg.Done()
	t := time.NewTicker(h.cfg.TickInterval)
	defer t.Stop()
	for {
		select {
		case <-h.stopc:
			return
		case <-t.C:
			for _, w := range h.workers {
				w.ticks.Add(1)
				w.notify()
			}
		}
	}
}

// result of a request.
type result struct {
	val   any
	index uint64
	err   error
}

type request struct {
	ctx    context.Context
	data   []byte
	cc     *raftpb.ConfChangeV2
	target uint64
	voters []uint64
	done   chan result
	// cb, when set, takes the answer instead of done (Submit).
	cb     func(result)
	issued uint64 // worker tick count when (re-)issued, for reads
}

// finish answers the request.
func (r *request) finish(res result) {
	if r.cb != nil {
		r.cb(res)
		return
	}
	r.done <- res
}

// requests recycles requests (and their done channels) whose answer was
// received: the worker holds no reference to a request once it has
// answered it. One abandoned by its caller (context, stop) is left to the
// garbage collector, since the worker may still answer it.
var requests = sync.Pool{New: func() any { return &request{done: make(chan result, 1)} }}

func newRequest() *request { return requests.Get().(*request) }

func (h *Host) do(ctx context.Context, shard uint64, kind evKind, req *request) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, err
	}
	req.ctx = ctx
	if req.done == nil {
		req.done = make(chan result, 1)
	}
	if err := h.worker(shard).enqueue(event{kind: kind, shard: shard, req: req}); err != nil {
		return result{}, err
	}
	select {
	case r := <-req.done:
		*req = request{done: req.done}
		requests.Put(req)
		return r, r.err
	case <-ctx.Done():
		return result{}, ctx.Err()
	case <-h.stopc:
		return result{}, ErrStopped
	}
}

// Propose replicates cmd in shard's log and returns what the StateMachine
// returned when it applied it here. Errors: *NotLeaderError (errors.Is
// ErrNotLeader) with a leader hint, ErrDropped (not appended),
// ErrOutcomeUnknown (leadership lost after append), ErrBusy, ErrUnknownShard,
// ErrStopped, or the context's error.
func (h *Host) Propose(ctx context.Context, shard uint64, cmd []byte) (any, error) {
	req := newRequest()
	req.data = make([]byte, headerLen+len(cmd))
	copy(req.data[headerLen:], cmd)
	r, err := h.do(ctx, shard, evPropose, req)
	return r.val, err
}

// ReadIndex returns an index such that every write acknowledged before the
// call is applied here once the returned index is; it returns only after
// the local replica has applied it, so a local read is then linearizable.
func (h *Host) ReadIndex(ctx context.Context, shard uint64) (uint64, error) {
	r, err := h.do(ctx, shard, evRead, newRequest())
	return r.index, err
}

// TransferLeader asks the shard's leader (this host's replica) to hand
// leadership to target. It returns once raft has accepted the request; the
// move itself shows in OnLeaderChange.
func (h *Host) TransferLeader(ctx context.Context, shard, target uint64) error {
	_, err := h.do(ctx, shard, evTransfer, &request{target: target})
	return err
}

// Campaign makes this host's replica of shard start an election now (used to
// place initial leaders without waiting an election timeout).
// DropReplica deletes this host's replica of shard, with its data, when the
// caller has confirmed that the group no longer counts this node (its
// leader's configuration leaves it out) but the replica never applied its
// removal, having been cut off. It refuses a replica that leads its group
// (ErrLeads) and one this host does not have (ErrUnknownShard). Dropping a
// replica that is still a member would lose what it acknowledged: the
// caller must be sure.
func (h *Host) DropReplica(ctx context.Context, shard uint64) error {
	_, err := h.do(ctx, shard, evDrop, &request{})
	return err
}

func (h *Host) Campaign(ctx context.Context, shard uint64) error {
	_, err := h.do(ctx, shard, evCampaign, &request{})
	return err
}

// Bootstrap creates shard here as a member of a new group with the given
// voters (replica ids = node ids). Every initial voter bootstraps the same
// way; replicas added later are created by their first message and filled
// by a snapshot.
func (h *Host) Bootstrap(ctx context.Context, shard uint64, voters []uint64) error {
	if len(voters) == 0 {
		return fmt.Errorf("%w: no voters", ErrInvalid)
	}
	_, err := h.do(ctx, shard, evBootstrap, &request{voters: append([]uint64(nil), voters...)})
	return err
}

// AddLearner adds node as a non-voting member of shard.
func (h *Host) AddLearner(ctx context.Context, shard, node uint64) (*raftpb.ConfState, error) {
	return h.changeConf(ctx, shard, raftpb.ConfChangeTransitionAuto,
		raftpb.ConfChangeAddLearnerNode, node)
}

// Promote makes learner node a voter, through a joint configuration that
// raft leaves automatically. A learner that has not caught up with the
// leader's commit index (see Config.PromoteMaxLag) is refused with a
// *LearnerBehindError (errors.Is ErrLearnerBehind); retry later.
func (h *Host) Promote(ctx context.Context, shard, node uint64) (*raftpb.ConfState, error) {
	return h.changeConf(ctx, shard, raftpb.ConfChangeTransitionJointImplicit,
		raftpb.ConfChangeAddNode, node)
}

// Replace promotes learner node to a voter and removes voter out, in one
// joint configuration that raft leaves automatically: while it is joint,
// a quorum needs a majority of the old voters and one of the new, so a
// group that keeps a majority of its old voters answering needs neither
// out nor the new voter, where a promotion alone (a group of four) would
// need one of them. The learner must have caught up, as for Promote.
func (h *Host) Replace(ctx context.Context, shard, node, out uint64) (*raftpb.ConfState, error) {
	if node == 0 || out == 0 || node == out {
		return nil, fmt.Errorf("%w: replace %d by %d", ErrInvalid, out, node)
	}
	r, err := h.do(ctx, shard, evConfChange, &request{cc: replaceChange(node, out)})
	if err != nil {
		return nil, err
	}
	cs, _ := r.val.(*raftpb.ConfState)
	return cs, nil
}

// replaceChange is the change of Replace.
func replaceChange(node, out uint64) *raftpb.ConfChangeV2 {
	return &raftpb.ConfChangeV2{
		Transition: raftpb.ConfChangeTransitionJointImplicit,
		Changes: []raftpb.ConfChangeSingle{
			{Type: raftpb.ConfChangeAddNode, NodeID: node},
			{Type: raftpb.ConfChangeRemoveNode, NodeID: out},
		},
		Context: make([]byte, headerLen),
	}
}

// RemoveReplica removes node from shard, through a joint configuration.
// The removed replica deletes its data when it applies the change.
func (h *Host) RemoveReplica(ctx context.Context, shard, node uint64) (*raftpb.ConfState, error) {
	return h.changeConf(ctx, shard, raftpb.ConfChangeTransitionJointImplicit,
		raftpb.ConfChangeRemoveNode, node)
}

func (h *Host) changeConf(ctx context.Context, shard uint64, tr raftpb.ConfChangeTransition, typ raftpb.ConfChangeType, node uint64) (*raftpb.ConfState, error) {
	if node == 0 {
		return nil, fmt.Errorf("%w: node 0", ErrInvalid)
	}
	cc := &raftpb.ConfChangeV2{
		Transition: tr,
		Changes:    []raftpb.ConfChangeSingle{{Type: typ, NodeID: node}},
		Context:    make([]byte, headerLen),
	}
	r, err := h.do(ctx, shard, evConfChange, &request{cc: cc})
	if err != nil {
		return nil, err
	}
	cs, _ := r.val.(*raftpb.ConfState)
	return cs, nil
}

// NodeSuspect reports that the membership layer suspects node: followers
// of the groups it leads wake and ask it to answer; for every group it
// leaves unanswered for three ticks, one deterministic candidate among the
// other voters campaigns at once, as after NodeDead. A false suspicion of
// a live leader costs a wake-up heartbeat, or at worst an election.
func (h *Host) NodeSuspect(node uint64) { h.liveness(node, nodeSuspect) }

// NodeDead reports node dead: followers of groups it led forget it and elect
// a new leader at once; leaders stop waiting for it before quiescing.
func (h *Host) NodeDead(node uint64) { h.liveness(node, nodeDead) }

// NodeAlive reports node alive again: leaders of groups it belongs to wake
// to catch it up.
func (h *Host) NodeAlive(node uint64) { h.liveness(node, nodeAlive) }

// Unreachable reports that the connection to node is down.
func (h *Host) Unreachable(node uint64) { h.liveness(node, nodeUnreachable) }

func (h *Host) liveness(node uint64, st nodeState) {
	for _, w := range h.workers {
		w.enqueueControl(event{kind: evLiveness, from: node, nodeState: st})
	}
}

// Deliver hands the host a batch received from node from. The host takes
// ownership of b's messages.
func (h *Host) Deliver(from uint64, b *RaftBatch) {
	if b == nil {
		return
	}
	if len(h.workers) == 1 {
		h.workers[0].deliver(from, b, 0, 1)
		return
	}
	for i, w := range h.workers {
		w.deliver(from, b, uint64(i), uint64(len(h.workers)))
	}
}

// DeliverSnapshotChunk hands the host one snapshot chunk from node from.
func (h *Host) DeliverSnapshotChunk(from uint64, c *SnapshotChunk) {
	if c == nil {
		return
	}
	h.worker(c.Shard).enqueueMsg(event{kind: evSnapChunk, shard: c.Shard, from: from, chunk: c})
}

// Info is a snapshot of one hosted replica's state.
type Info struct {
	Shard    uint64
	Leader   uint64
	Term     uint64
	Applied  uint64
	Quiesced bool
	// Halted: the replica stopped at an entry it could not apply (see
	// Host.Halted).
	Halted bool
	// Ended: the replica applied its shard's split, by entry or by
	// snapshot (EndObserver).
	Ended    bool
	Voters   []uint64
	Learners []uint64
}

// Shards returns the state of every hosted replica, for observation.
func (h *Host) Shards(ctx context.Context) ([]Info, error) {
	var out []Info
	for _, w := range h.workers {
		req := &request{ctx: ctx, done: make(chan result, 1)}
		if err := w.enqueueControl(event{kind: evInfo, req: req}); err != nil {
			return nil, err
		}
		select {
		case r := <-req.done:
			out = append(out, r.val.([]Info)...)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-h.stopc:
			return nil, ErrStopped
		}
	}
	return out, nil
}

// Entry headers: the proposing node and its proposal id, so every replica
// applies the same bytes and only the proposer's host resolves the waiter.
const headerLen = 16

func putHeader(b []byte, node, seq uint64) {
	binary.LittleEndian.PutUint64(b[0:8], node)
	binary.LittleEndian.PutUint64(b[8:16], seq)
}

func readHeader(b []byte) (node, seq uint64, ok bool) {
	if len(b) < headerLen {
		return 0, 0, false
	}
	return binary.LittleEndian.Uint64(b[0:8]), binary.LittleEndian.Uint64(b[8:16]), true
}

// OpKind names a request made with Submit.
type OpKind uint8

// The requests Submit takes; each is the blocking method of the same name.
const (
	OpPropose OpKind = iota + 1
	OpReadIndex
	OpTransferLeader
	OpCampaign
	OpBootstrap
	OpAddLearner
	OpPromote
	OpRemoveReplica
	OpDropReplica
	OpShards
	OpReplace
)

// Op is a request made with Submit.
type Op struct {
	Kind  OpKind
	Shard uint64
	// Data is OpPropose's command.
	Data []byte
	// Node is OpTransferLeader's target, and the node OpAddLearner,
	// OpPromote, OpRemoveReplica and OpReplace change.
	Node uint64
	// Out is the voter OpReplace removes as it promotes Node.
	Out uint64
	// Voters are OpBootstrap's voters.
	Voters []uint64
}

// Result answers a Submit: Value is what Propose returns (the state
// machine's result), a conf change's *raftpb.ConfState, or OpShards'
// []Info; Index is what ReadIndex returns.
type Result struct {
	Value any
	Index uint64
	Err   error
}

// Submit makes a request without waiting for it: done gets the answer,
// exactly once — on a worker goroutine, or, on a Manual host, during a
// later Step on the caller's goroutine (at once, when the request cannot
// even be queued). done must not block.
func (h *Host) Submit(op Op, done func(Result)) {
	fail := func(err error) { done(Result{Err: err}) }
	if op.Kind == OpShards {
		h.submitShards(done)
		return
	}
	req := &request{ctx: context.Background(), cb: func(r result) { done(Result{Value: r.val, Index: r.index, Err: r.err}) }}
	var kind evKind
	switch op.Kind {
	case OpPropose:
		kind = evPropose
		req.data = make([]byte, headerLen+len(op.Data))
		copy(req.data[headerLen:], op.Data)
	case OpReadIndex:
		kind = evRead
	case OpTransferLeader:
		kind, req.target = evTransfer, op.Node
	case OpCampaign:
		kind = evCampaign
	case OpBootstrap:
		if len(op.Voters) == 0 {
			fail(fmt.Errorf("%w: no voters", ErrInvalid))
			return
		}
		kind, req.voters = evBootstrap, append([]uint64(nil), op.Voters...)
	case OpAddLearner, OpPromote, OpRemoveReplica:
		if op.Node == 0 {
			fail(fmt.Errorf("%w: node 0", ErrInvalid))
			return
		}
		tr, typ := raftpb.ConfChangeTransitionAuto, raftpb.ConfChangeAddLearnerNode
		switch op.Kind {
		case OpPromote:
			tr, typ = raftpb.ConfChangeTransitionJointImplicit, raftpb.ConfChangeAddNode
		case OpRemoveReplica:
			tr, typ = raftpb.ConfChangeTransitionJointImplicit, raftpb.ConfChangeRemoveNode
		}
		kind = evConfChange
		req.cc = &raftpb.ConfChangeV2{Transition: tr, Changes: []raftpb.ConfChangeSingle{{Type: typ, NodeID: op.Node}}, Context: make([]byte, headerLen)}
	case OpReplace:
		if op.Node == 0 || op.Out == 0 || op.Node == op.Out {
			fail(fmt.Errorf("%w: replace %d by %d", ErrInvalid, op.Out, op.Node))
			return
		}
		kind = evConfChange
		req.cc = replaceChange(op.Node, op.Out)
	case OpDropReplica:
		kind = evDrop
	default:
		fail(fmt.Errorf("%w: op %d", ErrInvalid, op.Kind))
		return
	}
	if err := h.worker(op.Shard).enqueue(event{kind: kind, shard: op.Shard, req: req}); err != nil {
		fail(err)
	}
}

// submitShards gathers every worker's Info for Submit(OpShards).
func (h *Host) submitShards(done func(Result)) {
	var out []Info
	left := len(h.workers)
	var failed error
	var mu sync.Mutex
	for _, w := range h.workers {
		req := &request{ctx: context.Background(), cb: func(r result) {
			mu.Lock()
			defer mu.Unlock()
			if r.err != nil && failed == nil {
				failed = r.err
			}
			if infos, ok := r.val.([]Info); ok {
				out = append(out, infos...)
			}
			if left--; left == 0 {
				if failed != nil {
					done(Result{Err: failed})
					return
				}
				done(Result{Value: out})
			}
		}}
		if err := w.enqueueControl(event{kind: evInfo, req: req}); err != nil {
			req.finish(result{err: err})
		}
	}
}
