package node

import (
	"time"

	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// The changes of the groups this node leads, the moves of dead, drained or
// silent owners' topics, strays and the cluster's birth are the reconcile
// room's (node/reconcile): its Controller decides, and its Driver makes
// the decisions against the raft host and the state machine. Here the
// room is given the node's parts; the reconcile task runs the Driver's
// passes, and the event loop its birth.

// newReconcile builds the node's reconcile room: its Controller.
func (n *Node) newReconcile() (*reconcile.Controller, error) {
	return reconcile.New(reconcile.Config{
		Self:            n.cfg.ID,
		Shards:          n.cfg.Shards,
		Replicas:        n.cfg.Replicas,
		MaxConfChanges:  n.cfg.MaxConfChanges,
		MaxTransfers:    reconcile.DefaultMaxTransfers,
		BootstrapExpect: n.cfg.BootstrapExpect,
		Interval:        n.cfg.ReconcileInterval,
		Lease:           n.cfg.LeaseDuration,
		RaftID:          RaftID,
		Leaders:         n.leaders,
		Env:             reconcileEnv{parts{n}},
	})
}

// newReconciler builds the Driver of the reconcile room's Controller.
func (n *Node) newReconciler() (*reconcile.Driver, error) {
	return reconcile.NewDriver(reconcile.DriverConfig{
		Controller: n.rec,
		Lease:      n.lease,
		Machine:    n.sm,
		Events:     n.events,
		Join:       n.cfg.Join,
		Logger:     n.log,
		Split:      n.splits(),
		Env:        reconcileEnv{parts{n}},
	})
}

// splits is the node's automatic splits (Config.Splits), none when unset.
func (n *Node) splits() reconcile.SplitConfig {
	if n.cfg.Splits == nil {
		return reconcile.SplitConfig{}
	}
	return *n.cfg.Splits
}

// reconcileEnv is what the reconcile room reads and does of the node. It
// reads the node's raft host and peers when called: they are set after
// New.
type reconcileEnv struct{ parts }

func (e reconcileEnv) HoldsBack(shard uint64) bool { return e.n.lease.HoldsBack(shard) }
func (e reconcileEnv) View() *reconcile.View       { return e.n.view.Load().Rec() }
func (e reconcileEnv) MarkBorn()                   { e.n.birth.MarkBorn() }
func (e reconcileEnv) Host() reconcile.Host        { return e.n.host }

func (e reconcileEnv) ReadyAt() time.Time { return e.n.birth.ReadyAt() }

func (e reconcileEnv) ShardMap() *router.ShardMap { return e.n.leaders.Map() }

func (e reconcileEnv) AskShards(leader string, done func(*wire.ShardList, error)) {
	e.n.srv.AskShards(leader, done)
}
