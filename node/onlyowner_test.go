package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/faultnet"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// The tests of this file each put one fault from docs/leases.md on a
// cluster under a produce load — from a client that reaches every node and
// from one that reaches only the topic's owner — and check what the
// clients saw: never a write acknowledged at an epoch after one at a
// higher epoch had completed (history.Check). Each failed before owners
// served under leases.

func assignTo(t *testing.T, cl *client.Client, topic, owner string) client.Assignment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var a client.Assignment
	var err error
	for range 50 {
		if a, err = cl.Assign(ctx, topic, client.AssignOptions{Owner: owner}); err == nil && a.Owner == owner {
			return a
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("assign %s to %s: %+v %v", topic, owner, a, err)
	return a
}

// ownedUnderLoad assigns topic to owner, waits until owner serves it, and
// starts writing to it through a client of owner alone ("beside-" and its
// id) and one of the other nodes given ("elsewhere").
func (fc *faultCluster) ownedUnderLoad(t *testing.T, admin *client.Client, topic, owner string, others ...string) (client.Assignment, *history.Recorder, *producers) {
	t.Helper()
	a := assignTo(t, admin, topic, owner)
	waitServes(t, fc.node(owner), topic, a.Epoch)
	rec := &history.Recorder{}
	load := startProducers(rec, topic, map[string]*client.Client{
		"beside-" + owner: fc.onlyClient(owner), "elsewhere": fc.confinedClient(others...),
	})
	return a, rec, load
}

// waitServes waits until node serves topic at epoch.
func waitServes(t *testing.T, n *Node, topic string, epoch uint64) {
	t.Helper()
	waitUntil(t, 15*time.Second, n.ID()+" serves "+topic, func() bool {
		_, r := n.lease.Serve([]byte(topic), epoch)
		return r == ownership.Servable
	})
}

func TestCutOffOwnerStopsBeforeItsTopicsNextOwnerServes(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 1)
	admin := fc.confinedClient("n1", "n2")
	// One topic whose shard's leader stays on the majority side, one whose
	// leader is cut off with the owner (its successor waits out its grants).
	away, _ := fc.topicLedBy("cut-away", "n1")
	with, _ := fc.topicLedBy("cut-with", "n3")
	epochs := map[string]uint64{}
	for _, topic := range []string{away, with} {
		a := assignTo(t, admin, topic, "n3")
		waitServes(t, fc.node("n3"), topic, a.Epoch)
		epochs[topic] = a.Epoch
	}
	rec := &history.Recorder{}
	var loads []*producers
	for _, topic := range []string{away, with} {
		loads = append(loads, startProducers(rec, topic, map[string]*client.Client{
			"beside-n3": fc.onlyClient("n3"),
			"elsewhere": fc.confinedClient("n1", "n2"),
		}))
	}
	time.Sleep(time.Second)
	cutAt := time.Now()
	fc.net.Isolate("n3")
	fc.confine("n3", true)
	for _, topic := range []string{away, with} {
		waitWrittenAbove(t, rec, topic, epochs[topic], cutAt)
	}
	time.Sleep(afterMove)
	// n3 comes back: it must not serve what moved meanwhile.
	fc.net.Heal()
	fc.confine("n3", false)
	time.Sleep(2 * afterMove)
	for _, p := range loads {
		p.stop()
	}
	ops := checkHistory(t, rec)
	for _, topic := range []string{away, with} {
		e, at := maxAckedEpoch(ops, topic)
		if e <= epochs[topic] || at.Before(cutAt) {
			t.Fatalf("%s was never written at a new owner after the cut (highest epoch %d)", topic, e)
		}
		t.Logf("%s: first write at epoch %d %v after the cut; longest unwritable stretch %v",
			topic, e, at.Sub(cutAt).Round(time.Millisecond), unwritable(ops, topic).Round(time.Millisecond))
	}
}

func TestReorderedCloseAndOpenNeverReopenATopic(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	n := c.node("n2")
	const topic = "reordered"
	// The close of epoch 3 overtakes the open of epoch 2 it supersedes.
	shard := uint64(9)
	_, term := n.lease.ReplicaLead(shard)
	if ack, ok := n.takeOwnership(nil, &wire.CloseTopic{Topic: []byte(topic), Epoch: 3, Shard: shard, Term: term}); !ok || ack.Status != wire.TopicDone || ack.Epoch != 3 {
		t.Fatalf("close: %+v %v", ack, ok)
	}
	if ack, ok := n.takeOwnership(&wire.OpenTopic{Topic: []byte(topic), Epoch: 2, Partitions: 1, Shard: shard, Term: term}, nil); !ok || ack.Status != wire.TopicBelowFloor {
		t.Fatalf("late open: %+v %v, want refused below the floor", ack, ok)
	}
	if _, ok := held(n, topic); ok {
		t.Fatal("the late open reopened the topic")
	}
	// The floor is durable: a restart does not forget it.
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	n2, err := New(nodeConfig("n2", c.dirs[1], nil, 3))
	if err != nil {
		t.Fatal(err)
	}
	defer n2.Close()
	c.nodes[1] = n2
	if ack, ok := n2.takeOwnership(&wire.OpenTopic{Topic: []byte(topic), Epoch: 3, Partitions: 1, Shard: shard, Term: term}, nil); !ok || ack.Status != wire.TopicBelowFloor {
		t.Fatalf("open at the closed epoch after a restart: %+v %v", ack, ok)
	}
	if ack, ok := n2.takeOwnership(&wire.OpenTopic{Topic: []byte(topic), Epoch: 4, Partitions: 1, Shard: shard, Term: term}, nil); !ok || ack.Status != wire.TopicDone {
		t.Fatalf("open above the floor: %+v %v", ack, ok)
	}
}

func TestOwnershipHoldsUnderReorderedDuplicatedAndLostMessages(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 2)
	admin := fc.confinedClient("n1", "n2", "n3")
	topic, _ := fc.topicLedBy("churn", "n1")
	a := assignTo(t, admin, topic, "n2")
	waitServes(t, fc.node("n2"), topic, a.Epoch)
	// Every message between nodes, SWIM's included: up to 30 ms late (so
	// reordered), one in ten twice, one in fifty lost.
	fc.net.SetDefault(faultnet.Link{DelayMax: 30 * time.Millisecond, Dup: 0.1, Loss: 0.02})
	rec := &history.Recorder{}
	load := startProducers(rec, topic, map[string]*client.Client{
		"at-n1": fc.onlyClient("n1"), "at-n2": fc.onlyClient("n2"), "at-n3": fc.onlyClient("n3"),
		"anywhere": fc.confinedClient("n1", "n2", "n3"),
	})
	// Move the topic around while the messages that move it are reordered.
	owners := []string{"n3", "n1", "n2", "n3", "n2", "n1"}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	moves := 0
	for _, o := range owners {
		from := time.Now()
		b, err := admin.Assign(ctx, topic, client.AssignOptions{Owner: o})
		if err != nil {
			time.Sleep(afterMove)
			continue
		}
		moves++
		// The load reaches the new owner before the next move.
		waitWrittenAbove(t, rec, topic, b.Epoch-1, from)
		time.Sleep(afterMove / 4)
	}
	load.stop()
	ops := checkHistory(t, rec)
	e, _ := maxAckedEpoch(ops, topic)
	t.Logf("%d moves; writes acknowledged up to epoch %d", moves, e)
	if moves < 3 || e < 3 {
		t.Fatalf("too little happened to mean anything: %d moves, highest written epoch %d", moves, e)
	}
}

func TestDeposedLeaderCannotReopenAClosedTopic(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 3)
	admin := fc.confinedClient("n1", "n2", "n3")
	topic, shard := fc.topicLedBy("deposed", "n1")
	// n2's acknowledgements to n1 are lost, so n1 owes n2 the open of the
	// topic for as long as it resends.
	fc.net.Cut("n2", "n1", uint8(wire.KindTopicAck))
	a, rec, load := fc.ownedUnderLoad(t, admin, topic, "n2", "n1", "n3")
	time.Sleep(500 * time.Millisecond)
	// n1 hands the shard to n3, which moves the topic to n1.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// raft gives a transfer up after an election timeout if n3 does not
	// catch up meanwhile (a busy machine): ask again until n3 leads.
	waitUntil(t, 20*time.Second, "n3 leads the shard", func() bool {
		if fc.node("n3").events.Leads(uint64(shard)) {
			return true
		}
		if fc.node("n1").events.Leads(uint64(shard)) {
			if err := fc.node("n1").host.TransferLeader(ctx, uint64(shard), RaftID("n3")); err != nil {
				t.Logf("transfer: %v", err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		return fc.node("n3").events.Leads(uint64(shard))
	})
	b := assignTo(t, admin, topic, "n1")
	if b.Epoch <= a.Epoch {
		t.Fatalf("move at epoch %d after %d", b.Epoch, a.Epoch)
	}
	// n1 resent its open every interval while it led: once n2 has closed
	// the topic, it must never hold it at its old epoch again.
	closed := false
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		h, ok := held(fc.node("n2"), topic)
		if !ok {
			closed = true
		} else if closed && h.Epoch <= a.Epoch {
			t.Errorf("n2 reopened %s at epoch %d after closing it (it moved to epoch %d)", topic, h.Epoch, b.Epoch)
			break
		}
	}
	load.stop()
	checkHistory(t, rec)
	if h, ok := held(fc.node("n2"), topic); ok && h.Epoch <= a.Epoch {
		t.Fatalf("n2 holds %s at epoch %d again after it moved to epoch %d", topic, h.Epoch, b.Epoch)
	}
}

func TestEveryEarlierOwnerStopsAfterAChainOfMovesAndALeaderChange(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 4)
	admin := fc.confinedClient("n1", "n2", "n3")
	topic, shard := fc.topicLedBy("chain", "n1")
	// n2, the first owner, never hears a close and never acknowledges one.
	fc.net.Cut("*", "n2", uint8(wire.KindCloseTopic))
	a, rec, load := fc.ownedUnderLoad(t, admin, topic, "n2", "n1", "n3")
	time.Sleep(300 * time.Millisecond)
	assignTo(t, admin, topic, "n3")
	time.Sleep(300 * time.Millisecond)
	c := assignTo(t, admin, topic, "n1")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := fc.node("n1").host.TransferLeader(ctx, uint64(shard), RaftID("n3")); err != nil {
		t.Fatalf("transfer: %v", err)
	}
	waitServes(t, fc.node("n1"), topic, c.Epoch)
	time.Sleep(2 * afterMove)
	load.stop()
	checkHistory(t, rec)
	if _, r := fc.node("n2").lease.Serve([]byte(topic), a.Epoch); r == ownership.Servable {
		t.Fatalf("n2 still serves %s at epoch %d, three owners later", topic, a.Epoch)
	}
}

func TestLeavingOwnerStopsServingBeforeItsTopicsMove(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 5)
	admin := fc.confinedClient("n1", "n2")
	topic, _ := fc.topicLedBy("leaving", "n1")
	a, rec, load := fc.ownedUnderLoad(t, admin, topic, "n3", "n1", "n2")
	time.Sleep(time.Second)
	// The leaving node hears no close, and the client elsewhere learns of
	// the move from n1 and n2, not from n3.
	fc.net.Cut("*", "n3", uint8(wire.KindCloseTopic))
	fc.confine("n3", true)
	leftAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fc.node("n3").Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	waitWrittenAbove(t, rec, topic, a.Epoch, leftAt)
	time.Sleep(afterMove)
	load.stop()
	ops := checkHistory(t, rec)
	e, at := maxAckedEpoch(ops, topic)
	if e <= a.Epoch {
		t.Fatalf("%s was never written at its next owner", topic)
	}
	t.Logf("%s written at epoch %d %v after n3 began to leave", topic, e, at.Sub(leftAt).Round(time.Millisecond))
}

func TestPausedOwnerRefusesOnceItsLeaseRanOut(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 6)
	admin := fc.confinedClient("n1", "n2")
	topic, _ := fc.topicLedBy("paused", "n1")
	a := assignTo(t, admin, topic, "n3")
	waitServes(t, fc.node("n3"), topic, a.Epoch)
	rec := &history.Recorder{}
	load := startProducers(rec, topic, map[string]*client.Client{"elsewhere": fc.confinedClient("n1", "n2")})
	// A client beside n3 that waits out the pause for its answer.
	patient := startProducersWaiting(rec, topic, map[string]*client.Client{"beside-n3": fc.onlyClientWaiting("n3", 10*time.Second)}, 10*time.Second)
	time.Sleep(time.Second)
	// Frozen mid-request: a produce that n3 appended waits, with every
	// message to or from n3, until the pause ends.
	pausedAt := time.Now()
	fc.pause("n3")
	// n3's lease runs out and the topic moves while n3 is frozen.
	waitWrittenAbove(t, rec, topic, a.Epoch, pausedAt)
	time.Sleep(afterMove)
	resumedAt := time.Now()
	fc.resume("n3")
	time.Sleep(2 * afterMove)
	load.stop()
	patient.stop()
	ops := checkHistory(t, rec)
	for _, o := range ops {
		if o.OK && o.Client == "beside-n3" && o.Epoch == a.Epoch && o.End.After(resumedAt) {
			t.Fatalf("n3 acknowledged a write at its old epoch after the pause: %v", &o)
		}
	}
	if e, _ := maxAckedEpoch(ops, topic); e <= a.Epoch {
		t.Fatalf("%s never moved away from the paused owner", topic)
	}
}

// TestAnOwnerThatCannotReachItsLeaderLosesItsTopicsAfterOneShortPull cuts
// the owner's messages to the leader of its topic's shard, which is also
// where the topic moves: the owner's leases lapse while SWIM, probing
// through the third node, keeps it alive, and the leader moves the topic
// to itself for the owner's silence. The OpenTopic says so, and the new
// owner asks the silent owner for its records once (or not at all), rather
// than three times, before it serves.
func TestAnOwnerThatCannotReachItsLeaderLosesItsTopicsAfterOneShortPull(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 7)
	admin := fc.confinedClient("n1", "n2")
	topic := topicMovingTo(t, fc.testCluster, "one-way", "n1", "n3")
	// A planned move first: its new owner pulls in full.
	b := assignTo(t, admin, topic, "n2")
	waitServes(t, fc.node("n2"), topic, b.Epoch)
	a := assignTo(t, admin, topic, "n3")
	waitServes(t, fc.node("n3"), topic, a.Epoch)
	if s := fc.node("n3").Stats(); s.HandoffsStarted != 1 || s.HandoffsSilent != 0 {
		t.Fatalf("n3 after a planned move: %d pulls started, %d of a silent owner; want 1 and 0", s.HandoffsStarted, s.HandoffsSilent)
	}
	rec := &history.Recorder{}
	load := startProducers(rec, topic, map[string]*client.Client{
		"beside-n3": fc.onlyClient("n3"), "elsewhere": fc.confinedClient("n1", "n2"),
	})
	time.Sleep(500 * time.Millisecond)
	cutAt := fc.cutWhileLeading(t, rec, topic, a.Epoch, "n3", "n1", func() { fc.net.Cut("n3", "n1") }, func() { fc.net.HealLink("n3", "n1") })
	time.Sleep(afterMove)
	load.stop()
	ops := checkHistory(t, rec)
	e, at := maxAckedEpoch(ops, topic)
	pulls := fc.deliveredFrames("n1", "n3", wire.KindRecordsPull)
	t.Logf("%s written at epoch %d %v after the one-way cut; longest unwritable stretch %v; n3 got %d record pulls",
		topic, e, at.Sub(cutAt).Round(time.Millisecond), unwritable(ops, topic).Round(time.Millisecond), pulls)
	if owner := fc.node("n1"); owner.Stats().HandoffsSilent != 1 {
		t.Fatalf("n1 took %s without being told n3 was silent (%d such pulls)", topic, owner.Stats().HandoffsSilent)
	}
	if pulls > 1 {
		t.Fatalf("n1 asked the silent n3 for its records %d times, want at most once", pulls)
	}
}

// An owner whose peer connection to its shard's leader is gone both ways
// (what a one-way cut does to TCP: the other side's acknowledgements are
// lost too), while SWIM, through the third node, keeps it alive: the
// leader's Close cannot reach it, and the topic moves to the third node,
// which can reach it. Its lease lapsed, so the owner hands its records
// over at once, without the Close: the new owner copies all of them and
// serves, rather than waiting for a Close that comes only once the cut
// heals.
func TestAnOwnerCutOffFromItsLeaderHandsItsRecordsOverWithoutTheClose(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 11)
	admin := fc.confinedClient("n1", "n2")
	topic := topicLedByMovingTo(t, fc.testCluster, "cut-off", "n1", "n2", "n3")
	a, rec, load := fc.ownedUnderLoad(t, admin, topic, "n3", "n1", "n2")
	time.Sleep(500 * time.Millisecond)
	cutAt := fc.cutWhileLeading(t, rec, topic, a.Epoch, "n3", "n1", func() { fc.net.Partition([]string{"n3"}, []string{"n1"}) }, fc.net.Heal)
	time.Sleep(afterMove)
	load.stop()
	ops := checkHistory(t, rec)
	e, at := maxAckedEpoch(ops, topic)
	s := fc.node("n2").Stats()
	t.Logf("%s written at epoch %d by n2 %v after the cut; longest unwritable stretch %v; n2 copied %d records",
		topic, e, at.Sub(cutAt).Round(time.Millisecond), unwritable(ops, topic).Round(time.Millisecond), s.HandoffRecords)
	if s.HandoffsStarted != 1 || s.HandoffsCut != 0 {
		t.Fatalf("n2 started %d pulls, %d of them ended before the last record; want 1 and 0", s.HandoffsStarted, s.HandoffsCut)
	}
	if s.HandoffRecords == 0 {
		t.Fatalf("n2 copied none of the records n3 acknowledged")
	}
}

// cutWhileLeading makes a cut (cut) that keeps owner's messages from
// leader, the leader of topic's shard, and waits for a write of topic
// above epoch; it returns when the cut began. The test is about an owner
// that cannot reach its shard's leader: should the leadership pass to the
// owner meanwhile (the leader stalled for an election timeout on a loaded
// machine and the owner won the election; the cut then keeps the
// leadership from coming back, as a transfer's message cannot reach the
// leader), the owner reaches its leader and rightly keeps the topic. Then
// the cut is healed (heal), the leadership comes back to leader, and the
// cut is made again, at most three times in all.
func (fc *faultCluster) cutWhileLeading(t *testing.T, rec *history.Recorder, topic string, epoch uint64, owner, leader string, cut, heal func()) time.Time {
	t.Helper()
	shard := uint64(router.ShardOf([]byte(topic), testShards))
	for try := 1; ; try++ {
		waitUntil(t, 30*time.Second, leader+" leads the shard of "+topic, func() bool {
			return fc.node(leader).events.Leads(shard) && !fc.node(owner).events.Leads(shard)
		})
		cutAt := time.Now()
		cut()
		var moved bool
		waitUntil(t, 30*time.Second, fmt.Sprintf("a write of %s above epoch %d", topic, epoch), func() bool {
			for _, o := range rec.Ops() {
				if o.OK && o.Topic == topic && o.Epoch > epoch && o.End.After(cutAt) {
					moved = true
					return true
				}
			}
			return try < 3 && fc.node(owner).events.Leads(shard)
		})
		if moved {
			return cutAt
		}
		t.Logf("%s took the leadership of shard %d over from %s after the cut; healing it and cutting again", owner, shard, leader)
		heal()
	}
}

// topicMovingTo returns a topic, with prefix, whose shard leader is to and
// which the leader moves to itself when it moves the topic off from (the
// shard holding no other topic).
func topicMovingTo(t *testing.T, c *testCluster, prefix, to, from string) string {
	t.Helper()
	return topicLedByMovingTo(t, c, prefix, to, to, from)
}

// topicLedByMovingTo returns a topic, with prefix, whose shard leader is
// leader and which moves to to when it moves off from (the shard holding
// no other topic).
func topicLedByMovingTo(t *testing.T, c *testCluster, prefix, leader, to, from string) string {
	t.Helper()
	var others []meta.Node
	for _, n := range c.nodes {
		if n.ID() != from {
			others = append(others, meta.Node{ID: n.ID()})
		}
	}
	for i := range 1000 {
		topic, _ := c.topicLedBy(fmt.Sprintf("%s-%d", prefix, i), leader)
		if meta.ChooseOwner([]byte(topic), others) == to {
			return topic
		}
	}
	t.Fatalf("no topic led by %s moves to %s off %s", leader, to, from)
	return ""
}
