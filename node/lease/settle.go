package lease

import (
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
)

// A move or revoke is acknowledged to its client only once it is settled:
// every owner the topic left has acknowledged the close, or the last lease
// it may hold has run out (duty.Leader.Settled). Until then the old owner
// may still acknowledge writes at its epoch, and a client told the topic
// moved must not see that. A linearizable lookup waits the same way. Usually
// the wait is one CloseTopic round trip; with the old owner cut off or
// paused it is the rest of its lease.

// settleWait is a client's answer waiting for its command to settle.
type settleWait struct {
	shard, term, epoch uint64
	fresh              bool // never owned before this epoch
	topic              string
	done               func(settled bool)
}

// WhenSettled calls done(true) once the command that took topic to epoch
// on shard is settled, or done(false) as soon as this node no longer leads
// shard (its successor fences the old owners again; the client asks it).
func (a *Agent) WhenSettled(shard uint64, topic []byte, epoch uint64, fresh bool, done func(settled bool)) {
	if mutant.On(mutant.Settle) {
		done(true)
		return
	}
	term, led := a.LeadsAt(shard)
	if !led {
		done(false)
		return
	}
	w := &settleWait{shard: shard, term: term, epoch: epoch, fresh: fresh, topic: string(topic), done: done}
	a.dutyMu.Lock()
	finished, settled, wait := a.settleCheck(w)
	if !finished {
		a.settling = append(a.settling, w)
	}
	a.dutyMu.Unlock()
	if finished {
		done(settled)
		return
	}
	a.env.After(wait, a.RecheckSettling)
}

// settleCheck reports whether w is answered, how, and otherwise how long
// until the last lease in its way runs out. The caller holds dutyMu.
func (a *Agent) settleCheck(w *settleWait) (finished, settled bool, wait time.Duration) {
	settled, wait, leads := a.duty.Settled(a.env.Now(), w.shard, w.term, w.topic, w.epoch, w.fresh)
	return settled || !leads, settled, wait
}

// RecheckSettling answers the waits that are settled or lost their
// leadership: after an acknowledged close, a lost leadership, and when a
// lease in the way runs out.
func (a *Agent) RecheckSettling() {
	a.dutyMu.Lock()
	if len(a.settling) == 0 {
		a.dutyMu.Unlock()
		return
	}
	var answered []*settleWait
	var outcome []bool
	kept := a.settling[:0]
	for _, w := range a.settling {
		if finished, settled, _ := a.settleCheck(w); finished {
			answered = append(answered, w)
			outcome = append(outcome, settled)
		} else {
			kept = append(kept, w)
		}
	}
	clear(a.settling[len(kept):])
	a.settling = kept
	a.dutyMu.Unlock()
	for i, w := range answered {
		w.done(outcome[i])
	}
}
