package duty

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

var t0 = time.Unix(1000, 0)

func ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

func newLeader(t *testing.T) *Leader {
	t.Helper()
	l, err := New(Config{Self: 1, Lease: time.Second, ConfirmFresh: ms(400), MaxDrift: 0.01, Resend: ms(200)})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// leading makes l the current, confirmed leader of shard at term since at.
func leading(l *Leader, shard, term uint64, at time.Time) {
	l.Won(at, shard, term)
	l.Current(shard, term)
	l.Confirm(shard, term, at)
	l.SetVoters(shard, []uint64{1, 2, 3}, nil)
}

func never(string) time.Time { return time.Time{} }

func nobodyGone(string) bool { return false }

func opens(rs []RPC) map[string]RPC {
	out := map[string]RPC{}
	for _, r := range rs {
		if r.Open {
			out[r.Node+"/"+r.Topic] = r
		}
	}
	return out
}

func TestGrantsNeedACurrentStateAndAFreshConfirmation(t *testing.T) {
	l := newLeader(t)
	if _, ok := l.CanGrant(t0, 7); ok {
		t.Fatal("grants a shard it does not lead")
	}
	l.Won(t0, 7, 3)
	l.Confirm(7, 3, t0)
	if _, ok := l.CanGrant(t0, 7); ok {
		t.Fatal("grants before its state is current")
	}
	l.Current(7, 2) // another term's proof counts for nothing
	if _, ok := l.CanGrant(t0, 7); ok {
		t.Fatal("current for another term")
	}
	l.Current(7, 3)
	if term, ok := l.CanGrant(t0.Add(ms(400)), 7); !ok || term != 3 {
		t.Fatalf("CanGrant = %d, %v", term, ok)
	}
	if _, ok := l.CanGrant(t0.Add(ms(401)), 7); ok {
		t.Fatal("grants on a confirmation older than ConfirmFresh")
	}
	l.Lost(7)
	if _, ok := l.CanGrant(t0, 7); ok {
		t.Fatal("grants after losing the leadership")
	}
}

func TestAVouchRoundConfirmsAtItsStartOnceAQuorumVouched(t *testing.T) {
	l := newLeader(t)
	l.Won(t0, 7, 3)
	l.Current(7, 3)
	l.SetVoters(7, []uint64{1, 2, 3}, nil)
	if asks := l.VouchRound(t0, 1); len(asks) != 0 {
		t.Fatal("vouch round for a shard nobody asked a lease of")
	}
	l.CanGrant(t0, 7) // demand
	start := t0.Add(ms(100))
	seq := uint64(2)
	asks := l.VouchRound(start, seq)
	if len(asks) != 2 || len(asks[2].Vouch) != 1 || asks[2].Vouch[0] != (wire.ShardTerm{Shard: 7, Term: 3}) {
		t.Fatalf("asks %+v", asks)
	}
	l.Vouched(9, seq, []uint64{7}, false) // not a voter
	if _, ok := l.CanGrant(start.Add(ms(10)), 7); ok {
		t.Fatal("confirmed without a quorum of voters")
	}
	l.Vouched(3, seq, []uint64{7}, false)
	if _, ok := l.CanGrant(start.Add(ms(400)), 7); !ok {
		t.Fatal("not confirmed by self and n3")
	}
	if _, ok := l.CanGrant(start.Add(ms(401)), 7); ok {
		t.Fatal("the confirmation must date from the round's start")
	}
}

func TestAVoterThatSharesTheSummaryVouchesForEveryShardAsked(t *testing.T) {
	l := newLeader(t)
	for _, shard := range []uint64{7, 8, 9} {
		l.Won(t0, shard, shard)
		l.Current(shard, shard)
		l.SetVoters(shard, []uint64{1, 2, 3}, nil)
	}
	l.SetVoters(9, []uint64{1, 3, 4}, nil) // n2 is no voter of 9
	l.CanGrant(t0, 7)
	l.CanGrant(t0, 9)
	sum2 := wire.Summary{Count: 2, Digest: meta.ShardSummary(7, 7, 0) ^ meta.ShardSummary(8, 8, 0)}
	// The first round lists what it asks (the shards a lease was asked
	// of), beside the summary of every shard n2 votes in.
	asks := l.VouchRound(t0, 1)
	if a := asks[2]; a == nil || a.Led != sum2 || len(a.Vouch) != 1 || a.Vouch[0].Shard != 7 {
		t.Fatalf("n2 asked %+v, want summary %+v and shard 7", a, sum2)
	}
	if again := l.Vouched(2, 1, nil, true); again {
		t.Fatal("asked again after a vouch")
	}
	if _, ok := l.CanGrant(t0, 7); !ok {
		t.Fatal("shard 7 not confirmed by self and n2")
	}
	if _, ok := l.CanGrant(t0, 9); ok {
		t.Fatal("shard 9 confirmed by a node that does not vote in it")
	}
	// n2 shares the summary: the next round sends it alone.
	asks = l.VouchRound(t0.Add(ms(100)), 2)
	if a := asks[2]; a.Led != sum2 || a.Vouch != nil {
		t.Fatalf("n2 asked %+v, want the summary alone", a)
	}
	// Until n2's state sums otherwise: then nothing is vouched for, and
	// the next round lists again.
	if again := l.Vouched(2, 2, []uint64{7}, false); !again {
		t.Fatal("not asked to list after the summaries differed")
	}
	if _, ok := l.CanGrant(t0.Add(ms(401)), 7); ok {
		t.Fatal("confirmed by a vouch for a shard the round did not list")
	}
	if a := l.VouchRound(t0.Add(ms(200)), 3)[2]; len(a.Vouch) != 1 {
		t.Fatalf("n2 asked %+v after a mismatch", a)
	}
}

func TestAJointConfigurationNeedsBothMajorities(t *testing.T) {
	l := newLeader(t)
	l.Won(t0, 7, 3)
	l.Current(7, 3)
	l.SetVoters(7, []uint64{1, 4, 5}, []uint64{1, 2, 3})
	l.CanGrant(t0, 7)
	seq := uint64(1)
	l.VouchRound(t0, seq)
	l.Vouched(4, seq, []uint64{7}, false)
	if _, ok := l.CanGrant(t0, 7); ok {
		t.Fatal("confirmed by the incoming majority alone")
	}
	l.Vouched(2, seq, []uint64{7}, false)
	if _, ok := l.CanGrant(t0, 7); !ok {
		t.Fatal("not confirmed by both majorities")
	}
}

func TestAMovedTopicsNewOwnerWaitsForTheOldOwnersCloseOrLease(t *testing.T) {
	for _, ack := range []bool{true, false} {
		l := newLeader(t)
		leading(l, 7, 3, t0.Add(-time.Hour))
		lastGrant := t0.Add(-ms(300))
		l.Effects(t0, 7, []meta.Effect{
			{Kind: meta.EffectClose, Node: "n2", Topic: "t", Epoch: 5, Partitions: 1},
			{Kind: meta.EffectOpen, Node: "n3", Topic: "t", Epoch: 5, Partitions: 1},
		}, func(node string) time.Time {
			if node != "n2" {
				t.Fatalf("asked the last grant of %s", node)
			}
			return lastGrant
		})
		due := l.Due(t0, nobodyGone)
		if len(due) != 1 || due[0].Open || due[0].Node != "n2" {
			t.Fatalf("due at once: %+v, want only the close", due)
		}
		if ack {
			l.Ack("n3", due[0].ReqID, &wire.TopicAck{Topic: []byte("t"), Epoch: 5}) // not the node asked
			l.Ack("n2", due[0].ReqID, &wire.TopicAck{Topic: []byte("u"), Epoch: 5}) // another topic
			l.Ack("n2", due[0].ReqID, &wire.TopicAck{Topic: []byte("t"), Epoch: 4}) // an older close
			if o := opens(l.Due(t0.Add(ms(1)), nobodyGone)); len(o) != 0 {
				t.Fatalf("open sent on a wrong ack: %+v", o)
			}
			l.Ack("n2", due[0].ReqID, &wire.TopicAck{Topic: []byte("t"), Epoch: 5})
			if o := opens(l.Due(t0.Add(ms(2)), nobodyGone)); len(o) != 1 {
				t.Fatalf("open not sent after the close was acknowledged: %+v", o)
			}
			continue
		}
		fenceEnd := lastGrant.Add(l.cfg.OwnGrantWait())
		if o := opens(l.Due(fenceEnd.Add(-time.Millisecond), nobodyGone)); len(o) != 0 {
			t.Fatalf("open sent before the old owner's lease ran out: %+v", o)
		}
		if o := opens(l.Due(fenceEnd, gone("n2"))); len(o) != 1 {
			t.Fatalf("open not sent once the lease ran out: %+v", o)
		}
	}
}

func gone(nodes ...string) func(string) bool {
	return func(n string) bool {
		for _, x := range nodes {
			if x == n {
				return true
			}
		}
		return false
	}
}

func TestANewLeaderWaitsOutItsPredecessorsGrants(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 4, t0)
	l.Resend(7, []meta.Assignment{
		{Topic: "moved", Owner: "n3", Previous: "n2", Epoch: 6, Partitions: 1, State: meta.Active},
		{Topic: "new", Owner: "n2", Epoch: 1, Partitions: 1, State: meta.Active},
	})
	due := l.Due(t0, nobodyGone)
	o := opens(due)
	if len(o) != 1 || o["n2/new"].Epoch != 1 {
		t.Fatalf("opens at once: %+v, want only the never-moved topic", o)
	}
	if len(due) != 2 {
		t.Fatalf("due %+v, want the fresh open and the close to n2", due)
	}
	wait := l.cfg.NewLeaderWait()
	if o := opens(l.Due(t0.Add(wait-time.Millisecond), nobodyGone)); o["n3/moved"].Node != "" {
		t.Fatalf("open of a moved topic before the new leader's wait: %+v", o)
	}
	if o := opens(l.Due(t0.Add(wait), gone("n2"))); o["n3/moved"].Epoch != 6 {
		t.Fatalf("opens after the wait: %+v", o)
	}
	// A fresh assignment during the wait needs none.
	l2 := newLeader(t)
	if _, ok := l2.Next(); ok {
		t.Fatal("a leader with nothing queued has something due next")
	}
	leading(l2, 7, 4, t0)
	l2.Effects(t0, 7, []meta.Effect{{Kind: meta.EffectOpen, Node: "n2", Topic: "x", Epoch: 1, Partitions: 1, Fresh: true}}, never)
	if o := opens(l2.Due(t0, nobodyGone)); len(o) != 1 {
		t.Fatalf("a fresh topic's open waited: %+v", o)
	}
}

// TestAHeldBackOpenIsDueTheMomentItsWaitEnds: Next names the end of the
// new leader's wait, so that the caller sends the open then and not at its
// next periodic turn.
func TestAHeldBackOpenIsDueTheMomentItsWaitEnds(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 4, t0)
	l.Resend(7, []meta.Assignment{{Topic: "moved", Owner: "n3", Previous: "n2", Epoch: 6, Partitions: 1, State: meta.Active}})
	l.Due(t0, gone("n2"))
	end := t0.Add(l.cfg.NewLeaderWait())
	if at, ok := l.Next(); !ok || !at.Equal(end) {
		t.Fatalf("next due at %v (%v), want the end of the new leader's wait, %v", at.Sub(t0), ok, end.Sub(t0))
	}
	if o := opens(l.Due(end, gone("n2"))); o["n3/moved"].Epoch != 6 {
		t.Fatalf("opens at the end of the wait: %+v", o)
	}
	// Sent: next comes its resend.
	if at, ok := l.Next(); !ok || !at.Equal(end.Add(l.cfg.Resend)) {
		t.Fatalf("next due at %v (%v) after the open was sent, want its resend at %v", at.Sub(t0), ok, end.Add(l.cfg.Resend).Sub(t0))
	}
}

// TestALeaderSaysWhileItHoldsBackAnOpen: the shard manager does not hand
// away the leadership of a shard whose leader owes an open its new owner
// has not acknowledged (held back or sent).
func TestALeaderSaysWhileItHoldsBackAnOpen(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 4, t0)
	leading(l, 8, 4, t0)
	if l.HoldsBack(7) {
		t.Fatal("a leader that owes nothing holds an open back")
	}
	l.Resend(7, []meta.Assignment{{Topic: "moved", Owner: "n3", Previous: "n2", Epoch: 6, Partitions: 1, State: meta.Active}})
	l.Due(t0, gone("n2"))
	if !l.HoldsBack(7) || l.HoldsBack(8) {
		t.Fatalf("holds back: shard 7 %v, shard 8 %v; want only 7", l.HoldsBack(7), l.HoldsBack(8))
	}
	due := l.Due(t0.Add(l.cfg.NewLeaderWait()), gone("n2"))
	if len(due) != 1 || !due[0].Open {
		t.Fatalf("due after the new-leader wait: %+v, want the open", due)
	}
	if !l.HoldsBack(7) {
		t.Fatal("the open was sent but not acknowledged, yet the leader would hand the shard away")
	}
	l.Ack("n3", due[0].ReqID, &wire.TopicAck{Topic: []byte("moved"), Epoch: 6})
	if l.HoldsBack(7) {
		t.Fatal("the open was acknowledged, yet the leader says it holds it back")
	}
}

func TestADeposedLeaderStopsSending(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 3, t0.Add(-time.Hour))
	l.Effects(t0, 7, []meta.Effect{{Kind: meta.EffectClose, Node: "n2", Topic: "t", Epoch: 5}}, never)
	if len(l.Due(t0, nobodyGone)) != 1 {
		t.Fatal("close not due")
	}
	l.Lost(7)
	if due := l.Due(t0.Add(time.Second), nobodyGone); len(due) != 0 || l.Pending() != 0 {
		t.Fatalf("a deposed leader still owes %+v", due)
	}
	// And a stale-term answer ends a message too.
	leading(l, 8, 3, t0.Add(-time.Hour))
	l.Effects(t0, 8, []meta.Effect{{Kind: meta.EffectClose, Node: "n2", Topic: "u", Epoch: 5}}, never)
	d := l.Due(t0, nobodyGone)
	l.Ack("n2", d[0].ReqID, &wire.TopicAck{Topic: []byte("u"), Status: wire.TopicStaleTerm})
	if l.Pending() != 0 {
		t.Fatal("still sending after the owner saw a newer leader")
	}
}

func TestUnacknowledgedMessagesAreResent(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 3, t0.Add(-time.Hour))
	l.Effects(t0, 7, []meta.Effect{{Kind: meta.EffectOpen, Node: "n2", Topic: "t", Epoch: 1, Fresh: true, Partitions: 1}}, never)
	// Resend 200 ms: sent again after 200, 400, 800, then every 1600 ms.
	for _, at := range []int{0, 200, 600, 1400, 3000, 4600} {
		if at > 0 && len(l.Due(t0.Add(ms(at-1)), nobodyGone)) != 0 {
			t.Fatalf("resent before %d ms", at)
		}
		if len(l.Due(t0.Add(ms(at)), nobodyGone)) != 1 {
			t.Fatalf("not resent at %d ms", at)
		}
	}
	// What is owed to a gone node is dropped when next due.
	if len(l.Due(t0.Add(ms(6199)), gone("n2"))) != 0 || l.Pending() != 1 {
		t.Fatal("a message not yet due was looked at")
	}
	if len(l.Due(t0.Add(ms(6200)), gone("n2"))) != 0 || l.Pending() != 0 {
		t.Fatal("a message to a gone node was kept")
	}
}

func TestAReleasedNodeNeedsNoFenceUntilItHoldsAgain(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 3, t0.Add(-time.Hour))
	recent := func(string) time.Time { return t0 }
	l.Effects(t0, 7, []meta.Effect{
		{Kind: meta.EffectClose, Node: "n2", Topic: "a", Epoch: 2},
		{Kind: meta.EffectOpen, Node: "n3", Topic: "a", Epoch: 2, Partitions: 1},
	}, recent)
	l.Released("n2")
	l.Effects(t0, 7, []meta.Effect{
		{Kind: meta.EffectClose, Node: "n2", Topic: "b", Epoch: 2},
		{Kind: meta.EffectOpen, Node: "n3", Topic: "b", Epoch: 2, Partitions: 1},
	}, recent)
	if o := opens(l.Due(t0, nobodyGone)); len(o) != 2 {
		t.Fatalf("opens after the old owner released: %+v", o)
	}
	l.Holding("n2") // a new life of n2 asks for leases
	l.Effects(t0, 7, []meta.Effect{
		{Kind: meta.EffectClose, Node: "n2", Topic: "c", Epoch: 2},
		{Kind: meta.EffectOpen, Node: "n3", Topic: "c", Epoch: 2, Partitions: 1},
	}, recent)
	if o := opens(l.Due(t0.Add(ms(1)), nobodyGone)); len(o) != 0 {
		t.Fatalf("open not held back for a node that holds again: %+v", o)
	}
}

func TestWaitsAllowForClockDrift(t *testing.T) {
	l := newLeader(t)
	if w := l.cfg.OwnGrantWait(); w <= time.Second || w > time.Second*102/100+time.Millisecond*2 {
		t.Fatalf("OwnGrantWait %v", w)
	}
	if w := l.cfg.NewLeaderWait(); w <= ms(1400) || w > ms(1400)*102/100+time.Millisecond*2 {
		t.Fatalf("NewLeaderWait %v", w)
	}
}

func TestAMoveIsSettledOnceEveryEarlierOwnerIsFenced(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 3, t0.Add(-time.Hour))
	lastGrant := t0.Add(-ms(300))
	l.Effects(t0, 7, []meta.Effect{
		{Kind: meta.EffectClose, Node: "n2", Topic: "t", Epoch: 5, Partitions: 1},
		{Kind: meta.EffectOpen, Node: "n3", Topic: "t", Epoch: 5, Partitions: 1},
	}, func(string) time.Time { return lastGrant })
	if ok, _, leads := l.Settled(t0, 7, 3, "t", 4, false); !ok || !leads {
		t.Fatal("an earlier epoch is held back by a later move's fence")
	}
	ok, wait, leads := l.Settled(t0, 7, 3, "t", 5, false)
	if ok || !leads {
		t.Fatalf("settled before the old owner was fenced: %v %v", ok, leads)
	}
	if want := lastGrant.Add(l.cfg.OwnGrantWait()).Sub(t0); wait != want {
		t.Fatalf("wait %v, want the rest of the old owner's lease %v", wait, want)
	}
	if ok, _, _ := l.Settled(t0.Add(wait), 7, 3, "t", 5, false); !ok {
		t.Fatal("not settled once the old owner's lease ran out")
	}
	due := l.Due(t0, nobodyGone)
	l.Ack("n2", due[0].ReqID, &wire.TopicAck{Topic: []byte("t"), Epoch: 5})
	if ok, _, _ := l.Settled(t0, 7, 3, "t", 5, false); !ok {
		t.Fatal("not settled once the old owner acknowledged the close")
	}
	if _, _, leads := l.Settled(t0, 7, 4, "t", 5, false); leads {
		t.Fatal("settled at a term this node does not lead")
	}
	l.Lost(7)
	if _, _, leads := l.Settled(t0, 7, 3, "t", 5, false); leads {
		t.Fatal("a deposed leader still answers for its fences")
	}
}

func TestANewLeaderSettlesOnlyFreshTopicsUntilItsPredecessorsGrantsRanOut(t *testing.T) {
	l := newLeader(t)
	leading(l, 7, 3, t0)
	if ok, wait, _ := l.Settled(t0, 7, 3, "t", 5, false); ok || wait != l.cfg.NewLeaderWait() {
		t.Fatalf("a new leader settled a topic with a past: %v, wait %v", ok, wait)
	}
	if ok, _, _ := l.Settled(t0, 7, 3, "t", 1, true); !ok {
		t.Fatal("a fresh topic waited for the predecessors' grants")
	}
	if ok, _, _ := l.Settled(t0.Add(l.cfg.NewLeaderWait()), 7, 3, "t", 5, false); !ok {
		t.Fatal("not settled once the predecessors' grants ran out")
	}
}

// BenchmarkDueWithManyOwed: a pass when 10,000 messages are owed and sent
// and none is due again yet (the ownership loop runs a pass after every
// acknowledgement and every applied command).
func BenchmarkDueWithManyOwed(b *testing.B) {
	l, err := New(Config{Self: 1, Lease: time.Second, ConfirmFresh: ms(400), MaxDrift: 0.01, Resend: ms(200)})
	if err != nil {
		b.Fatal(err)
	}
	l.Won(t0.Add(-time.Hour), 7, 3)
	l.Current(7, 3)
	effs := make([]meta.Effect, 10000)
	for i := range effs {
		effs[i] = meta.Effect{Kind: meta.EffectOpen, Node: "n2", Topic: fmt.Sprintf("t%05d", i), Epoch: 1, Fresh: true, Partitions: 1}
	}
	l.Effects(t0, 7, effs, func(string) time.Time { return time.Time{} })
	if n := len(l.Due(t0, func(string) bool { return false })); n != len(effs) {
		b.Fatalf("%d due", n)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if len(l.Due(t0.Add(time.Duration(i%100)*time.Microsecond), func(string) bool { return false })) != 0 {
			b.Fatal("due")
		}
	}
}

func TestVouchRoundsBySummariesAloneConfirmEveryLedShard(t *testing.T) {
	l := newLeader(t)
	for _, shard := range []uint64{7, 8} {
		l.Won(t0, shard, 3)
		l.Current(shard, 3)
		l.SetVoters(shard, []uint64{1, 2, 3}, nil)
	}
	v := l.Version()
	if l.GrantAll(t0, v) {
		t.Fatal("granted all before any confirmation")
	}
	// A lease of everything was asked: the round lists every led shard.
	asks := l.VouchRound(t0, 1)
	if len(asks) != 2 || len(asks[2].Vouch) != 2 || len(asks[3].Vouch) != 2 {
		t.Fatalf("first round asks %+v", asks)
	}
	l.Vouched(2, 1, nil, true)
	if l.GrantAll(t0, v) {
		t.Fatal("granted all with one voter of two sharing its summary")
	}
	if _, ok := l.CanGrant(t0, 7); !ok {
		t.Fatal("shard 7 not confirmed by self and n2")
	}
	l.Vouched(3, 1, nil, true)
	if !l.GrantAll(t0.Add(ms(400)), v) || l.GrantAll(t0.Add(ms(401)), v) {
		t.Fatal("every voter shared: all confirmed from the round's start for ConfirmFresh")
	}
	// The next round asks by the summaries alone, nothing listed.
	at2 := t0.Add(ms(100))
	asks = l.VouchRound(at2, 2)
	if len(asks) != 2 || asks[2].Vouch != nil || asks[3].Vouch != nil {
		t.Fatalf("second round asks %+v", asks)
	}
	// n3 does not answer: nothing is confirmed at the second round, and
	// the third lists the shards again, so that a quorum per shard can
	// still confirm them.
	l.Vouched(2, 2, nil, true)
	if l.GrantAll(t0.Add(ms(401)), v) {
		t.Fatal("all confirmed by a round one voter did not answer")
	}
	at3 := t0.Add(ms(200))
	asks = l.VouchRound(at3, 3)
	if len(asks) != 2 {
		t.Fatalf("third round asks %+v", asks)
	}
	l.Vouched(2, 3, nil, true)
	if _, ok := l.CanGrant(at3.Add(ms(400)), 8); !ok {
		t.Fatal("shard 8 not confirmed by self and n2 in the listed round")
	}
	// A leadership lost: nothing granted at once at the old version.
	l.Vouched(3, 3, nil, true)
	if !l.GrantAll(at3, v) {
		t.Fatal("every voter shared in the third round")
	}
	l.Lost(8)
	if l.GrantAll(at3, v) || l.GrantAll(at3, l.Version()) {
		t.Fatal("granted all after the led shards changed, before a round confirmed them again")
	}
}
