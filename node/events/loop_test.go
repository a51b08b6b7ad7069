package events

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"go.etcd.io/raft/v3/raftpb"
)

// raftID numbers the test's nodes: n1 is 1, n2 is 2, and so on.
func raftID(node string) uint64 { return uint64(node[1] - '0') }

// digit is the last character of the name of the node of raft id id.
func digit(id uint64) string { return strconv.FormatUint(id, 10) }

type fakeEnv struct {
	now     time.Time
	kicks   int
	removed map[string]bool
	calls   []string // in order: what the loop asked of the node
}

func (e *fakeEnv) Now() time.Time { return e.now }
func (e *fakeEnv) Kick()          { e.kicks++ }
func (e *fakeEnv) NameOf(id uint64) (string, bool) {
	return "n" + digit(id), id != 0
}
func (e *fakeEnv) Host() Host            { return fakeHost{e} }
func (e *fakeEnv) RemovePeer(m string)   { e.calls = append(e.calls, "forget "+m) }
func (e *fakeEnv) Removed(m string) bool { return e.removed[m] }
func (e *fakeEnv) AnnounceLeader(shard, _ uint64) {
	e.calls = append(e.calls, "announce "+digit(shard))
}
func (e *fakeEnv) Rebuild() { e.calls = append(e.calls, "rebuild") }
func (e *fakeEnv) Announced(uint64, string, uint64) {
	e.calls = append(e.calls, "version")
}
func (e *fakeEnv) SyncTick() { e.calls = append(e.calls, "sync") }
func (e *fakeEnv) Birth()    { e.calls = append(e.calls, "birth") }
func (e *fakeEnv) Ready()    { e.calls = append(e.calls, "ready") }

// fakeRoutes is the routing cache; emptying it is a call of the node's.
type fakeRoutes struct{ e *fakeEnv }

func (r fakeRoutes) Clear() { r.e.calls = append(r.e.calls, "cache") }

type fakeHost struct{ e *fakeEnv }

func (h fakeHost) NodeSuspect(id uint64) { h.e.calls = append(h.e.calls, "suspect "+digit(id)) }
func (h fakeHost) NodeDead(id uint64)    { h.e.calls = append(h.e.calls, "dead "+digit(id)) }
func (h fakeHost) NodeAlive(id uint64)   { h.e.calls = append(h.e.calls, "alive "+digit(id)) }

type fakeLease struct{ calls []string }

func (l *fakeLease) Follows(shard, lead, term uint64) { l.calls = append(l.calls, "follows") }
func (l *fakeLease) Leadership(_, _ uint64, won bool) {
	l.calls = append(l.calls, map[bool]string{true: "won", false: "lost"}[won])
}
func (l *fakeLease) RecheckSettling()                     { l.calls = append(l.calls, "recheck") }
func (l *fakeLease) TakeUpLater(uint64, uint64)           { l.calls = append(l.calls, "take up") }
func (l *fakeLease) ConfState(uint64, []uint64, []uint64) { l.calls = append(l.calls, "conf") }

func newLoop(t *testing.T) (*Loop, *fakeEnv, *fakeLease, *router.LeaderTable) {
	t.Helper()
	env := &fakeEnv{now: time.Unix(100, 0), removed: map[string]bool{}}
	lease := &fakeLease{}
	leaders := router.NewLeaderTable(4)
	l, err := New(Config{Self: "n1", RaftID: raftID, Shards: 4, Interval: time.Second, Leaders: leaders, Lease: lease,
		Routes: fakeRoutes{env}, RoutesFor: 10 * time.Second, Tick: 100 * time.Millisecond, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return l, env, lease, leaders
}

func TestNewRefusesAnIncompleteConfig(t *testing.T) {
	if _, err := New(Config{Self: "n1", RaftID: raftID, Shards: 4, Interval: time.Second, Leaders: router.NewLeaderTable(4)}); err == nil {
		t.Fatal("a Loop without a lease room or an Env")
	}
}

// A leader change is recorded where it arrives, before the events task
// runs: the lease room hears it, the replica's leadership and leaderless
// time are kept, the shard events counted and the leader table filled.
func TestALeaderChangeIsRecordedWhereItArrives(t *testing.T) {
	l, env, lease, leaders := newLoop(t)
	l.LeaderChange(raftmux.LeaderChange{Shard: 2, Leader: 0, Term: 3})
	if l.Leads(2) || l.LeaderlessSince(2) != env.now.UnixNano() || l.ShardEvents() != 1 {
		t.Fatalf("leaderless: leads %v since %d events %d", l.Leads(2), l.LeaderlessSince(2), l.ShardEvents())
	}
	env.now = env.now.Add(time.Second)
	l.LeaderChange(raftmux.LeaderChange{Shard: 2, Leader: 0, Term: 3})
	if l.LeaderlessSince(2) != time.Unix(100, 0).UnixNano() {
		t.Fatal("a second leaderless report moved the time it began")
	}
	l.LeaderChange(raftmux.LeaderChange{Shard: 2, Leader: 1, Term: 4})
	if !l.Leads(2) || l.LeaderlessSince(2) != 0 || l.Led() != 1 || l.ShardEvents() != 3 {
		t.Fatalf("won: leads %v since %d led %d events %d", l.Leads(2), l.LeaderlessSince(2), l.Led(), l.ShardEvents())
	}
	if leader, term, ok := leaders.Get(2); !ok || leader != "n1" || term != 4 {
		t.Fatalf("leader table: %s at %d (%v)", leader, term, ok)
	}
	want := []string{"follows", "lost", "recheck", "follows", "lost", "recheck", "follows", "won"}
	if !slices.Equal(lease.calls, want) {
		t.Fatalf("lease room heard %v, want %v", lease.calls, want)
	}
	if env.kicks != 3 || l.Len() != 3 {
		t.Fatalf("kicks %d, queued %d", env.kicks, l.Len())
	}
	l.Deposed(2)
	if l.Leads(2) {
		t.Fatal("deposed, still leads")
	}
	l.ConfState(1, raftpb.ConfState{Voters: []uint64{1, 2, 3}})
	l.LeaderChange(raftmux.LeaderChange{Shard: uint64(router.ShardSpace(4).Capacity()), Leader: 1, Term: 1})
	if l.ShardEvents() != 4 || l.Len() != 3 {
		t.Fatalf("events %d, queued %d: a report of a shard outside the space counted", l.ShardEvents(), l.Len())
	}
	// A split's child, past the shards the cluster was born with, is
	// taken, and splits the table's map.
	low, _, _ := router.ShardSpace(4).Children(1)
	l.LeaderChange(raftmux.LeaderChange{Shard: uint64(low), Leader: 1, Term: 1})
	if !l.Leads(uint64(low)) || l.Led() != 1 || !leaders.Map().Live(low) || leaders.Map().Live(1) {
		t.Fatalf("a child's leadership: leads %v, led %d, live %v", l.Leads(uint64(low)), l.Led(), leaders.Map().Live(low))
	}
}

// A pass tells raft what the membership events say (but nothing of this
// node, nor of a removed member), rebuilds the view once, announces this
// node's new leaderships, hands the metadata versions over after the
// rebuild, and ends with the sync, the cache, birth and readiness.
func TestAPassHandlesTheEventsInOrder(t *testing.T) {
	l, env, lease, leaders := newLoop(t)
	env.removed["n4"] = true
	l.Run(env.now) // the routing cache's age counts from here
	env.now = env.now.Add(10 * time.Second)
	env.calls = nil
	l.LeaderChange(raftmux.LeaderChange{Shard: 1, Leader: 1, Term: 2})
	lease.calls = nil
	for _, e := range []swim.Event{
		{Kind: swim.EventMetadataVersion, Leader: "n2", MetaKind: 1, Version: 7},
		{Kind: swim.EventSuspect, Member: swim.Member{ID: "n2"}},
		{Kind: swim.EventDead, Member: swim.Member{ID: "n3", State: swim.StateDead}},
		{Kind: swim.EventJoined, Member: swim.Member{ID: "n4"}},
		{Kind: swim.EventDead, Member: swim.Member{ID: "n1"}},
		{Kind: swim.EventShardLeader, Shard: 3, Leader: "n2", Term: 5},
		{Kind: swim.EventShardLeader, Shard: 9, Leader: "n2", Term: 5},
	} {
		l.Push(e)
	}
	if next := l.Run(env.now); !next.Equal(env.now.Add(time.Second)) {
		t.Fatalf("next due %v", next)
	}
	want := []string{"suspect 2", "dead 3", "forget n3", "announce 1", "rebuild", "version", "sync", "cache", "birth", "ready"}
	if !slices.Equal(env.calls, want) {
		t.Fatalf("pass: %v, want %v", env.calls, want)
	}
	if !slices.Equal(lease.calls, []string{"take up"}) {
		t.Fatalf("lease room heard %v", lease.calls)
	}
	if leader, term, ok := leaders.Get(3); !ok || leader != "n2" || term != 5 {
		t.Fatalf("leader table: %s at %d (%v)", leader, term, ok)
	}
	if l.Len() != 0 {
		t.Fatalf("%d events left", l.Len())
	}
}

// Quiet passes read SWIM's members again only every viewRefreshTicks.
func TestQuietPassesRebuildTheViewNowAndThen(t *testing.T) {
	l, env, _, _ := newLoop(t)
	rebuilds := 0
	for range 3 * viewRefreshTicks {
		env.calls = nil
		l.Run(env.now)
		if slices.Contains(env.calls, "rebuild") {
			rebuilds++
		}
	}
	if rebuilds != 3 {
		t.Fatalf("%d rebuilds in %d quiet passes", rebuilds, 3*viewRefreshTicks)
	}
}

// A split the leader table learns rebuilds the view on the next pass,
// once: the halves are placed anew.
func TestASplitRebuildsTheView(t *testing.T) {
	l, env, _, leaders := newLoop(t)
	l.Run(env.now)
	low, _, _ := router.ShardSpace(4).Children(1)
	if _, err := leaders.Update(low, "n2", 5); err != nil {
		t.Fatal(err)
	}
	var rebuilds []bool
	for range 2 {
		env.calls = nil
		l.Run(env.now)
		rebuilds = append(rebuilds, slices.Contains(env.calls, "rebuild"))
	}
	if !rebuilds[0] || rebuilds[1] {
		t.Fatalf("rebuilds after a split: %v, want the first pass only", rebuilds)
	}
}

// The routing cache is emptied once it is as old as RoutesFor, its age
// counted from the first pass, and not again until it is that old anew.
func TestTheRoutesAreEmptiedEveryInterval(t *testing.T) {
	l, env, _, _ := newLoop(t)
	clears := func() int {
		c := 0
		for _, call := range env.calls {
			if call == "cache" {
				c++
			}
		}
		env.calls = nil
		return c
	}
	l.Run(env.now)
	if c := clears(); c != 0 {
		t.Fatalf("the first pass emptied the cache %d times", c)
	}
	env.now = env.now.Add(10*time.Second - time.Nanosecond)
	l.Run(env.now)
	if c := clears(); c != 0 {
		t.Fatal("emptied before it was RoutesFor old")
	}
	env.now = env.now.Add(time.Nanosecond)
	l.Run(env.now)
	if c := clears(); c != 1 {
		t.Fatalf("emptied %d times once RoutesFor old", c)
	}
	env.now = env.now.Add(5 * time.Second)
	l.Run(env.now)
	if c := clears(); c != 0 {
		t.Fatal("emptied again before it was RoutesFor old anew")
	}
}

// A replica answers plain lookups while it knows a leader, and for
// leaderlessLookups ticks after it lost it, not after.
func TestAReplicaAnswersLocallyUntilLongLeaderless(t *testing.T) {
	l, env, _, _ := newLoop(t)
	if !l.AnswersLocally(2) {
		t.Fatal("a replica never leaderless does not answer")
	}
	l.LeaderChange(raftmux.LeaderChange{Shard: 2, Leader: 0, Term: 3})
	env.now = env.now.Add(leaderlessLookups * 100 * time.Millisecond)
	if !l.AnswersLocally(2) {
		t.Fatal("stopped answering within leaderlessLookups ticks")
	}
	env.now = env.now.Add(time.Nanosecond)
	if l.AnswersLocally(2) {
		t.Fatal("answers past leaderlessLookups ticks without a leader")
	}
	l.LeaderChange(raftmux.LeaderChange{Shard: 2, Leader: 2, Term: 4})
	if !l.AnswersLocally(2) {
		t.Fatal("a replica that knows a leader again does not answer")
	}
}

// The queue drops SWIM events past its bound, and everything once closed.
func TestTheQueueIsBounded(t *testing.T) {
	l, env, _, _ := newLoop(t)
	for range maxQueuedEvents + 5 {
		l.Push(swim.Event{Kind: swim.EventUpdated, Member: swim.Member{ID: "n2"}})
	}
	if l.Len() != maxQueuedEvents || l.q.drops != 5 || env.kicks != maxQueuedEvents {
		t.Fatalf("queued %d, dropped %d, kicks %d", l.Len(), l.q.drops, env.kicks)
	}
	l.Run(env.now)
	l.Close()
	l.Push(swim.Event{Kind: swim.EventUpdated})
	l.LeaderChange(raftmux.LeaderChange{Shard: 1, Leader: 2, Term: 1})
	if l.Len() != 0 {
		t.Fatalf("%d events queued after Close", l.Len())
	}
}

// A replica whose configuration no longer names this node (it applied its
// own removal, so it never campaigns and raft never clears the leader it
// names) answers no plain lookup, whatever leader it names; named again,
// as a learner, it does.
func TestAReplicaOutsideItsConfigurationDoesNotAnswer(t *testing.T) {
	l, _, _, _ := newLoop(t)
	self := l.self
	l.LeaderChange(raftmux.LeaderChange{Shard: 2, Leader: self + 1, Term: 4})
	l.ConfState(2, raftpb.ConfState{Voters: []uint64{self, self + 1, self + 2}})
	if !l.AnswersLocally(2) {
		t.Fatal("a voter that knows a leader does not answer")
	}
	l.ConfState(2, raftpb.ConfState{Voters: []uint64{self + 1, self + 2, self + 3}})
	if l.AnswersLocally(2) {
		t.Fatal("a replica removed from its group answers")
	}
	l.ConfState(2, raftpb.ConfState{})
	if l.AnswersLocally(2) {
		t.Fatal("a replica with no configuration answers")
	}
	l.ConfState(2, raftpb.ConfState{Voters: []uint64{self + 1, self + 2, self + 3}, Learners: []uint64{self}})
	if !l.AnswersLocally(2) {
		t.Fatal("a learner that knows a leader does not answer")
	}
}
