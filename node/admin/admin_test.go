package admin

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

func raftID(id string) uint64 { return xxh3.HashString(id) | 1 }

// world is a node as the admin requests see it: a view, a raft host that
// answers at once, marks and forwards recorded.
type world struct {
	now       time.Time
	members   map[string]swim.Member
	dead      map[string]bool
	drained   map[string]bool
	removed   map[string]bool
	shards    []raftmux.Info // what OpShards answers
	leads     map[uint64]bool
	lead      map[uint64][2]uint64 // shard → replica's leader, term
	marked    []bool
	removals  map[string]uint64
	pins      []uint64
	transfers int
	ops       []raftmux.Op
	forwards  []string // "to kind"
	timers    []func()
}

func newWorld() *world {
	return &world{now: time.Unix(1000, 0), members: map[string]swim.Member{}, dead: map[string]bool{}, drained: map[string]bool{},
		removed: map[string]bool{}, leads: map[uint64]bool{}, lead: map[uint64][2]uint64{}, removals: map[string]uint64{}}
}

func (w *world) Now() time.Time { return w.now }
func (w *world) After(d time.Duration, f func()) func() bool {
	w.timers = append(w.timers, f)
	return func() bool { return false }
}
func (w *world) Members() Members { return worldView{w} }
func (w *world) Submit(op raftmux.Op, done func(raftmux.Result)) {
	w.ops = append(w.ops, op)
	if op.Kind == raftmux.OpShards {
		done(raftmux.Result{Value: w.shards})
		return
	}
	done(raftmux.Result{})
}
func (w *world) NameOf(id uint64) (string, bool) {
	for m := range w.members {
		if raftID(m) == id {
			return m, true
		}
	}
	return "", false
}
func (w *world) Leads(shard uint64) bool                { return w.leads[shard] }
func (w *world) ReplicaLead(shard uint64) (a, b uint64) { l := w.lead[shard]; return l[0], l[1] }
func (w *world) Owned() int                             { return 3 }
func (w *world) Led() int                               { return 2 }
func (w *world) Drain(d bool) error                     { w.marked = append(w.marked, d); return nil }
func (w *world) Remove(node string, at uint64) error {
	w.removals[node] = at
	return nil
}
func (w *world) Pin(shard uint64, _ *router.Placement) { w.pins = append(w.pins, shard) }
func (w *world) Transferred()                          { w.transfers++ }

type worldView struct{ w *world }

func (v worldView) Member(id string) (swim.Member, bool) { m, ok := v.w.members[id]; return m, ok }
func (v worldView) Alive(id string) bool {
	_, ok := v.w.members[id]
	return ok && !v.w.dead[id]
}
func (v worldView) Drained(id string) bool       { return v.w.drained[id] }
func (v worldView) Removed(id string) bool       { return v.w.removed[id] }
func (v worldView) Placement() *router.Placement { return nil }

// forwarder records forwards and answers them as the target would.
type forwarder struct {
	w      *world
	answer serve.Answer
}

func (f *forwarder) ForwardTo(to string, kind wire.Kind, _ []byte, _ int, done serve.Done) {
	f.w.forwards = append(f.w.forwards, to+" "+kind.String())
	done(f.answer)
}
func (f *forwarder) ToLeader(kind wire.Kind, _ []byte, _ int, _ uint32, done serve.Done) {
	f.w.forwards = append(f.w.forwards, "leader "+kind.String())
	done(serve.ErrAnswer(wire.CodeNotLeader, "elsewhere"))
}
func (f *forwarder) RaftError(shard uint64, err error) serve.Answer {
	return serve.Unavailable(err.Error())
}
func (f *forwarder) NotLeader(shard uint64, leader string) serve.Answer {
	return serve.ErrAnswer(wire.CodeNotLeader, leader)
}

func newHandler(t *testing.T, w *world) (*Handler, *forwarder) {
	t.Helper()
	for _, id := range []string{"n1", "n2", "n3"} {
		w.members[id] = swim.Member{ID: id, State: swim.StateAlive, Generation: 7}
	}
	f := &forwarder{w: w, answer: result(&wire.AdminResult{})}
	h, err := New(Config{Self: "n1", RequestTimeout: time.Second, RaftID: raftID, Server: f,
		Leaders: router.NewLeaderTable(4), Events: w, Lease: w, Marks: w, Manager: w, Env: w})
	if err != nil {
		t.Fatal(err)
	}
	return h, f
}

// ask serves one request and returns its answer, which must come at once.
func ask(t *testing.T, h *Handler, kind wire.Kind, payload []byte) serve.Answer {
	t.Helper()
	var got *serve.Answer
	h.Handle(kind, payload, 0, func(a serve.Answer) { got = &a })
	if got == nil {
		t.Fatalf("%v: no answer", kind)
	}
	return *got
}

func adminNode(node string, force bool) []byte {
	return wire.AppendAdminNode(nil, &wire.AdminNode{Node: []byte(node), Force: force})
}

func TestDrainIsServedByTheNodeItNamesAndForwardedThere(t *testing.T) {
	w := newWorld()
	h, _ := newHandler(t, w)
	a := ask(t, h, wire.KindDrain, adminNode("n1", false))
	var r wire.AdminResult
	if a.Kind != wire.KindAdminResult || wire.DecodeAdminResult(a.Payload, &r) != nil || !r.Drained || r.Topics != 3 || r.Leaders != 2 {
		t.Fatalf("drain of self answered %+v (%+v)", a, r)
	}
	if a := ask(t, h, wire.KindUndrain, adminNode("n1", false)); a.Kind != wire.KindAdminResult {
		t.Fatalf("undrain answered %+v", a)
	}
	if len(w.marked) != 2 || !w.marked[0] || w.marked[1] {
		t.Fatalf("marks set %v", w.marked)
	}
	if a := ask(t, h, wire.KindDrain, adminNode("n2", false)); a.Kind != wire.KindAdminResult || len(w.forwards) != 1 || w.forwards[0] != "n2 "+wire.KindDrain.String() {
		t.Fatalf("drain of n2: %+v, forwards %v", a, w.forwards)
	}
	// Only a live member is forwarded to.
	w.dead["n3"] = true
	w.removed["n2"] = true
	for _, c := range []struct {
		node string
		code wire.ErrorCode
	}{{"n2", wire.CodeBadRequest}, {"n3", wire.CodeBadRequest}, {"n9", wire.CodeNotFound}} {
		if a := ask(t, h, wire.KindDrain, adminNode(c.node, false)); !a.Is(c.code) {
			t.Fatalf("drain of %s answered %+v, want %v", c.node, a, c.code)
		}
	}
	if len(w.forwards) != 1 {
		t.Fatalf("forwards %v", w.forwards)
	}
	if a := ask(t, h, wire.KindDrain, []byte{0xff}); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a request that does not decode answered %+v", a)
	}
}

func TestTransferLeaderPinsPreparesAndHandsOver(t *testing.T) {
	w := newWorld()
	h, _ := newHandler(t, w)
	tl := func(shard uint64, node string, prepare bool) []byte {
		return wire.AppendTransferLeader(nil, &wire.TransferLeader{Shard: shard, Node: []byte(node), Prepare: prepare})
	}
	if a := ask(t, h, wire.KindTransferLeader, tl(9, "n2", false)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a shard out of range answered %+v", a)
	}
	w.drained["n3"] = true
	if a := ask(t, h, wire.KindTransferLeader, tl(1, "n3", false)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a transfer to a drained node answered %+v", a)
	}
	if a := ask(t, h, wire.KindTransferLeader, tl(1, "n2", true)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a prepare for another node answered %+v", a)
	}
	if a := ask(t, h, wire.KindTransferLeader, tl(1, "n1", true)); a.Kind != wire.KindAdminResult || len(w.pins) != 1 || w.pins[0] != 1 {
		t.Fatalf("a prepare for self answered %+v, pins %v", a, w.pins)
	}
	// Not the leader: to the leader.
	if a := ask(t, h, wire.KindTransferLeader, tl(1, "n2", false)); !a.Is(wire.CodeNotLeader) || w.forwards[0] != "leader "+wire.KindTransferLeader.String() {
		t.Fatalf("a transfer off a follower answered %+v, forwards %v", a, w.forwards)
	}
	// The leader: a voter is told to prepare, then raft hands over, and
	// the answer waits for the replica to see the new leader.
	w.leads[1] = true
	w.shards = []raftmux.Info{{Shard: 1, Leader: raftID("n1"), Term: 4, Voters: []uint64{raftID("n1"), raftID("n2")}}}
	if a := ask(t, h, wire.KindTransferLeader, tl(1, "n3", false)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a transfer to a drained node answered %+v", a)
	}
	w.drained["n3"] = false
	if a := ask(t, h, wire.KindTransferLeader, tl(1, "n3", false)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a transfer to a non-voter answered %+v", a)
	}
	var got *serve.Answer
	h.Handle(wire.KindTransferLeader, tl(1, "n2", false), 0, func(a serve.Answer) { got = &a })
	if got != nil || w.transfers != 1 || w.ops[len(w.ops)-1].Kind != raftmux.OpTransferLeader || len(w.timers) != 1 {
		t.Fatalf("transfer: answer %v, transfers %d, ops %v, timers %d", got, w.transfers, w.ops, len(w.timers))
	}
	w.lead[1] = [2]uint64{raftID("n2"), 5}
	w.timers[0]()
	var r wire.AdminResult
	if got == nil || got.Kind != wire.KindAdminResult || wire.DecodeAdminResult(got.Payload, &r) != nil || r.Term != 5 || string(r.Node) != "n2" {
		t.Fatalf("transfer answered %+v (%+v)", got, r)
	}
	// A new leader that never shows up at a later term: Unavailable at
	// the deadline.
	got = nil
	w.lead[1] = [2]uint64{raftID("n2"), 4}
	h.Handle(wire.KindTransferLeader, tl(1, "n2", false), 0, func(a serve.Answer) { got = &a })
	if got != nil {
		t.Fatalf("transfer answered %+v at a term not above the one it began at", got)
	}
	w.now = w.now.Add(time.Second)
	w.timers[len(w.timers)-1]()
	if got == nil || !got.Is(wire.CodeUnavailable) {
		t.Fatalf("transfer past its deadline answered %+v", got)
	}
}

func TestRemoveNodeRecordsTheRemovalAndCountsTheShardsStillCountingIt(t *testing.T) {
	w := newWorld()
	h, _ := newHandler(t, w)
	if a := ask(t, h, wire.KindRemoveNode, adminNode("n1", false)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("removing self answered %+v", a)
	}
	if a := ask(t, h, wire.KindRemoveNode, adminNode("n2", false)); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("removing a live node answered %+v", a)
	}
	if a := ask(t, h, wire.KindRemoveNode, adminNode("n9", false)); !a.Is(wire.CodeNotFound) {
		t.Fatalf("removing an unknown node answered %+v", a)
	}
	if len(w.removals) != 0 {
		t.Fatalf("removals %v", w.removals)
	}
	w.dead["n2"] = true
	w.shards = []raftmux.Info{
		{Shard: 0, Leader: raftID("n1"), Voters: []uint64{raftID("n1"), raftID("n2")}},
		{Shard: 1, Leader: raftID("n1"), Learners: []uint64{raftID("n2")}},
		{Shard: 2, Leader: raftID("n3"), Voters: []uint64{raftID("n2")}},
		{Shard: 3, Leader: raftID("n1"), Voters: []uint64{raftID("n1")}},
	}
	a := ask(t, h, wire.KindRemoveNode, adminNode("n2", false))
	var r wire.AdminResult
	if a.Kind != wire.KindAdminResult || wire.DecodeAdminResult(a.Payload, &r) != nil || r.Shards != 2 {
		t.Fatalf("remove answered %+v (%+v)", a, r)
	}
	if at := w.removals["n2"]; at != uint64(w.now.UnixNano()) {
		t.Fatalf("removal of n2 at %d", at)
	}
	// Forced: an id nobody knows, at its generation if that is later.
	if a := ask(t, h, wire.KindRemoveNode, adminNode("n9", true)); a.Kind != wire.KindAdminResult || w.removals["n9"] == 0 {
		t.Fatalf("forced removal answered %+v, removals %v", a, w.removals)
	}
	// Known removed: counted again, not recorded again.
	w.removed["n2"] = true
	delete(w.removals, "n2")
	if a := ask(t, h, wire.KindRemoveNode, adminNode("n2", false)); a.Kind != wire.KindAdminResult || w.removals["n2"] != 0 {
		t.Fatalf("a second removal answered %+v, removals %v", a, w.removals)
	}
	w.shards = nil
	if a := ask(t, h, wire.KindShards, nil); !a.Is(wire.CodeBadRequest) {
		t.Fatalf("a request that is not an admin one answered %+v", a)
	}
}

// replicas is a raft host that reports shards and records the transfers
// asked of it, failing those to a target in refuse.
type replicas struct {
	infos     []raftmux.Info
	err       error
	refuse    map[uint64]bool
	transfers [][2]uint64 // shard, target
}

func (r *replicas) Shards(context.Context) ([]raftmux.Info, error) { return r.infos, r.err }
func (r *replicas) TransferLeader(_ context.Context, shard, target uint64) error {
	r.transfers = append(r.transfers, [2]uint64{shard, target})
	if r.refuse[target] {
		return errors.New("refused")
	}
	return nil
}

// A leaving node hands each shard it leads to the first other voter that
// is a live member it knows, one try per shard, and counts the transfers
// made; it leaves the shards others lead alone.
func TestHandOffGivesEachLeadershipToALiveVoter(t *testing.T) {
	w := newWorld()
	for _, m := range []string{"n1", "n2", "n3", "n4"} {
		w.members[m] = swim.Member{ID: m}
	}
	w.dead["n2"] = true
	a, _ := newHandler(t, w)
	n1, n2, n3, n4, n9 := raftID("n1"), raftID("n2"), raftID("n3"), raftID("n4"), raftID("n9")
	r := &replicas{refuse: map[uint64]bool{n4: true}, infos: []raftmux.Info{
		{Shard: 1, Leader: n1, Voters: []uint64{n1, n9, n2, n3, n4}}, // n9 unknown, n2 dead: n3
		{Shard: 2, Leader: n3, Voters: []uint64{n1, n3, n4}},         // not led here
		{Shard: 3, Leader: n1, Voters: []uint64{n1, n4, n3}},         // n4 refuses: no second try
		{Shard: 4, Leader: n1, Voters: []uint64{n1, n2}},             // nobody to take it
	}}
	if err := a.HandOff(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if want := [][2]uint64{{1, n3}, {3, n4}}; !slices.Equal(r.transfers, want) {
		t.Fatalf("transfers %v, want %v", r.transfers, want)
	}
	if w.transfers != 1 {
		t.Fatalf("%d transfers counted, want 1", w.transfers)
	}
	r = &replicas{err: errors.New("stopped")}
	if err := a.HandOff(context.Background(), r); err == nil || len(r.transfers) != 0 {
		t.Fatalf("without the shards: %v, %v", err, r.transfers)
	}
}

// clocked is a world on the wall clock, whose node leads led shards.
type clocked struct {
	*world
	led atomic.Int32
}

func (c *clocked) Now() time.Time                              { return time.Now() }
func (c *clocked) After(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
func (c *clocked) Led() int                                    { return int(c.led.Load()) }

func newClocked(t *testing.T) (*Handler, *clocked) {
	t.Helper()
	c := &clocked{world: newWorld()}
	for _, id := range []string{"n1", "n2"} {
		c.members[id] = swim.Member{ID: id, State: swim.StateAlive}
	}
	h, err := New(Config{Self: "n1", RequestTimeout: time.Second, RaftID: raftID, Server: &forwarder{w: c.world},
		Leaders: router.NewLeaderTable(4), Events: c, Lease: c, Marks: c, Manager: c, Env: c})
	if err != nil {
		t.Fatal(err)
	}
	return h, c
}

// A leaving node hands its leaderships over, then waits until it leads
// nothing, and no longer.
func TestLeaveWaitsUntilTheNodeLeadsNothing(t *testing.T) {
	h, c := newClocked(t)
	c.led.Store(1)
	r := &replicas{infos: []raftmux.Info{{Shard: 1, Leader: raftID("n1"), Voters: []uint64{raftID("n1"), raftID("n2")}}}}
	time.AfterFunc(150*time.Millisecond, func() { c.led.Store(0) })
	start := time.Now()
	h.Leave(context.Background(), r)
	if took := time.Since(start); took < 150*time.Millisecond || took > leaveWait/2 {
		t.Fatalf("left after %v: want once it led nothing, at 150ms", took)
	}
	if want := [][2]uint64{{1, raftID("n2")}}; !slices.Equal(r.transfers, want) {
		t.Fatalf("transfers %v, want %v", r.transfers, want)
	}
}

// The wait ends with its context, and there is none when the leaderships
// could not be read.
func TestLeaveWaitsNoLongerThanItsContextAllows(t *testing.T) {
	h, c := newClocked(t)
	c.led.Store(1)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	h.Leave(ctx, &replicas{})
	if took := time.Since(start); took < 100*time.Millisecond || took > leaveWait/2 {
		t.Fatalf("left after %v, want at the context's end (100ms)", took)
	}
	start = time.Now()
	h.Leave(context.Background(), &replicas{err: errors.New("stopped")})
	if took := time.Since(start); took > leavePoll {
		t.Fatalf("waited %v without knowing the leaderships", took)
	}
}
