package raftmux

import (
	"errors"
	"io"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
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
	go w.h.streamSnapshot(r.shard, to, id, m)
}

func (h *Host) streamSnapshot(shard, to, id uint64, m *raftpb.Message) {
	defer h.wg.Done()
	err := h.streamSnapshotData(shard, to, id, m)
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

// handleChunk assembles an incoming snapshot; once complete, raft gets the
// MsgSnap and the data waits for the Ready that installs it.
func (w *worker) handleChunk(from uint64, c *SnapshotChunk) {
	if c == nil {
		return
	}
	r := w.replicaFor(c.Shard, raftpb.MsgSnap)
	if r == nil {
		return
	}
	data := c.Data
	switch c.Codec {
	case CodecNone:
	case CodecZstd:
		var err error
		if data, err = w.h.zdec.DecodeAll(c.Data, nil); err != nil || len(data) > 2*w.h.cfg.SnapshotChunkSize {
			w.h.cfg.Logger.Warn("raftmux: bad snapshot chunk", "shard", c.Shard, "from", from, "err", errors.Join(ErrBadChunk, err))
			r.inSnap = nil
			return
		}
	default:
		r.inSnap = nil
		return
	}
	if c.Seq == 0 {
		m := c.Msg
		if m == nil || m.Type != raftpb.MsgSnap || m.From != from ||
			m.To != w.h.cfg.NodeID || m.Snapshot == nil {
			return
		}
		r.inSnap = &inSnapshot{id: c.ID, from: from, next: 1, msg: m, buf: append(make([]byte, 0, len(data)), data...)}
	} else {
		in := r.inSnap
		if in == nil || in.id != c.ID || in.from != from || in.next != c.Seq {
			r.inSnap = nil
			return
		}
		if len(in.buf)+len(data) > w.h.cfg.MaxSnapshotBytes {
			w.h.cfg.Logger.Warn("raftmux: incoming snapshot too large", "shard", c.Shard, "from", from)
			r.inSnap = nil
			return
		}
		in.buf = append(in.buf, data...)
		in.next++
	}
	if !c.Last {
		return
	}
	in := r.inSnap
	r.inSnap = nil
	r.snapData = in.buf
	r.snapDataIdx = in.msg.Snapshot.Metadata.Index
	w.wake(r)
	_ = r.rn.Step(*in.msg)
	w.touch(r)
}
