package raftmux_test

import (
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

// manualRun drives three Manual hosts from this goroutine alone: it
// bootstraps two shards, elects host 1, proposes commands to it, and
// returns what happened, in order, for comparing runs.
func manualRun(t *testing.T) []string {
	t.Helper()
	net := raftmuxtest.NewNetwork()
	var log []string
	hosts, kvs, settle := manualHosts(t, net, func(id uint64, c raftmux.LeaderChange) {
		log = append(log, fmt.Sprintf("host %d: shard %d leader %d term %d", id, c.Shard, c.Leader, c.Term))
	})
	// until ticks the clock (settling between ticks) until cond holds.
	until := func(what string, cond func() bool) {
		for range 1000 {
			settle()
			if cond() {
				return
			}
			for id := uint64(1); id <= 3; id++ {
				hosts[id].Tick()
			}
		}
		t.Fatalf("never: %s", what)
	}
	for id := uint64(1); id <= 3; id++ {
		for shard := uint64(0); shard < 2; shard++ {
			hosts[id].Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: shard, Voters: []uint64{1, 2, 3}}, func(r raftmux.Result) {
				if r.Err != nil {
					t.Errorf("bootstrap: %v", r.Err)
				}
			})
		}
	}
	settle()
	campaigned := false
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}, func(r raftmux.Result) { campaigned = r.Err == nil })
	leads := func() bool {
		var st []raftmux.Info
		hosts[1].Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) { st, _ = r.Value.([]raftmux.Info) })
		settle()
		for _, in := range st {
			if in.Shard == 0 {
				return in.Leader == 1
			}
		}
		return false
	}
	until("host 1 leads shard 0", func() bool { return campaigned && leads() })
	done := 0
	for i := range 10 {
		hosts[1].Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: fmt.Appendf(nil, "cmd-%02d", i)}, func(r raftmux.Result) {
			if r.Err != nil {
				t.Errorf("propose %d: %v", i, r.Err)
			}
			log = append(log, fmt.Sprintf("proposal %d applied at %v", i, r.Value))
			done++
		})
	}
	until("every proposal applied", func() bool { return done == 10 })
	until("every replica applied them", func() bool {
		for _, kv := range kvs {
			if _, l := kv.Log(0); len(l) < 10 {
				return false
			}
		}
		return true
	})
	_, want := kvs[1].Log(0)
	for id, kv := range kvs {
		if _, got := kv.Log(0); !reflect.DeepEqual(got, want) {
			t.Fatalf("host %d applied %v, host 1 %v", id, got, want)
		}
	}
	return log
}

// manualHosts starts three Manual hosts on net, each on its own MemStore
// with a KV state machine; onLeader hears each host's leader changes. It
// returns the hosts and their KVs, and settle, which steps every host
// until none has work left.
func manualHosts(t *testing.T, net *raftmuxtest.Network, onLeader func(id uint64, c raftmux.LeaderChange), opts ...func(*raftmux.Config)) (map[uint64]*raftmux.Host, map[uint64]*raftmuxtest.KV, func()) {
	t.Helper()
	hosts := map[uint64]*raftmux.Host{}
	kvs := map[uint64]*raftmuxtest.KV{}
	for id := uint64(1); id <= 3; id++ {
		st, err := raftmuxtest.NewMemStore("")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		kvs[id] = raftmuxtest.NewKV(st, true)
		cfg := raftmux.Config{
			NodeID: id, Storage: st, Transport: net.Endpoint(id), StateMachine: kvs[id],
			Manual: true, Seed: id << 40, Logger: slog.New(slog.DiscardHandler),
			OnLeaderChange: func(c raftmux.LeaderChange) { onLeader(id, c) },
		}
		for _, o := range opts {
			o(&cfg)
		}
		h, err := raftmux.NewHost(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Stop)
		net.Register(id, h)
		hosts[id] = h
	}
	settle := func() {
		for moved := true; moved; {
			moved = false
			for id := uint64(1); id <= 3; id++ {
				moved = hosts[id].Step() || moved
			}
		}
	}
	return hosts, kvs, settle
}

func TestManualHostsRunOnTheCallersGoroutineAndRepeat(t *testing.T) {
	first := manualRun(t)
	if len(first) < 10 {
		t.Fatalf("too little happened: %v", first)
	}
	if second := manualRun(t); !reflect.DeepEqual(first, second) {
		t.Fatalf("two runs differ:\n%v\n%v", first, second)
	}
}

// TestConfChangeOfANewLeaderIsRefusedNotLost: a leader elected with
// entries of the previous term still uncommitted in its log cannot tell
// whether they hold a configuration change, and raft turns a conf change
// proposed then into an empty entry. raftmux must refuse it (ErrDropped,
// to be retried) rather than leave its proposer waiting forever.
func TestConfChangeOfANewLeaderIsRefusedNotLost(t *testing.T) {
	net := raftmuxtest.NewNetwork()
	isolate := uint64(0) // a host cut off from every other
	hosts, _, settle := manualHosts(t, net, func(id uint64, c raftmux.LeaderChange) {
		if id == 2 && c.Leader == 2 {
			isolate = 2 // before its first entry as leader leaves
		}
	})
	call := func(id uint64, op raftmux.Op) (res raftmux.Result, answered bool) {
		hosts[id].Submit(op, func(r raftmux.Result) { res, answered = r, true })
		settle()
		return res, answered
	}
	for id := uint64(1); id <= 3; id++ {
		if r, _ := call(id, raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r, _ := call(1, raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}); r.Err != nil {
		t.Fatal(r.Err)
	}
	if r, ok := call(1, raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: []byte("a")}); !ok || r.Err != nil {
		t.Fatalf("first proposal: answered %v, %v", ok, r.Err)
	}
	// Host 2 gets an entry nobody acknowledges to host 1.
	net.SetFilter(func(from, to uint64) bool {
		if isolate != 0 {
			return from != isolate && to != isolate
		}
		return from == 1 && to == 2
	})
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: []byte("b")}, func(raftmux.Result) {})
	settle()
	// Host 1 is gone; host 2 wins host 3's vote, and is cut off the moment
	// it leads: its own first entry, and "b" with it, stay uncommitted.
	net.SetFilter(func(from, to uint64) bool {
		if isolate != 0 {
			return from != isolate && to != isolate
		}
		return from != 1 && to != 1
	})
	// (Only host 2 can win: host 3's log lacks "b".)
	for range 1000 {
		if isolate == 2 {
			break
		}
		hosts[2].Tick()
		hosts[3].Tick()
		settle()
	}
	if isolate != 2 {
		t.Fatal("host 2 was not elected")
	}
	r, ok := call(2, raftmux.Op{Kind: raftmux.OpAddLearner, Shard: 0, Node: 4})
	if !ok {
		t.Fatal("the conf change was never answered")
	}
	if !errors.Is(r.Err, raftmux.ErrDropped) {
		t.Fatalf("conf change of a leader with an uncommitted tail: %v, want ErrDropped", r.Err)
	}
}

// TestLearnerThatLostWhatItAcknowledgedIsFilled: replica ids are node ids,
// so an ack a replica sent before its removal can reach the leader after
// the node was added back as a learner, when that replica has been
// destroyed meanwhile and is created again empty. The leader then counts
// entries the new replica lacks: raft probes it no lower than that match,
// and probes again at once after each rejection. The leader must fill the
// learner with a snapshot instead of trading the same append and
// rejection with it forever.
func TestLearnerThatLostWhatItAcknowledgedIsFilled(t *testing.T) {
	net := raftmuxtest.NewNetwork()
	hosts, kvs, _ := manualHosts(t, net, func(uint64, raftmux.LeaderChange) {})
	// settle steps every host until none has work left, and fails the
	// test if they are still busy after many rounds: the hosts spin.
	settle := func() {
		t.Helper()
		for range 1000 {
			moved := false
			for id := uint64(1); id <= 3; id++ {
				moved = hosts[id].Step() || moved
			}
			if !moved {
				return
			}
		}
		t.Fatal("the hosts never settle: they spin")
	}
	tick := func(n int) {
		t.Helper()
		for range n {
			for id := uint64(1); id <= 3; id++ {
				hosts[id].Tick()
			}
			settle()
		}
	}
	call := func(id uint64, op raftmux.Op) raftmux.Result {
		t.Helper()
		var res raftmux.Result
		answered := false
		hosts[id].Submit(op, func(r raftmux.Result) { res, answered = r, true })
		settle()
		if !answered {
			t.Fatalf("op %d on host %d never answered", op.Kind, id)
		}
		return res
	}
	info := func(id uint64) (raftmux.Info, bool) {
		infos, _ := call(id, raftmux.Op{Kind: raftmux.OpShards}).Value.([]raftmux.Info)
		for _, in := range infos {
			if in.Shard == 0 {
				return in, true
			}
		}
		return raftmux.Info{}, false
	}
	for id := uint64(1); id <= 3; id++ {
		if r := call(id, raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := call(1, raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}); r.Err != nil {
		t.Fatal(r.Err)
	}
	for i := range 3 {
		if r := call(1, raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: fmt.Appendf(nil, "k%d", i)}); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	tick(1)
	in3, ok := info(3)
	if !ok || in3.Applied == 0 {
		t.Fatalf("host 3 has not applied the proposals: %+v", in3)
	}
	// What host 3 acknowledged last, at the leader's term: the ack that
	// will arrive late.
	stale := &raftmux.RaftBatch{Messages: []raftmux.ShardMessage{{Shard: 0, Msg: &raftpb.Message{
		Type: raftpb.MsgAppResp, From: 3, To: 1, Term: in3.Term, Index: in3.Applied,
	}}}}

	// Host 3 is removed, hears nothing more and destroys its replica.
	if r := call(1, raftmux.Op{Kind: raftmux.OpRemoveReplica, Shard: 0, Node: 3}); r.Err != nil {
		t.Fatal(r.Err)
	}
	tick(40)
	if _, hosted := info(3); hosted {
		t.Fatal("host 3 kept the replica it was removed from")
	}
	// It is added back while cut off; its old ack arrives.
	net.SetFilter(func(from, to uint64) bool { return from != 3 && to != 3 })
	if r := call(1, raftmux.Op{Kind: raftmux.OpAddLearner, Shard: 0, Node: 3}); r.Err != nil {
		t.Fatal(r.Err)
	}
	hosts[1].Deliver(3, stale)
	settle()
	net.Heal()
	tick(40)
	in1, _ := info(1)
	in3, ok = info(3)
	if !ok || in3.Applied != in1.Applied {
		t.Fatalf("the learner was not filled: applied %d, leader %d", in3.Applied, in1.Applied)
	}
	for i := range 3 {
		if _, ok := kvs[3].Store.Get(0, fmt.Appendf(nil, "k%d", i)); !ok {
			t.Fatalf("the learner lacks k%d", i)
		}
	}
}

// TestManualHostWithAClockHoldsARoundForAcks: a Manual host given a clock
// holds a round back for a follower's ack of its leaders' appends, as a
// host on goroutines does (Config.AckWait), and says until when
// (NextDue): a simulation runs the same wait in its own time.
func TestManualHostWithAClockHoldsARoundForAcks(t *testing.T) {
	net := raftmuxtest.NewNetwork()
	now := time.Unix(1000, 0)
	hosts := map[uint64]*raftmux.Host{}
	for id := uint64(1); id <= 3; id++ {
		st, err := raftmuxtest.NewMemStore("")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		h, err := raftmux.NewHost(raftmux.Config{
			NodeID: id, Storage: st, Transport: net.Endpoint(id), StateMachine: raftmuxtest.NewKV(st, true),
			Manual: true, Seed: id << 40, Logger: slog.New(slog.DiscardHandler),
			Clock: func() time.Time { return now }, AckWait: time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Stop)
		net.Register(id, h)
		hosts[id] = h
	}
	settle := func() {
		for moved := true; moved; {
			moved = false
			for id := uint64(1); id <= 3; id++ {
				moved = hosts[id].Step() || moved
			}
		}
	}
	// settleAll also lets the held rounds run, a millisecond at a time.
	settleAll := func() {
		for range 100 {
			settle()
			if hosts[1].NextDue().IsZero() {
				return
			}
			now = now.Add(time.Millisecond)
		}
		t.Fatal("a round stays held")
	}
	for id := uint64(1); id <= 3; id++ {
		hosts[id].Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}, func(raftmux.Result) {})
	}
	settleAll()
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}, func(raftmux.Result) {})
	settleAll()
	propose := func(data string) *bool {
		done := new(bool)
		hosts[1].Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: []byte(data)}, func(r raftmux.Result) { *done = r.Err == nil })
		return done
	}
	first := propose("a")
	settleAll()
	if !*first {
		t.Fatal("the first proposal was not applied")
	}

	// No ack reaches host 1: its round after the append waits AckWait.
	net.SetFilter(func(from, to uint64) bool { return to != 1 })
	a := propose("b")
	settle()
	due := hosts[1].NextDue()
	if due.IsZero() || !due.After(now) {
		t.Fatalf("after appending with no ack in: next due %v (now %v), want a held round", due, now)
	}
	b := propose("c")
	if hosts[1].Step() {
		t.Fatal("a held round ran before its ack or its deadline")
	}
	now = due
	if !hosts[1].Step() {
		t.Fatal("a held round did not run at its deadline")
	}
	net.SetFilter(nil)
	settleAll()
	if !*a || !*b {
		t.Fatalf("proposals applied: %v %v", *a, *b)
	}
}

// TestManualSyncLagHoldsTheRoundUntilItsFsync: on a Manual host with a
// SyncLag, a round that must sync finishes (its proposals answered, its
// next round run) only once the lag has passed on the host's clock, and
// NextDue says when.
func TestManualSyncLagHoldsTheRoundUntilItsFsync(t *testing.T) {
	const lag = 7 * time.Millisecond
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	net := raftmuxtest.NewNetwork()
	hosts, kvs, settle := manualHosts(t, net, func(uint64, raftmux.LeaderChange) {}, func(c *raftmux.Config) {
		c.Clock, c.AckWait = clock, -1
		c.SyncLag = func() time.Duration { return lag }
	})
	// pass settles, then moves the clock to the earliest NextDue, until
	// cond holds.
	pass := func(what string, cond func() bool) {
		t.Helper()
		for range 1000 {
			settle()
			if cond() {
				return
			}
			next := time.Time{}
			for id := uint64(1); id <= 3; id++ {
				if d := hosts[id].NextDue(); !d.IsZero() && (next.IsZero() || d.Before(next)) {
					next = d
				}
			}
			if next.IsZero() {
				now = now.Add(10 * time.Millisecond)
				for id := uint64(1); id <= 3; id++ {
					hosts[id].Tick()
				}
				continue
			}
			now = next
		}
		t.Fatalf("never: %s", what)
	}
	booted := 0
	for id := uint64(1); id <= 3; id++ {
		hosts[id].Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}, func(r raftmux.Result) {
			if r.Err != nil {
				t.Errorf("bootstrap: %v", r.Err)
			}
			booted++
		})
	}
	pass("bootstrapped", func() bool { return booted == 3 })
	campaigned := false
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}, func(r raftmux.Result) { campaigned = r.Err == nil })
	leads := false
	pass("host 1 leads", func() bool {
		hosts[1].Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
			st, _ := r.Value.([]raftmux.Info)
			leads = len(st) == 1 && st[0].Leader == 1
		})
		settle()
		return campaigned && leads
	})
	pass("idle", func() bool {
		for id := uint64(1); id <= 3; id++ {
			if !hosts[id].NextDue().IsZero() {
				return false
			}
		}
		return true
	})

	applied := false
	start := now
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: []byte("x")}, func(r raftmux.Result) {
		if r.Err != nil {
			t.Errorf("propose: %v", r.Err)
		}
		applied = true
	})
	settle()
	if applied {
		t.Fatal("answered before the leader's fsync ended")
	}
	if due := hosts[1].NextDue(); !due.Equal(start.Add(lag)) {
		t.Fatalf("host 1 next due at %v, want its fsync's end %v", due.Sub(start), lag)
	}
	pass("the proposal answered", func() bool { return applied })
	// The appends left before the leader's fsync, so its followers' ran
	// beside it: the answer comes once both ended, one lag on.
	if took := now.Sub(start); took != lag {
		t.Fatalf("answered %v after the proposal, want one fsync's %v", took, lag)
	}
	pass("every replica applied it", func() bool {
		for _, kv := range kvs {
			if _, l := kv.Log(0); len(l) != 1 {
				return false
			}
		}
		return true
	})
}

func TestSyncLagIsForManualHosts(t *testing.T) {
	st, err := raftmuxtest.NewMemStore("")
	if err != nil {
		t.Fatal(err)
	}
	_, err = raftmux.NewHost(raftmux.Config{
		NodeID: 1, Storage: st, Transport: raftmuxtest.NewNetwork().Endpoint(1), StateMachine: raftmuxtest.NewKV(st, true),
		Logger: slog.New(slog.DiscardHandler), SyncLag: func() time.Duration { return time.Millisecond },
	})
	if !errors.Is(err, raftmux.ErrInvalid) {
		t.Fatalf("a started host with SyncLag: %v, want ErrInvalid", err)
	}
}

// recorder is a peer that keeps what it is sent.
type recorder struct{ got []raftpb.Message }

func (r *recorder) Deliver(_ uint64, b *raftmux.RaftBatch) {
	for _, m := range b.Messages {
		r.got = append(r.got, *m.Msg)
	}
}
func (r *recorder) DeliverSnapshotChunk(uint64, *raftmux.SnapshotChunk) {}

// TestEarlierLeaderOutsideTheGroupIsToldTheTerm: a replica refuses a
// leader's traffic from outside its group at an earlier term, but answers
// it with its own term, as raft answers a member. The sender may be the
// group's leader under a configuration this replica has not seen, which
// counts the replica in (a replica whose term rose while it was cut off);
// told nothing, it would send at its term forever, and the replica would
// never learn the configuration that makes it a member.
func TestEarlierLeaderOutsideTheGroupIsToldTheTerm(t *testing.T) {
	net := raftmuxtest.NewNetwork()
	hosts, kvs, settle := manualHosts(t, net, func(uint64, raftmux.LeaderChange) {})
	for id := uint64(1); id <= 3; id++ {
		hosts[id].Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}, func(r raftmux.Result) {
			if r.Err != nil {
				t.Errorf("bootstrap: %v", r.Err)
			}
		})
	}
	settle()
	leads := false
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}, func(r raftmux.Result) { leads = r.Err == nil })
	for range 100 {
		settle()
		var st []raftmux.Info
		hosts[2].Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) { st, _ = r.Value.([]raftmux.Info) })
		settle()
		if leads && len(st) == 1 && st[0].Leader == 1 {
			break
		}
		for id := uint64(1); id <= 3; id++ {
			hosts[id].Tick()
		}
	}
	var term uint64
	hosts[2].Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		st, _ := r.Value.([]raftmux.Info)
		if len(st) == 1 && st[0].Leader == 1 {
			term = st[0].Term
		}
	})
	settle()
	if term < 2 {
		t.Fatalf("host 2 follows no leader at a term past 1 (term %d)", term)
	}
	_, before := kvs[2].Log(0)

	peer := &recorder{}
	net.Register(42, peer)
	refused := hosts[2].Stats().RefusedNonMember
	hosts[2].Deliver(42, &raftmux.RaftBatch{Messages: []raftmux.ShardMessage{{Shard: 0, Msg: &raftpb.Message{
		Type: raftpb.MsgApp, From: 42, To: 2, Term: term - 1, Index: 0, LogTerm: 0,
		Entries: []raftpb.Entry{{Index: 1, Term: term - 1, Data: []byte("x")}}}}}})
	settle()
	if got := hosts[2].Stats().RefusedNonMember; got != refused+1 {
		t.Fatalf("refused %d appends from outside the group, want 1", got-refused)
	}
	if len(peer.got) != 1 || peer.got[0].Type != raftpb.MsgAppResp || peer.got[0].Term != term || peer.got[0].From != 2 {
		t.Fatalf("the sender heard %v, want one ack at term %d", peer.got, term)
	}
	if _, after := kvs[2].Log(0); !reflect.DeepEqual(after, before) {
		t.Fatalf("host 2 applied %v after the refused append, before %v", after, before)
	}
	// A coalesced heartbeat at an earlier term is answered the same way.
	peer.got = nil
	hosts[2].Deliver(42, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 0, Term: term - 1}}})
	settle()
	if len(peer.got) != 1 || peer.got[0].Term != term {
		t.Fatalf("a heartbeat from outside at an earlier term: the sender heard %v, want one ack at term %d", peer.got, term)
	}
}

// TestAFollowerHearsItsLeaderElectedAgainAtANewTerm: the leadership goes
// from host 1 to host 2 and back while host 3 is not stepped; host 3 then
// takes both elections in one Ready, from which host 1 leads as before,
// at a higher term. OnLeaderChange must still tell it the new term: a
// leader's lease grants rely on followers vouching for it at its term.
func TestAFollowerHearsItsLeaderElectedAgainAtANewTerm(t *testing.T) {
	net := raftmuxtest.NewNetwork()
	last := map[uint64]raftmux.LeaderChange{}
	hosts, _, settle := manualHosts(t, net, func(id uint64, c raftmux.LeaderChange) { last[id] = c })
	call := func(id uint64, op raftmux.Op, step ...uint64) raftmux.Result {
		var res raftmux.Result
		answered := false
		hosts[id].Submit(op, func(r raftmux.Result) { res, answered = r, true })
		for moved := true; moved; {
			moved = false
			for _, s := range step {
				moved = hosts[s].Step() || moved
			}
		}
		if !answered {
			t.Fatalf("%v on host %d: no answer", op.Kind, id)
		}
		return res
	}
	for id := uint64(1); id <= 3; id++ {
		if r := call(id, raftmux.Op{Kind: raftmux.OpBootstrap, Shard: 0, Voters: []uint64{1, 2, 3}}, 1, 2, 3); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	if r := call(1, raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}, 1, 2, 3); r.Err != nil {
		t.Fatal(r.Err)
	}
	settle()
	first := last[3]
	if first.Leader != 1 || last[1].Leader != 1 || last[1].Term != first.Term {
		t.Fatalf("after the first election: host 1 heard %+v, host 3 %+v", last[1], first)
	}
	for _, hop := range []struct{ from, to uint64 }{{1, 2}, {2, 1}} {
		if r := call(hop.from, raftmux.Op{Kind: raftmux.OpTransferLeader, Shard: 0, Node: hop.to}, 1, 2); r.Err != nil {
			t.Fatal(r.Err)
		}
		if last[hop.to].Leader != hop.to {
			t.Fatalf("transfer to %d: host %d heard %+v", hop.to, hop.to, last[hop.to])
		}
	}
	if last[3] != first {
		t.Fatalf("host 3 stepped meanwhile: %+v", last[3])
	}
	settle()
	if now := last[1]; now.Leader != 1 || now.Term <= first.Term || last[3] != now {
		t.Fatalf("host 1 leads at %+v; host 3 heard %+v", now, last[3])
	}
}
