package node

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

// whenSettled calls done(true) once the command that took topic to epoch
// on shard is settled, or done(false) as soon as this node no longer leads
// shard (its successor fences the old owners again; the client asks it).
func (n *Node) whenSettled(shard uint64, topic []byte, epoch uint64, fresh bool, done func(settled bool)) {
	if mutant.On(mutant.Settle) {
		done(true)
		return
	}
	term, led := n.leadsAt(shard)
	if !led {
		done(false)
		return
	}
	w := &settleWait{shard: shard, term: term, epoch: epoch, fresh: fresh, topic: string(topic), done: done}
	n.dutyMu.Lock()
	finished, settled, wait := n.settleCheck(w)
	if !finished {
		n.settling = append(n.settling, w)
	}
	n.dutyMu.Unlock()
	if finished {
		done(settled)
		return
	}
	n.after(wait, n.recheckSettling)
}

// settleCheck reports whether w is answered, how, and otherwise how long
// until the last lease in its way runs out. The caller holds dutyMu.
func (n *Node) settleCheck(w *settleWait) (finished, settled bool, wait time.Duration) {
	settled, wait, leads := n.duty.Settled(n.clock(), w.shard, w.term, w.topic, w.epoch, w.fresh)
	return settled || !leads, settled, wait
}

// recheckSettling answers the waits that are settled or lost their
// leadership: after an acknowledged close, a lost leadership, and when a
// lease in the way runs out.
func (n *Node) recheckSettling() {
	n.dutyMu.Lock()
	if len(n.settling) == 0 {
		n.dutyMu.Unlock()
		return
	}
	var answered []*settleWait
	var outcome []bool
	kept := n.settling[:0]
	for _, w := range n.settling {
		if finished, settled, _ := n.settleCheck(w); finished {
			answered = append(answered, w)
			outcome = append(outcome, settled)
		} else {
			kept = append(kept, w)
		}
	}
	clear(n.settling[len(kept):])
	n.settling = kept
	n.dutyMu.Unlock()
	for i, w := range answered {
		w.done(outcome[i])
	}
}
