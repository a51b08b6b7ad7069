package raftio_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
)

func TestRealPartsShardsElectAndReplicateInOrder(t *testing.T) {
	n := shardCount()
	c := newCluster(t, 3, nil)
	shards := shardList(n)
	c.bootstrap(n, []uint64{1, 2, 3})
	leaders := c.waitLeaders(shards, 30*time.Second)
	counts := map[uint64]int{}
	for _, l := range leaders {
		counts[l]++
	}
	if len(counts) != 3 {
		t.Fatalf("leaders not spread over the three hosts: %v", counts)
	}
	const perShard = 3
	for i := uint64(0); i < perShard; i++ {
		c.proposeAll(shards, func(s uint64) []byte { return cmd(byte('a'+i), s) })
	}
	// Every replica applies every command, in the same order, and stores
	// what it applied in its Pebble directory.
	c.waitFor("all replicas to apply", 20*time.Second, func() bool {
		for _, id := range c.ids() {
			for _, s := range shards {
				if _, log := c.host(id).kv.Log(s); len(log) < perShard {
					return false
				}
			}
		}
		return true
	})
	c.checkSameLogs(shards)
	for _, id := range c.ids() {
		for _, s := range []uint64{0, uint64(n) / 2, uint64(n) - 1} {
			if k := c.keys(id, s); k != perShard {
				t.Fatalf("host %d shard %d: %d keys stored, want %d", id, s, k, perShard)
			}
		}
		st := c.host(id).storage.Stats()
		if st.Fsyncs == 0 || st.Fsyncs > uint64(n*perShard*2) {
			t.Fatalf("host %d: %d fsyncs for %d shards × %d proposals: group commit not batching", id, st.Fsyncs, n, perShard)
		}
		ts := c.host(id).tr.Stats()
		if ts.FramesOut == 0 || ts.BytesOut == 0 {
			t.Fatalf("host %d: transport sent nothing: %+v", id, ts)
		}
	}
}

// A host stopped abruptly loses the shards it led to the others; started
// again from the same Pebble directory it catches up: from the log where
// the leaders kept it, from a snapshot where they compacted past it.
func TestRealPartsStoppedHostFailsOverAndRestartedHostCatchesUp(t *testing.T) {
	const n = 16
	c := newCluster(t, 3, func(cfg *raftmux.Config) {
		cfg.CompactionOverhead = 16
		cfg.CompactionKeep = 4
	})
	shards := shardList(n)
	c.bootstrap(n, []uint64{1, 2, 3})
	leaders := c.waitLeaders(shards, 10*time.Second)
	c.proposeAll(shards, func(s uint64) []byte { return cmd('B', s) })
	led := 0
	for _, l := range leaders {
		if l == 1 {
			led++
		}
	}
	if led == 0 {
		t.Fatal("host 1 leads no shard: nothing to fail over")
	}
	c.stop(1)
	c.report(1, (*raftmux.Host).NodeDead)
	after := c.waitLeaders(shards, 10*time.Second)
	for _, s := range shards {
		if after[s] == 1 {
			t.Fatalf("shard %d still led by the stopped host", s)
		}
	}
	// Even shards get a few entries (caught up from the log), odd ones
	// enough to be compacted past host 1's log (caught up by snapshot).
	c.proposeAll(shards, func(s uint64) []byte { return cmd('D', s) })
	var odd []uint64
	for _, s := range shards {
		if s%2 == 1 {
			odd = append(odd, s)
		}
	}
	for i := uint64(0); i < 40; i++ {
		c.proposeAll(odd, func(s uint64) []byte { return cmd('E', s*100+i) })
	}
	c.start(1)
	c.report(1, (*raftmux.Host).NodeAlive)
	c.proposeAll(shards, func(s uint64) []byte { return cmd('A', s) })
	c.waitFor("restarted host to store everything", 20*time.Second, func() bool {
		for _, s := range shards {
			want := 3
			if s%2 == 1 {
				want += 40
			}
			if c.keys(1, s) != want {
				return false
			}
		}
		return true
	})
	for _, s := range shards {
		for _, tag := range []byte{'B', 'D', 'A'} {
			if k := string(cmd(tag, s)); c.value(1, s, k) != k {
				t.Fatalf("shard %d: restarted host lacks %q", s, k)
			}
		}
	}
	snapped := 0
	for _, s := range odd {
		if base, _ := c.host(1).kv.Log(s); base > 0 {
			snapped++
		}
	}
	if snapped == 0 {
		t.Fatal("no shard was caught up by snapshot although the leaders compacted past the restarted host")
	}
	c.checkSameLogs(shards)
}

func TestRealPartsLearnerPromotedGetsSnapshot(t *testing.T) {
	c := newCluster(t, 4, nil)
	ctx := context.Background()
	const shard = 7
	for _, v := range []uint64{1, 2, 3} {
		if err := c.host(v).h.Bootstrap(ctx, shard, []uint64{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.host(1).h.Campaign(ctx, shard); err != nil {
		t.Fatal(err)
	}
	lead := c.waitLeaders([]uint64{shard}, 5*time.Second)[shard]
	for i := uint64(0); i < 5; i++ {
		if _, err := c.propose(shard, cmd('k', i)); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := c.host(lead).h.AddLearner(ctx, shard, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cs.Learners, 4) {
		t.Fatalf("conf state after AddLearner: %v", cs)
	}
	// The learner is created empty by the leader's first message and filled
	// by a snapshot streamed over the peer connection.
	c.waitFor("learner snapshot", 10*time.Second, func() bool { return c.keys(4, shard) == 5 })
	// The store holds the data before the state machine is told of the
	// snapshot; the learner's worker answers Shards only after both.
	c.waitFor("learner to report its applied index", 5*time.Second, func() bool { return c.infos()[4][shard].Applied > 0 })
	if base, _ := c.host(4).kv.Log(shard); base == 0 {
		t.Fatal("the learner was filled from the log, not by a snapshot")
	}
	if _, err := c.propose(shard, cmd('k', 5)); err != nil {
		t.Fatal(err)
	}
	var voters []uint64
	c.waitFor("promotion", 10*time.Second, func() bool {
		cs, err := c.host(lead).h.Promote(ctx, shard, 4)
		if err == nil {
			voters = cs.Voters
			return true
		}
		if !errors.Is(err, raftmux.ErrDropped) {
			t.Fatal(err)
		}
		return false
	})
	if !slices.Contains(voters, 4) {
		t.Fatalf("voters after Promote: %v", voters)
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	c.waitFor("removal", 10*time.Second, func() bool {
		_, err := c.host(lead).h.RemoveReplica(ctx, shard, victim)
		if err != nil && !errors.Is(err, raftmux.ErrDropped) {
			t.Fatal(err)
		}
		return err == nil
	})
	c.waitFor("removed replica to delete its data", 10*time.Second, func() bool {
		_, hosted := c.infos()[victim][shard]
		return !hosted && c.keys(victim, shard) == 0
	})
	if _, err := c.propose(shard, cmd('k', 6)); err != nil {
		t.Fatal(err)
	}
	c.waitFor("new voter to apply", 10*time.Second, func() bool { return c.keys(4, shard) == 7 })
	c.checkSameLogs([]uint64{shard})
}

func TestRealPartsPartitionedLeaderIsReplaced(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	if _, err := c.propose(0, cmd('p', 0)); err != nil {
		t.Fatal(err)
	}
	c.waitFor("quiescence", 5*time.Second, func() bool { return quiesced(c, 0) })
	var others []uint64
	for _, id := range c.ids() {
		if id != lead {
			others = append(others, id)
		}
	}
	c.partition([]uint64{lead}, others)
	// The majority side's failure detector suspects the leader: its
	// followers wake, find it silent, and elect by ordinary timeouts.
	for _, id := range others {
		c.host(id).h.NodeSuspect(lead)
	}
	// The cut-off leader, woken by a proposal, cannot commit it and
	// CheckQuorum makes it step down: the proposal fails, it is not lost.
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.host(lead).h.Propose(ctx, 0, cmd('L', 0))
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
	if _, err := c.host(lead).h.Propose(context.Background(), 0, cmd('L', 1)); !errors.Is(err, raftmux.ErrNotLeader) {
		t.Fatalf("propose on the stepped-down leader: %v", err)
	}
	if _, err := c.propose(0, cmd('M', 0)); err != nil {
		t.Fatal(err)
	}
	c.heal()
	c.waitFor("old leader to catch up", 10*time.Second, func() bool {
		_, log := c.host(lead).kv.Log(0)
		return len(log) > 0 && log[len(log)-1].Data == string(cmd('M', 0))
	})
	if v := c.value(lead, 0, string(cmd('L', 0))); v != "" {
		t.Fatalf("the cut-off leader's uncommitted proposal was applied: %q", v)
	}
	c.checkSameLogs([]uint64{0})
}

func TestRealPartsIdleGroupQuiescesAndWakes(t *testing.T) {
	c := newCluster(t, 3, nil)
	shards := shardList(4)
	c.bootstrap(len(shards), []uint64{1, 2, 3})
	c.waitLeaders(shards, 5*time.Second)
	c.waitFor("all groups to quiesce", 10*time.Second, func() bool {
		for _, s := range shards {
			if !quiesced(c, s) {
				return false
			}
		}
		return true
	})
	// A quiesced group sends nothing: no raft frame leaves any host.
	frames := func() uint64 {
		var n uint64
		for _, id := range c.ids() {
			n += c.host(id).tr.Stats().FramesOut
		}
		return n
	}
	before := frames()
	time.Sleep(20 * testTick)
	if d := frames() - before; d != 0 {
		t.Fatalf("%d raft frames sent while every group was quiesced", d)
	}

	// A proposal wakes the group, commits, and the group sleeps again; the
	// leader keeps its leadership across a quiescence longer than an
	// election timeout.
	before0 := c.infos()
	time.Sleep(30 * testTick)
	if _, err := c.propose(0, cmd('w', 0)); err != nil {
		t.Fatal(err)
	}
	c.waitFor("group to quiesce again", 10*time.Second, func() bool { return quiesced(c, 0) })
	for id, m := range c.infos() {
		if b := before0[id][0]; m[0].Leader != b.Leader || m[0].Term != b.Term {
			t.Fatalf("host %d: leader/term moved from %d/%d to %d/%d across quiescence", id, b.Leader, b.Term, m[0].Leader, m[0].Term)
		}
	}
	c.checkSameLogs(shards)

	// A quiesced group does not elect on its own, even with its leader
	// gone (its sockets closed too).
	l, _ := c.leaders([]uint64{1})
	lead := l[1]
	c.stop(lead)
	time.Sleep(40 * testTick) // two to four election timeouts
	if inf := c.infos(); inf[c.ids()[0]][1].Leader != lead {
		t.Fatalf("quiesced follower changed leader on its own: %+v", inf[c.ids()[0]][1])
	}
	// Reported dead, it elects at once.
	c.report(lead, (*raftmux.Host).NodeDead)
	after := c.waitLeaders(shards, 5*time.Second)
	for _, s := range shards {
		if after[s] == lead {
			t.Fatalf("shard %d still led by dead host %d", s, lead)
		}
	}
	if _, err := c.propose(1, cmd('w', 1)); err != nil {
		t.Fatal(err)
	}
}
