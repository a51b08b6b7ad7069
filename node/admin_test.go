package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/wire"
)

// restart closes node i of c and starts it again from its directory.
func (c *testCluster) restart(t *testing.T, i int) *Node {
	t.Helper()
	id := c.nodes[i].ID()
	if err := c.nodes[i].Close(); err != nil {
		t.Fatal(err)
	}
	var seed string
	for _, o := range c.nodes {
		if o.ID() != id {
			_, _, seed = o.Addrs()
			break
		}
	}
	n, err := New(nodeConfig(id, c.dirs[i], []string{seed}, len(c.nodes)))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[i] = n
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.Ready():
	case <-time.After(20 * time.Second):
		t.Fatalf("restarted %s not ready: %+v", id, n.Status())
	}
	return n
}

// noPreferredLeadership reports whether n's placement leaves id no
// preferred leadership.
func noPreferredLeadership(n *Node, id string) bool {
	v := n.view.Load()
	for s := range uint32(testShards) {
		if v.Placement().Leader(s) == id {
			return false
		}
	}
	return true
}

func owners(ctx context.Context, t *testing.T, cl *client.Client, topics []string) map[string]string {
	t.Helper()
	out := make(map[string]string, len(topics))
	for _, topic := range topics {
		a, err := cl.Lookup(ctx, topic, true)
		if err != nil {
			t.Fatalf("lookup %s: %v", topic, err)
		}
		out[topic] = a.Owner
	}
	return out
}

func TestDrainMovesTopicsAndLeadershipsAwayUntilUndrain(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	var topics []string
	for i := range 20 {
		topic := fmt.Sprintf("drained-%02d", i)
		if _, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
		topics = append(topics, topic)
	}
	n3 := c.node("n3")
	waitUntil(t, 10*time.Second, "n3 holds its topics", func() bool { return n3.Status().TopicsOwned == 20 })
	led := n3.Status().ShardsLed
	if led == 0 {
		t.Fatal("n3 leads no shard to move")
	}
	// Records written at n3 go with the topic.
	s := &seen{t: t, recs: map[string]client.Record{}}
	a0, _ := cl.Lookup(ctx, topics[0], true)
	waitUntil(t, 10*time.Second, "n3 serves "+topics[0], func() bool { return n3.Guard(topics[0], a0.Epoch).Check() == nil })
	s.produce(ctx, cl, topics[0], "before the drain", a0.Epoch)

	var looks int
	res, err := cl.Drain(ctx, "n3", func(p client.DrainProgress) { looks++ })
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if res.Node != "n3" || res.TopicsMoved != 20 || res.LeadersMoved != uint64(led) || looks == 0 {
		t.Fatalf("drain result %+v after %d looks; n3 owned 20 topics and led %d shards", res, looks, led)
	}
	if st := n3.Status(); st.TopicsOwned != 0 || st.ShardsLed != 0 {
		t.Fatalf("drained n3: %+v", st)
	}
	for topic, owner := range owners(ctx, t, cl, topics) {
		if owner == "n3" {
			t.Fatalf("%s still owned by drained n3", topic)
		}
	}
	// Moved through the ownership path: a new epoch, served by the new
	// owner.
	if p, err := cl.Produce(ctx, topics[0], [][]byte{[]byte("after the drain")}); err != nil || p.Epoch < 2 {
		t.Fatalf("produce to a moved topic: %+v %v", p, err)
	} else {
		s.add("produce", topics[0], client.Record{Offset: p.Offset, Epoch: p.Epoch, Value: []byte("after the drain")})
	}
	if got := s.fetchAll(ctx, cl, topics[0]); fmt.Sprint(got) != "[before the drain after the drain]" {
		t.Fatalf("%s after the drain serves %v", topics[0], got)
	}
	// New topics avoid it; naming it is refused.
	for i := range 20 {
		a, err := cl.Assign(ctx, fmt.Sprintf("after-drain-%02d", i), client.AssignOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if a.Owner == "n3" {
			t.Fatalf("%s assigned to drained n3", a.Topic)
		}
	}
	if _, err := cl.Assign(ctx, "onto-drained", client.AssignOptions{Owner: "n3"}); !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("assign naming drained n3: %v", err)
	}
	// Draining again finds nothing to move.
	if again, err := cl.Drain(ctx, "n3", nil); err != nil || again.TopicsMoved != 0 || again.LeadersMoved != 0 {
		t.Fatalf("second drain: %+v %v", again, err)
	}

	// The mark survives a restart of the drained node and of another: both
	// know it, and no placement gives n3 a leadership.
	n3 = c.restart(t, 2)
	if !n3.marks.Drained() {
		t.Fatal("restarted n3 forgot its drain mark")
	}
	n1 := c.restart(t, 0)
	cl = clientOf(t, n1)
	waitUntil(t, 10*time.Second, "restarted n1 sees n3 drained", func() bool { return n1.view.Load().Drained("n3") })
	for _, n := range c.nodes {
		if !noPreferredLeadership(n, "n3") {
			t.Fatalf("%s's placement gives drained n3 a leadership", n.ID())
		}
	}
	if _, err := cl.Assign(ctx, "onto-drained", client.AssignOptions{Owner: "n3"}); !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("assign naming drained n3 after restarts: %v", err)
	}

	// Undrain: it takes topics and leaderships again.
	if p, err := cl.Undrain(ctx, "n3"); err != nil || p.Node != "n3" {
		t.Fatalf("undrain: %+v %v", p, err)
	}
	waitUntil(t, 30*time.Second, "n3 leads again", func() bool { return n3.Status().ShardsLed > 0 })
	waitUntil(t, 10*time.Second, "every node sees n3 undrained", func() bool {
		for _, n := range c.nodes {
			if n.view.Load().Drained("n3") {
				return false
			}
		}
		return true
	})
	if a, err := cl.Assign(ctx, "onto-undrained", client.AssignOptions{Owner: "n3"}); err != nil || a.Owner != "n3" {
		t.Fatalf("assign to undrained n3: %+v %v", a, err)
	}
}

func TestTransferLeaderMovesAShardToAVoterAndKeepsItThere(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	shards, err := cl.Shards(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A shard and a voter of it that does not lead it, and a node that is
	// not a replica of it.
	var shard uint64
	var to, stranger string
	for _, s := range shards {
		if len(s.Replicas) != 3 || s.Leader == "" {
			continue
		}
		for _, r := range s.Replicas {
			if r != s.Leader {
				to = r
			}
		}
		for _, n := range c.nodes {
			if !contains(s.Replicas, n.ID()) {
				stranger = n.ID()
			}
		}
		shard = s.Shard
		break
	}
	if to == "" || stranger == "" {
		t.Fatalf("no shard with a follower and a stranger: %+v", shards)
	}
	_, before, _ := c.node("n1").ShardLeader(uint32(shard))
	got, err := cl.TransferLeader(ctx, shard, to)
	if err != nil {
		t.Fatalf("transfer-leader %d %s: %v", shard, to, err)
	}
	if got.Shard != shard || got.Leader != to || got.Term <= before {
		t.Fatalf("transfer-leader answered %+v (term before %d)", got, before)
	}
	target := c.node(to)
	if !target.events.Leads(shard) || !target.rec.Pinned(shard, target.view.Load().Rec()) {
		t.Fatalf("%s does not lead shard %d, or forgot to keep it", to, shard)
	}
	// The shard manager leaves it there: a whole pass over the shards
	// starts no transfer of it.
	waitUntil(t, 10*time.Second, "no shard-manager pass in flight", func() bool { return target.rec.BeginPass() })
	target.reconciler.ManagePass(target.view.Load().Rec(), target.events.ShardEvents(), mustShards(t, target))
	if !target.events.Leads(shard) {
		t.Fatalf("%s handed shard %d back", to, shard)
	}

	_, err = cl.TransferLeader(ctx, shard, stranger)
	if !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("transfer to %s, not a replica: %v", stranger, err)
	}
	if _, err := cl.TransferLeader(ctx, testShards, to); !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("transfer of a shard past the last: %v", err)
	}
	if _, err := cl.TransferLeader(ctx, shard, "n9"); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("transfer to an unknown node: %v", err)
	}
}

// namesOf returns the node ids of raft ids as n knows them (the raft id
// in hex when unknown), sorted.
func namesOf(n *Node, ids []uint64) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if name, ok := n.nameOf(id); ok {
			out = append(out, name)
		} else {
			out = append(out, fmt.Sprintf("%x", id))
		}
	}
	slices.Sort(out)
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func mustShards(t *testing.T, n *Node) []raftmux.Info {
	t.Helper()
	infos, err := n.host.Shards(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return infos
}

func TestRemoveReplacesTheReplicasOfAStoppedNodeAndKeepsItOut(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	if _, err := cl.RemoveNode(ctx, "n4", client.RemoveOptions{}); !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("remove of a live node without force: %v", err)
	}
	if _, err := cl.RemoveNode(ctx, "n9", client.RemoveOptions{}); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("remove of an unknown node: %v", err)
	}
	hosted := c.node("n4").Status().ShardsHosted
	if hosted == 0 {
		t.Fatal("n4 hosts no replica")
	}
	if err := c.node("n4").Close(); err != nil {
		t.Fatal(err)
	}
	// Every live member is asked and refuses while it still sees n4
	// alive: wait until each has declared it dead.
	waitUntil(t, 20*time.Second, "n4 declared dead", func() bool {
		for _, id := range []string{"n1", "n2", "n3"} {
			if !c.node(id).view.Load().Dead["n4"] {
				return false
			}
		}
		return true
	})
	var looks int
	res, err := cl.RemoveNode(ctx, "n4", client.RemoveOptions{Progress: func(uint64) { looks++ }})
	if err != nil {
		t.Fatalf("remove: %v", err)
	}
	if res.Node != "n4" || res.ShardsReplaced == 0 || looks == 0 {
		t.Fatalf("remove result %+v after %d looks; n4 hosted %d replicas", res, looks, hosted)
	}
	// No group counts n4; every shard has three voters again.
	for _, n := range c.nodes[:3] {
		for _, in := range mustShards(t, n) {
			if contains(namesOf(n, in.Voters), "n4") || contains(namesOf(n, in.Learners), "n4") {
				t.Fatalf("%s: shard %d still counts n4: voters %v", n.ID(), in.Shard, namesOf(n, in.Voters))
			}
		}
	}
	waitUntil(t, 30*time.Second, "three voters per shard", func() bool {
		shards, err := cl.Shards(ctx)
		if err != nil {
			return false
		}
		for _, s := range shards {
			if len(s.Replicas) != 3 {
				return false
			}
		}
		return true
	})
	for _, n := range c.nodes[:3] {
		if n.marks.Removals() != 1 {
			t.Fatalf("%s knows %d removals", n.ID(), n.marks.Removals())
		}
	}

	// n4 back with its old data stays out, and says so.
	_, _, seed := c.node("n1").Addrs()
	old, err := New(nodeConfig("n4", c.dirs[3], []string{seed}, 4))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[3] = old
	if err := old.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "n4 with its old data finds itself removed", old.marks.Out)
	waitUntil(t, 10*time.Second, "the others see n4 alive in SWIM", func() bool {
		m, ok := c.node("n1").view.Load().Members["n4"]
		return ok && m.Generation == old.Generation()
	})
	for _, n := range c.nodes[:3] {
		if v := n.view.Load(); contains(v.Live, "n4") {
			t.Fatalf("%s counts the removed n4 live", n.ID())
		}
	}
	members, err := cl.Members(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		if m.ID == "n4" && m.State != wire.MemberLeft {
			t.Fatalf("members shows the removed n4 %v", m.State)
		}
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}
	// n4 on an empty data directory joins as new.
	fresh, err := New(nodeConfig("n4", t.TempDir(), []string{seed}, 4))
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[3] = fresh
	if err := fresh.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 30*time.Second, "the new n4 counts live everywhere", func() bool {
		for _, n := range c.nodes {
			if !contains(n.view.Load().Live, "n4") {
				return false
			}
		}
		return true
	})
	if fresh.marks.Out() {
		t.Fatal("the new n4 took itself for removed")
	}
}

// TestDrainedOwnerStopsBeforeItsTopicsNextOwnerServes: a drain moves
// topics through the ownership path, so producers on both sides of the
// move never see two owners (history.Check), even when the drained node
// hears no CloseTopic and its next owners must wait its leases out; one
// topic's shard is led by the drained node itself, whose leadership moves
// too.
func TestDrainedOwnerStopsBeforeItsTopicsNextOwnerServes(t *testing.T) {
	t.Parallel()
	fc := startFaultCluster(t, 3, 11)
	admin := fc.confinedClient("n1", "n2")
	away, _ := fc.topicLedBy("drain-away", "n1")
	with, _ := fc.topicLedBy("drain-with", "n3")
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
	fc.net.Cut("*", "n3", uint8(wire.KindCloseTopic))
	drainedAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.Drain(ctx, "n3", nil); err != nil {
		t.Fatalf("drain: %v", err)
	}
	time.Sleep(2 * time.Second)
	for _, p := range loads {
		p.stop()
	}
	ops := checkHistory(t, rec)
	for _, topic := range []string{away, with} {
		e, at := maxAckedEpoch(ops, topic)
		if e <= epochs[topic] || at.Before(drainedAt) {
			t.Fatalf("%s was never written at its next owner after the drain (highest epoch %d)", topic, e)
		}
		t.Logf("%s: first write at epoch %d %v after the drain began", topic, e, at.Sub(drainedAt).Round(time.Millisecond))
	}
}
