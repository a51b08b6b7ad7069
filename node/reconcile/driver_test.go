package reconcile

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/ddtest"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// driverNode is the node a Driver acts on, as the tests make it: a raft
// host that answers every op at once, a lease room and a state machine
// that know nothing, and the spec's clock and view.
type driverNode struct {
	s        *spec
	born     int      // MarkBorn calls
	ops      []string // what the raft host was asked, in order
	takeUps  int      // TakeUpLeaderships calls
	proposed int
}

func (e *driverNode) Now() time.Time          { return e.s.now }
func (e *driverNode) View() *View             { return e.s.view }
func (e *driverNode) Born() bool              { return e.born > 0 }
func (e *driverNode) MarkBorn()               { e.born++ }
func (e *driverNode) ReadyAt() time.Time      { return time.Time{} }
func (e *driverNode) Leads(shard uint64) bool { return false }
func (e *driverNode) ShardEvents() uint64     { return e.s.events }
func (e *driverNode) Host() Host              { return driverHost{e} }

func (e *driverNode) Propose(uint64, []byte, func(*shardsm.Result, error)) { e.proposed++ }
func (e *driverNode) AskShards(string, func(*wire.ShardList, error))       {}
func (e *driverNode) ShardMap() *router.ShardMap {
	m, _ := router.NewShardMap(e.s.c.cfg.Shards)
	return m
}

func (e *driverNode) TakeUpLeaderships()                           { e.takeUps++ }
func (e *driverNode) WithRoundsFrom(fn func(map[string]time.Time)) { fn(e.s.rounds) }
func (e *driverNode) Since(uint64) (time.Time, bool)               { return time.Time{}, false }
func (e *driverNode) LastRound(string) time.Time                   { return time.Time{} }

func (e *driverNode) WithShard(uint64, func(*shardsm.Shard)) error { return errors.New("not hosted") }
func (e *driverNode) StateVersion() uint64                         { return 1 }

type driverHost struct{ e *driverNode }

func (h driverHost) NodeAlive(id uint64) { h.e.ops = append(h.e.ops, fmt.Sprintf("alive %d", id)) }

func (h driverHost) Submit(op raftmux.Op, done func(raftmux.Result)) {
	switch op.Kind {
	case raftmux.OpBootstrap:
		h.e.ops = append(h.e.ops, fmt.Sprintf("bootstrap %d %v", op.Shard, op.Voters))
	case raftmux.OpCampaign:
		h.e.ops = append(h.e.ops, fmt.Sprintf("campaign %d", op.Shard))
	case raftmux.OpShards:
		h.e.ops = append(h.e.ops, "shards")
	default:
		h.e.ops = append(h.e.ops, fmt.Sprintf("op %d shard %d", op.Kind, op.Shard))
	}
	done(raftmux.Result{})
}

func newDriver(t *testing.T) (*Driver, *driverNode, *spec) {
	t.Helper()
	s := newSpec(t)
	node := &driverNode{s: s}
	d, err := NewDriver(DriverConfig{Controller: s.c, Lease: node, Machine: node, Events: node, Env: node})
	if err != nil {
		t.Fatal(err)
	}
	return d, node, s
}

func TestNewDriverRefusesAnIncompleteConfig(t *testing.T) {
	s := newSpec(t)
	node := &driverNode{s: s}
	for name, cfg := range map[string]DriverConfig{
		"no controller": {Lease: node, Machine: node, Events: node, Env: node},
		"no lease":      {Controller: s.c, Machine: node, Events: node, Env: node},
		"no machine":    {Controller: s.c, Lease: node, Events: node, Env: node},
		"no events":     {Controller: s.c, Lease: node, Machine: node, Env: node},
		"no env":        {Controller: s.c, Lease: node, Machine: node, Events: node},
	} {
		if _, err := NewDriver(cfg); err == nil || !strings.HasPrefix(err.Error(), "reconcile: ") {
			t.Errorf("%s: NewDriver = %v", name, err)
		}
	}
}

// Once the birth condition settled, the Driver bootstraps the groups the
// Controller names, campaigns in those this node is the preferred leader
// of (testdata/birth.txt), and marks the node born once every group was
// answered; a born node looks no more.
func TestTheDriverBootstrapsTheGroupsOfTheBirth(t *testing.T) {
	d, node, s := newDriver(t)
	var out strings.Builder
	s.newView(t, ddtest.NewArgs(t, map[string][]string{"live": {"n1", "n2", "n3"}}), &out)
	d.Birth()
	if len(node.ops) != 0 || node.born != 0 {
		t.Fatalf("before the condition settled: ops %v, born %d", node.ops, node.born)
	}
	s.now = s.now.Add(birthSettle)
	d.Birth()
	want := []string{"bootstrap 0 [2 3 1]", "bootstrap 1 [3 1 2]", "bootstrap 2 [1 2 3]", "campaign 2",
		"bootstrap 3 [1 3 2]", "campaign 3"}
	if !slices.Equal(node.ops, want) || node.born != 1 {
		t.Fatalf("birth: ops %v, born %d; want %v, born once", node.ops, node.born, want)
	}
	s.now = s.now.Add(time.Second)
	d.Birth()
	if len(node.ops) != len(want) || node.born != 1 {
		t.Fatalf("a born node looked at its birth again: ops %v, born %d", node.ops, node.born)
	}
}

// The reconcile task does nothing before birth, and is due again one
// interval later either way; once born, it takes up the leaderships won.
func TestTheReconcileTaskWaitsForBirth(t *testing.T) {
	d, node, s := newDriver(t)
	var out strings.Builder
	s.newView(t, ddtest.NewArgs(t, map[string][]string{"live": {"n1", "n2", "n3"}}), &out)
	if next := d.Run(s.now); !next.Equal(s.now.Add(500*time.Millisecond)) || node.takeUps != 0 || len(node.ops) != 0 {
		t.Fatalf("unborn: next %v, take-ups %d, ops %v", next.Sub(s.now), node.takeUps, node.ops)
	}
	node.born = 1
	if next := d.Run(s.now); !next.Equal(s.now.Add(500*time.Millisecond)) || node.takeUps != 1 || node.proposed != 0 {
		t.Fatalf("born: next %v, take-ups %d, proposed %d", next.Sub(s.now), node.takeUps, node.proposed)
	}
}

// A previous owner SWIM declared dead is silent; one that left, or this
// node, or an owner of a shard this node does not lead, is not.
func TestPrevSilent(t *testing.T) {
	d, _, s := newDriver(t)
	var out strings.Builder
	s.newView(t, ddtest.NewArgs(t, map[string][]string{"live": {"n1", "n2"}, "dead": {"n3"}, "left": {"n4"}}), &out)
	for prev, want := range map[string]bool{"": false, "n1": false, "n2": false, "n3": true, "n4": false} {
		if got := d.PrevSilent(0, prev); got != want {
			t.Errorf("PrevSilent(%q) = %v, want %v", prev, got, want)
		}
	}
}
