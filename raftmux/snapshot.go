package raftmux

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/internal/histogram"
)

// sendSnapshot streams the shard's state to m's target in chunks, on its own
// goroutine, at most MaxConcurrentSnapshots at a time per host; raft retries
// a snapshot refused for lack of a slot.
func (w *worker) sendSnapshot(r *replica, m *raftpb.Message) {
	to := m.To
	select {
	case w.h.snapSem <- struct{}{}:
	default:
		r.rn.ReportSnapshot(to, raft.SnapshotFailure)
		return
	}
	w.snapID++
	id := uint64(w.idx)<<48 | w.snapID
	w.h.wg.Add(1)
	if w.h.cfg.Manual {
		// No goroutine runs beside the caller's: the whole stream goes
		// out now, and its end is handled at the next round.
		w.h.streamSnapshot(r.shard, to, id, m)
		return
	}
	go w.h.streamSnapshot(r.shard, to, id, m)
}

func (h *Host) streamSnapshot(shard, to, id uint64, m *raftpb.Message) {
	defer h.wg.Done()
	start := time.Now()
	err := h.streamSnapshotData(shard, to, id, m)
	if err == nil {
		h.snapSend.Since(start)
	}
	<-h.snapSem
	if err != nil {
		h.cfg.Logger.Warn("raftmux: snapshot send failed", "shard", shard, "to", to, "err", err)
	}
	_ = h.worker(shard).enqueueControl(event{kind: evSnapDone, shard: shard, from: to, ok: err == nil})
}

var errSnapshotStale = errors.New("raftmux: stored snapshot older than requested")

func (h *Host) streamSnapshotData(shard, to, id uint64, m *raftpb.Message) error {
	meta, rc, err := h.cfg.Storage.SnapshotData(shard)
	if err != nil {
		return err
	}
	defer rc.Close()
	if meta.Index < m.Snapshot.Metadata.Index {
		return errSnapshotStale
	}
	// The data is at the shard's applied index, which may be past the index
	// raft picked; announce that one so the follower resumes from it.
	cp := *m
	msg := &cp
	msg.Snapshot = &raftpb.Snapshot{Metadata: *meta}
	buf := make([]byte, h.cfg.SnapshotChunkSize)
	var zbuf []byte
	for seq := uint32(0); ; seq++ {
		select {
		case <-h.stopc:
			return ErrStopped
		default:
		}
		n, err := io.ReadFull(rc, buf)
		last := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !last {
			return err
		}
		zbuf = h.zenc.EncodeAll(buf[:n], zbuf[:0])
		c := &SnapshotChunk{Shard: shard, ID: id, Seq: seq, Last: last, Codec: CodecZstd, Data: zbuf}
		if seq == 0 {
			c.Msg = msg
		}
		if err := h.cfg.Transport.SendSnapshotChunk(to, c); err != nil {
			return err
		}
		if last {
			return nil
		}
	}
}

// Incoming snapshots are bounded three ways: a stream is accepted only
// for a replica this host has, or would create for the sender (see
// replicaFor), from a sender admit takes, with a MsgSnap raft can restore;
// one snapshot holds at most Config.MaxSnapshotBytes; and all the streams
// of the host together, with the assembled snapshots waiting for raft's
// Ready, hold at most Config.MaxSnapshotBufferBytes. A stream that stops
// sending chunks is dropped after Config.SnapshotIdleTicks. The data of a
// complete snapshot is checked (Storage's CheckSnapshot, when it has one)
// before raft is stepped with it: raft installs a snapshot before its data
// is written, and one whose data then fails to install could only halt the
// replica.

// SnapshotChecker is implemented by a Storage that can tell, before a
// snapshot is stepped into raft, whether ApplySnapshot would take its data
// (the stream decodes, its checksum holds and it is at meta's index and
// term). Without it, data is checked only when installed.
type SnapshotChecker interface {
	CheckSnapshot(shard uint64, meta *raftpb.SnapshotMetadata, data []byte) error
}

// handleChunk assembles an incoming snapshot; once complete and checked,
// raft gets the MsgSnap and the data waits for the Ready that installs it.
func (w *worker) handleChunk(from uint64, c *SnapshotChunk) {
	if c == nil {
		return
	}
	h := w.h
	r := w.replicas[c.Shard]
	if c.Seq == 0 {
		if err := checkSnapMessage(from, h.cfg.NodeID, c.Msg); err != nil {
			w.refuseChunk(r, c, from, err)
			return
		}
		if r = w.replicaFor(c.Shard, from, raftpb.MsgSnap); r == nil {
			return
		}
		if !w.admit(r, from, raftpb.MsgSnap, c.Msg.Term) {
			return
		}
		if idx := c.Msg.Snapshot.Metadata.Index; idx <= r.tombApplied {
			// Only a stale member of the group this host's replica left
			// can hold so old a state for it.
			w.refuseChunk(r, c, from, fmt.Errorf("%w: snapshot at %d, a replica here had applied %d", ErrBadChunk, idx, r.tombApplied))
			return
		}
	} else if r == nil || r.halted != nil {
		// Only a stream's first chunk may create a replica.
		h.refuse(refuseUnplaced, c.Shard, from, raftpb.MsgSnap)
		return
	}
	data := c.Data
	switch c.Codec {
	case CodecNone:
	case CodecZstd:
		var err error
		if data, err = h.zdec.DecodeAll(c.Data, nil); err != nil {
			w.refuseChunk(r, c, from, errors.Join(ErrBadChunk, err))
			return
		}
	default:
		w.refuseChunk(r, c, from, ErrBadChunk)
		return
	}
	if len(data) > 2*h.cfg.SnapshotChunkSize {
		w.refuseChunk(r, c, from, fmt.Errorf("%w: chunk of %d bytes", ErrBadChunk, len(data)))
		return
	}
	if c.Seq == 0 {
		w.dropInSnap(r)
		r.inSnap = &inSnapshot{id: c.ID, from: from, msg: c.Msg, started: time.Now()}
		w.receiving[r] = struct{}{}
	}
	in := r.inSnap
	if in == nil || in.id != c.ID || in.from != from || in.next != c.Seq {
		w.refuseChunk(r, c, from, fmt.Errorf("%w: chunk out of sequence", ErrBadChunk))
		return
	}
	if len(in.buf)+len(data) > h.cfg.MaxSnapshotBytes {
		w.refuseChunk(r, c, from, fmt.Errorf("%w: snapshot over %d bytes", ErrBadChunk, h.cfg.MaxSnapshotBytes))
		return
	}
	if !h.reserveSnap(len(data)) {
		w.refuseChunk(r, c, from, fmt.Errorf("%w: incoming snapshots hold %d bytes", ErrBadChunk, h.cfg.MaxSnapshotBufferBytes))
		return
	}
	if in.buf == nil {
		in.buf = make([]byte, 0, len(data))
	}
	in.buf = append(in.buf, data...)
	in.next++
	in.lastTick = w.tickCount
	if !c.Last {
		return
	}
	r.inSnap = nil
	delete(w.receiving, r)
	meta := &in.msg.Snapshot.Metadata
	if chk, ok := h.cfg.Storage.(SnapshotChecker); ok {
		if err := chk.CheckSnapshot(r.shard, meta, in.buf); err != nil {
			h.releaseSnap(len(in.buf))
			w.refuseChunk(r, c, from, err)
			return
		}
	}
	h.snapRecv.Since(in.started)
	if old, ok := r.takeSnap(meta.Index); ok { // a copy of this one
		h.releaseSnap(len(old))
	}
	r.snaps = append(r.snaps, heldSnap{idx: meta.Index, data: in.buf})
	w.wake(r)
	_ = r.rn.Step(*in.msg)
	w.touch(r)
}

// refuseChunk drops r's stream in progress (r may be nil) and counts the
// refusal.
func (w *worker) refuseChunk(r *replica, c *SnapshotChunk, from uint64, err error) {
	if r != nil && r.inSnap != nil && r.inSnap.id == c.ID && r.inSnap.from == from {
		w.dropInSnap(r)
	}
	w.h.counters.refused[refuseSnapshot].Add(1)
	if w.h.debug {
		w.h.cfg.Logger.Debug("raftmux: refused snapshot chunk", "shard", c.Shard, "from", from, "stream", c.ID, "seq", c.Seq, "err", err)
	}
}

// dropInSnap abandons r's incoming stream, if any, and frees its buffer.
func (w *worker) dropInSnap(r *replica) {
	if in := r.inSnap; in != nil {
		w.h.releaseSnap(len(in.buf))
		r.inSnap = nil
	}
	delete(w.receiving, r)
}

// heldSnap is a snapshot fully received, awaiting raft's Ready.
type heldSnap struct {
	idx  uint64
	data []byte
}

// releaseSnapData frees every snapshot r holds for raft's Ready.
func (w *worker) releaseSnapData(r *replica) {
	for _, s := range r.snaps {
		w.h.releaseSnap(len(s.data))
	}
	r.snaps = nil
}

// releaseSnapsBut frees the snapshots r holds for raft's Ready, but the
// one at index keep (0: none).
func (w *worker) releaseSnapsBut(r *replica, keep uint64) {
	kept := r.snaps[:0]
	for _, s := range r.snaps {
		if s.idx == keep {
			kept = append(kept, s)
			continue
		}
		w.h.releaseSnap(len(s.data))
	}
	clear(r.snaps[len(kept):])
	if r.snaps = kept; len(kept) == 0 {
		r.snaps = nil
	}
}

// takeSnap removes and returns the data r holds for the snapshot at idx.
func (r *replica) takeSnap(idx uint64) ([]byte, bool) {
	for i, s := range r.snaps {
		if s.idx == idx {
			r.snaps = append(r.snaps[:i], r.snaps[i+1:]...)
			return s.data, true
		}
	}
	return nil, false
}

// expireSnapshots drops the incoming streams that received no chunk for
// Config.SnapshotIdleTicks (their sender gave up or died), so that their
// buffers do not hold the host's budget.
func (w *worker) expireSnapshots() {
	idle := uint64(w.h.cfg.SnapshotIdleTicks)
	rs := make([]*replica, 0, len(w.receiving))
	for r := range w.receiving {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b *replica) int { return cmp.Compare(a.shard, b.shard) })
	for _, r := range rs {
		if in := r.inSnap; in == nil || w.tickCount-in.lastTick >= idle {
			w.dropInSnap(r)
		}
	}
}

// reserveSnap takes n bytes of the host's incoming snapshot budget.
func (h *Host) reserveSnap(n int) bool {
	limit := int64(h.cfg.MaxSnapshotBufferBytes)
	for {
		cur := h.snapBuffered.Load()
		if cur+int64(n) > limit {
			return false
		}
		if h.snapBuffered.CompareAndSwap(cur, cur+int64(n)) {
			return true
		}
	}
}

func (h *Host) releaseSnap(n int) { h.snapBuffered.Add(-int64(n)) }

// SnapshotLatencies are the histograms of the snapshots this host streamed
// to peers (first chunk to the end of the stream) and took in (first chunk
// to the last one, checked). The times are the wall clock's, also for a
// manual host: they are read by metrics only.
func (h *Host) SnapshotLatencies() (send, receive *histogram.Histogram) {
	return &h.snapSend, &h.snapRecv
}
