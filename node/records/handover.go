package records

import (
	"bytes"
	"context"
	"errors"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// The previous owner's side of a handoff (pull.go has the new owner's),
// and the end of a revoked topic's records.

// AnswerPull answers a new owner's RecordsPull m, request reqID, on c with
// a chunk of this node's log of the topic, once this node no longer holds
// the topic below the asker's epoch and its produces in flight left the
// gate; before, with HandoffNotClosed. A pull that cannot be answered now
// (the store failed) is not answered: the asker asks again. m's bytes are
// not kept.
func (k *Keeper) AnswerPull(c Conn, reqID uint64, m *wire.RecordsPull) {
	if m.Epoch == 0 {
		return
	}
	if hook := k.cfg.AnswerPull; hook != nil && !hook(string(m.Topic)) {
		return
	}
	if t, ok := k.lease.Holding(m.Topic); ok && t.Epoch < m.Epoch && !k.ended(m.Topic, t.Epoch) {
		sendChunk(c, reqID, &wire.RecordsChunk{Topic: m.Topic, Status: wire.HandoffNotClosed})
		return
	}
	// The log is read once the produces in flight have answered; the
	// frame's bytes may be reused by then.
	topic, from, epoch := bytes.Clone(m.Topic), m.From, m.Epoch
	maxBytes := int(min(m.MaxBytes, MaxChunkBytes))
	k.ho.gate(topic).await(func() {
		res := wire.RecordsChunk{Topic: topic}
		next, err := k.store.ReadRecords(topic, from, max(maxBytes, 1), func(off, epoch uint64, v []byte) bool {
			res.Records = append(res.Records, wire.Record{Offset: off, Epoch: epoch, Value: append([]byte(nil), v...)})
			return len(res.Records) < wire.MaxRecordsPerProduce
		})
		hw, herr := k.store.HighWatermark(topic)
		switch {
		case errors.Is(err, shardstore.ErrOffsetOutOfRange) && herr == nil && from > hw:
			res.Next, res.End = from, hw // nothing beyond what the asker has
		case err != nil || herr != nil:
			return // the asker asks again
		default:
			res.Next, res.End = next, max(hw, next)
		}
		if res.Next >= res.End {
			// The last chunk: the topic's producer sessions go with it.
			ps, err := k.store.Producers(topic)
			if err != nil {
				return // the asker asks again
			}
			res.Producers = ps
			k.handedOver(string(topic), epoch)
		}
		sendChunk(c, reqID, &res)
	})
}

func sendChunk(c Conn, reqID uint64, res *wire.RecordsChunk) {
	f, start := wire.BeginFrame(nil, wire.KindRecordsChunk, reqID)
	f = wire.AppendRecordsChunk(f, res)
	if f, err := wire.EndFrame(f, start); err == nil {
		_ = c.Write(f)
	}
}

// ended reports whether this node's hold of topic at epoch, which a new
// owner at a higher epoch asks it to hand over, is over as surely as a
// Close would end it: it gave up every topic (it is leaving), or no
// unexpired lease covers the topic at epoch. A lease that ran out is never
// renewed for that epoch: the asker's OpenTopic left its leader only after
// the move was applied and every grant that could cover the epoch ran out
// (the fences), and no leader grants it again once the move is applied.
// So an owner cut off from its leader (whose Close cannot reach it) hands
// its records over as soon as its lease has lapsed, instead of keeping
// the new owner waiting for the Close until the cut heals.
func (k *Keeper) ended(topic []byte, epoch uint64) bool {
	_, r := k.lease.Serve(topic, epoch)
	return r == ownership.Released || r == ownership.NoLease
}

// ExpectHandoffs notes the topics a leaving node held, at their epochs,
// before anyone can learn that it released them: a new owner may pull a
// topic's records at once, and a pull answered before the leaving node
// waits must count too.
func (k *Keeper) ExpectHandoffs(held map[string]uint64) {
	if len(held) == 0 {
		return
	}
	h := &k.ho
	h.mu.Lock()
	h.leaving = held
	h.left = make(chan struct{})
	h.mu.Unlock()
}

// AwaitHandoffs is the leaving node's wait for the new owners of the
// topics ExpectHandoffs noted to pull their records, bounded by ctx and
// Config.HandoffTimeout.
func (k *Keeper) AwaitHandoffs(ctx context.Context) {
	h := &k.ho
	h.mu.Lock()
	left := h.left
	h.mu.Unlock()
	if left == nil {
		return
	}
	timeout := make(chan struct{})
	stop := k.env.After(k.cfg.HandoffTimeout, func() { close(timeout) })
	defer stop()
	select {
	case <-left:
	case <-timeout:
		h.mu.Lock()
		waiting := len(h.leaving)
		h.mu.Unlock()
		k.cfg.Logger.Warn("records: left before every topic's records were pulled", "topics", waiting)
	case <-ctx.Done():
	}
}

// handedOver notes that a new owner at epoch pulled topic's records to the
// end.
func (k *Keeper) handedOver(topic string, epoch uint64) {
	h := &k.ho
	h.mu.Lock()
	defer h.mu.Unlock()
	if e, ok := h.leaving[topic]; !ok || e >= epoch {
		return
	}
	delete(h.leaving, topic)
	if len(h.leaving) == 0 {
		close(h.left)
	}
}

// DeleteRevoked deletes the records of topic, revoked at epoch, once the
// produces that entered its gate before have answered (those after found
// the topic given up); done, called once then, is told whether nothing of
// them is left to delete. topic's bytes must stay unchanged until then.
//
// A topic this node holds anew, above epoch, keeps its records, as a
// close that came after the open keeps them. One it does not hold loses
// the records of epochs up to the revoked one only: those of a later
// epoch, which it wrote or copied before this close, late or sent again,
// reached it, stay (each epoch's records lie below the next epoch's
// OffsetBase).
func (k *Keeper) DeleteRevoked(topic []byte, epoch uint64, done func(deleted bool)) {
	k.ho.gate(topic).await(func() {
		done(k.deleteRevoked(topic, epoch))
	})
}

func (k *Keeper) deleteRevoked(topic []byte, epoch uint64) bool {
	ok := true
	k.lease.HoldingLocked(topic, func(held ownership.Topic, isHeld bool) {
		if isHeld && held.Epoch > epoch {
			return // held anew: kept
		}
		bound, berr := OffsetBase(epoch + 1)
		hw, herr := k.store.HighWatermark(topic)
		var err error
		if berr == nil && herr == nil && hw > bound {
			err = k.store.DeleteRecordsBelow(topic, bound)
		} else {
			err = k.store.DeleteTopic(topic)
		}
		if err != nil {
			k.cfg.Logger.Error("records: delete the records of a revoked topic", "topic", topic, "err", err)
			ok = false
			return
		}
		k.stats.topicsDeleted.Add(1)
	})
	return ok
}
