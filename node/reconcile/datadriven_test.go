package reconcile

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/shoalmq/shoal/internal/ddtest"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// TestSpec runs the scenarios of testdata/*.txt: what the reconcile room
// of node n1 decides, given the membership, the replicas n1 hosts and what
// it hears. The cluster has 4 shards of 3 replicas; n1 makes at most 4
// changes per pass, waits for 3 members to be born; the reconcile interval
// is 500ms and the lease 3s (so a member settles in 2.5s, an owner is
// silent after 9s, a stray is a suspect after 15s). Node nK has raft id K;
// nodes of other letters sort apart from n1 (aK before, zK after).
// Times are offsets from a fixed instant (at=1.5s); a directive with at=
// moves the clock there. The verbs:
//
//	view live=(N, ...) [suspect=(N, ...)] [dead=(N, ...)] [left=(N, ...)]
//	     [drained=(N, ...)] [removed=(N, ...)] [at=D]
//	    a new membership (changed at D if the live set differs from the
//	    last view's): prints the placement, each shard's replicas with the
//	    preferred leader first
//	replicas [events]
//	    the replicas n1 hosts, one a line: S leader=N voters=N,N learners=N
//	    [ended] (ended: the replica applied its shard's split)
//	    (events: count a shard event, as a changed leader or configuration
//	    does)
//	pass [at=D]
//	    the shard manager: is a pass due, and what it asks (stray checks,
//	    groups to wake, steps)
//	passes [at=D] until=D
//	    a pass every 500ms until D, each step made at once: what the
//	    passes that did something did
//	done [fail]
//	    the steps of the last pass end, made (applied to the replicas,
//	    each a shard event) or not
//	owes shard=S | owes
//	    n1 owes an open in S it has not sent (none)
//	pin shard=S                     an operator moved S's leadership to n1
//	rounds N=D ...                  when each peer's last lease round came
//	owners [at=D] [until=D] [knows-all] [version=V]
//	    the owners' look at one reconcile interval (or at each from the
//	    clock's time until D), over the shards n1 leads, one a line:
//	    S since=D owners=N,N [asked=N:D,...]
//	    (n1 leads S since D; N last asked n1 for a lease there at D):
//	    is a look due, and whose topics move, why; version is the state
//	    machine's (default 1)
//	reassign shard=S n=K | reassigned shard=S
//	    K proposals of moves in S go out; one is answered
//	leader shard=S node=N term=T    the leader table hears of a leader
//	answer leader=N                 N's answer to n1's check: the shards it
//	    knows, one a line: S leader=N replicas=N,N
//	dropped shard=S [err]           a confirmed stray's drop ended (the
//	                                replica is gone, or not: err)
//	strays                          the confirmed strays not dropped
//	birth [at=D]                    n1, not born, looks at its birth
//	group-done                      the creation of one group was answered
//	ready leaders=K born=D [at=D]   is n1, born at D, ready
//	silent since=D asked=D round=D [at=D]
//	knows-all ready=D [at=D]
func TestSpec(t *testing.T) {
	ddtest.Run(t, "testdata/*.txt", func(t *testing.T) ddtest.Handler { return newSpec(t).run })
}

const specShards = 4

// specID is a test node's raft id: nK is K, and a node of another letter
// L (aK, zK: ids that sort before or after n1's) 1000×L + K.
func specID(name string) uint64 {
	k, err := strconv.ParseUint(name[1:], 10, 64)
	if err != nil || name[0] < 'a' || name[0] > 'z' || k >= 1000 {
		panic(fmt.Sprintf("node %q is not a letter and a number below 1000", name))
	}
	if name[0] == 'n' {
		return k
	}
	return uint64(name[0]-'a'+1)*1000 + k
}

func specName(id uint64) string {
	if id < 1000 {
		return fmt.Sprintf("n%d", id)
	}
	return fmt.Sprintf("%c%d", 'a'+byte(id/1000-1), id%1000)
}

// specEnv is the node, as the scenarios make it.
type specEnv struct{ owes map[uint64]bool }

func (e *specEnv) NameOf(id uint64) (string, bool) { return specName(id), true }
func (e *specEnv) HoldsBack(shard uint64) bool     { return e.owes[shard] }

type spec struct {
	c       *Controller
	env     *specEnv
	leaders *router.LeaderTable
	now     time.Time
	view    *View
	infos   []raftmux.Info
	events  uint64
	steps   []Step // the last pass's, not yet done
	rounds  map[string]time.Time
	asks    map[string]Ask // the last checks sent, by leader
}

func newSpec(t *testing.T) *spec {
	env := &specEnv{owes: map[uint64]bool{}}
	leaders := router.NewLeaderTable(specShards)
	c, err := New(Config{Self: "n1", Shards: specShards, Replicas: 3, MaxConfChanges: 4, MaxTransfers: 64, BootstrapExpect: 3,
		Interval: 500 * time.Millisecond, Lease: 3 * time.Second, RaftID: specID, Leaders: leaders, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	v := &View{Members: map[string]swim.Member{}, Dead: map[string]bool{}}
	return &spec{c: c, env: env, leaders: leaders, now: ddtest.T0, view: v, rounds: map[string]time.Time{}, asks: map[string]Ask{}}
}

// fields parses "S k=v k=v,v" into S and the keys' values.
func fields(t *testing.T, line string) (uint64, map[string][]string) {
	f := strings.Fields(line)
	s, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		t.Fatalf("line %q: %v", line, err)
	}
	kv := map[string][]string{}
	for _, p := range f[1:] {
		k, v, _ := strings.Cut(p, "=")
		if v != "" {
			kv[k] = strings.Split(v, ",")
		} else {
			kv[k] = nil
		}
	}
	return s, kv
}

func ids(names []string) []uint64 {
	out := make([]uint64, 0, len(names))
	for _, n := range names {
		out = append(out, specID(n))
	}
	return out
}

func names(ids []uint64) string {
	if len(ids) == 0 {
		return "-"
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, specName(id))
	}
	return strings.Join(out, ",")
}

func (s *spec) run(t *testing.T, td *datadriven.TestData) string {
	a := ddtest.ArgsOf(t, td)
	if a.Has("at") {
		s.now = a.Time("at")
	}
	var out strings.Builder
	switch td.Cmd {
	case "view":
		s.newView(t, a, &out)
	case "replicas":
		s.infos = nil
		for _, l := range ddtest.Lines(td.Input) {
			shard, kv := fields(t, l)
			in := raftmux.Info{Shard: shard, Voters: ids(kv["voters"]), Learners: ids(kv["learners"])}
			if l := kv["leader"]; len(l) > 0 {
				in.Leader = specID(l[0])
			}
			_, in.Ended = kv["ended"]
			s.infos = append(s.infos, in)
		}
		if a.Has("events") {
			s.events++
		}
		out.WriteString("ok\n")
	case "pass":
		s.pass(&out)
	case "passes":
		s.passes(t, a.Time("until"), &out)
	case "done":
		s.done(a.Has("fail"), &out)
	case "owes":
		clear(s.env.owes)
		if a.Has("shard") {
			s.env.owes[a.Num("shard")] = true
		}
		out.WriteString("ok\n")
	case "pin":
		s.c.Pin(a.Num("shard"), s.view.Placement)
		out.WriteString("ok\n")
	case "rounds":
		for _, c := range td.CmdArgs {
			s.rounds[c.Key] = ddtest.At(t, c.Vals[0])
		}
		out.WriteString("ok\n")
	case "owners":
		s.owners(t, a, td.Input, &out)
	case "reassign":
		if !s.c.BeginReassign(a.Num("shard"), int(a.Num("n"))) {
			out.WriteString("moves already in flight\n")
		} else {
			out.WriteString("ok\n")
		}
	case "reassigned":
		s.c.Reassigned(a.Num("shard"))
		out.WriteString("ok\n")
	case "leader":
		if _, err := s.leaders.Update(uint32(a.Num("shard")), a.Need("node"), a.Num("term")); err != nil {
			t.Fatal(err)
		}
		out.WriteString("ok\n")
	case "answer":
		s.answer(t, a.Need("leader"), td.Input, &out)
	case "strays":
		fmt.Fprintf(&out, "confirmed strays: %v\n", s.c.Strays())
	case "dropped":
		var err error
		if a.Has("err") {
			err = errors.New("raft host stopped")
		}
		shard := a.Num("shard")
		s.c.Dropped(shard, err)
		if err == nil {
			s.infos = slices.DeleteFunc(s.infos, func(in raftmux.Info) bool { return in.Shard == shard })
		}
		fmt.Fprintf(&out, "confirmed strays: %v\n", s.c.Strays())
	case "birth":
		s.birth(&out)
	case "group-done":
		if s.c.GroupDone() {
			out.WriteString("born\n")
		} else {
			out.WriteString("more to come\n")
		}
	case "ready":
		fmt.Fprintf(&out, "ready: %v\n", s.c.Ready(int(a.Num("leaders")), a.Time("born"), s.now))
	case "silent":
		fmt.Fprintf(&out, "silent: %v\n", s.c.Silent(s.now, a.Time("since"), a.Time("asked"), a.Time("round")))
	case "knows-all":
		var at time.Time
		if a.Has("ready") {
			at = a.Time("ready")
		}
		fmt.Fprintf(&out, "knows all: %v\n", s.c.KnowsAll(at, s.now))
	default:
		t.Fatalf("unknown verb %q", td.Cmd)
	}
	return out.String()
}

func (s *spec) newView(t *testing.T, a ddtest.Args, out *strings.Builder) {
	v := &View{Members: map[string]swim.Member{}, Dead: map[string]bool{}, Drained: map[string]bool{}, Removed: map[string]bool{}}
	add := func(key string, st swim.State) {
		for _, id := range a.Vals(key) {
			v.Members[id] = swim.Member{ID: id, State: st}
		}
	}
	add("live", swim.StateAlive)
	add("suspect", swim.StateSuspect)
	add("dead", swim.StateDead)
	add("left", swim.StateLeft)
	for _, id := range a.Vals("removed") {
		if _, ok := v.Members[id]; !ok {
			v.Members[id] = swim.Member{ID: id, State: swim.StateAlive}
		}
		v.Removed[id] = true
	}
	var rm []router.Member
	for _, id := range slices.Sorted(maps.Keys(v.Members)) {
		m := v.Members[id]
		switch {
		case v.Removed[id]:
			v.Dead[id] = true
		case m.State == swim.StateAlive || m.State == swim.StateSuspect:
			v.Live = append(v.Live, id)
			rm = append(rm, router.Member{ID: id})
			if m.State == swim.StateSuspect {
				v.Suspects++
			}
		default:
			v.Dead[id] = true
		}
	}
	var noLead []string
	for _, id := range a.Vals("drained") {
		v.Drained[id] = true
		noLead = append(noLead, id)
	}
	slices.Sort(noLead)
	ring, err := router.NewRing(rm, router.RingConfig{})
	if err != nil {
		t.Fatal(err)
	}
	v.Ring, v.Placement = ring, ring.PlacementExcept(specShards, 3, noLead)
	v.Changed = s.view.Changed
	if !slices.Equal(v.Live, s.view.Live) {
		v.Changed = s.now
	}
	s.view = v
	var reps []string
	for sh := range uint32(specShards) {
		reps = v.Placement.Replicas(sh, reps[:0])
		lead := v.Placement.Leader(sh)
		fmt.Fprintf(out, "shard %d: %s", sh, lead)
		for _, r := range reps {
			if r != lead {
				fmt.Fprintf(out, " %s", r)
			}
		}
		out.WriteString("\n")
	}
}

// passes runs a pass every reconcile interval from the clock's time to
// until, its steps made at once, and prints what the passes that did
// something did, at their times.
func (s *spec) passes(t *testing.T, until time.Time, out *strings.Builder) {
	notDue, idle := 0, 0
	for ; !s.now.After(until); s.now = s.now.Add(500 * time.Millisecond) {
		var o strings.Builder
		switch s.pass(&o) {
		case passNotDue:
			notDue++
		case passIdle:
			idle++
		default:
			fmt.Fprintf(out, "at %v:\n%s", s.now.Sub(ddtest.T0), indent(o.String()))
			if len(s.steps) > 0 {
				var d strings.Builder
				s.done(false, &d)
				out.WriteString(indent(d.String()))
			}
		}
	}
	s.now = until
	fmt.Fprintf(out, "%d passes with nothing to do, %d left out\n", idle, notDue)
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range ddtest.Lines(s) {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

type passOutcome int

const (
	passNotDue passOutcome = iota
	passIdle
	passBusy
)

func (s *spec) pass(out *strings.Builder) passOutcome {
	if !s.c.ManageDue(s.view, s.now, s.events) {
		out.WriteString("no pass due\n")
		return passNotDue
	}
	if !s.c.BeginPass() {
		out.WriteString("a pass is in flight\n")
		return passNotDue
	}
	p := s.c.Manage(s.view, s.events, s.infos, s.now)
	for _, ask := range p.Asks {
		fmt.Fprintf(out, "ask %s about shards %v\n", ask.Leader, ask.Shards)
		s.asks[ask.Leader] = ask
	}
	for _, id := range p.Wake {
		fmt.Fprintf(out, "wake the groups of %s\n", specName(id))
	}
	for _, st := range p.Steps {
		fmt.Fprintf(out, "%v\n", st)
		if st.Name != specName(st.Node) {
			fmt.Fprintf(out, "  (named %q, raft id %d)\n", st.Name, st.Node)
		}
	}
	s.steps = p.Steps
	if len(p.Asks)+len(p.Wake)+len(p.Steps) == 0 {
		out.WriteString("nothing to do\n")
		return passIdle
	}
	return passBusy
}

func (s *spec) done(fail bool, out *strings.Builder) {
	if len(s.steps) == 0 {
		out.WriteString("no step in flight\n")
		return
	}
	for _, st := range s.steps {
		if fail {
			s.c.StepDone(st, false, s.now)
			fmt.Fprintf(out, "shard %d: %v failed\n", st.Shard, st.Kind)
			continue
		}
		i := slices.IndexFunc(s.infos, func(in raftmux.Info) bool { return in.Shard == st.Shard })
		in := &s.infos[i]
		switch st.Kind {
		case Promote:
			in.Learners = slices.DeleteFunc(in.Learners, func(id uint64) bool { return id == st.Node })
			in.Voters = append(in.Voters, st.Node)
		case Replace:
			in.Learners = slices.DeleteFunc(in.Learners, func(id uint64) bool { return id == st.Node })
			in.Voters = append(slices.DeleteFunc(in.Voters, func(id uint64) bool { return id == st.Out }), st.Node)
		case RemoveLearner:
			in.Learners = slices.DeleteFunc(in.Learners, func(id uint64) bool { return id == st.Node })
		case AddLearner:
			in.Learners = append(in.Learners, st.Node)
		case RemoveRemoved, RemoveVoter:
			in.Voters = slices.DeleteFunc(in.Voters, func(id uint64) bool { return id == st.Node })
		case Transfer:
			in.Leader = st.Node
		}
		s.events++
		s.c.StepDone(st, true, s.now)
		fmt.Fprintf(out, "%d leader=%s voters=%s learners=%s\n", in.Shard, specName(in.Leader), names(in.Voters), names(in.Learners))
	}
	s.steps = nil
}

// owners runs the owners' look at every reconcile interval from the
// clock's time to until (default: once), over the shards of input.
func (s *spec) owners(t *testing.T, a ddtest.Args, input string, out *strings.Builder) {
	if !a.Has("until") {
		s.look(t, a, input, out)
		return
	}
	until := a.Time("until")
	notDue := 0
	for ; !s.now.After(until); s.now = s.now.Add(500 * time.Millisecond) {
		var o strings.Builder
		if !s.look(t, a, input, &o) {
			notDue++
			continue
		}
		fmt.Fprintf(out, "at %v:\n%s", s.now.Sub(ddtest.T0), indent(o.String()))
	}
	s.now = until
	fmt.Fprintf(out, "%d intervals with no look due\n", notDue)
}

// look is the owners' look at one reconcile interval; it reports whether
// one was due.
func (s *spec) look(t *testing.T, a ddtest.Args, input string, out *strings.Builder) bool {
	if !s.c.OwnersDue(s.view, s.now, s.rounds) {
		out.WriteString("no look due\n")
		return false
	}
	version := uint64(1)
	if a.Has("version") {
		version = a.Num("version")
	}
	look := s.c.Owners(s.view, s.now, maps.Clone(s.rounds), a.Has("knows-all"), version, s.events)
	if look == nil {
		out.WriteString("nothing changed since a look that found nothing\n")
		return true
	}
	moved := false
	for _, l := range ddtest.Lines(input) {
		shard, kv := fields(t, l)
		since := ddtest.At(t, kv["since"][0])
		asked := map[string]time.Time{}
		for _, p := range kv["asked"] {
			id, at, _ := strings.Cut(p, ":")
			asked[id] = ddtest.At(t, at)
		}
		owners := look.Shard(true, since, asked)
		if !slices.ContainsFunc(kv["owners"], owners.Moves) {
			continue
		}
		for _, o := range slices.Sorted(slices.Values(kv["owners"])) {
			if why := owners.Why(o); why != Stays {
				fmt.Fprintf(out, "shard %d: move the topics of %s (%v)\n", shard, o, why)
				moved = true
			}
		}
	}
	look.Done()
	if !moved {
		out.WriteString("no owner to move\n")
	}
	return true
}

func (s *spec) answer(t *testing.T, leader, input string, out *strings.Builder) {
	ask, ok := s.asks[leader]
	if !ok {
		t.Fatalf("%s was not asked", leader)
	}
	var sl wire.ShardList
	for _, l := range ddtest.Lines(input) {
		shard, kv := fields(t, l)
		si := wire.ShardInfo{Shard: shard}
		if l := kv["leader"]; len(l) > 0 {
			si.Leader = []byte(l[0])
		}
		for _, r := range kv["replicas"] {
			si.Replicas = append(si.Replicas, []byte(r))
		}
		sl.Shards = append(sl.Shards, si)
	}
	drop := s.c.Judge(ask, &sl)
	for _, d := range drop {
		fmt.Fprintf(out, "drop the stray replica of shard %d\n", d)
	}
	if len(drop) == 0 {
		out.WriteString("nothing confirmed\n")
	}
	fmt.Fprintf(out, "confirmed strays: %v\n", s.c.Strays())
}

func (s *spec) birth(out *strings.Builder) {
	rows, _ := s.leaders.Snapshot(nil)
	b, err := s.c.Birth(s.view, rows, s.now)
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
		return
	}
	switch b.Step {
	case BirthNone:
		out.WriteString("nothing yet\n")
	case BirthWait:
		fmt.Fprintf(out, "wait: %d of 3 members\n", len(s.view.Live))
	case BirthJoin:
		out.WriteString("join the born cluster\n")
	case BirthCreate:
		fmt.Fprintf(out, "create the cluster of %s\n", strings.Join(b.Members, ","))
		for _, g := range b.Groups {
			fmt.Fprintf(out, "shard %d: voters %s", g.Shard, names(g.Voters))
			if g.Campaign {
				out.WriteString(", campaign")
			}
			out.WriteString("\n")
		}
		if len(b.Groups) == 0 {
			out.WriteString("no group here: born\n")
		}
	}
}
