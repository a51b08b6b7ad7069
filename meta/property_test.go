package meta

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// gen draws random commands over a small set of topics and nodes, so that
// moves, revokes and re-assigns of the same topic are frequent. About one
// command in ten is invalid.
type gen struct {
	rng    *rand.Rand
	topics []string
	nodes  []string
}

func newGen(seed uint64) *gen {
	g := &gen{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
	for i := range 8 {
		g.topics = append(g.topics, fmt.Sprintf("t%d", i))
	}
	for i := range 4 {
		g.nodes = append(g.nodes, fmt.Sprintf("n%d", i+1))
	}
	return g
}

func (g *gen) topic() string { return g.topics[g.rng.IntN(len(g.topics))] }
func (g *gen) node() string  { return g.nodes[g.rng.IntN(len(g.nodes))] }

func (g *gen) partitions() uint32 {
	return []uint32{0, 1, 2, 4, 8, MaxPartitions + 1}[g.rng.IntN(6)]
}

func (g *gen) command(s *State) Command {
	switch p := g.rng.IntN(100); {
	case p < 35:
		owner := g.node()
		if g.rng.IntN(4) == 0 {
			owner = ""
		}
		return assign(g.topic(), owner, g.partitions())
	case p < 50:
		return revoke(g.topic())
	case p < 60:
		return update(g.topic(), g.partitions())
	case p < 72:
		// What a leader proposes when a node dies.
		dead := g.node()
		var live []Node
		for _, n := range g.nodes {
			if n != dead {
				live = append(live, Node{ID: n, Load: uint64(s.Load(n))})
			}
		}
		c, err := s.PlanReassign(dead, live, 1+g.rng.IntN(4))
		if err != nil {
			panic(err)
		}
		return c
	case p < 80:
		// A stale or hand-made reassign: moves of any topic, sorted.
		dead := g.node()
		picked := map[string]bool{}
		for range g.rng.IntN(4) {
			picked[g.topic()] = true
		}
		var names []string
		for n := range picked {
			names = append(names, n)
		}
		slices.Sort(names)
		c := Command{Op: OpReassignNode, Node: dead}
		for _, n := range names {
			to := g.node()
			if to == dead {
				to = "n9"
			}
			c.Moves = append(c.Moves, Move{Topic: []byte(n), Owner: to})
		}
		return c
	case p < 85:
		return marker(g.rng.Uint64())
	case p < 90:
		return compactCmd()
	default:
		// Invalid: an empty topic, an unsorted reassign, an unknown op.
		switch g.rng.IntN(3) {
		case 0:
			return assign("", g.node(), 0)
		case 1:
			return reassign("n1", "t7", "n2", "t0", "n3")
		default:
			return Command{Op: Op(8 + g.rng.IntN(200))}
		}
	}
}

// recordsByTopic snapshots every record (tombstones included).
func recordsByTopic(s *State) map[string]Assignment {
	m := map[string]Assignment{}
	for a := range s.All() {
		m[a.Topic] = a
	}
	return m
}

func TestReplicasApplyingTheSameLogAgree(t *testing.T) {
	seeds, steps := 60, 200
	if testing.Short() {
		seeds = 10
	}
	var st stats
	for seed := range uint64(seeds) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { replayProperty(t, seed, steps, &st) })
	}
	t.Logf("%+v", st)
	if st.rejected == 0 || st.applied < st.rejected || st.moves == 0 || st.reassigned == 0 || st.revokes == 0 || st.compacted == 0 {
		t.Fatalf("the random logs missed a case: %+v", st)
	}
}

func replayProperty(t *testing.T, seed uint64, steps int, st *stats) {
	g := newGen(seed)
	leader, follower := New(), New()
	var late *State // restored from the leader's snapshot half way through
	var log [][]byte
	var resL, resF Result
	highest := map[string]uint64{} // topic → highest epoch seen
	for i := range steps {
		c := g.command(leader)
		before := snapshot(leader)
		prev := recordsByTopic(leader)
		errL := leader.Apply(&c, &resL)

		// The follower sees only the log entry.
		b, encErr := AppendCommand(nil, &c)
		if vErr := c.Validate(); (encErr == nil) != (vErr == nil) || (vErr != nil && errL == nil) {
			t.Fatalf("step %d %s: validate %v, encode %v, apply %v", i, c.Op, vErr, encErr, errL)
		}
		st.count(c.Op, errL, &resL)
		if encErr == nil {
			var d Command
			if err := DecodeCommand(b, &d); err != nil {
				t.Fatalf("step %d %s: decode of an encoded command: %v", i, c.Op, err)
			}
			errF := follower.Apply(&d, &resF)
			if (errL == nil) != (errF == nil) {
				t.Fatalf("step %d %s: leader err %v, follower err %v", i, c.Op, errL, errF)
			}
			if errL == nil && !reflect.DeepEqual(resL, resF) {
				t.Fatalf("step %d %s: results differ\n%+v\n%+v", i, c.Op, resL, resF)
			}
			log = append(log, b)
			if late != nil {
				if err := late.Apply(&d, nil); (err == nil) != (errL == nil) {
					t.Fatalf("step %d %s: restored replica err %v, leader %v", i, c.Op, err, errL)
				}
			}
		}
		if errL != nil && !bytes.Equal(before, snapshot(leader)) {
			t.Fatalf("step %d %s: rejected (%v) but the state changed", i, c.Op, errL)
		}
		if err := leader.checkInvariants(); err != nil {
			t.Fatalf("step %d %s: %v", i, c.Op, err)
		}
		sameSnapshot(t, leader, follower)

		// Epochs never go back, and an owner never changes within an epoch.
		now := recordsByTopic(leader)
		for topic, was := range prev {
			a, ok := now[topic]
			if !ok {
				if leader.Floor() < was.Epoch {
					t.Fatalf("step %d: %s dropped at epoch %d above floor %d", i, topic, was.Epoch, leader.Floor())
				}
				continue
			}
			if a.Epoch < was.Epoch || (a.Epoch == was.Epoch && (a.Owner != was.Owner || a.State != was.State)) {
				t.Fatalf("step %d %s: %s went from %+v to %+v", i, c.Op, topic, was, a)
			}
		}
		for topic, a := range now {
			if a.Epoch < highest[topic] {
				t.Fatalf("step %d %s: %s at epoch %d after %d was used", i, c.Op, topic, a.Epoch, highest[topic])
			}
			highest[topic] = a.Epoch
		}
		// Every Open names the owner the state now holds at that epoch.
		if errL == nil {
			// Every Close names the owner the state now records as
			// previous, for a new leader to close again.
			for _, e := range resL.Effects {
				a := now[e.Topic]
				switch {
				case e.Kind == EffectOpen && (a.Owner != e.Node || a.Epoch != e.Epoch || a.Partitions != e.Partitions),
					e.Kind == EffectClose && (a.Previous != e.Node || a.Epoch != e.Epoch):
					t.Fatalf("step %d %s: effect %+v but state %+v", i, c.Op, e, a)
				}
			}
		}
		if i == steps/2 {
			var err error
			if late, err = DecodeSnapshot(snapshot(leader)); err != nil {
				t.Fatal(err)
			}
		}
	}
	sameSnapshot(t, leader, late)

	// Replaying the whole log from scratch gives the same state again.
	replay := New()
	for _, b := range log {
		var d Command
		if err := DecodeCommand(b, &d); err != nil {
			t.Fatal(err)
		}
		_ = replay.Apply(&d, nil) // rejected entries were rejected above too
	}
	sameSnapshot(t, leader, replay)
}

// stats counts what the random logs exercised, so that a generator that
// stopped producing some case would be noticed.
type stats struct {
	applied, rejected, moves, reassigned, revokes, compacted int
}

func (st *stats) count(op Op, err error, res *Result) {
	if err != nil {
		st.rejected++
		return
	}
	st.applied++
	switch {
	case op == OpAssign && len(res.Effects) == 2:
		st.moves++
	case op == OpReassignNode && res.Moved > 0:
		st.reassigned++
	case op == OpRevoke && res.Changed:
		st.revokes++
	case op == OpCompact && res.Compacted > 0:
		st.compacted++
	}
}
