package lease

import (
	"errors"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/histogram"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
)

// proposeEnv is raft committing every proposal after took on the node's
// clock, with res.
type proposeEnv struct {
	testEnv
	now  time.Time
	took time.Duration
	res  raftmux.Result
	ops  []raftmux.Op
}

func (e *proposeEnv) Now() time.Time { return e.now }
func (e *proposeEnv) Submit(op raftmux.Op, done func(raftmux.Result)) {
	e.ops = append(e.ops, op)
	e.now = e.now.Add(e.took)
	done(e.res)
}

// A proposal hands the state machine's result on, times a commit, and a
// commit of a shard this node leads proves its leadership from the moment
// it proposed: it may grant on it while that proof is fresh.
func TestAProposalCommittedProvesTheLeadership(t *testing.T) {
	a, shard, term := owner(t)
	env := &proposeEnv{now: time.Unix(100, 0), took: 10 * time.Millisecond}
	a.env, a.cfg.CommitTimes = env, new(histogram.Histogram)
	want := &shardsm.Result{}
	env.res = raftmux.Result{Value: want}
	a.Leadership(shard, term, true)
	var got *shardsm.Result
	a.Propose(shard, []byte("cmd"), func(res *shardsm.Result, err error) {
		if err != nil {
			t.Fatal(err)
		}
		got = res
	})
	if got != want || len(env.ops) != 1 || env.ops[0].Kind != raftmux.OpPropose || env.ops[0].Shard != shard || string(env.ops[0].Data) != "cmd" {
		t.Fatalf("result %p (want %p), ops %+v", got, want, env.ops)
	}
	if s := a.cfg.CommitTimes.Snapshot(); s.Count != 1 {
		t.Fatalf("%d commits timed", s.Count)
	}
	a.dutyMu.Lock()
	at, may := a.duty.CanGrant(time.Unix(100, 0).Add(a.cfg.ConfirmFresh), shard)
	a.dutyMu.Unlock()
	if !may || at != term {
		t.Fatalf("no grant (term %d) within ConfirmFresh of the proposal", at)
	}
}

// A failed proposal is neither timed nor a proof, and a result that is not
// the state machine's reaches done as none.
func TestAFailedProposalProvesNothing(t *testing.T) {
	a, shard, term := owner(t)
	env := &proposeEnv{now: time.Unix(100, 0)}
	a.env, a.cfg.CommitTimes = env, new(histogram.Histogram)
	a.Leadership(shard, term, true)
	fail := errors.New("deposed")
	env.res = raftmux.Result{Value: "not a result", Err: fail}
	called := false
	a.Propose(shard, nil, func(res *shardsm.Result, err error) {
		called = true
		if res != nil || !errors.Is(err, fail) {
			t.Fatalf("result %v, err %v", res, err)
		}
	})
	if !called {
		t.Fatal("done not called")
	}
	if s := a.cfg.CommitTimes.Snapshot(); s.Count != 0 {
		t.Fatalf("%d failed commits timed", s.Count)
	}
	a.dutyMu.Lock()
	_, may := a.duty.CanGrant(env.now, shard)
	a.dutyMu.Unlock()
	if may {
		t.Fatal("a failed proposal proved the leadership")
	}
}
