package raftmux

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

type evKind uint8

const (
	evMsg evKind = iota
	evHeartbeat
	evHeartbeatResp
	evSnapChunk
	evSnapDone
	evPropose
	evConfChange
	evRead
	evTransfer
	evCampaign
	evBootstrap
	evLiveness
	evInfo
	evDrop
	evSeeded
)

type nodeState uint8

const (
	nodeAlive nodeState = iota
	nodeSuspect
	nodeDead
	nodeUnreachable
)

type event struct {
	kind      evKind
	nodeState nodeState
	ok        bool
	shard     uint64
	from      uint64
	msg       *raftpb.Message
	hb        Heartbeat
	req       *request
	chunk     *SnapshotChunk
}

// worker owns the replicas of the shards id mod W and runs their rounds.
type worker struct {
	h   *Host
	idx int

	mu    sync.Mutex
	inbox []event
	// awaited: shard → the last index its leader here appended in the last
	// round (see holdForAcks); acksIn counts inbox acks reaching it.
	awaited map[uint64]uint64
	acksIn  int
	stopped bool
	wakec   chan struct{}
	ticks   atomic.Int64

	// Everything below is owned by the worker goroutine.
	spare    []event
	replicas map[uint64]*replica
	// order: replicas in shard order, rebuilt after the set changes
	// (orderStale); read on every pass, changed rarely.
	order      []*replica
	orderStale bool
	awake      map[uint64]*replica
	tickOrder  []*replica        // tick's scratch: awake in shard order
	tombstones map[uint64]uint64 // destroyed shard → the tick it was destroyed at
	dead       map[uint64]bool
	touched    []*replica
	confirmQ   []*replica // replicas with reads to confirm this round (reads.go)
	confirmSeq uint64     // the last read confirmation's id
	readies    []readyItem
	outbox     map[uint64]*RaftBatch
	seq        uint64
	tickCount  uint64
	snapID     uint64
	cmds       []Command
	seqs       []uint64 // proposal id of each of cmds (0: not ours)
	waiters    []waiter
	// awaitAcks: the last round persisted appends that leaders here sent
	// their followers before the fsync; the next round is held back (see
	// Config.AckWait) until an ack is in or ackDeadline passes.
	awaitAcks   bool
	ackDeadline time.Time
	// syncing (Manual hosts with Config.SyncLag) is the round whose batch
	// is written but not yet durable: it finishes at syncDue.
	syncing  []readyItem
	syncDue  time.Time
	ackTimer *time.Timer
	// staged holds a state machine's writes until its Apply succeeds;
	// seeded the shards this round's applies seeded (Splitter), opened
	// once the round's apply batch is committed.
	staged staging
	seeded []seed
	// receiving: replicas with an incoming snapshot stream in progress.
	receiving map[*replica]struct{}
}

// removedGraceElections is how many election timeouts a replica left out
// of its group's configuration waits, hearing nothing, before it deletes
// itself and its data. The entries that removed it may be followed by
// entries, already acknowledged, that add it back; the leader stops
// talking to a replica only once it applied the removal.
const removedGraceElections = 3

type readyItem struct {
	r     *replica
	rd    raft.Ready
	early bool
	// applied: its committed entries were applied before the fsync.
	applied bool
}

type waiter struct {
	req *request
	res result
}

func newWorker(h *Host, idx int, seq uint64) *worker {
	return &worker{
		h:          h,
		idx:        idx,
		wakec:      make(chan struct{}, 1),
		replicas:   make(map[uint64]*replica),
		awake:      make(map[uint64]*replica),
		tombstones: make(map[uint64]uint64),
		dead:       make(map[uint64]bool),
		receiving:  make(map[*replica]struct{}),
		outbox:     make(map[uint64]*RaftBatch),
		awaited:    make(map[uint64]uint64),
		seq:        seq,
	}
}

func (w *worker) notify() {
	select {
	case w.wakec <- struct{}{}:
	default:
	}
}

// enqueue adds a caller request; it fails rather than grow the inbox past
// its bound.
func (w *worker) enqueue(ev event) error {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return ErrStopped
	}
	if len(w.inbox) >= w.h.cfg.MaxInboxEvents {
		w.mu.Unlock()
		return ErrBusy
	}
	w.inbox = append(w.inbox, ev)
	w.mu.Unlock()
	w.notify()
	return nil
}

// enqueueControl adds an event that must not be lost to a full inbox
// (liveness reports, snapshot completions, observation). These are few.
func (w *worker) enqueueControl(ev event) error {
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return ErrStopped
	}
	w.inbox = append(w.inbox, ev)
	w.mu.Unlock()
	w.notify()
	return nil
}

// enqueueMsg adds an inbound message; a full inbox drops it (raft
// retransmits).
func (w *worker) enqueueMsg(ev event) {
	_ = w.enqueue(ev)
}

// deliver queues this worker's share of a peer's batch (the shards idx
// mod n). What no peer may send (see checkPeerMessage, checkHeartbeat) is
// refused here, before it takes an inbox place.
func (w *worker) deliver(from uint64, b *RaftBatch, idx, n uint64) {
	max := w.h.cfg.MaxInboxEvents
	self := w.h.cfg.NodeID
	added := false
	w.mu.Lock()
	if w.stopped {
		w.mu.Unlock()
		return
	}
	for i := range b.Messages {
		m := &b.Messages[i]
		if m.Shard%n == idx && len(w.inbox) < max {
			if reason := checkPeerMessage(from, self, m.Msg); reason >= 0 {
				var t raftpb.MessageType
				if m.Msg != nil {
					t = m.Msg.Type
				}
				w.h.refuse(reason, m.Shard, from, t)
				continue
			}
			w.inbox = append(w.inbox, event{kind: evMsg, shard: m.Shard, from: from, msg: m.Msg})
			if len(w.awaited) > 0 && m.Msg.Type == raftpb.MsgAppResp && !m.Msg.Reject {
				if last, ok := w.awaited[m.Shard]; ok && m.Msg.Index >= last {
					w.acksIn++
				}
			}
			added = true
		}
	}
	for _, hb := range b.Heartbeats {
		if hb.Shard%n == idx && len(w.inbox) < max {
			if reason := checkHeartbeat(from, self, &hb); reason >= 0 {
				w.h.refuse(reason, hb.Shard, from, raftpb.MsgHeartbeat)
				continue
			}
			w.inbox = append(w.inbox, event{kind: evHeartbeat, shard: hb.Shard, from: from, hb: hb})
			added = true
		}
	}
	for _, hb := range b.HeartbeatResponses {
		if hb.Shard%n == idx && len(w.inbox) < max {
			if reason := checkHeartbeat(from, self, &hb); reason >= 0 {
				w.h.refuse(reason, hb.Shard, from, raftpb.MsgHeartbeatResp)
				continue
			}
			w.inbox = append(w.inbox, event{kind: evHeartbeatResp, shard: hb.Shard, from: from, hb: hb})
			added = true
		}
	}
	w.mu.Unlock()
	if added {
		w.notify()
	}
}

func (w *worker) run() {
	defer w.h.wg.Done()
	for {
		select {
		case <-w.h.stopc:
			return
		case <-w.wakec:
		}
		if w.awaitAcks && !w.holdForAcks() {
			return
		}
		w.round()
		if w.awaitAcks {
			w.ackDeadline = w.h.cfg.Clock().Add(w.h.cfg.AckWait)
		}
	}
}

// holdForAcks waits, after a round whose leaders sent appends before their
// fsync, until a follower's ack of all of one group's appends is in the
// inbox or Config.AckWait has passed since the round ended. A follower's
// fsync of those appends started when the leader's did, so its ack is due a
// network round trip after the leader's fsync ended; the round that steps it commits and answers the
// appends (they are durable here), where a round started at once, for a
// proposal that came in meanwhile, would leave the ack waiting through its
// whole fsync. Acks of earlier appends do not count: one is in the inbox
// after most rounds of a busy group, and a round started on it leaves the
// new appends' acks to wait through its fsync. Whatever comes in meanwhile
// waits for the same round, which then carries more proposals in one
// fsync. It returns false if the host stops.
func (w *worker) holdForAcks() bool {
	w.awaitAcks = false
	for {
		w.mu.Lock()
		acks := w.acksIn
		w.mu.Unlock()
		wait := w.ackDeadline.Sub(w.h.cfg.Clock())
		if acks > 0 || wait <= 0 {
			return true
		}
		if w.ackTimer == nil {
			w.ackTimer = time.NewTimer(wait)
		} else {
			w.ackTimer.Reset(wait)
		}
		select {
		case <-w.h.stopc:
			w.ackTimer.Stop()
			return false
		case <-w.wakec:
			w.ackTimer.Stop()
		case <-w.ackTimer.C:
			return true
		}
	}
}

// shutdown fails everything still waiting once the goroutine has exited.
func (w *worker) shutdown() {
	w.mu.Lock()
	w.stopped = true
	evs := w.inbox
	w.inbox = nil
	w.mu.Unlock()
	for _, ev := range evs {
		if ev.req != nil {
			ev.req.finish(result{err: ErrStopped})
		}
	}
	for _, r := range w.ordered() {
		r.failAll(ErrStopped)
	}
}

func (w *worker) round() {
	w.mu.Lock()
	evs := w.inbox
	w.inbox = w.spare[:0]
	w.acksIn = 0
	clear(w.awaited)
	w.mu.Unlock()
	for i := range evs {
		w.handle(&evs[i])
		evs[i] = event{}
	}
	w.spare = evs[:0]
	if n := w.ticks.Swap(0); n > 0 {
		w.tick()
	}
	w.processReady()
}

func (w *worker) touch(r *replica) {
	if !r.touched {
		r.touched = true
		w.touched = append(w.touched, r)
	}
}

func (w *worker) handle(ev *event) {
	switch ev.kind {
	case evMsg:
		w.handleMsg(ev.shard, ev.from, ev.msg)
	case evHeartbeat:
		w.handleHeartbeat(ev.shard, ev.from, ev.hb)
	case evHeartbeatResp:
		w.handleHeartbeatResp(ev.shard, ev.from, ev.hb)
	case evSnapChunk:
		w.handleChunk(ev.from, ev.chunk)
	case evSnapDone:
		if r := w.replicas[ev.shard]; r != nil && r.halted == nil {
			st := raft.SnapshotFinish
			if !ev.ok {
				st = raft.SnapshotFailure
			}
			r.rn.ReportSnapshot(ev.from, st)
			w.touch(r)
		}
	case evPropose:
		w.propose(ev.shard, ev.req)
	case evConfChange:
		w.proposeConf(ev.shard, ev.req)
	case evRead:
		w.read(ev.shard, ev.req)
	case evTransfer:
		r, err := w.hosted(ev.shard)
		if err != nil {
			ev.req.finish(result{err: err})
			return
		}
		w.wake(r)
		if r.state != raft.StateLeader {
			ev.req.finish(result{err: r.notLeader()})
			return
		}
		r.rn.TransferLeader(ev.req.target)
		w.touch(r)
		ev.req.finish(result{})
	case evCampaign:
		r, err := w.hosted(ev.shard)
		if err != nil {
			ev.req.finish(result{err: err})
			return
		}
		w.wake(r)
		err = r.rn.Campaign()
		w.touch(r)
		ev.req.finish(result{err: err})
	case evBootstrap:
		ev.req.finish(result{err: w.bootstrap(ev.shard, ev.req.voters)})
	case evLiveness:
		w.handleLiveness(ev.from, ev.nodeState)
	case evDrop:
		ev.req.finish(result{err: w.drop(ev.shard)})
	case evSeeded:
		w.openSeeded(ev.shard, ev.ok)
	case evInfo:
		out := make([]Info, 0, len(w.replicas))
		for _, r := range w.ordered() {
			out = append(out, r.info())
		}
		ev.req.finish(result{val: out})
	}
}

func (w *worker) tick() {
	w.tickCount++
	if len(w.receiving) > 0 {
		w.expireSnapshots()
	}
	grace := uint64(removedGraceElections * w.h.cfg.ElectionTicks)
	w.tickOrder = appendInOrder(w.tickOrder[:0], w.awake)
	for _, r := range w.tickOrder {
		if r.removed && w.tickCount-r.removedTick >= grace && w.tickCount-r.heardTick >= grace {
			w.destroy(r)
			continue
		}
		if r.skipTicks > 0 {
			r.skipTicks--
		} else {
			r.rn.Tick()
		}
		w.suspectCampaign(r)
		w.seededCampaign(r)
		w.retryReads(r)
		w.retryConfirms(r)
		w.touch(r)
		if !w.h.cfg.DisableQuiesce {
			w.maybeQuiesce(r)
		}
	}
}

// ordered returns the worker's replicas in shard order. The slice is not
// changed afterwards (a change of the set makes a new one), so a caller
// may destroy replicas while ranging over it.
func (w *worker) ordered() []*replica {
	if w.orderStale || len(w.order) != len(w.replicas) {
		w.order = appendInOrder(make([]*replica, 0, len(w.replicas)), w.replicas)
		w.orderStale = false
	}
	return w.order
}

// inOrder returns the replicas of m in shard order. Rounds visit replicas
// in a fixed order, so that a Manual host given the same inputs sends the
// same messages in the same order (the simulator replays runs).
func inOrder(m map[uint64]*replica) []*replica { return appendInOrder(nil, m) }

func appendInOrder(dst []*replica, m map[uint64]*replica) []*replica {
	for _, r := range m {
		dst = append(dst, r)
	}
	slices.SortFunc(dst, func(a, b *replica) int { return cmp.Compare(a.shard, b.shard) })
	return dst
}

// outbound returns the batch being built for node to.
func (w *worker) outbound(to uint64) *RaftBatch {
	b := w.outbox[to]
	if b == nil {
		b = &RaftBatch{}
		w.outbox[to] = b
	}
	return b
}

// route queues one raft message of r for sending: heartbeats without a
// read-index context become coalesced tuples, snapshots are streamed.
func (w *worker) route(r *replica, m *raftpb.Message) {
	to := m.To
	switch m.Type {
	case raftpb.MsgHeartbeat:
		if len(m.Context) == 0 {
			if r.quiesced {
				// The quiesce heartbeat sent in its place carries the same
				// term and commit; this one would wake the follower again.
				return
			}
			if r.appendedSince(to, w.tickCount-1) {
				// An append went to this follower within the last tick: it
				// reset the follower's election timer and its ack counts
				// for CheckQuorum, as this heartbeat would have. A busy
				// group sends no heartbeats.
				return
			}
			b := w.outbound(to)
			b.Heartbeats = append(b.Heartbeats, Heartbeat{Shard: r.shard, Term: m.Term, Commit: m.Commit})
			return
		}
	case raftpb.MsgHeartbeatResp:
		if len(m.Context) == 0 {
			b := w.outbound(to)
			b.HeartbeatResponses = append(b.HeartbeatResponses, Heartbeat{Shard: r.shard, Term: m.Term})
			return
		}
	case raftpb.MsgSnap:
		w.sendSnapshot(r, m)
		return
	case raftpb.MsgApp:
		if len(m.Entries) == 0 && commitOnly(r, m) {
			return
		}
		r.noteAppend(to, w.tickCount)
	}
	b := w.outbound(to)
	b.Messages = append(b.Messages, ShardMessage{Shard: r.shard, Msg: m})
}

// commitOnly reports whether m, an append without entries, only tells a
// follower a newer commit index and may be left unsent: the follower is
// being replicated to, and either has acknowledged everything up to the
// append's position or has appends in flight whose acks will come (the
// append is not raft's answer to a heartbeat response, which is how it
// recovers appends that were lost). The follower learns the commit index
// from its next append or heartbeat, at most a tick later; a commit is
// complete when the leader applies it, so no proposer waits for this. It
// halves the messages of a group with one proposal at a time (append, ack,
// commit, ack → append, ack).
func commitOnly(r *replica, m *raftpb.Message) bool {
	if r.confCommitting {
		return false
	}
	to, idx := m.To, m.Index
	ok := false
	r.rn.WithProgress(func(id uint64, _ raft.ProgressType, pr tracker.Progress) {
		if id == to && pr.State == tracker.StateReplicate {
			ok = pr.Match >= idx || (pr.Next-1 > pr.Match && !slices.Contains(r.hbResps, to))
		}
	})
	return ok
}

// flush sends every non-empty outbound batch, one per node.
func (w *worker) flush() {
	for _, to := range slices.Sorted(maps.Keys(w.outbox)) {
		b := w.outbox[to]
		if b.Empty() {
			continue
		}
		if err := w.h.cfg.Transport.Send(to, b); err != nil {
			for _, m := range b.Messages {
				if r := w.replicas[m.Shard]; r != nil && r.state == raft.StateLeader && r.halted == nil {
					r.rn.ReportUnreachable(to)
				}
			}
		}
		b.Reset()
	}
}

// held reports whether a Manual host's worker holds its next round back
// at now, waiting for an ack of its leaders' appends (holdForAcks); when
// it stops waiting, it forgets the wait.
func (w *worker) held(now time.Time) bool {
	if !w.awaitAcks {
		return false
	}
	w.mu.Lock()
	acks := w.acksIn
	w.mu.Unlock()
	if acks > 0 || !now.Before(w.ackDeadline) {
		w.awaitAcks = false
		return false
	}
	return true
}

// due reports whether a round would have anything to do (Manual hosts).
func (w *worker) due() bool {
	w.mu.Lock()
	n := len(w.inbox)
	w.mu.Unlock()
	return n > 0 || len(w.touched) > 0 || w.ticks.Load() > 0
}
