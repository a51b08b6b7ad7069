//go:build invariants || race

package duty

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
	"github.com/shoalmq/shoal/meta"
)

// moving returns a Leader of shard 7 that moved t from n2 to n3 at t0, with
// n2's last grant at t0: the open to n3 waits for n2's close or lease.
func moving(t *testing.T) *Leader {
	t.Helper()
	l := newLeader(t)
	leading(l, 7, 3, t0.Add(-time.Hour))
	l.Effects(t0, 7, []meta.Effect{
		{Kind: meta.EffectClose, Node: "n2", Topic: "t", Epoch: 5, Partitions: 1},
		{Kind: meta.EffectOpen, Node: "n3", Topic: "t", Epoch: 5, Partitions: 1},
	}, func(string) time.Time { return t0 })
	return l
}

// An Open that goes out while an earlier owner may still serve its topic,
// or within a new leader's wait, is the fault the fences exist against.
func TestDueNeverOpensWhileAFenceRuns(t *testing.T) {
	l := moving(t)
	if due := l.Due(t0, nobodyGone); len(due) != 1 || due[0].Open {
		t.Fatalf("due %+v, want the close alone", due)
	}
	open := *l.rpcs[key("n3", "t")]
	invariantstest.MustViolate(t, `open of "t" at epoch 5 to n3 sent at`, func() { l.checkDue(t0.Add(ms(10)), []RPC{open}) })
	l.checkDue(t0.Add(l.cfg.OwnGrantWait()), []RPC{open}) // the fence ran out

	n := newLeader(t)
	leading(n, 7, 4, t0)
	n.Resend(7, []meta.Assignment{{Topic: "m", Owner: "n3", Previous: "n2", Epoch: 6, Partitions: 1, State: meta.Active}})
	open = *n.rpcs[key("n3", "m")]
	delete(n.led[7].fences, "m") // as if n2 had closed it
	invariantstest.MustViolate(t, "within the new leader's wait", func() { n.checkDue(t0.Add(ms(10)), []RPC{open}) })

	open.Term = 3
	invariantstest.MustViolate(t, "which this node does not lead", func() { n.checkDue(t0.Add(time.Hour), []RPC{open}) })
}

// The whole-Leader checks, which every call runs every so often (on every
// call of a Leader this small), catch a Leader broken behind its back.
func TestLeaderChecksItsWholeState(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		breakIt    func(l *Leader)
	}{
		{"not-current count", "led shards not current, the count says", func(l *Leader) { l.nonCurrent++ }},
		{"request index", "messages owed, 1 by request", func(l *Leader) {
			delete(l.byReq, l.rpcs[key("n3", "t")].ReqID)
		}},
		{"shard index", `open of "t" at epoch 5 to n3 not indexed by its shard 7`, func(l *Leader) {
			r := l.rpcs[key("n3", "t")]
			delete(l.byShard[7], r)
			l.byShard[8] = map[*RPC]struct{}{{}: {}}
		}},
		{"never looked at again", "owed, and never looked at again", func(l *Leader) { l.queue = nil }},
		{"owed for a shard not led", "which this node does not lead", func(l *Leader) { l.led[7].term = 9 }},
		{"fence within the wait", "within the new leader's wait", func(l *Leader) {
			fs := l.led[7].fences["t"]
			fs[0].deadline = l.led[7].since
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l := moving(t)
			tt.breakIt(l)
			invariantstest.MustViolate(t, tt.want, func() { l.Lost(99) })
		})
	}
}
