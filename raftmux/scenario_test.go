package raftmux_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
)

func TestStoppedHostsShardsFailOverAndRestartedHostCatchesUp(t *testing.T) {
	const n = 32
	c := newCluster(t, 3, nil)
	shards := shardList(n)
	c.bootstrap(n, []uint64{1, 2, 3})
	leaders := c.waitLeaders(shards, 10*time.Second)
	for _, s := range shards {
		if _, err := c.propose(s, fmt.Appendf(nil, "before-%d", s)); err != nil {
			t.Fatal(err)
		}
	}
	c.stop(1)
	for _, id := range c.ids() {
		c.hosts[id].NodeDead(1)
	}
	after := c.waitLeaders(shards, 10*time.Second)
	for _, s := range shards {
		if after[s] == 1 {
			t.Fatalf("shard %d still led by the stopped host", s)
		}
		if leaders[s] != 1 && after[s] != leaders[s] {
			t.Logf("shard %d moved from %d to %d although its leader lived", s, leaders[s], after[s])
		}
	}
	for _, s := range shards {
		if _, err := c.propose(s, fmt.Appendf(nil, "during-%d", s)); err != nil {
			t.Fatal(err)
		}
	}
	c.start(1)
	for _, id := range c.ids() {
		if id != 1 {
			c.hosts[id].NodeAlive(1)
		}
	}
	for _, s := range shards {
		if _, err := c.propose(s, fmt.Appendf(nil, "after-%d", s)); err != nil {
			t.Fatal(err)
		}
	}
	c.waitFor("restarted host to apply everything", 10*time.Second, func() bool {
		for _, s := range shards {
			if _, log := c.kvs[1].Log(s); len(log) < 3 {
				return false
			}
		}
		return true
	})
	c.checkSameLogs(shards)
}

func quiesced(c *cluster, shard uint64) bool { return c.obs().Quiesced(shard) }

func TestIdleGroupQuiescesAndWakes(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(4, []uint64{1, 2, 3})
	shards := shardList(4)
	c.waitLeaders(shards, 5*time.Second)
	c.waitFor("all groups to quiesce", 5*time.Second, func() bool {
		for _, s := range shards {
			if !quiesced(c, s) {
				return false
			}
		}
		return true
	})
	// A quiesced group sends nothing: the network stays silent.
	before := c.net.Frames()
	time.Sleep(20 * testTick)
	if d := c.net.Frames() - before; d != 0 {
		t.Fatalf("%d frames sent while every group was quiesced", d)
	}

	// A proposal wakes the group, commits, and the group sleeps again; the
	// leader, back from a quiescence longer than an election timeout, keeps
	// its leadership (CheckQuorum does not count the silence against it).
	before0 := c.infos()
	time.Sleep(30 * testTick)
	if _, err := c.propose(0, []byte("wake")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("group to quiesce again", 5*time.Second, func() bool { return quiesced(c, 0) })
	time.Sleep(30 * testTick)
	if _, err := c.propose(0, []byte("wake again")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("group to quiesce again", 5*time.Second, func() bool { return quiesced(c, 0) })
	for id, m := range c.infos() {
		if b := before0[id][0]; m[0].Leader != b.Leader || m[0].Term != b.Term {
			t.Fatalf("host %d: leader/term moved from %d/%d to %d/%d across quiescence", id, b.Leader, b.Term, m[0].Leader, m[0].Term)
		}
	}
	c.checkSameLogs(shards)

	// A quiesced group does not elect on its own, even with its leader gone.
	l, _ := c.leaders([]uint64{1})
	lead := l[1]
	c.stop(lead)
	time.Sleep(40 * testTick) // two to four election timeouts
	if inf := c.infos(); inf[c.ids()[0]][1].Leader != lead {
		t.Fatalf("quiesced follower changed leader on its own: %+v", inf[c.ids()[0]][1])
	}
	// Reported dead, it elects at once.
	for _, id := range c.ids() {
		c.hosts[id].NodeDead(lead)
	}
	after := c.waitLeaders(shards, 5*time.Second)
	for _, s := range shards {
		if after[s] == lead {
			t.Fatalf("shard %d still led by dead host %d", s, lead)
		}
	}
	if _, err := c.propose(1, []byte("after failover")); err != nil {
		t.Fatal(err)
	}
}

func TestDeadFollowerDoesNotKeepGroupAwake(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	follower := lead%3 + 1
	c.stop(follower)
	if _, err := c.propose(0, []byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * testTick)
	if inf := c.infos(); inf[lead][0].Quiesced {
		t.Fatal("leader quiesced although a live-reported follower lags")
	}
	for _, id := range c.ids() {
		c.hosts[id].NodeDead(follower)
	}
	c.waitFor("quiescence without the dead follower", 5*time.Second, func() bool { return quiesced(c, 0) })
	// Back alive: the leader wakes and catches it up.
	c.start(follower)
	for _, id := range c.ids() {
		if id != follower {
			c.hosts[id].NodeAlive(follower)
		}
	}
	c.waitFor("follower to catch up", 5*time.Second, func() bool {
		_, log := c.kvs[follower].Log(0)
		return len(log) == 1
	})
	c.checkSameLogs([]uint64{0})
}

func TestSuspectedLeaderOfQuiescedGroupIsPinged(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	c.waitFor("quiescence", 5*time.Second, func() bool { return quiesced(c, 0) })
	for _, id := range c.ids() {
		c.hosts[id].NodeSuspect(lead)
	}
	// The leader is alive: it answers the wake-up, keeps leadership, and
	// the group goes back to sleep.
	c.waitFor("group to sleep again", 5*time.Second, func() bool { return quiesced(c, 0) })
	if l := c.waitLeaders([]uint64{0}, time.Second)[0]; l != lead {
		t.Fatalf("leader moved from %d to %d on a false suspicion", lead, l)
	}
}

func TestSilentSuspectedLeaderIsVotedOut(t *testing.T) {
	c := newCluster(t, 3, nil)
	const n = 30
	shards := make([]uint64, n)
	for i := range shards {
		shards[i] = uint64(i)
	}
	c.bootstrap(n, []uint64{1, 2, 3})
	c.waitLeaders(shards, 10*time.Second)
	c.waitFor("quiescence", 10*time.Second, func() bool {
		for _, s := range shards {
			if !quiesced(c, s) {
				return false
			}
		}
		return true
	})
	before, _ := c.leaders(shards)
	var led []uint64
	for _, s := range shards {
		if before[s] == 1 {
			led = append(led, s)
		}
	}
	if len(led) == 0 {
		t.Fatal("host 1 leads no shard")
	}
	// Host 1 stops; the others only suspect it, and never hear it is dead.
	c.stop(1)
	for _, id := range c.ids() {
		c.hosts[id].NodeSuspect(1)
	}
	after := c.waitLeaders(led, 10*time.Second)
	for _, s := range led {
		// The one deterministic candidate among the voters left, [2 3],
		// campaigned; an ordinary election timeout would have picked
		// either at random.
		if want := []uint64{2, 3}[s%2]; after[s] != want {
			t.Errorf("shard %d: new leader %d, want the suspicion's candidate %d", s, after[s], want)
		}
	}
	for _, s := range led {
		if _, err := c.propose(s, []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLearnerPromotedThenReplicaRemoved(t *testing.T) {
	c := newCluster(t, 4, nil)
	ctx := context.Background()
	lead := groupOfThree(t, c, 7)
	for i := 0; i < 5; i++ {
		if _, err := c.propose(7, fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	h := c.hosts[lead]
	cs, err := h.AddLearner(ctx, 7, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cs.Learners, 4) {
		t.Fatalf("conf state after AddLearner: %v", cs)
	}
	// The learner is created empty by the leader's first message and filled
	// by a snapshot.
	c.waitFor("learner snapshot", 5*time.Second, func() bool { return c.stores[4].Len(7) == 5 })
	if _, err := c.propose(7, []byte("k5")); err != nil {
		t.Fatal(err)
	}
	var cs2 *raftpb.ConfState
	c.waitFor("promotion", 5*time.Second, func() bool {
		cs, err := c.hosts[lead].Promote(ctx, 7, 4)
		if err == nil {
			cs2 = cs
			return true
		}
		if !errors.Is(err, raftmux.ErrDropped) {
			t.Fatal(err)
		}
		return false
	})
	if !slices.Contains(cs2.Voters, 4) {
		t.Fatalf("voters after Promote: %v", cs2.Voters)
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	c.waitFor("removal", 5*time.Second, func() bool {
		_, err := c.hosts[lead].RemoveReplica(ctx, 7, victim)
		if err != nil && !errors.Is(err, raftmux.ErrDropped) {
			t.Fatal(err)
		}
		return err == nil
	})
	c.waitFor("removed replica to delete its data", 5*time.Second, func() bool {
		_, hosted := c.infos()[victim][7]
		return !hosted && c.stores[victim].Len(7) == 0
	})
	if _, err := c.propose(7, []byte("k6")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("new voter to apply", 5*time.Second, func() bool { return c.stores[4].Len(7) == 7 })
}

func TestPartitionedLeaderIsReplaced(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	c.waitFor("quiescence", 5*time.Second, func() bool { return quiesced(c, 0) })
	var others []uint64
	for _, id := range c.ids() {
		if id != lead {
			others = append(others, id)
		}
	}
	c.net.Partition([]uint64{lead}, others)
	// The majority side's failure detector suspects the leader: its
	// followers wake, find it silent, and elect by ordinary timeouts.
	for _, id := range others {
		c.hosts[id].NodeSuspect(lead)
	}
	// The cut-off leader, woken by a proposal, cannot commit it and
	// CheckQuorum makes it step down: the proposal fails, it is not lost.
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.hosts[lead].Propose(ctx, 0, []byte("lost"))
		errc <- err
	}()
	c.waitFor("new leader on the majority side", 10*time.Second, func() bool {
		inf := c.infos()
		for _, id := range others {
			if inf[id][0].Leader == id {
				return true
			}
		}
		return false
	})
	if err := <-errc; !errors.Is(err, raftmux.ErrOutcomeUnknown) {
		t.Fatalf("proposal on the cut-off leader: %v, want ErrOutcomeUnknown", err)
	}
	if _, err := c.hosts[lead].Propose(context.Background(), 0, []byte("lost")); !errors.Is(err, raftmux.ErrNotLeader) {
		t.Fatalf("propose on the stepped-down leader: %v", err)
	}
	if _, err := c.propose(0, []byte("majority")); err != nil {
		t.Fatal(err)
	}
	c.net.Heal()
	c.waitFor("old leader to catch up", 10*time.Second, func() bool {
		_, log := c.kvs[lead].Log(0)
		return len(log) > 0 && log[len(log)-1].Data == "majority"
	})
	c.checkSameLogs([]uint64{0})
}

func TestLaggingFollowerGetsSnapshot(t *testing.T) {
	const shards = 4
	c := newCluster(t, 3, func(cfg *raftmux.Config) {
		cfg.CompactionOverhead = 16
		cfg.CompactionKeep = 4
		cfg.SnapshotChunkSize = 64 // several chunks
		cfg.MaxConcurrentSnapshots = 1
	})
	c.bootstrap(1, []uint64{1, 2, 3})
	for s := uint64(1); s < shards; s++ {
		for _, v := range []uint64{1, 2, 3} {
			if err := c.hosts[v].Bootstrap(context.Background(), s, []uint64{1, 2, 3}); err != nil {
				t.Fatal(err)
			}
		}
		// All led by one host, so its single snapshot slot is contended.
		if err := c.hosts[c.ids()[0]].Campaign(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	leaders := c.waitLeaders(shardList(shards), 5*time.Second)
	lagger := leaders[0]%3 + 1
	c.net.SetFilter(func(from, to uint64) bool { return from != lagger && to != lagger })
	for s := uint64(0); s < shards; s++ {
		if leaders[s] == lagger {
			continue
		}
		for i := 0; i < 60; i++ {
			if _, err := c.propose(s, fmt.Appendf(nil, "key%05d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	c.net.Heal()
	for s := uint64(0); s < shards; s++ {
		if leaders[s] == lagger {
			continue
		}
		// The store may hold the snapshot's data a moment before the state
		// machine is told.
		c.waitFor("lagger to install a snapshot", 10*time.Second, func() bool {
			base, log := c.kvs[lagger].Log(s)
			return c.stores[lagger].Len(s) == 60 && (base != 1 || len(log) >= 60)
		})
		base, _ := c.kvs[lagger].Log(s)
		if base < 16 {
			t.Fatalf("shard %d: lagger caught up from the log (snapshot base %d), compaction did not force a snapshot", s, base)
		}
		v, _ := c.stores[lagger].Get(s, []byte("key00059"))
		if string(v) != "key00059" {
			t.Fatalf("shard %d: value after snapshot = %q", s, v)
		}
	}
}

func TestReadIndexAndLeaderTransfer(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	idx, err := c.propose(0, []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, id := range c.ids() {
		ri, err := c.hosts[id].ReadIndex(ctx, 0)
		if err != nil {
			t.Fatalf("host %d: %v", id, err)
		}
		if ri < idx {
			t.Fatalf("host %d: read index %d below acknowledged write %d", id, ri, idx)
		}
	}
	target := lead%3 + 1
	if err := c.hosts[lead].TransferLeader(ctx, 0, target); err != nil {
		t.Fatal(err)
	}
	c.waitFor("transfer", 5*time.Second, func() bool {
		l, ok := c.leaders([]uint64{0})
		return ok && l[0] == target
	})
	c.mu.Lock()
	var sawTarget bool
	for _, lc := range c.changes {
		sawTarget = sawTarget || (lc.Shard == 0 && lc.Leader == target && lc.Term > 1)
	}
	c.mu.Unlock()
	if !sawTarget {
		t.Fatal("no leadership-change callback for the transfer")
	}
	// Reads still work after a quiescence of the new leader.
	c.waitFor("quiescence", 5*time.Second, func() bool { return quiesced(c, 0) })
	if ri, err := c.hosts[lead].ReadIndex(ctx, 0); err != nil || ri < idx {
		t.Fatalf("read after transfer: %d, %v", ri, err)
	}
}

// A voter that bootstraps after its peers already elected (and messaged it,
// creating an empty replica) still joins with its bootstrap state.
func TestLateBootstrapAfterPeersElected(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	voters := []uint64{1, 2, 3}
	for _, v := range []uint64{2, 3} {
		if err := c.hosts[v].Bootstrap(ctx, 0, voters); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.hosts[2].Campaign(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.propose(0, []byte("early")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("an empty replica on the late host", 5*time.Second, func() bool {
		_, ok := c.infos()[1][0]
		return ok
	})
	// Either the empty replica is still empty and gets bootstrapped, or the
	// leader filled it with a snapshot first and it is already a member.
	if err := c.hosts[1].Bootstrap(ctx, 0, voters); err != nil && !errors.Is(err, raftmux.ErrShardExists) {
		t.Fatal(err)
	}
	if err := c.hosts[1].Bootstrap(ctx, 0, voters); !errors.Is(err, raftmux.ErrShardExists) {
		t.Fatalf("second bootstrap: %v, want ErrShardExists", err)
	}
	if _, err := c.propose(0, []byte("late")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("late host to apply", 5*time.Second, func() bool {
		v, _ := c.stores[1].Get(0, []byte("late"))
		return string(v) == "late"
	})
	c.checkSameLogs([]uint64{0})
}

// Heartbeats of many groups travel as tuples in one frame per host pair,
// never as raft messages.
func TestHeartbeatsAreCoalesced(t *testing.T) {
	const shards = 64
	c := newCluster(t, 3, func(cfg *raftmux.Config) { cfg.DisableQuiesce = true; cfg.Workers = 1 })
	c.bootstrap(shards, []uint64{1, 2, 3})
	c.waitLeaders(shardList(shards), 10*time.Second)
	f0, h0 := c.net.Frames(), c.net.HeartbeatTuples()
	const ticks = 20
	time.Sleep(ticks * testTick)
	frames, tuples := c.net.Frames()-f0, c.net.HeartbeatTuples()-h0
	if n := c.net.Messages(raftpb.MsgHeartbeat) + c.net.Messages(raftpb.MsgHeartbeatResp); n != 0 {
		t.Fatalf("%d heartbeats went out as raft messages", n)
	}
	// Every group heartbeats every tick (when the loaded test machine lets
	// the clock run); a frame from one host to another carries the tuples of
	// all the groups involved, about a third of them each.
	if tuples < 4*shards {
		t.Fatalf("only %d heartbeat tuples in %d ticks of %d awake groups", tuples, ticks, shards)
	}
	if perFrame := float64(tuples) / float64(frames); perFrame < 8 {
		t.Fatalf("%.1f heartbeat tuples per frame for %d groups: not coalesced per host pair", perFrame, shards)
	}
}

// TestReplicaRemovedAndAddedBackWhileDown: a stopped replica is removed from
// its group and added back as a learner before it returns. On its return it
// receives both changes at once. It must not delete the data it
// acknowledged because the first change left it out: the leader counts on
// that data, and a replica that deleted it would later be told of a commit
// index beyond its log.
func TestReplicaRemovedAndAddedBackWhileDown(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	for i := range 3 {
		if _, err := c.propose(0, fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	c.waitFor("victim to apply", 5*time.Second, func() bool { return c.stores[victim].Len(0) == 3 })
	c.stop(victim)
	h := c.hosts[lead]
	change := func(what string, f func() error) {
		c.waitFor(what, 5*time.Second, func() bool {
			err := f()
			if err != nil && !errors.Is(err, raftmux.ErrDropped) {
				t.Fatalf("%s: %v", what, err)
			}
			return err == nil
		})
	}
	change("removal", func() error { _, err := h.RemoveReplica(ctx, 0, victim); return err })
	change("learner", func() error { _, err := h.AddLearner(ctx, 0, victim); return err })
	if _, err := c.propose(0, []byte("k3")); err != nil {
		t.Fatal(err)
	}
	c.start(victim)
	c.waitFor("returning learner to apply everything", 5*time.Second, func() bool {
		inf, ok := c.infos()[victim][0]
		return ok && c.stores[victim].Len(0) == 4 && slices.Contains(inf.Learners, victim)
	})
	// Long past the grace period of a removed replica, it still holds its
	// data and follows the group.
	time.Sleep(time.Duration(4*10) * testTick * 2)
	if _, err := c.propose(0, []byte("k4")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("learner to apply a new entry", 5*time.Second, func() bool { return c.stores[victim].Len(0) == 5 })
	if _, hosted := c.infos()[victim][0]; !hosted {
		t.Fatal("the learner deleted its replica")
	}
}

func TestPromoteRefusesLearnerThatHasNotCaughtUp(t *testing.T) {
	c := newCluster(t, 4, nil)
	ctx := context.Background()
	lead := groupOfThree(t, c, 3)
	for i := 0; i < 5; i++ {
		if _, err := c.propose(3, fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The learner is cut off before it hears anything of the group.
	c.net.Partition([]uint64{4}, []uint64{1, 2, 3})
	if _, err := c.hosts[lead].AddLearner(ctx, 3, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.propose(3, []byte("k5")); err != nil {
		t.Fatal(err)
	}
	_, err := c.hosts[lead].Promote(ctx, 3, 4)
	var lb *raftmux.LearnerBehindError
	if !errors.Is(err, raftmux.ErrLearnerBehind) || !errors.As(err, &lb) || lb.Node != 4 || lb.Match >= lb.Commit {
		t.Fatalf("Promote of a cut-off learner: %v, want a LearnerBehindError for node 4", err)
	}
	inf := c.infos()[lead][3]
	if slices.Contains(inf.Voters, 4) || !slices.Contains(inf.Learners, 4) {
		t.Fatalf("refused promotion changed the configuration: voters %v learners %v", inf.Voters, inf.Learners)
	}
	// Healed, the learner gets the state by snapshot and log, and once it
	// holds the committed log the same call succeeds.
	c.net.Heal()
	c.waitFor("promotion of the caught-up learner", 10*time.Second, func() bool {
		cs, err := c.hosts[lead].Promote(ctx, 3, 4)
		if err != nil {
			if !errors.Is(err, raftmux.ErrLearnerBehind) && !errors.Is(err, raftmux.ErrDropped) {
				t.Fatal(err)
			}
			return false
		}
		if !slices.Contains(cs.Voters, 4) {
			t.Fatalf("voters after Promote: %v", cs.Voters)
		}
		return true
	})
	c.waitFor("promoted learner to apply everything", 5*time.Second, func() bool { return c.stores[4].Len(3) == 6 })
}

// A group committing one proposal at a time costs an append to each
// follower and its ack (four messages), not also an append carrying the
// new commit index and its ack; the followers still learn every commit.
func TestBusyGroupSendsNoCommitOnlyAppends(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	count := func() int64 {
		return c.net.Messages(raftpb.MsgApp) + c.net.Messages(raftpb.MsgAppResp)
	}
	const n = 50
	m0 := count()
	for i := 0; i < n; i++ {
		if _, err := c.hosts[lead].Propose(context.Background(), 0, fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Heartbeat answers may add a few appends when a tick falls mid-round.
	if per := float64(count()-m0) / n; per > 5 {
		t.Fatalf("%.2f append messages per commit, want about 4", per)
	}
	c.waitFor("followers to apply every commit", 5*time.Second, func() bool {
		for _, id := range c.ids() {
			if _, log := c.kvs[id].Log(0); len(log) < n {
				return false
			}
		}
		return true
	})
	c.checkSameLogs([]uint64{0})
}

// TestDropReplicaOfAStray: a replica removed while its host was down never
// learns of it (the group no longer talks to it). DropReplica deletes it
// with its data; a leader and an unknown shard are refused.
func TestDropReplicaOfAStray(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	if _, err := c.propose(0, []byte("k0")); err != nil {
		t.Fatal(err)
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	c.waitFor("victim to apply", 5*time.Second, func() bool { return c.stores[victim].Len(0) == 1 })
	c.stop(victim)
	c.waitFor("removal", 5*time.Second, func() bool {
		_, err := c.hosts[lead].RemoveReplica(ctx, 0, victim)
		if err != nil && !errors.Is(err, raftmux.ErrDropped) {
			t.Fatal(err)
		}
		return err == nil
	})
	h := c.start(victim)
	if _, hosted := c.infos()[victim][0]; !hosted {
		t.Fatal("the stray was not reopened from its store")
	}
	if err := c.hosts[lead].DropReplica(ctx, 0); !errors.Is(err, raftmux.ErrLeads) {
		t.Fatalf("DropReplica on the leader: %v, want ErrLeads", err)
	}
	if err := h.DropReplica(ctx, 99); !errors.Is(err, raftmux.ErrUnknownShard) {
		t.Fatalf("DropReplica of an unknown shard: %v, want ErrUnknownShard", err)
	}
	if err := h.DropReplica(ctx, 0); err != nil {
		t.Fatal(err)
	}
	c.waitFor("stray to be deleted with its data", 5*time.Second, func() bool {
		_, hosted := c.infos()[victim][0]
		return !hosted && c.stores[victim].Len(0) == 0
	})
	if _, err := c.propose(0, []byte("k1")); err != nil {
		t.Fatal(err)
	}
}

// TestDestroyedReplicaKeepsItsTermAndVote: replica ids are node ids, so a
// replica destroyed and later created again by a stale member's message is
// the same raft peer with its memory wiped. Its tombstone makes it start
// at the term it had, refuse votes (an empty replica is in no group) and
// refuse a snapshot older than what it had applied: a member cut off
// before the removal cannot use it to lead the old configuration.
func TestDestroyedReplicaKeepsItsTermAndVote(t *testing.T) {
	c := newCluster(t, 3, func(cfg *raftmux.Config) {
		cfg.AcceptReplica = func(shard, _ uint64) bool { return shard == 0 }
	})
	ctx := context.Background()
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	for i := range 3 {
		if _, err := c.propose(0, fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	stale := 6 - lead - victim
	c.waitFor("victim to apply", 5*time.Second, func() bool { return c.stores[victim].Len(0) == 3 })
	c.stop(victim)
	c.waitFor("removal", 5*time.Second, func() bool {
		_, err := c.hosts[lead].RemoveReplica(ctx, 0, victim)
		if err != nil && !errors.Is(err, raftmux.ErrDropped) {
			t.Fatal(err)
		}
		return err == nil
	})
	h := c.start(victim)
	if err := h.DropReplica(ctx, 0); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the replica to be deleted", 5*time.Second, func() bool {
		_, hosted := c.infos()[victim][0]
		return !hosted
	})
	tomb, ok, err := c.stores[victim].Tombstone(0)
	if err != nil || !ok || tomb.Term == 0 || tomb.Applied < 4 {
		t.Fatalf("tombstone %+v, %v, %v: want the term and the applied index", tomb, ok, err)
	}

	// The stale member's heartbeats, at an older term, create an empty
	// replica (once the host's own grace period is over).
	c.waitFor("a replica created by the stale member", 10*time.Second, func() bool {
		h.Deliver(stale, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 0, Term: tomb.Term - 1}}})
		_, hosted := c.infos()[victim][0]
		return hosted
	})
	inf := c.infos()[victim][0]
	if inf.Term < tomb.Term || inf.Applied != 0 {
		t.Fatalf("recreated replica at term %d, applied %d: want term >= %d, empty", inf.Term, inf.Applied, tomb.Term)
	}

	// It votes for no one, not even the leader it follows, at a later term.
	c.waitFor("the replica to follow the stale member", 5*time.Second, func() bool {
		h.Deliver(stale, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 0, Term: inf.Term}}})
		return c.infos()[victim][0].Leader == stale
	})
	before := h.Stats().RefusedNonMember
	h.Deliver(stale, msgBatch(0, &raftpb.Message{Type: raftpb.MsgVote, From: stale, To: victim, Term: tomb.Term + 10, LogTerm: tomb.Term, Index: tomb.Applied}))
	c.waitFor("the vote to be refused", 5*time.Second, func() bool { return h.Stats().RefusedNonMember > before })
	if got := c.infos()[victim][0].Term; got != inf.Term {
		t.Fatalf("a refused vote moved the term from %d to %d", inf.Term, got)
	}

	// Nor does it take a snapshot of the history it has passed.
	before = h.Stats().RefusedSnapshots
	h.DeliverSnapshotChunk(stale, &raftmux.SnapshotChunk{Shard: 0, ID: 1, Last: true, Msg: &raftpb.Message{
		Type: raftpb.MsgSnap, From: stale, To: victim, Term: tomb.Term + 10,
		Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: tomb.Applied, Term: tomb.Term, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}},
	}})
	c.waitFor("the snapshot to be refused", 5*time.Second, func() bool { return h.Stats().RefusedSnapshots > before })
	if inf := c.infos()[victim][0]; inf.Applied != 0 || len(inf.Voters) != 0 {
		t.Fatalf("the stale snapshot was installed: applied %d, voters %v", inf.Applied, inf.Voters)
	}
	if _, err := c.propose(0, []byte("after")); err != nil {
		t.Fatal(err)
	}
}

// Replace promotes a learner and removes a voter in one joint change:
// the learner is refused until it caught up; once made, the group has its
// three voters, the removed one out, and it goes on with a majority of
// the new voters though the removed one and the promoted one are gone.
func TestReplacePromotesAndRemovesInOneChange(t *testing.T) {
	c := newCluster(t, 4, nil)
	ctx := context.Background()
	lead := groupOfThree(t, c, 3)
	out := uint64(1)
	for out == lead {
		out++
	}
	if _, err := c.propose(3, []byte("k0")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.hosts[lead].Replace(ctx, 3, 4, out); !errors.Is(err, raftmux.ErrInvalid) {
		t.Fatalf("Replace by a node that is no learner: %v", err)
	}
	if _, err := c.hosts[lead].AddLearner(ctx, 3, 4); err != nil {
		t.Fatal(err)
	}
	if _, err := c.hosts[lead].Replace(ctx, 3, 4, 4); !errors.Is(err, raftmux.ErrInvalid) {
		t.Fatalf("Replace of a node by itself: %v", err)
	}
	var cs *raftpb.ConfState
	c.waitFor("the caught-up learner replacing a voter", 10*time.Second, func() bool {
		var err error
		cs, err = c.hosts[lead].Replace(ctx, 3, 4, out)
		if err != nil {
			if !errors.Is(err, raftmux.ErrLearnerBehind) && !errors.Is(err, raftmux.ErrDropped) {
				t.Fatal(err)
			}
			return false
		}
		return true
	})
	if !slices.Contains(cs.Voters, 4) || slices.Contains(cs.Voters, out) || len(cs.Voters) != 3 || len(cs.Learners) != 0 {
		t.Fatalf("configuration after Replace: %+v", cs)
	}
	c.waitFor("the group out of its joint configuration", 5*time.Second, func() bool {
		in := c.infos()[lead][3]
		return len(in.Voters) == 3 && !slices.Contains(in.Voters, out)
	})
	// The removed voter and the new one gone: the other two still commit.
	c.stop(out)
	c.stop(4)
	if _, err := c.propose(3, []byte("k1")); err != nil {
		t.Fatalf("proposal with two of three voters: %v", err)
	}
}

// groupOfThree bootstraps shard on hosts 1, 2 and 3, has host 1 campaign,
// and returns the leader.
func groupOfThree(t *testing.T, c *cluster, shard uint64) uint64 {
	t.Helper()
	ctx := context.Background()
	for _, v := range []uint64{1, 2, 3} {
		if err := c.hosts[v].Bootstrap(ctx, shard, []uint64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.hosts[1].Campaign(ctx, shard); err != nil {
		t.Fatal(err)
	}
	return c.waitLeaders([]uint64{shard}, 5*time.Second)[shard]
}
