package raftmux

import (
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// A replica halts when it cannot go on without diverging from its group:
// the state machine failed to apply a committed entry, a committed
// configuration change does not decode or apply, or raft handed it a
// snapshot whose data it does not have. Applying past the entry, or
// installing an empty state, would leave this replica answering from a
// state its peers do not have. A halted replica is frozen where it stopped:
// it steps nothing, persists nothing more, answers every request with a
// *HaltedError, and its durable applied index stays below the entry it
// could not apply (the apply batch that would have recorded it is not
// written). Its peers go on without it. The other replicas of the host are
// not affected; restarting the host reopens the replica from storage and
// retries the entry.

// ErrHalted: the replica stopped at an entry it could not apply; errors.As
// a *HaltedError for where and why.
var ErrHalted = errors.New("raftmux: replica halted")

// HaltedError describes a halted replica: Index is the entry it could not
// get past (its applied index is below it), Err the cause.
type HaltedError struct {
	Shard uint64
	Index uint64
	Err   error
}

func (e *HaltedError) Error() string {
	return fmt.Sprintf("raftmux: shard %d halted at index %d: %v", e.Shard, e.Index, e.Err)
}

// Is makes errors.Is(err, ErrHalted) true.
func (e *HaltedError) Is(target error) bool { return target == ErrHalted }

// Unwrap returns the cause.
func (e *HaltedError) Unwrap() error { return e.Err }

// Halted lists the host's halted replicas, by shard.
func (h *Host) Halted() []HaltedError {
	h.haltMu.Lock()
	out := make([]HaltedError, 0, len(h.halted))
	for _, e := range h.halted {
		out = append(out, *e)
	}
	h.haltMu.Unlock()
	slices.SortFunc(out, func(a, b HaltedError) int {
		switch {
		case a.Shard < b.Shard:
			return -1
		case a.Shard > b.Shard:
			return 1
		}
		return 0
	})
	return out
}

// haltReplica freezes r at index (the entry it could not get past) with
// one error line, fails its waiters, and lists it in Host.Halted.
func (w *worker) haltReplica(r *replica, index uint64, cause error) {
	if r.halted != nil {
		return
	}
	he := &HaltedError{Shard: r.shard, Index: index, Err: cause}
	r.halted = he
	w.h.cfg.Logger.Error("raftmux: replica halted", "shard", r.shard, "index", index, "applied", r.applied, "err", cause)
	w.h.haltMu.Lock()
	w.h.halted[r.shard] = he
	w.h.haltMu.Unlock()
	// The state machine stops serving the shard before anyone hears of
	// the halt.
	if o, ok := w.h.cfg.StateMachine.(HaltObserver); ok {
		o.Halted(r.shard)
	}
	r.failAll(he)
	w.dropInSnap(r)
	w.releaseSnapData(r)
	delete(w.awake, r.shard)
	r.quiesced = true
}

// staging holds the state machine's writes of one Apply call until it
// returns: they reach the round's shared batch only if it succeeded, so a
// failed Apply leaves nothing of its commands in the batch (a storage
// batch cannot take writes back). The buffers are reused across calls.
type staging struct {
	Batch // the round's batch; Append, SetConfState and SetApplied go straight to it
	ops   []stagedOp
	buf   []byte
	// w and r: the worker and the replica whose commands are applying;
	// seeds the shards their Apply seeded (SeedChild), written with the
	// rest at commit.
	w     *worker
	r     *replica
	seeds []seed
	// ends: the Apply split r's shard (SeedChild was called): r ends at
	// commit.
	ends bool
}

// seed is a shard born of an entry of r's (a split): its start and the
// configuration it inherits. campaign: this replica led when it applied
// the entry, so the child campaigns here at once.
type seed struct {
	child, index, term uint64
	cs                 raftpb.ConfState
	campaign           bool
}

// Splitter is what the batch a StateMachine's Apply is handed offers a
// command that splits the shard. SeedChild starts shard child on this host
// from the entry at (index, term) being applied: with the parent's
// configuration (its voters and learners), its log empty from that entry
// on, its applied index there, and the data the same Apply writes for it
// (Put). It reports false, and the caller writes nothing for the child,
// when this replica is not in the configuration or the child is already
// here (it has state or a tombstone: a replica of it was made otherwise,
// which its leader fills). A parent in a joint configuration cannot split
// (ErrSplitJoint): every replica refuses the same entry alike. Once the
// round's writes are committed, the child's replica opens on its worker;
// where the parent's replica led, it campaigns at once.
//
// A host whose groups split must not create a child's replica from a
// message while it hosts the parent (Config.AcceptReplica): the parent's
// apply makes it.
type Splitter interface {
	SeedChild(child, index, term uint64) (bool, error)
}

// ErrSplitJoint: a split entry applied while the parent's configuration
// was joint.
var ErrSplitJoint = errors.New("raftmux: split in a joint configuration")

// SeedChild implements Splitter.
func (s *staging) SeedChild(child, index, term uint64) (bool, error) {
	r, cfg := s.r, &s.w.h.cfg
	if child == r.shard {
		return false, fmt.Errorf("%w: shard %d seeds itself", ErrInvalid, child)
	}
	if len(r.confState.VotersOutgoing) > 0 {
		return false, fmt.Errorf("raftmux: shard %d splits at %d: %w", r.shard, index, ErrSplitJoint)
	}
	s.ends = true
	if !isMember(r.confState, cfg.NodeID) {
		return false, nil
	}
	for _, sd := range s.seeds {
		if sd.child == child {
			return false, fmt.Errorf("%w: shard %d seeded twice", ErrInvalid, child)
		}
	}
	if _, ok, err := cfg.Storage.Tombstone(child); err != nil || ok {
		return false, err
	}
	if applied, err := cfg.Storage.Applied(child); err != nil || applied != 0 {
		return false, err
	}
	rs, err := cfg.Storage.Storage(child)
	if err != nil {
		return false, err
	}
	if last, err := rs.LastIndex(); err != nil || last != 0 {
		return false, err
	}
	cs := raftpb.ConfState{Voters: slices.Clone(r.confState.Voters), Learners: slices.Clone(r.confState.Learners)}
	s.seeds = append(s.seeds, seed{child: child, index: index, term: term, cs: cs, campaign: r.state == raft.StateLeader})
	return true, nil
}

type stagedOp struct {
	shard     uint64
	k, v, end int // key buf[k:v], value buf[v:end]
	del       bool
}

// maxStagingRetain: staging buffers that grew past this (a large apply)
// are let go after the call.
const maxStagingRetain = 1 << 20

// Put implements Batch: the write is held until commit.
func (s *staging) Put(shard uint64, key, value []byte) {
	k := len(s.buf)
	s.buf = append(append(s.buf, key...), value...)
	s.ops = append(s.ops, stagedOp{shard: shard, k: k, v: k + len(key), end: len(s.buf)})
}

// Delete implements Batch: the deletion is held until commit.
func (s *staging) Delete(shard uint64, key []byte) {
	k := len(s.buf)
	s.buf = append(s.buf, key...)
	s.ops = append(s.ops, stagedOp{shard: shard, k: k, v: len(s.buf), end: len(s.buf), del: true})
}

// commit hands the held writes to the round's batch, in order.
func (s *staging) commit() {
	for i := range s.seeds {
		sd := &s.seeds[i]
		s.Batch.Seed(sd.child, sd.index, sd.term, &sd.cs)
	}
	s.w.seeded = append(s.w.seeded, s.seeds...)
	if s.ends {
		s.r.ended = true
	}
	for _, op := range s.ops {
		if op.del {
			s.Batch.Delete(op.shard, s.buf[op.k:op.v])
		} else {
			s.Batch.Put(op.shard, s.buf[op.k:op.v], s.buf[op.v:op.end])
		}
	}
	s.reset()
}

// reset drops the held writes.
func (s *staging) reset() {
	s.ops = s.ops[:0]
	if cap(s.buf) > maxStagingRetain {
		s.buf = nil
	} else {
		s.buf = s.buf[:0]
	}
	s.Batch = nil
	clear(s.seeds)
	s.seeds = s.seeds[:0]
	s.w, s.r, s.ends = nil, nil, false
}

// applyConfChange applies cc to r's RawNode. raft panics on a change that
// its configuration cannot take (it computes the new configuration before
// touching any state, so nothing has changed when it does); that is turned
// into an error, on which the replica halts.
func applyConfChange(r *replica, cc raftpb.ConfChangeI) (cs *raftpb.ConfState, err error) {
	defer func() {
		if p := recover(); p != nil {
			cs, err = nil, fmt.Errorf("raftmux: configuration change refused by raft: %v", p)
		}
	}()
	return r.rn.ApplyConfChange(cc), nil
}
