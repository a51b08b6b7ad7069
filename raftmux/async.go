package raftmux

import (
	"bytes"
	"fmt"
	"sync"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// With Config.AsyncStorageWrites raft runs with its AsyncStorageWrites
// option: a Ready's log appends (MsgStorageAppend) go to the worker's
// writer goroutine, which persists whatever has queued up in one batch and
// one fsync and then delivers the responses raft attached to them (acks to
// leaders, votes, and its own MsgStorageAppendResp). The worker meanwhile
// goes on stepping: a leader takes its followers' acks and commits while its
// own append is still being written, and committed entries
// (MsgStorageApply) are applied on the worker as soon as raft hands them
// out, which it does once they are durable here.
//
// The store lets one goroutine at a time write a shard (shardstore: "the
// raft layer owns each shard from one goroutine at a time"): a batch takes
// a view of the shard's log bounds when it first touches the shard and puts
// them back when it commits. An apply batch (SetApplied) or a compaction
// committed on the worker while the writer commits an append of the same
// shard would put back bounds from before the append, and raft would then
// read entries at the wrong indexes. So the writer's batches and the
// worker's storage writes take turns under writer.storeMu, and the worker
// records applied indexes only under it, just before its commit (the state
// machine's own writes are built outside it). The writer holds it for its
// unsynced commit only, not for the fsync that follows.

// appendJob is one MsgStorageAppend of one replica.
type appendJob struct {
	r    *replica
	m    *raftpb.Message
	sync bool
	// snapData is the received state of a snapshot the append installs.
	snapData []byte
}

// writer persists a worker's appends, in order, off the worker goroutine.
type writer struct {
	w      *worker
	mu     sync.Mutex
	queue  []appendJob
	spare  []appendJob
	kick   chan struct{}
	outbox map[uint64]*RaftBatch
	// storeMu serialises the storage writes of the worker's shards: held by
	// the writer around each batch it builds and commits unsynced, by the worker
	// around recording applied indexes and committing, and around
	// compactions.
	storeMu sync.Mutex
}

func newWriter(w *worker) *writer {
	return &writer{w: w, kick: make(chan struct{}, 1), outbox: make(map[uint64]*RaftBatch)}
}

func (wr *writer) submit(jobs []appendJob) {
	wr.mu.Lock()
	wr.queue = append(wr.queue, jobs...)
	wr.mu.Unlock()
	select {
	case wr.kick <- struct{}{}:
	default:
	}
}

func (wr *writer) run() {
	h := wr.w.h
	defer h.wg.Done()
	for {
		select {
		case <-h.stopc:
			return
		case <-wr.kick:
		}
		for {
			wr.mu.Lock()
			jobs := wr.queue
			wr.queue = wr.spare[:0]
			wr.mu.Unlock()
			if len(jobs) == 0 {
				break
			}
			if !wr.write(jobs) {
				return
			}
			// The jobs go to the worker with the completion; the next
			// batch takes a fresh slice.
			wr.spare = nil
		}
	}
}

// write persists jobs in one batch (split only around snapshots), sends
// the responses meant for other nodes and hands the rest to the worker.
//
// The batch is committed without a sync under storeMu, and made durable by
// an empty synced commit after it (a synced commit makes every earlier
// commit durable): the worker's own storage writes wait for the short
// commit only, never for the fsync.
func (wr *writer) write(jobs []appendJob) bool {
	wr.storeMu.Lock()
	sync, ok := wr.persist(jobs)
	wr.storeMu.Unlock()
	if !ok {
		return false
	}
	if sync {
		if err := wr.w.h.cfg.Storage.NewBatch().Commit(true); err != nil {
			wr.w.h.halt(fmt.Errorf("raftmux: persist raft state: %w", err))
			return false
		}
	}
	wr.respond(jobs)
	return true
}

// persist writes jobs to the store unsynced, under storeMu, and reports
// whether they must be synced.
func (wr *writer) persist(jobs []appendJob) (mustSync, ok bool) {
	h := wr.w.h
	st := h.cfg.Storage
	b := st.NewBatch()
	pending := false
	commit := func() bool {
		if !pending {
			return true
		}
		if err := b.Commit(false); err != nil {
			h.halt(fmt.Errorf("raftmux: persist raft state: %w", err))
			return false
		}
		b = st.NewBatch()
		pending = false
		return true
	}
	for i := range jobs {
		j := &jobs[i]
		m := j.m
		if snap := m.Snapshot; snap != nil && !raft.IsEmptySnap(*snap) {
			if !commit() {
				return false, false
			}
			// The worker submits a snapshot only with its data (see
			// processReadyAsync). Synced by the store, with everything
			// committed before it.
			err := st.ApplySnapshot(j.r.shard, snap, bytes.NewReader(j.snapData))
			h.releaseSnap(len(j.snapData))
			j.snapData = nil
			if err != nil {
				h.halt(fmt.Errorf("raftmux: shard %d: apply snapshot %d: %w", j.r.shard, snap.Metadata.Index, err))
				return false, false
			}
		}
		var hs *raftpb.HardState
		if m.Term != 0 || m.Vote != 0 || m.Commit != 0 {
			hs = &raftpb.HardState{Term: m.Term, Vote: m.Vote, Commit: m.Commit}
		}
		if hs != nil || len(m.Entries) > 0 {
			b.Append(j.r.shard, hs, m.Entries)
			pending = true
			mustSync = mustSync || j.sync
		}
	}
	return mustSync, commit()
}

// respond sends the responses of persisted jobs meant for other nodes and
// hands the rest to the worker.
func (wr *writer) respond(jobs []appendJob) {
	h := wr.w.h
	self := h.cfg.NodeID
	for i := range jobs {
		j := &jobs[i]
		for k := range j.m.Responses {
			resp := &j.m.Responses[k]
			if to := resp.To; to != self {
				b := wr.outbox[to]
				if b == nil {
					b = &RaftBatch{}
					wr.outbox[to] = b
				}
				b.Messages = append(b.Messages, ShardMessage{Shard: j.r.shard, Msg: resp})
			}
		}
	}
	for to, b := range wr.outbox {
		if !b.Empty() {
			// A failed send is a lost message; raft retransmits.
			_ = h.cfg.Transport.Send(to, b)
			b.Reset()
		}
	}
	_ = wr.w.enqueueControl(event{kind: evAppended, jobs: jobs})
}

// deferredApplied is the worker's apply batch with AsyncStorageWrites: the
// state machine writes into it freely, but the applied indexes are recorded
// only under writer.storeMu, right before the commit (see above).
type deferredApplied struct {
	Batch
	marks []appliedMark
}

type appliedMark struct{ shard, index uint64 }

// SetApplied implements Batch: it is recorded for commit.
func (d *deferredApplied) SetApplied(shard, idx uint64) {
	d.marks = append(d.marks, appliedMark{shard: shard, index: idx})
}

// commit records the applied indexes and commits (unsynced), under storeMu.
func (d *deferredApplied) commit(wr *writer) error {
	wr.storeMu.Lock()
	for _, m := range d.marks {
		d.Batch.SetApplied(m.shard, m.index)
	}
	err := d.Batch.Commit(false)
	wr.storeMu.Unlock()
	d.Batch = nil
	d.marks = d.marks[:0]
	return err
}

// appended steps the local responses of persisted appends.
func (w *worker) appended(jobs []appendJob) {
	self := w.h.cfg.NodeID
	for i := range jobs {
		j := &jobs[i]
		r := j.r
		r.writes--
		if w.replicas[r.shard] != r || r.halted != nil {
			continue
		}
		if snap := j.m.Snapshot; snap != nil && !raft.IsEmptySnap(*snap) {
			idx := snap.Metadata.Index
			if err := w.h.cfg.StateMachine.Restore(r.shard, idx); err != nil {
				w.h.halt(fmt.Errorf("raftmux: shard %d: restore snapshot %d: %w", r.shard, idx, err))
				return
			}
			r.applied = idx
			r.compacted = idx
			cs := snap.Metadata.ConfState
			r.confState = &cs
			w.confChanged(r)
		}
		for _, resp := range j.m.Responses {
			if resp.To == self {
				_ = r.rn.Step(resp)
			}
		}
		w.touch(r)
	}
}

type applyItem struct {
	r *replica
	m *raftpb.Message
}

// processReadyAsync is processReady with AsyncStorageWrites.
func (w *worker) processReadyAsync() {
	cfg := &w.h.cfg
	items := w.readies[:0]
	for _, r := range w.touched {
		r.touched = false
		if r.destroyed || r.halted != nil || !r.rn.HasReady() {
			continue
		}
		items = append(items, readyItem{r: r, rd: r.rn.Ready()})
		w.noteReady(r, &items[len(items)-1].rd)
	}
	w.touched = w.touched[:0]
	defer func() {
		clear(items)
		w.readies = items[:0]
	}()
	if len(items) == 0 {
		w.flush()
		return
	}
	jobs := w.jobs[:0]
	applies := w.applies[:0]
	for i := range items {
		r, rd := items[i].r, &items[i].rd
		term := r.term
		if !raft.IsEmptyHardState(rd.HardState) {
			term = rd.HardState.Term
			if term != r.term && len(r.proposals) > 0 {
				r.failProposals(ErrOutcomeUnknown)
			}
		}
		if rd.SoftState != nil {
			w.softState(r, rd.SoftState, term)
		}
		r.term = term
		r.confCommitting = len(r.confState.VotersOutgoing) > 0 || hasConfChange(rd.CommittedEntries)
		if snap := rd.Snapshot; !raft.IsEmptySnap(snap) && (r.snapData == nil || r.snapDataIdx != snap.Metadata.Index) {
			// Nothing of this Ready is written or sent: see ErrSnapshotData.
			w.haltReplica(r, snap.Metadata.Index, fmt.Errorf("raftmux: shard %d: snapshot %d: %w", r.shard, snap.Metadata.Index, ErrSnapshotData))
			continue
		}
		for k := range rd.Messages {
			m := &rd.Messages[k]
			switch m.To {
			case raft.LocalAppendThread:
				j := appendJob{r: r, m: m, sync: rd.MustSync}
				if snap := m.Snapshot; snap != nil && !raft.IsEmptySnap(*snap) {
					// The writer installs it and frees its budget.
					j.sync = true
					j.snapData = r.snapData
					r.snapData = nil
				}
				r.writes++
				jobs = append(jobs, j)
			case raft.LocalApplyThread:
				applies = append(applies, applyItem{r: r, m: m})
			default:
				w.route(r, m)
			}
		}
		r.hbResps = r.hbResps[:0]
		w.readStates(r, rd.ReadStates)
	}
	// Leaders' appends and everything not waiting for the disk leave now.
	w.flush()
	if len(jobs) > 0 {
		w.wr.submit(jobs)
		clear(jobs)
	}
	w.jobs = jobs[:0]

	if len(applies) > 0 {
		ab := &w.deferred
		ab.Batch = cfg.Storage.NewBatch()
		for _, a := range applies {
			if a.r.halted == nil {
				w.apply(a.r, a.m.Entries, ab)
			}
		}
		if err := ab.commit(w.wr); err != nil {
			w.h.halt(fmt.Errorf("raftmux: persist applied state: %w", err))
			return
		}
		w.reply()
		for _, a := range applies {
			if a.r.halted != nil {
				continue
			}
			for _, resp := range a.m.Responses {
				_ = a.r.rn.Step(resp)
			}
		}
		clear(applies)
	}
	w.applies = applies[:0]

	for i := range items {
		if r := items[i].r; r.halted == nil {
			w.settle(r, !r.removed)
		}
	}
	w.endRound()
}
