package records

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// Produce and fetch are served by the topic's owner at the named epoch,
// under a lease that covers it: checked before the work, to refuse early,
// and again after it, before the answer, so that a node paused or cut off
// in between answers nothing its lease no longer covers. A produce refused
// after its append removes its records again: nothing unacknowledged
// stays behind to be fetched later.
//
// A produce is two pieces of work: the first check and the append, then
// (Env.Resume) the second check and the answer. A pause or a crash may
// come between them, on a driven node as on a started one.
//
// A produce that names a producer session (wire.Produce.Session) is
// appended once: a retry of one appended before, here or at an earlier
// owner whose records this node pulled, gets the first answer (its epoch
// and offset) and appends nothing; one whose answer is no longer kept is
// refused with ErrSessionExpired (shardstore/producers.go says when, and
// what the bounds cannot tell apart). Two copies of one such produce take
// turns (onceLocks) from the append to the answer: the second sees the
// first's answer, or, if the first was refused and removed, appends.

// Produce appends m's records to its topic and hands done the ack, or why
// not: a *NotServedError, or a refusal wrapping ErrHandingOver,
// ErrSessionExpired, ErrBadRequest or ErrInternal. done may run after
// Produce returns, on another piece of work; m must stay unchanged until
// then.
func (k *Keeper) Produce(m *wire.Produce, done func(wire.ProduceAck, error)) {
	// A pull of this topic's records, or the deletion of a revoked
	// topic's, waits at the gate for the produces inside: none appends
	// after the log was read for a new owner.
	leave := k.ho.gate(m.Topic).enter(k.env.Spawn)
	finish := func(ack wire.ProduceAck, err error) {
		leave()
		done(ack, err)
	}
	if err := k.serve(m.Topic, m.Epoch); err != nil {
		finish(wire.ProduceAck{}, err)
		return
	}
	if k.ho.pending(m.Topic) {
		finish(wire.ProduceAck{}, handingOver(m.Topic))
		return
	}
	base, err := OffsetBase(m.Epoch)
	if err != nil {
		finish(wire.ProduceAck{}, refuse(ErrInternal, err))
		return
	}
	if m.Session.IsZero() {
		off, err := k.store.AppendRecords(m.Topic, m.Epoch, base, m.Records, true)
		k.appended(m, off, err, finish)
		return
	}
	k.turns.lock(m.Topic, m.Session, k.env.Spawn, func(unlock func()) {
		finish := func(ack wire.ProduceAck, err error) {
			unlock()
			finish(ack, err)
		}
		a, dup, err := k.store.AppendRecordsOnce(m.Topic, m.Epoch, base, m.Records, m.Session, true)
		if err == nil && dup {
			k.env.Resume(func() {
				if err := k.serve(m.Topic, m.Epoch); err != nil {
					finish(wire.ProduceAck{}, err)
					return
				}
				finish(wire.ProduceAck{Topic: m.Topic, Epoch: a.Epoch, Offset: a.Offset}, nil)
			})
			return
		}
		k.appended(m, a.Offset, err, finish)
	})
}

// appended ends produce m, whose append at offset off returned err: the
// second lease check and the answer, in a piece of work of their own.
func (k *Keeper) appended(m *wire.Produce, off uint64, err error, done func(wire.ProduceAck, error)) {
	switch {
	case errors.Is(err, shardstore.ErrProducerExpired):
		done(wire.ProduceAck{}, &refusal{
			msg: fmt.Sprintf("producer session expired: produce %d of session %x to %q may have been appended, and is not appended again",
				m.Session.Seq, m.Session.ID, m.Topic),
			errs: []error{ErrSessionExpired, err}})
		return
	case errors.Is(err, shardstore.ErrInvalid) && !m.Session.IsZero():
		done(wire.ProduceAck{}, refuse(ErrBadRequest, err))
		return
	case err != nil:
		done(wire.ProduceAck{}, refuse(ErrInternal, err))
		return
	}
	k.env.Resume(func() {
		if hook := k.cfg.AfterAppend; hook != nil {
			hook(string(m.Topic))
		}
		// A write the lease no longer covers is not acknowledged, and
		// does not stay.
		if err := k.serve(m.Topic, m.Epoch); err != nil && !mutant.On(mutant.LeaseRecheck) {
			if err := k.store.RemoveRecords(m.Topic, off, len(m.Records)); err != nil {
				k.cfg.Logger.Error("records: remove refused records", "topic", m.Topic, "offset", off, "err", err)
			} else {
				k.stats.producesRemoved.Add(1)
			}
			done(wire.ProduceAck{}, err)
			return
		}
		k.stats.produced.Add(uint64(len(m.Records)))
		done(wire.ProduceAck{Topic: m.Topic, Epoch: m.Epoch, Offset: off}, nil)
	})
}

// Fetch reads m's records from its topic's log, at most MaxFetchBytes of
// them, or says why not: a *NotServedError, or a refusal wrapping
// ErrHandingOver, ErrBadRequest (an offset out of range) or ErrInternal.
func (k *Keeper) Fetch(m *wire.Fetch) (wire.FetchResult, error) {
	if err := k.serve(m.Topic, m.Epoch); err != nil {
		return wire.FetchResult{}, err
	}
	if k.ho.pending(m.Topic) {
		return wire.FetchResult{}, handingOver(m.Topic)
	}
	maxBytes := k.fetchBytes(m.MaxBytes)
	res := wire.FetchResult{Topic: m.Topic, Epoch: m.Epoch}
	next, err := k.store.ReadRecords(m.Topic, m.From, maxBytes, func(off, epoch uint64, v []byte) bool {
		res.Records = append(res.Records, wire.Record{Offset: off, Epoch: epoch, Value: append([]byte(nil), v...)})
		return len(res.Records) < wire.MaxRecordsPerProduce
	})
	if err != nil {
		if errors.Is(err, shardstore.ErrOffsetOutOfRange) {
			return wire.FetchResult{}, refuse(ErrBadRequest, err)
		}
		return wire.FetchResult{}, refuse(ErrInternal, err)
	}
	hw, err := k.store.HighWatermark(m.Topic)
	if err != nil {
		return wire.FetchResult{}, refuse(ErrInternal, err)
	}
	if err := k.serve(m.Topic, m.Epoch); err != nil {
		return wire.FetchResult{}, err
	}
	res.Next, res.HighWatermark = next, max(hw, next)
	k.stats.fetched.Add(uint64(len(res.Records)))
	return res, nil
}

// fetchBytes is what a Fetch asking for asked bytes gets at most: the
// node's cap when it asks for none (0) or for more.
func (k *Keeper) fetchBytes(asked uint32) int {
	if asked == 0 || int64(asked) > int64(k.cfg.MaxFetchBytes) {
		return k.cfg.MaxFetchBytes
	}
	return int(asked)
}

// handingOver refuses a data request of a topic whose records are still
// being pulled from its previous owner: ask again soon.
func handingOver(topic []byte) error {
	return &refusal{msg: fmt.Sprintf("records of %q are being handed over from its previous owner", topic), errs: []error{ErrHandingOver}}
}
