package ownership

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

const leaseLen = time.Second

var t0 = time.Unix(1000, 0)

func newHolder(t *testing.T) *Holder {
	t.Helper()
	h, err := New(Config{Lease: leaseLen})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func open(h *Holder, topic string, shard, term, epoch uint64, floor uint64) (wire.TopicStatus, uint64, []Change) {
	return h.Open(&wire.OpenTopic{Topic: []byte(topic), Shard: shard, Term: term, Epoch: epoch, Partitions: 1}, floor)
}

// leaderIs makes every shard led by one node.
func leaderIs(node string) func(uint64) (string, bool) {
	return func(uint64) (string, bool) { return node, true }
}

// grantAll answers a round from leader with an unlisted grant of every
// shard asked.
func grantAll(seq uint64, reqs []wire.LeaseRequest, term uint64) *wire.LeaseReply {
	r := &wire.LeaseReply{Seq: seq}
	for _, q := range reqs {
		r.Grants = append(r.Grants, wire.LeaseGrant{Shard: q.Shard, Term: term})
	}
	return r
}

// agreed runs a full round at now with every shard led by leader, and
// answers it as a leader whose state sums the same: every shard granted
// at term, the summary matched. It returns the round's number.
func agreed(h *Holder, now time.Time, leader string, term uint64) uint64 {
	seq, asks, _ := h.Round(now, leaderIs(leader), 0)
	r := grantAll(seq, asks[leader].Requests, term)
	r.HeldMatched = true
	h.Reply(leader, r)
	return seq
}

func mustServe(t *testing.T, h *Holder, now time.Time, topic string, epoch uint64, want Refusal) {
	t.Helper()
	if _, got := h.Serve(now, []byte(topic), epoch); got != want {
		t.Fatalf("serve %s@%d at +%v: %v, want %v", topic, epoch, now.Sub(t0), got, want)
	}
}

func TestAHeldTopicIsServedOnlyUnderALease(t *testing.T) {
	h := newHolder(t)
	if st, e, ch := open(h, "t", 3, 1, 1, 0); st != wire.TopicDone || e != 1 || len(ch) != 1 || !ch[0].Put {
		t.Fatalf("open: %v %d %+v", st, e, ch)
	}
	mustServe(t, h, t0, "t", 1, NoLease)
	mustServe(t, h, t0, "t", 2, OtherEpoch)
	mustServe(t, h, t0, "u", 1, NotHeld)

	seq, reqs, _ := h.Round(t0, leaderIs("L"), 0)
	if len(reqs["L"].Requests) != 1 || reqs["L"].Requests[0].Shard != 3 || reqs["L"].Requests[0].Digest != meta.TopicDigest("t", 1) {
		t.Fatalf("round asks %+v", reqs)
	}
	h.Reply("L", grantAll(seq, reqs["L"].Requests, 1))
	mustServe(t, h, t0.Add(leaseLen-time.Millisecond), "t", 1, Servable)
	// The leaseLen runs from when the round was built, however late the
	// grant arrived: a pause eats it.
	mustServe(t, h, t0.Add(leaseLen), "t", 1, NoLease)
}

func TestAGrantArrivingAfterAPauseGivesNothing(t *testing.T) {
	h := newHolder(t)
	open(h, "t", 3, 1, 1, 0)
	seq, reqs, _ := h.Round(t0, leaderIs("L"), 0)
	// Paused for two leases; the grant is taken at once on resume.
	h.Reply("L", grantAll(seq, reqs["L"].Requests, 1))
	mustServe(t, h, t0.Add(2*leaseLen), "t", 1, NoLease)
}

func TestAGrantDoesNotCoverATopicOpenedAfterItsRound(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 1, 1, 0)
	seq, reqs, _ := h.Round(t0, leaderIs("L"), 0)
	open(h, "b", 3, 1, 1, 0) // opened while the round was out
	h.Reply("L", grantAll(seq, reqs["L"].Requests, 1))
	mustServe(t, h, t0, "a", 1, Servable)
	mustServe(t, h, t0, "b", 1, NoLease)
	seq, reqs, _ = h.Round(t0.Add(100*time.Millisecond), leaderIs("L"), 0)
	if reqs["L"].Requests[0].Digest != meta.TopicDigest("a", 1)^meta.TopicDigest("b", 1) {
		t.Fatal("digest does not cover both topics")
	}
	h.Reply("L", grantAll(seq, reqs["L"].Requests, 1))
	mustServe(t, h, t0.Add(200*time.Millisecond), "b", 1, Servable)
}

func TestAnOpenAtOrBelowAClosedEpochIsRefused(t *testing.T) {
	h := newHolder(t)
	open(h, "t", 3, 1, 1, 0)
	// The close of epoch 2 overtakes the open of epoch 2.
	st, floor, ch := h.Close(&wire.CloseTopic{Topic: []byte("t"), Shard: 3, Term: 1, Epoch: 2}, 0)
	if st != wire.TopicDone || floor != 2 || len(ch) != 1 || !ch[0].Drop || ch[0].Floor != 2 {
		t.Fatalf("close: %v %d %+v", st, floor, ch)
	}
	if st, e, ch := open(h, "t", 3, 1, 2, floor); st != wire.TopicBelowFloor || e != 2 || ch != nil {
		t.Fatalf("late open: %v %d %+v", st, e, ch)
	}
	if _, ok := h.Get([]byte("t")); ok {
		t.Fatal("a closed topic is held again")
	}
	if st, _, _ := open(h, "t", 3, 1, 3, floor); st != wire.TopicDone {
		t.Fatalf("open above the floor: %v", st)
	}
}

func TestOwnershipMessagesFromALowerTermAreRefused(t *testing.T) {
	h := newHolder(t)
	open(h, "t", 3, 5, 1, 0)
	if st, _, _ := open(h, "u", 3, 4, 1, 0); st != wire.TopicStaleTerm {
		t.Fatalf("open from term 4 after term 5: %v", st)
	}
	if st, _, _ := h.Close(&wire.CloseTopic{Topic: []byte("t"), Shard: 3, Term: 4, Epoch: 9}, 0); st != wire.TopicStaleTerm {
		t.Fatalf("close from term 4 after term 5: %v", st)
	}
	if _, ok := h.Get([]byte("t")); !ok {
		t.Fatal("a deposed leader's close took effect")
	}
	// Another shard has its own terms.
	if st, _, _ := open(h, "v", 4, 1, 1, 0); st != wire.TopicDone {
		t.Fatalf("open in another shard: %v", st)
	}
}

func TestAnOlderOpenNeverLowersEpochOrPartitions(t *testing.T) {
	h := newHolder(t)
	h.Open(&wire.OpenTopic{Topic: []byte("t"), Shard: 3, Term: 1, Epoch: 4, Partitions: 8}, 0)
	if st, e, ch := h.Open(&wire.OpenTopic{Topic: []byte("t"), Shard: 3, Term: 1, Epoch: 3, Partitions: 16}, 0); st != wire.TopicDone || e != 4 || ch != nil {
		t.Fatalf("older open: %v %d %+v", st, e, ch)
	}
	if st, _, ch := h.Open(&wire.OpenTopic{Topic: []byte("t"), Shard: 3, Term: 1, Epoch: 4, Partitions: 2}, 0); st != wire.TopicDone || ch != nil {
		t.Fatalf("open with fewer partitions: %v %+v", st, ch)
	}
	if got, _ := h.Get([]byte("t")); got.Epoch != 4 || got.Partitions != 8 {
		t.Fatalf("held %+v", got)
	}
	_, _, ch := h.Open(&wire.OpenTopic{Topic: []byte("t"), Shard: 3, Term: 1, Epoch: 6, Partitions: 8}, 0)
	if len(ch) != 1 || ch[0].Floor != 4 {
		t.Fatalf("a newer open must close the epoch it replaces: %+v", ch)
	}
}

func TestAListedGrantCoversOnlyItsTopicsAndClosesTheRest(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 1, 1, 0)
	open(h, "b", 3, 1, 1, 0)
	open(h, "c", 3, 1, 1, 0)
	seq, _, _ := h.Round(t0, leaderIs("L"), 0)
	open(h, "d", 3, 1, 1, 0) // after the round: the list cannot speak for it
	// The leader's state: a is ours at 1, b moved on to epoch 2 (still ours:
	// its open is on the way), c is not ours any more.
	changes, _, _ := h.Reply("L", &wire.LeaseReply{Seq: seq, Grants: []wire.LeaseGrant{{Shard: 3, Term: 1, Listed: true,
		Topics: []wire.TopicEpoch{{Topic: []byte("a"), Epoch: 1}, {Topic: []byte("b"), Epoch: 2}}}}})
	mustServe(t, h, t0, "a", 1, Servable)
	mustServe(t, h, t0, "b", 1, NotHeld)
	mustServe(t, h, t0, "c", 1, NotHeld)
	mustServe(t, h, t0, "d", 1, NoLease)
	closed := map[string]uint64{}
	for _, c := range changes {
		if !c.Drop {
			t.Fatalf("change %+v", c)
		}
		closed[c.Topic] = c.Floor
	}
	if len(closed) != 2 || closed["b"] != 1 || closed["c"] != 1 {
		t.Fatalf("closed %v, want b and c at 1", closed)
	}
	if st, _, _ := open(h, "b", 3, 1, 2, 1); st != wire.TopicDone {
		t.Fatalf("b's open at 2 after the list closed 1: %v", st)
	}
}

func TestGrantsThatCannotBeTrustedAreIgnored(t *testing.T) {
	h := newHolder(t)
	open(h, "t", 3, 2, 1, 0)
	seq, reqs, _ := h.Round(t0, leaderIs("L"), 0)
	h.Reply("X", grantAll(seq, reqs["L"].Requests, 2)) // not asked of X
	mustServe(t, h, t0, "t", 1, NoLease)
	h.Reply("L", grantAll(seq, reqs["L"].Requests, 1)) // a term below one seen
	mustServe(t, h, t0, "t", 1, NoLease)
	h.Reply("L", grantAll(seq+7, reqs["L"].Requests, 2)) // a round never sent
	mustServe(t, h, t0, "t", 1, NoLease)

	seq2, reqs2, _ := h.Round(t0.Add(300*time.Millisecond), leaderIs("L"), 0)
	h.Reply("L", &wire.LeaseReply{Seq: seq2, Grants: []wire.LeaseGrant{{Shard: 3, Term: 2, Listed: true}}})
	// The grant of the earlier round arrives late: it must not bring back
	// what the newer one took away.
	h.Reply("L", grantAll(seq, reqs2["L"].Requests, 2))
	mustServe(t, h, t0.Add(400*time.Millisecond), "t", 1, NotHeld)
}

func TestRoundsGoToEachShardsLeaderAndSkipUnknownLeaders(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 1, 1, 1, 0)
	open(h, "b", 2, 1, 1, 0)
	open(h, "c", 3, 1, 1, 0)
	leaders := map[uint64]string{1: "L1", 2: "L2"}
	_, reqs, _ := h.Round(t0, func(s uint64) (string, bool) { l, ok := leaders[s]; return l, ok }, 0)
	if len(reqs) != 2 || len(reqs["L1"].Requests) != 1 || reqs["L1"].Requests[0].Shard != 1 || len(reqs["L2"].Requests) != 1 || reqs["L2"].Requests[0].Shard != 2 {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestAReleasedHolderServesNothing(t *testing.T) {
	h := newHolder(t)
	open(h, "t", 3, 1, 1, 0)
	seq, reqs, _ := h.Round(t0, leaderIs("L"), 0)
	h.Reply("L", grantAll(seq, reqs["L"].Requests, 1))
	h.Release()
	mustServe(t, h, t0, "t", 1, Released)
	if _, _, released := h.Round(t0, leaderIs("L"), 0); !released {
		t.Fatal("rounds after a release must say so")
	}
}

func TestHolderDigestIsTheLeadersOwnerDigest(t *testing.T) {
	st := meta.New()
	h := newHolder(t)
	var res meta.Result
	for _, c := range []meta.Command{
		{Op: meta.OpAssign, Topic: []byte("a"), Owner: "n1"},
		{Op: meta.OpAssign, Topic: []byte("b"), Owner: "n1"},
		{Op: meta.OpAssign, Topic: []byte("c"), Owner: "n2"},
		{Op: meta.OpAssign, Topic: []byte("a"), Owner: "n2"},
		{Op: meta.OpAssign, Topic: []byte("a"), Owner: "n1"},
	} {
		if err := st.Apply(&c, &res); err != nil {
			t.Fatal(err)
		}
		for _, e := range res.Effects {
			if e.Node != "n1" {
				continue
			}
			if e.Kind == meta.EffectOpen {
				h.Open(&wire.OpenTopic{Topic: []byte(e.Topic), Shard: 0, Term: 1, Epoch: e.Epoch, Partitions: e.Partitions}, 0)
			} else {
				h.Close(&wire.CloseTopic{Topic: []byte(e.Topic), Shard: 0, Term: 1, Epoch: e.Epoch}, 0)
			}
		}
	}
	_, reqs, _ := h.Round(t0, leaderIs("L"), 0)
	if got, want := reqs["L"].Requests[0].Digest, st.OwnerDigest("n1"); got != want {
		t.Fatalf("holder digest %x, leader's %x", got, want)
	}
}

func TestARoundAsksByItsSummaryOnceTheLeaderAgrees(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 2, 1, 0)
	open(h, "b", 5, 4, 1, 0)
	held := wire.Summary{Count: 2, Digest: meta.ShardSummary(3, 2, meta.TopicDigest("a", 1)) ^ meta.ShardSummary(5, 4, meta.TopicDigest("b", 1))}
	// The first round lists the shards beside their summary.
	seq, asks, _ := h.Round(t0, leaderIs("L"), 0)
	if a := asks["L"]; a.Held != held || len(a.Requests) != 2 {
		t.Fatalf("first round asks %+v, want %+v and a list", a, held)
	}
	r := grantAll(seq, asks["L"].Requests, 0)
	r.Grants[0].Term, r.Grants[1].Term = 2, 4
	r.HeldMatched = true
	if _, _, again := h.Reply("L", r); again {
		t.Fatal("asked again after a grant")
	}
	// The leader agreed with the summary: the next round sends it alone,
	// and a grant of it covers both shards at the terms summed.
	seq, asks, _ = h.Round(t0.Add(300*time.Millisecond), leaderIs("L"), 0)
	if a := asks["L"]; a.Held != held || a.Requests != nil {
		t.Fatalf("second round asks %+v, want the summary alone", a)
	}
	h.Reply("L", &wire.LeaseReply{Seq: seq, HeldMatched: true, HeldGranted: true})
	mustServe(t, h, t0.Add(300*time.Millisecond+leaseLen-time.Millisecond), "a", 1, Servable)
	mustServe(t, h, t0.Add(300*time.Millisecond+leaseLen-time.Millisecond), "b", 1, Servable)

	// A topic opened since changes the summary: the round lists again,
	// and a grant of the round before does not cover the new topic.
	open(h, "c", 5, 4, 1, 0)
	mustServe(t, h, t0.Add(400*time.Millisecond), "c", 1, NoLease)
	_, asks, _ = h.Round(t0.Add(600*time.Millisecond), leaderIs("L"), 0)
	if len(asks["L"].Requests) != 2 {
		t.Fatalf("a round after a change asks %+v", asks["L"])
	}
}

func TestASummaryTheLeaderDoesNotShareGrantsNothing(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 2, 1, 0)
	agreed(h, t0, "L", 2)
	seq, asks, _ := h.Round(t0.Add(300*time.Millisecond), leaderIs("L"), 0)
	if asks["L"].Requests != nil {
		t.Fatal("listed though the leader agreed")
	}
	// Meanwhile the leader moved the topic: its state sums otherwise. A
	// grant in the same answer, for a shard the summary alone asked for,
	// counts for nothing.
	_, _, again := h.Reply("L", &wire.LeaseReply{Seq: seq, Grants: []wire.LeaseGrant{{Shard: 3, Term: 2}}})
	if !again {
		t.Fatal("not asked to list after the summaries differed")
	}
	if e := h.LeaseExpiry(3); !e.Equal(t0.Add(leaseLen)) {
		t.Fatalf("lease runs to +%v, want the first round's", e.Sub(t0))
	}
	if _, asks, _ = h.Round(t0.Add(400*time.Millisecond), leaderIs("L"), 0); len(asks["L"].Requests) != 1 {
		t.Fatalf("the round after a mismatch asks %+v", asks["L"])
	}
}

func TestAGrantOfAWholeGroupOutlivesANewGrouping(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 2, 1, 0)
	open(h, "b", 5, 2, 1, 0)
	seq, asks, _ := h.Round(t0, leaderIs("L"), 7)
	r := grantAll(seq, asks["L"].Requests, 2)
	r.HeldMatched = true
	h.Reply("L", r)
	// Steady: the summary alone asks, and its grant covers both shards.
	seq, asks, _ = h.Round(t0.Add(300*time.Millisecond), leaderIs("L"), 7)
	if asks["L"].Requests != nil {
		t.Fatalf("steady round listed %+v", asks["L"])
	}
	h.Reply("L", &wire.LeaseReply{Seq: seq, HeldMatched: true, HeldGranted: true})
	end := t0.Add(300*time.Millisecond + leaseLen)
	// The leader table changed (shard 5 now led by M): the groups are
	// built again, and the grant already given still covers both until
	// it runs out, no longer.
	leaders := func(s uint64) (string, bool) {
		if s == 5 {
			return "M", true
		}
		return "L", true
	}
	_, asks, _ = h.Round(t0.Add(600*time.Millisecond), leaders, 8)
	if len(asks) != 2 || asks["M"].Held.Count != 1 || asks["L"].Held.Count != 1 {
		t.Fatalf("after the table changed the round asks %+v", asks)
	}
	for _, tp := range []string{"a", "b"} {
		mustServe(t, h, end.Add(-time.Millisecond), tp, 1, Servable)
		mustServe(t, h, end, tp, 1, NoLease)
	}
	if e := h.LeaseExpiry(5); !e.Equal(end) {
		t.Fatalf("shard 5's lease runs to +%v, want +%v", e.Sub(t0), end.Sub(t0))
	}
}

func TestAFreshRoundAsksForTheNewTopicsAlone(t *testing.T) {
	h := newHolder(t)
	if _, _, ok := h.FreshRound(t0, leaderIs("L")); ok {
		t.Fatal("a fresh round with nothing held")
	}
	open(h, "a", 3, 2, 1, 0)
	open(h, "b", 5, 2, 1, 0)
	late := agreed(h, t0, "L", 2)
	if _, _, ok := h.FreshRound(t0.Add(10*time.Millisecond), leaderIs("L")); ok {
		t.Fatal("a fresh round though nothing was opened since the last round")
	}

	// A topic opened in shard 7: the fresh round lists shard 7 alone,
	// with its digest and no summary.
	open(h, "c", 7, 2, 1, 0)
	mustServe(t, h, t0.Add(100*time.Millisecond), "c", 1, NoLease)
	seq, asks, ok := h.FreshRound(t0.Add(100*time.Millisecond), leaderIs("L"))
	if !ok || len(asks) != 1 {
		t.Fatalf("fresh round: ok %v, asks %+v", ok, asks)
	}
	if a := asks["L"]; a.Held != (wire.Summary{}) || len(a.Requests) != 1 || a.Requests[0] != (wire.LeaseRequest{Shard: 7, Digest: meta.TopicDigest("c", 1)}) {
		t.Fatalf("fresh round asks %+v", asks["L"])
	}
	// Its answer grants what it listed and nothing more (a grant of a
	// shard it did not ask counts for nothing), and takes nothing from
	// the shards the last full round covered.
	h.Reply("L", &wire.LeaseReply{Seq: seq, Grants: []wire.LeaseGrant{{Shard: 7, Term: 2}, {Shard: 3, Term: 2}}})
	mustServe(t, h, t0.Add(100*time.Millisecond+leaseLen-time.Millisecond), "c", 1, Servable)
	if e := h.LeaseExpiry(3); !e.Equal(t0.Add(leaseLen)) {
		t.Fatalf("shard 3's lease runs to +%v, want the full round's +%v", e.Sub(t0), leaseLen)
	}
	mustServe(t, h, t0.Add(leaseLen-time.Millisecond), "a", 1, Servable)
	// A late answer to an older round does not shorten the newer grant.
	h.Reply("L", grantAll(late, []wire.LeaseRequest{{Shard: 7}}, 2))
	if e := h.LeaseExpiry(7); !e.Equal(t0.Add(100*time.Millisecond + leaseLen)) {
		t.Fatalf("shard 7's lease runs to +%v after a late answer", e.Sub(t0))
	}
	// Nothing opened since: no fresh round; the next full round asks for
	// every shard again.
	if _, _, ok := h.FreshRound(t0.Add(200*time.Millisecond), leaderIs("L")); ok {
		t.Fatal("a second fresh round for the same opens")
	}
	if _, asks, _ = h.Round(t0.Add(300*time.Millisecond), leaderIs("L"), 0); asks["L"].Held.Count != 3 || len(asks["L"].Requests) != 3 {
		t.Fatalf("the full round after a fresh one asks %+v", asks["L"])
	}
}

func TestAFreshRoundLeavesTheSummaryAgreementStanding(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 2, 1, 0)
	agreed(h, t0, "L", 2)
	// A topic opened and closed again before the next full round: the
	// summary is as the leader agreed, whatever a fresh round's answer
	// said meanwhile.
	open(h, "b", 5, 2, 1, 0)
	seq, _, ok := h.FreshRound(t0.Add(50*time.Millisecond), leaderIs("L"))
	if !ok {
		t.Fatal("no fresh round after an open")
	}
	h.Reply("L", &wire.LeaseReply{Seq: seq})
	h.Close(&wire.CloseTopic{Topic: []byte("b"), Shard: 5, Term: 2, Epoch: 1}, 0)
	if _, asks, _ := h.Round(t0.Add(300*time.Millisecond), leaderIs("L"), 0); asks["L"].Requests != nil {
		t.Fatalf("the fresh round's answer undid the agreement: %+v", asks["L"])
	}
}

func TestASecondAnswerToARoundIsIgnored(t *testing.T) {
	h := newHolder(t)
	open(h, "a", 3, 2, 1, 0)
	seq, asks, _ := h.Round(t0, leaderIs("L"), 0)
	// The first answer refuses; a second one to the same round
	// (duplicated, or from a confused leader) that grants is not taken.
	h.Reply("L", &wire.LeaseReply{Seq: seq, Refused: []wire.LeaseRefusal{{Shard: 3}}})
	h.Reply("L", grantAll(seq, asks["L"].Requests, 2))
	mustServe(t, h, t0.Add(time.Millisecond), "a", 1, NoLease)
}

// TestAReplyToARoundOfAnEarlierLifeGrantsNothing: a holder's rounds are
// numbered from FirstRound (from the node's generation), so a late reply
// to a round its earlier life sent, which the network delivers after a
// restart, answers no round of this life. Numbered from 1 in each life,
// it would be taken as the answer to this life's round 1 and counted from
// that round's start, past the lease the leader gave the old round.
func TestAReplyToARoundOfAnEarlierLifeGrantsNothing(t *testing.T) {
	old, err := New(Config{Lease: leaseLen, FirstRound: 1 << 32})
	if err != nil {
		t.Fatal(err)
	}
	open(old, "t", 3, 1, 1, 0)
	oldSeq, oldReqs, _ := old.Round(t0, leaderIs("L"), 0)
	if oldSeq != 1<<32+1 {
		t.Fatalf("first round of a holder from 1<<32: %d", oldSeq)
	}
	late := grantAll(oldSeq, oldReqs["L"].Requests, 1)

	// The next life, a lease later, holds the topic again and asks.
	h, err := New(Config{Lease: leaseLen, FirstRound: 2 << 32})
	if err != nil {
		t.Fatal(err)
	}
	open(h, "t", 3, 1, 1, 0)
	now := t0.Add(leaseLen)
	if seq, _, _ := h.Round(now, leaderIs("L"), 0); seq == oldSeq {
		t.Fatalf("this life's round %d is the last life's", seq)
	}
	h.Reply("L", late)
	mustServe(t, h, now, "t", 1, NoLease)
}

// TestLoadAllHoldsWhatLoadHolds: a restart's bulk load holds exactly what
// loading each topic in turn holds: the same topics, at the same epochs,
// in the same shards, with the same digests; a topic without an epoch or
// partitions is not held either way.
func TestLoadAllHoldsWhatLoadHolds(t *testing.T) {
	var cs []Change
	for i := range 1000 {
		cs = append(cs, Change{Topic: fmt.Sprintf("t%04d", i), Put: true, Held: Topic{Epoch: uint64(i%7 + 1), Partitions: uint32(i%3 + 1), Shard: uint64(i % 13)}})
	}
	cs = append(cs, Change{Topic: "no-epoch", Put: true, Held: Topic{Partitions: 1, Shard: 2}}, Change{Topic: "no-partitions", Put: true, Held: Topic{Epoch: 4, Shard: 3}})
	one, all := newHolder(t), newHolder(t)
	for _, c := range cs {
		one.Load(c.Topic, c.Held)
	}
	all.LoadAll([][]Change{cs[:300], cs[300:]})
	if one.Count() != 1000 || all.Count() != one.Count() {
		t.Fatalf("held %d one by one, %d all at once; want 1000", one.Count(), all.Count())
	}
	for _, c := range cs {
		a, okA := one.Get([]byte(c.Topic))
		b, okB := all.Get([]byte(c.Topic))
		if a != b || okA != okB {
			t.Fatalf("%s: %+v %v one by one, %+v %v all at once", c.Topic, a, okA, b, okB)
		}
	}
	for s := range uint64(14) {
		if one.Digest(s) != all.Digest(s) {
			t.Fatalf("shard %d: digest %x one by one, %x all at once", s, one.Digest(s), all.Digest(s))
		}
	}
}

// Split moves a split shard's topics to its children, each served under
// the parent's lease as long as it runs, asked for by child in the next
// round, and covered by the children's leaders' grants from then on.
func TestSplitKeepsTheTopicsServed(t *testing.T) {
	h := newHolder(t)
	for i, topic := range []string{"a", "b", "c", "d"} {
		open(h, topic, 3, 1, uint64(i+1), 0)
	}
	agreed(h, t0, "L", 1)
	mustServe(t, h, t0, "c", 3, Servable)
	child := func(topic string) uint64 {
		if topic < "c" {
			return 10
		}
		return 11
	}
	if n := h.Split(3, child); n != 4 {
		t.Fatalf("moved %d", n)
	}
	if got := h.HeldShards(); !slices.Equal(got, []uint64{10, 11}) {
		t.Fatalf("held shards %v", got)
	}
	if tp, _ := h.Get([]byte("c")); tp.Shard != 11 || tp.Epoch != 3 {
		t.Fatalf("c held as %+v", tp)
	}
	if h.Digest(10) != meta.TopicDigest("a", 1)^meta.TopicDigest("b", 2) || h.Digest(3) != 0 {
		t.Fatalf("digests %x %x", h.Digest(10), h.Digest(3))
	}
	for _, topic := range []string{"a", "d"} {
		mustServe(t, h, t0.Add(leaseLen-time.Millisecond), topic, uint64(topic[0]-'a'+1), Servable)
	}
	if err := h.checkInvariants(); err != nil {
		t.Fatal(err)
	}
	seq, asks, _ := h.Round(t0.Add(time.Second), leaderIs("M"), 1)
	var shards []uint64
	for _, q := range asks["M"].Requests {
		shards = append(shards, q.Shard)
	}
	if !slices.Equal(shards, []uint64{10, 11}) {
		t.Fatalf("the round after the split asks %v", shards)
	}
	h.Reply("M", grantAll(seq, asks["M"].Requests, 1))
	mustServe(t, h, t0.Add(time.Second+leaseLen-time.Millisecond), "b", 2, Servable)
	if h.Split(3, child) != 0 {
		t.Fatal("a second split of the same shard moved topics")
	}
}
