package raftmux

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/mutant"
)

// processReady runs the persist/send/apply/advance half of a round for
// every touched group.
func (w *worker) processReady() {
	cfg := &w.h.cfg
	w.sendConfirms()
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
		w.reply() // reads confirmed by this round's acknowledgements
		return
	}

	// Leadership changes, and the leaders' messages: they may leave before
	// the entries they carry are durable here (Raft thesis §10.2.1), as long
	// as the term and vote they were sent under are.
	for i := range items {
		it := &items[i]
		r, rd := it.r, &it.rd
		hsChanged := !raft.IsEmptyHardState(rd.HardState) &&
			(rd.HardState.Term != r.term || rd.HardState.Vote != r.persistedVote)
		if hsChanged && rd.HardState.Term != r.term && len(r.proposals) > 0 {
			// A new term: whatever this replica proposed as leader before
			// may or may not survive, even if it leads again.
			r.failProposals(ErrOutcomeUnknown)
		}
		if rd.SoftState != nil {
			term := r.term
			if !raft.IsEmptyHardState(rd.HardState) {
				term = rd.HardState.Term
			}
			w.softState(r, rd.SoftState, term)
		} else if !raft.IsEmptyHardState(rd.HardState) && rd.HardState.Term != r.leadTerm && r.lead != 0 {
			// The same leader at a new term: a follower that took its
			// vote request and its first append at the new term in one
			// Ready never saw the leaderless state between them.
			w.leaderChanged(r, r.lead, rd.HardState.Term)
		}
		r.confCommitting = len(r.confState.VotersOutgoing) > 0 || hasConfChange(rd.CommittedEntries)
		it.early = (r.state == raft.StateLeader || mutant.On(mutant.AckBeforeSync)) && !hsChanged
		if it.early && len(rd.Entries) > 0 && cfg.AckWait > 0 && len(r.confState.Voters) > 1 {
			// Before the appends leave: an ack may beat this round's fsync.
			w.awaitAcks = true
			w.mu.Lock()
			w.awaited[r.shard] = rd.Entries[len(rd.Entries)-1].Index
			w.mu.Unlock()
		}
		if it.early {
			for k := range rd.Messages {
				w.route(r, &rd.Messages[k])
			}
			r.hbResps = r.hbResps[:0]
		}
	}

	// Out now: the followers write these entries while we do.
	w.flush()

	// A received snapshot replaces the shard's state before any entry that
	// follows it is appended.
	for i := range items {
		it := &items[i]
		if !raft.IsEmptySnap(it.rd.Snapshot) {
			if err := w.applySnapshot(it.r, &it.rd.Snapshot); errors.Is(err, ErrSnapshotData) {
				w.haltReplica(it.r, it.rd.Snapshot.Metadata.Index, err)
			} else if err != nil {
				w.h.halt(err)
				return
			}
		}
	}

	// Committed entries that were made durable by earlier rounds (none of
	// this Ready's own entries) are applied now, before the fsync, so their
	// proposers do not wait for it.
	if !w.applyItems(items, true) {
		return
	}

	// One batch, one fsync, for every group of the round.
	b := cfg.Storage.NewBatch()
	write, sync := false, false
	for i := range items {
		r, rd := items[i].r, &items[i].rd
		if r.halted != nil {
			continue
		}
		hs := &rd.HardState
		if raft.IsEmptyHardState(*hs) || (hs.Term == r.term && hs.Vote == r.persistedVote && hs.Commit <= r.persistedCommit) {
			// Empty, or already written: the early apply wrote the
			// HardState covering its entries, which on a leader is this
			// one (the commit index its acks raised).
			hs = nil
		}
		if hs == nil && len(rd.Entries) == 0 {
			continue
		}
		b.Append(r.shard, hs, rd.Entries)
		write = true
		sync = sync || rd.MustSync
	}
	if !write {
		w.finish(items)
		return
	}
	if sync && cfg.SyncLag != nil {
		if lag := cfg.SyncLag(); lag > 0 {
			// Written now, durable (and the round finished) at syncDue.
			if err := b.Commit(false); err != nil {
				w.h.halt(fmt.Errorf("raftmux: persist raft state: %w", err))
				return
			}
			w.syncing = append(w.syncing[:0], items...)
			w.syncDue = cfg.Clock().Add(lag)
			return
		}
	}
	if err := b.Commit(sync); err != nil {
		w.h.halt(fmt.Errorf("raftmux: persist raft state: %w", err))
		return
	}
	w.finish(items)
}

// endSync makes a Manual host's round written under Config.SyncLag durable
// and finishes it.
func (w *worker) endSync() {
	items := w.syncing
	defer func() {
		clear(items)
		w.syncing = items[:0]
	}()
	w.syncing = nil
	if err := w.h.cfg.Storage.NewBatch().Commit(true); err != nil {
		w.h.halt(fmt.Errorf("raftmux: persist raft state: %w", err))
		return
	}
	w.finish(items)
}

// finish runs the rest of a round once its Readies are durable: messages
// that had to wait, applying, Advance.
func (w *worker) finish(items []readyItem) {
	for i := range items {
		r, rd := items[i].r, &items[i].rd
		if r.halted != nil {
			continue
		}
		if !raft.IsEmptyHardState(rd.HardState) {
			r.term = rd.HardState.Term
			r.persistedVote = rd.HardState.Vote
			r.persistedCommit = max(r.persistedCommit, rd.HardState.Commit)
		}
		if !items[i].early {
			for k := range rd.Messages {
				w.route(r, &rd.Messages[k])
			}
			r.hbResps = r.hbResps[:0]
		}
	}
	w.flush()

	// Apply the rest.
	if !w.applyItems(items, false) {
		return
	}

	for i := range items {
		r, rd := items[i].r, &items[i].rd
		if r.halted != nil {
			// Frozen where it stopped: raft never hears that this Ready
			// was handled.
			continue
		}
		r.rn.Advance(*rd)
		if invariants.Enabled {
			r.checkIndexes()
		}
		w.readStates(r, rd.ReadStates)
		w.settle(r, true)
	}
	w.endRound()
}

// settle follows a replica's applied Ready: reads now answerable are
// answered, the log is compacted when compact, and a replica with more to
// do is touched for the next round.
func (w *worker) settle(r *replica, compact bool) {
	w.answerReads(r)
	if compact {
		w.maybeCompact(r)
	}
	if r.rn.HasReady() {
		w.touch(r)
	}
}

// endRound answers the round's waiters and wakes the worker again if any
// replica was touched.
func (w *worker) endRound() {
	w.reply()
	if len(w.touched) > 0 {
		w.notify()
	}
}

// readStates records raft's answers to read requests; they are answered
// once the replica has applied up to their index.
func (w *worker) readStates(r *replica, rss []raft.ReadState) {
	for _, rs := range rss {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		id := binary.LittleEndian.Uint64(rs.RequestCtx)
		if req := r.reads[id]; req != nil {
			delete(r.reads, id)
			r.readWaits = append(r.readWaits, readWait{index: rs.Index, req: req})
		}
	}
}

// answerReads queues the answers of the reads r has applied far enough for.
func (w *worker) answerReads(r *replica) {
	if len(r.readWaits) == 0 {
		return
	}
	n := 0
	for _, rw := range r.readWaits {
		if rw.index <= r.applied {
			w.waiters = append(w.waiters, waiter{req: rw.req, res: result{index: rw.index}})
		} else {
			r.readWaits[n] = rw
			n++
		}
	}
	clear(r.readWaits[n:])
	r.readWaits = r.readWaits[:n]
}

// maybeCompact trims r's log once enough applied entries piled up.
func (w *worker) maybeCompact(r *replica) {
	cfg := &w.h.cfg
	if r.applied <= r.compacted+cfg.CompactionOverhead {
		return
	}
	w.compact(r, r.applied-cfg.CompactionKeep)
}

// compact discards r's log up to and including idx, which is applied.
func (w *worker) compact(r *replica, idx uint64) {
	if err := w.h.cfg.Storage.Compact(r.shard, idx); err != nil {
		w.h.cfg.Logger.Warn("raftmux: compact", "shard", r.shard, "index", idx, "err", err)
		return
	}
	r.compacted = idx
}

// applyItems applies the committed entries of items, in one batch
// (unsynced: the raft log is the durable record). With early, only items
// whose committed entries are all durable already (none is among this
// Ready's entries still to be written); their waiters are answered at once.
func (w *worker) applyItems(items []readyItem, early bool) bool {
	ab := w.h.cfg.Storage.NewBatch()
	any := false
	for i := range items {
		it := &items[i]
		ents := it.rd.CommittedEntries
		if it.applied || len(ents) == 0 || it.r.halted != nil {
			continue
		}
		if early && len(it.rd.Entries) > 0 && ents[len(ents)-1].Index >= it.rd.Entries[0].Index {
			continue
		}
		w.apply(it.r, ents, ab)
		it.applied = true
		any = true
		if r := it.r; early && r.applied > r.persistedCommit {
			// The applied index is written before this Ready's HardState:
			// write a commit index that covers it with it, or a crash in
			// between leaves an applied index above the durable commit
			// index, which raft refuses to start from. The entries up to
			// it are durable already.
			ab.Append(r.shard, &raftpb.HardState{Term: r.term, Vote: r.persistedVote, Commit: r.applied}, nil)
			r.persistedCommit = r.applied
		}
	}
	if !any {
		return true
	}
	if err := ab.Commit(false); err != nil {
		clear(w.seeded)
		w.seeded = w.seeded[:0]
		w.h.halt(fmt.Errorf("raftmux: persist applied state: %w", err))
		return false
	}
	for _, sd := range w.seeded {
		if err := w.h.worker(sd.child).enqueueControl(event{kind: evSeeded, shard: sd.child, ok: sd.campaign}); err != nil {
			break // stopping: the next start opens it from the store
		}
	}
	clear(w.seeded)
	w.seeded = w.seeded[:0]
	if early {
		w.reply()
	}
	return true
}

func (w *worker) reply() {
	for i, wt := range w.waiters {
		wt.req.finish(wt.res)
		w.waiters[i] = waiter{}
	}
	w.waiters = w.waiters[:0]
}

func (w *worker) softState(r *replica, ss *raft.SoftState, term uint64) {
	wasLeader := r.state == raft.StateLeader
	r.state = ss.RaftState
	if !wasLeader && r.state == raft.StateLeader {
		// raft appended its empty entry on becoming leader: the log's end
		// as of this Ready (noteReady ran).
		r.leadIndex = r.tail
	}
	if wasLeader && r.state != raft.StateLeader {
		r.failProposals(fmt.Errorf("%w (%w)", ErrOutcomeUnknown, &NotLeaderError{Shard: r.shard, Leader: ss.Lead, Term: term}))
		w.rerouteReads(r)
	}
	if r.state == raft.StateLeader || r.state == raft.StateCandidate || r.state == raft.StatePreCandidate {
		w.wake(r)
	}
	if ss.Lead != r.lead || (ss.Lead != 0 && term != r.leadTerm) {
		w.leaderChanged(r, ss.Lead, term)
	}
}

// leaderChanged notes that r's group is led by lead (0: none known) at
// term, and tells OnLeaderChange.
func (w *worker) leaderChanged(r *replica, lead, term uint64) {
	r.lead, r.leadTerm = lead, term
	if f := w.h.cfg.OnLeaderChange; f != nil {
		f(LeaderChange{Shard: r.shard, Leader: lead, Term: term})
	}
}

// apply hands committed entries to the state machine (normal entries in
// runs, conf changes to raft), and resolves this host's waiters. An entry
// that cannot be applied halts the replica: the applied index recorded in
// b is then that of the last entry whose effects b holds, below it.
func (w *worker) apply(r *replica, ents []raftpb.Entry, b Batch) {
	self := w.h.cfg.NodeID
	done := ents[0].Index - 1 // the last entry whose effects are in b
	for i := range ents {
		e := &ents[i]
		switch e.Type {
		case raftpb.EntryNormal:
			node, seq, ok := readHeader(e.Data)
			if !ok {
				continue // a new leader's empty entry
			}
			if node != self {
				seq = 0
			}
			w.cmds = append(w.cmds, Command{Index: e.Index, Term: e.Term, Data: e.Data[headerLen:]})
			w.seqs = append(w.seqs, seq)
		case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
			if err := w.applyCmds(r, b); err != nil {
				w.applyFailed(r, b, done, err)
				return
			}
			done = e.Index - 1
			if err := w.applyConf(r, e, b); err != nil {
				w.applyFailed(r, b, done, err)
				return
			}
			done = e.Index
		}
	}
	if err := w.applyCmds(r, b); err != nil {
		w.applyFailed(r, b, done, err)
		return
	}
	last := ents[len(ents)-1].Index
	b.SetApplied(r.shard, last)
	r.applied = last
}

// applyFailed records the applied index of what b holds of r (done) and
// halts r at the entry after it.
func (w *worker) applyFailed(r *replica, b Batch, done uint64, err error) {
	if done > r.applied {
		b.SetApplied(r.shard, done)
		r.applied = done
	}
	w.haltReplica(r, done+1, err)
}

// applyCmds applies the run of commands collected in w.cmds. Their writes
// reach b only if the state machine applied them all; on an error none
// does, the run's proposers get the error, and the caller halts r.
func (w *worker) applyCmds(r *replica, b Batch) error {
	cmds := w.cmds
	if len(cmds) == 0 {
		return nil
	}
	st := &w.staged
	st.Batch, st.w, st.r = b, w, r
	err := w.h.cfg.StateMachine.Apply(r.shard, cmds, st)
	if err != nil {
		err = fmt.Errorf("raftmux: shard %d: apply entries %d-%d: %w", r.shard, cmds[0].Index, cmds[len(cmds)-1].Index, err)
		st.reset()
	} else {
		st.commit()
	}
	for i, seq := range w.seqs {
		if seq == 0 {
			continue
		}
		if req := r.proposals[seq]; req != nil {
			delete(r.proposals, seq)
			res := result{val: cmds[i].Result, index: cmds[i].Index}
			if err != nil {
				res = result{err: err}
			}
			w.waiters = append(w.waiters, waiter{req: req, res: res})
		}
	}
	clear(cmds)
	w.cmds = cmds[:0]
	w.seqs = w.seqs[:0]
	return err
}

// applyConf applies a committed configuration change. One that does not
// decode, or that raft refuses, cannot be skipped without this replica's
// configuration diverging from its group's: the error halts it.
func (w *worker) applyConf(r *replica, e *raftpb.Entry, b Batch) error {
	var cc raftpb.ConfChangeI
	var ctx []byte
	if e.Type == raftpb.EntryConfChange {
		var c raftpb.ConfChange
		if err := c.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("raftmux: shard %d: undecodable conf change at %d: %w", r.shard, e.Index, err)
		}
		cc, ctx = &c, c.Context
	} else {
		var c raftpb.ConfChangeV2
		if err := c.Unmarshal(e.Data); err != nil {
			return fmt.Errorf("raftmux: shard %d: undecodable conf change at %d: %w", r.shard, e.Index, err)
		}
		cc, ctx = &c, c.Context
	}
	cs, err := applyConfChange(r, cc)
	if err != nil {
		return fmt.Errorf("raftmux: shard %d: conf change at %d: %w", r.shard, e.Index, err)
	}
	r.confState = cs
	w.confChanged(r)
	b.SetConfState(r.shard, cs)
	if node, seq, ok := readHeader(ctx); ok && node == w.h.cfg.NodeID {
		if req := r.proposals[seq]; req != nil {
			delete(r.proposals, seq)
			r.ccPending = false
			w.waiters = append(w.waiters, waiter{req: req, res: result{val: cs, index: e.Index}})
		}
	}
	switch member := isMember(cs, w.h.cfg.NodeID); {
	case member:
		r.removed = false
	case !r.removed:
		r.removed, r.removedTick = true, w.tickCount
		// Stay awake, so that tick sees the grace period end.
		w.wake(r)
	}
	return nil
}

// drop destroys a replica on the caller's word that its group no longer
// counts it (DropReplica).
func (w *worker) drop(shard uint64) error {
	r, err := w.hosted(shard)
	if err != nil {
		return err
	}
	if r.state == raft.StateLeader {
		return ErrLeads
	}
	r.failAll(ErrRemoved)
	w.destroy(r)
	return nil
}

// destroy drops a replica removed from its group, with its data.
func (w *worker) destroy(r *replica) {
	r.destroyed = true
	w.confChanged(r)
	r.failAll(ErrRemoved)
	w.dropInSnap(r)
	w.releaseSnapData(r)
	delete(w.replicas, r.shard)
	w.orderStale = true
	delete(w.awake, r.shard)
	// Stale members may still talk to us about this shard; do not let them
	// recreate it for a while. Later, a leader that adds this node back
	// again creates it afresh, as a new learner, from the durable
	// tombstone: the term and vote this replica held, and the index below
	// which it takes no snapshot.
	w.tombstones[r.shard] = w.tickCount
	hs := r.rn.BasicStatus().HardState
	tomb := Tombstone{Term: hs.Term, Vote: hs.Vote, Applied: max(r.applied, r.tombApplied)}
	if err := w.h.cfg.Storage.DeleteShard(r.shard, tomb); err != nil {
		w.h.cfg.Logger.Error("raftmux: delete removed shard", "shard", r.shard, "err", err)
	}
	w.h.cfg.StateMachine.Remove(r.shard)
}

// ErrSnapshotData: raft handed a replica a snapshot to install whose data
// the replica does not hold. Installing an empty state in its place would
// wipe the replica's data while raft believes it has the group's; the
// replica halts instead.
var ErrSnapshotData = errors.New("raftmux: snapshot without its data")

func (w *worker) applySnapshot(r *replica, snap *raftpb.Snapshot) error {
	idx := snap.Metadata.Index
	buf, ok := r.takeSnap(idx)
	w.releaseSnapData(r)
	if !ok {
		return fmt.Errorf("raftmux: shard %d: snapshot %d: %w", r.shard, idx, ErrSnapshotData)
	}
	w.h.releaseSnap(len(buf))
	data := bytes.NewReader(buf)
	if err := w.h.cfg.Storage.ApplySnapshot(r.shard, snap, data); err != nil {
		return fmt.Errorf("raftmux: shard %d: apply snapshot %d: %w", r.shard, idx, err)
	}
	if err := w.h.cfg.StateMachine.Restore(r.shard, idx); err != nil {
		return fmt.Errorf("raftmux: shard %d: restore snapshot %d: %w", r.shard, idx, err)
	}
	r.applied = idx
	r.compacted = idx
	if eo, ok := w.h.cfg.StateMachine.(EndObserver); ok {
		r.ended = eo.Ended(r.shard) // a snapshot taken past the split
	}
	cs := snap.Metadata.ConfState
	r.confState = &cs
	w.confChanged(r)
	return nil
}

func hasConfChange(ents []raftpb.Entry) bool {
	for i := range ents {
		if t := ents[i].Type; t == raftpb.EntryConfChange || t == raftpb.EntryConfChangeV2 {
			return true
		}
	}
	return false
}
