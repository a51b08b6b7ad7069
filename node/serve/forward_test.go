package serve

import (
	"errors"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// answers records what each forward's done was given.
type answers struct {
	got []result
}

type result struct {
	tag string
	a   Answer
	err error
}

func (r *answers) done(tag string) ForwardDone {
	return func(a Answer, err error) { r.got = append(r.got, result{tag, a, err}) }
}

// reply hands s the ForwardReply a peer sends for forward id.
func reply(t *testing.T, s *Server, id uint64, a Answer) {
	t.Helper()
	f, err := ReplyFrame(id, a)
	if err != nil {
		t.Fatal(err)
	}
	var h wire.Header
	if err := wire.DecodeHeader(f, &h); err != nil {
		t.Fatal(err)
	}
	s.TakeReply(h, f[wire.HeaderSize:])
}

// A forward goes out as one Forward frame carrying the request, its hops
// and this node as its origin; its reply is handed to done once, decoded,
// however many copies of the reply come back.
func TestForwardIsAnsweredOnce(t *testing.T) {
	s, env := newTestServer(t)
	var r answers
	s.Forward("n2", wire.KindLookup, []byte("req"), 2, r.done("a"))
	if len(env.sent) != 1 || env.sent[0].to != "n2" || env.sent[0].h.Kind != wire.KindForward {
		t.Fatalf("sent %+v", env.sent)
	}
	id := env.sent[0].h.RequestID
	if id != 101 {
		t.Fatalf("first forward id %d, want 101 (FirstForward + 1)", id)
	}
	var fw wire.Forward
	if err := wire.DecodeForward(env.sent[0].frame[wire.HeaderSize:], &fw); err != nil {
		t.Fatal(err)
	}
	if fw.Kind != wire.KindLookup || string(fw.Payload) != "req" || fw.Hops != 2 || string(fw.Origin) != "n1" {
		t.Fatalf("forward %+v", fw)
	}
	env.advance(time.Second)
	nl := ErrorAnswer(&wire.ErrorResponse{Code: wire.CodeNotLeader, Message: "led elsewhere", NodeID: "n3", Shard: 2})
	reply(t, s, id, nl)
	reply(t, s, id, nl)
	if len(r.got) != 1 {
		t.Fatalf("done called %d times, want once", len(r.got))
	}
	got := r.got[0]
	if got.err != nil || !got.a.Is(wire.CodeNotLeader) || got.a.Err.NodeID != "n3" {
		t.Fatalf("answer %+v, err %v: want the typed NotLeader of n3", got.a, got.err)
	}
	if env.pending() != 0 {
		t.Fatal("the forward's timer still runs after its answer")
	}
	if h := s.ForwardLatency(); h.Count != 1 || h.SumSeconds != 1 {
		t.Fatalf("forward latency %+v, want one of 1s", h)
	}
	// The timer stopped: nothing more comes when it would have fired.
	env.advance(time.Minute)
	if len(r.got) != 1 {
		t.Fatalf("done called %d times", len(r.got))
	}
}

// A peer going down fails at once, in the order they were sent, every
// forward waiting on it, and only those; an answer it sent before going
// down that arrives later finds no wait.
func TestPeerDownFailsItsWaits(t *testing.T) {
	s, env := newTestServer(t)
	var r answers
	s.Forward("n2", wire.KindAssign, nil, 1, r.done("first"))
	s.Forward("n3", wire.KindAssign, nil, 1, r.done("other"))
	s.Forward("n2", wire.KindAssign, nil, 1, r.done("second"))
	s.PeerDown("n2")
	if len(r.got) != 2 || r.got[0].tag != "first" || r.got[1].tag != "second" {
		t.Fatalf("failed %+v, want first and second", r.got)
	}
	for _, g := range r.got {
		if !errors.Is(g.err, ErrPeerDown) {
			t.Fatalf("%s: err %v, want ErrPeerDown", g.tag, g.err)
		}
	}
	if env.pending() != 1 {
		t.Fatalf("%d timers pending, want n3's only", env.pending())
	}
	reply(t, s, env.sent[0].h.RequestID, NewAnswer(wire.KindAssignment, nil))
	if len(r.got) != 2 {
		t.Fatal("a reply after the peer went down was handed on")
	}
	reply(t, s, env.sent[1].h.RequestID, NewAnswer(wire.KindAssignment, nil))
	if len(r.got) != 3 || r.got[2].tag != "other" || r.got[2].err != nil || r.got[2].a.Kind != wire.KindAssignment {
		t.Fatalf("n3's forward: %+v", r.got)
	}
}

// A forward not answered within three quarters of the request timeout
// fails; its late answer is dropped. One that cannot be sent fails at
// once.
func TestForwardTimesOutAndSendFails(t *testing.T) {
	s, env := newTestServer(t)
	var r answers
	s.Forward("n2", wire.KindRevoke, nil, 1, r.done("slow"))
	env.advance(3*time.Second - time.Millisecond)
	if len(r.got) != 0 {
		t.Fatal("failed before its time")
	}
	env.advance(time.Millisecond)
	if len(r.got) != 1 || !errors.Is(r.got[0].err, ErrForwardTimeout) {
		t.Fatalf("got %+v, want ErrForwardTimeout at 3s", r.got)
	}
	reply(t, s, env.sent[0].h.RequestID, NewAnswer(wire.KindRevoked, nil))
	if len(r.got) != 1 {
		t.Fatal("a late answer was handed on")
	}
	if s.ForwardLatency().Count != 0 {
		t.Fatal("an unanswered forward was timed")
	}
	down := errors.New("link down")
	env.sendErr = down
	s.Forward("n2", wire.KindRevoke, nil, 1, r.done("unsent"))
	if len(r.got) != 2 || !errors.Is(r.got[1].err, down) || env.pending() != 0 {
		t.Fatalf("got %+v, %d timers pending", r.got, env.pending())
	}
}

// A Forward taken from a peer is served once within the window: a copy
// from the same peer is dropped and counted, the same id from another
// peer or after the window is a new request, and a Forward that does not
// decode is dropped.
func TestTakeForwardDropsCopies(t *testing.T) {
	s, env := newTestServer(t)
	payload := wire.AppendForward(nil, &wire.Forward{Hops: 1, Origin: []byte("n2"), Kind: wire.KindAssign, Payload: []byte("x")})
	fw, ok := s.TakeForward("n2", 7, payload)
	if !ok || fw.Kind != wire.KindAssign || string(fw.Payload) != "x" || fw.Hops != 1 {
		t.Fatalf("first copy: %+v, %v", fw, ok)
	}
	env.advance(2 * time.Second)
	if _, ok := s.TakeForward("n2", 7, payload); ok {
		t.Fatal("a copy within the window was taken")
	}
	if _, ok := s.TakeForward("n3", 7, payload); !ok {
		t.Fatal("the same id from another peer was dropped")
	}
	env.advance(3 * time.Second) // 5s after the first: past the 4s window
	if _, ok := s.TakeForward("n2", 7, payload); !ok {
		t.Fatal("the id after the window was dropped")
	}
	if _, ok := s.TakeForward("n2", 8, payload[:3]); ok {
		t.Fatal("a Forward that does not decode was taken")
	}
	if st := s.Stats(); st.ForwardsIn != 3 || st.ForwardDups != 1 {
		t.Fatalf("stats %+v, want 3 in, 1 copy", st)
	}
}

// The memory of forwards taken stays bounded, and keeps the latest.
func TestDedupIsBounded(t *testing.T) {
	var d dedup
	t0 := time.Unix(100, 0)
	const window = time.Second
	for i := range uint64(3 * maxForwardsSeen) {
		d.first("n3", 1000+i, t0, window)
	}
	if len(d.seen) > maxForwardsSeen || d.n > maxForwardsSeen || len(d.ring) > maxForwardsSeen {
		t.Fatalf("remembers %d/%d forwards in a ring of %d, bound %d", len(d.seen), d.n, len(d.ring), maxForwardsSeen)
	}
	last := 1000 + uint64(3*maxForwardsSeen) - 1
	if d.first("n3", last, t0, window) || !d.first("n3", 1000, t0, window) {
		t.Fatal("the ring kept the wrong forwards")
	}
}

// ToLeader forwards to the leader the table names, with one more hop; it
// answers NotLeader itself with no leader known, itself as the leader, or
// no hop left; an assignment it brings back fills the routing cache.
func TestToLeader(t *testing.T) {
	s, env := newTestServer(t)
	env.addrs["n2"] = "10.0.0.2:7000"
	var got []Answer
	done := func(a Answer) { got = append(got, a) }

	s.ToLeader(wire.KindAssign, nil, 0, 3, done)
	if len(got) != 1 || !got[0].Is(wire.CodeUnavailable) || got[0].Err.RetryAfter == 0 || len(env.sent) != 0 {
		t.Fatalf("no leader known: %+v", got)
	}
	if _, err := s.leaders.Update(3, "n2", 5); err != nil {
		t.Fatal(err)
	}
	s.ToLeader(wire.KindAssign, nil, wire.MaxForwardHops, 3, done)
	if len(got) != 2 || !got[1].Is(wire.CodeNotLeader) || got[1].Err.NodeID != "n2" || got[1].Err.Addr != "10.0.0.2:7000" || got[1].Err.Shard != 3 {
		t.Fatalf("no hop left: %+v", got[1].Err)
	}
	if st := s.Stats(); st.NotLeader != 2 || st.Forwarded != 0 {
		t.Fatalf("stats %+v", st)
	}

	s.ToLeader(wire.KindLookup, []byte("q"), 1, 3, done)
	if len(env.sent) != 1 || env.sent[0].to != "n2" {
		t.Fatalf("sent %+v", env.sent)
	}
	var fw wire.Forward
	if err := wire.DecodeForward(env.sent[0].frame[wire.HeaderSize:], &fw); err != nil || fw.Hops != 2 {
		t.Fatalf("forward %+v, %v: want 2 hops", fw, err)
	}
	asg := wire.Assignment{Topic: []byte("orders"), Owner: []byte("n4"), OwnerAddr: []byte("10.0.0.4:7000"), Epoch: 9, Partitions: 6, Shard: 3}
	reply(t, s, env.sent[0].h.RequestID, NewAnswer(wire.KindAssignment, wire.AppendAssignment(nil, &asg)))
	if len(got) != 3 || got[2].Kind != wire.KindAssignment {
		t.Fatalf("relayed %+v", got)
	}
	if r, ok := s.routes.Get([]byte("orders")); !ok || r.Owner != "n4" || r.Epoch != 9 || r.Partitions != 6 {
		t.Fatalf("cached route %+v, %v", r, ok)
	}
	// A forward that fails is Unavailable, naming the shard and leader.
	s.ToLeader(wire.KindLookup, nil, 0, 3, done)
	s.PeerDown("n2")
	if len(got) != 4 || !got[3].Is(wire.CodeUnavailable) {
		t.Fatalf("failed forward: %+v", got[3])
	}
	if st := s.Stats(); st.Forwarded != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Bounded answers Unavailable once the request timeout passes, and
// nothing after; an answer in time stops the timer.
func TestBounded(t *testing.T) {
	s, env := newTestServer(t)
	var got []Answer
	done := s.Bounded(func(a Answer) { got = append(got, a) })
	env.advance(4 * time.Second)
	done(NewAnswer(wire.KindAssignment, nil))
	if len(got) != 1 || !got[0].Is(wire.CodeUnavailable) {
		t.Fatalf("got %+v", got)
	}
	done = s.Bounded(func(a Answer) { got = append(got, a) })
	done(NewAnswer(wire.KindAssignment, nil))
	env.advance(time.Minute)
	if len(got) != 2 || got[1].Kind != wire.KindAssignment || env.pending() != 0 {
		t.Fatalf("got %+v", got)
	}
}

// AskShards forwards a Shards request to the leader, with every hop left,
// and hands done the ShardList it answers; any other answer, or none, is
// no list.
func TestAskShardsDecodesTheLeadersList(t *testing.T) {
	s, env := newTestServer(t)
	var lists []*wire.ShardList
	var errs []error
	done := func(sl *wire.ShardList, err error) { lists, errs = append(lists, sl), append(errs, err) }
	s.AskShards("n2", done)
	if len(env.sent) != 1 || env.sent[0].to != "n2" {
		t.Fatalf("sent %+v", env.sent)
	}
	var fw wire.Forward
	if err := wire.DecodeForward(env.sent[0].frame[wire.HeaderSize:], &fw); err != nil {
		t.Fatal(err)
	}
	if fw.Kind != wire.KindShards || len(fw.Payload) != 0 || fw.Hops != wire.MaxForwardHops {
		t.Fatalf("forward %+v", fw)
	}
	want := wire.ShardList{Shards: []wire.ShardInfo{{Shard: 3, Leader: []byte("n2"), Term: 7}}}
	reply(t, s, env.sent[0].h.RequestID, NewAnswer(wire.KindShardList, wire.AppendShardList(nil, &want)))
	if len(lists) != 1 || errs[0] != nil || lists[0] == nil || len(lists[0].Shards) != 1 || lists[0].Shards[0].Shard != 3 || lists[0].Shards[0].Term != 7 {
		t.Fatalf("list %+v, err %v", lists, errs)
	}
	s.AskShards("n2", done)
	reply(t, s, env.sent[1].h.RequestID, ErrAnswer(wire.CodeNotLeader, "not here"))
	if len(lists) != 2 || lists[1] != nil || errs[1] != nil {
		t.Fatalf("an error answer gave list %+v, err %v", lists[1], errs[1])
	}
	s.AskShards("n2", done)
	env.advance(time.Minute)
	if len(lists) != 3 || lists[2] != nil || !errors.Is(errs[2], ErrForwardTimeout) {
		t.Fatalf("an unanswered ask gave list %+v, err %v", lists[2], errs[2])
	}
}
