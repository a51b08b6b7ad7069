package duty

import (
	"fmt"
	"maps"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/mutant"
)

// The Leader's invariants. Builds with invariants (the invariants tag, or
// -race) check them as the Leader runs and panic with an
// invariants.Violation when one breaks; other builds compile none of it.
//
// On each Due: no message is left waiting for room in a window that has
// some; every message it returns belongs to a shard this node leads at the
// message's term, and every Open of a topic that may have had
// another holder goes out only once this leader's NewLeaderWait is over
// and no fence of its topic still runs: no earlier owner can still serve
// the topic when its new owner is told to.
//
// And every so often, amortized over the calls (invariants.Amortized), the
// whole Leader (checkInvariants): the count of led shards not yet current
// is right; every owed message is indexed by its key, its request id and
// its shard, belongs to a led shard at its term, and is queued to be
// looked at again or waits, listed, for room in its node's window; each
// node's window holds at most Config.Window messages, as counted; no
// fence ends before its leader's NewLeaderWait.

// leaderCheck is what the checks keep.
type leaderCheck struct {
	full invariants.Amortized
}

// checkDue checks the messages Due returned at now, and that no message
// still waits for room in a window that has some.
func (l *Leader) checkDue(now time.Time, out []RPC) {
	for node, ws := range l.waiting {
		for _, r := range ws {
			if r.waiting && l.rpcs[r.k] == r && l.inflight[node] < l.cfg.Window {
				invariants.Failf("duty: %s waits while the window of %s holds %d of %d", describe(r), node, l.inflight[node], l.cfg.Window)
			}
		}
	}
	for i := range out {
		r := &out[i]
		s := l.led[r.Shard]
		if s == nil || s.term != r.Term {
			invariants.Failf("duty: %s sent for shard %d at term %d, which this node does not lead", describe(r), r.Shard, r.Term)
		}
		if !r.Open || r.fresh || mutant.On(mutant.LeaseWait) {
			continue
		}
		if end := s.since.Add(l.cfg.NewLeaderWait()); now.Before(end) {
			invariants.Failf("duty: %s sent at %v, within the new leader's wait (until %v)", describe(r), now, end)
		}
		for _, f := range s.fences[r.Topic] {
			if now.Before(f.deadline) {
				invariants.Failf("duty: %s sent at %v while %s may still serve epoch %d (fenced until %v)", describe(r), now, f.node, f.epoch, f.deadline)
			}
		}
	}
}

// describe names r in a violation.
func describe(r *RPC) string {
	kind := "close"
	if r.Open {
		kind = "open"
	}
	return fmt.Sprintf("%s of %q at epoch %d to %s", kind, r.Topic, r.Epoch, r.Node)
}

// after runs the whole check when it is due.
func (ck *leaderCheck) after(l *Leader, what string) {
	if !ck.full.Due(len(l.led) + len(l.rpcs) + len(l.queue)) {
		return
	}
	if err := l.checkInvariants(); err != nil {
		invariants.Failf("duty: after %s: %w", what, err)
	}
}

// checkInvariants checks the whole Leader and reports the first
// violation.
func (l *Leader) checkInvariants() error {
	nonCurrent, resends := 0, 0
	wait := l.cfg.NewLeaderWait()
	for shard, s := range l.led {
		if !s.current {
			nonCurrent++
		}
		if s.resend {
			resends++
			if s.resendAt.Before(s.since.Add(wait)) {
				return fmt.Errorf("shard %d: its resend is due at %v, within the new leader's wait", shard, s.resendAt)
			}
		} else if s.verified != nil {
			return fmt.Errorf("shard %d: nodes verified with no resend pending", shard)
		}
		for topic, fs := range s.fences {
			for _, f := range fs {
				if f.deadline.Before(s.since.Add(wait)) {
					return fmt.Errorf("shard %d: the fence of %s on %q ends at %v, within the new leader's wait", shard, f.node, topic, f.deadline)
				}
			}
		}
	}
	if nonCurrent != l.nonCurrent {
		return fmt.Errorf("%d led shards not current, the count says %d", nonCurrent, l.nonCurrent)
	}
	if resends != l.resends {
		return fmt.Errorf("%d led shards with a resend pending, the count says %d", resends, l.resends)
	}
	queued := make(map[uint64]bool, len(l.queue))
	for _, w := range l.queue {
		queued[w.seq] = true
	}
	byShard := 0
	for _, m := range l.byShard {
		byShard += len(m)
	}
	if len(l.byReq) != len(l.rpcs) || byShard != len(l.rpcs) {
		return fmt.Errorf("%d messages owed, %d by request, %d by shard", len(l.rpcs), len(l.byReq), byShard)
	}
	listed := make(map[*RPC]bool)
	for node, ws := range l.waiting {
		for _, r := range ws {
			if r.waiting {
				if r.Node != node {
					return fmt.Errorf("%s waits for room in the window of %s", describe(r), node)
				}
				listed[r] = true
			}
		}
	}
	inWindow := make(map[string]int)
	for k, r := range l.rpcs {
		s := l.led[r.Shard]
		if r.inWindow {
			inWindow[r.Node]++
		}
		switch {
		case r.k != k || k != key(r.Node, r.Topic):
			return fmt.Errorf("%s kept under another key", describe(r))
		case l.byReq[r.ReqID] != k:
			return fmt.Errorf("%s: request %d not indexed", describe(r), r.ReqID)
		case s == nil || s.term != r.Term:
			return fmt.Errorf("%s owed for shard %d at term %d, which this node does not lead", describe(r), r.Shard, r.Term)
		case r.waiting && (r.inWindow || !listed[r]):
			return fmt.Errorf("%s waits for room, yet is in the window or not listed", describe(r))
		case !r.waiting && !queued[r.wseq]:
			return fmt.Errorf("%s owed, and never looked at again", describe(r))
		}
		if _, ok := l.byShard[r.Shard][r]; !ok {
			return fmt.Errorf("%s not indexed by its shard %d", describe(r), r.Shard)
		}
	}
	for node, n := range inWindow {
		if n > l.cfg.Window {
			return fmt.Errorf("%d messages in the window of %s, which holds %d", n, node, l.cfg.Window)
		}
	}
	if !maps.Equal(inWindow, l.inflight) {
		return fmt.Errorf("the windows hold %v, their counts say %v", inWindow, l.inflight)
	}
	return nil
}
