package reconcile

import (
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// DriverEnv is what a Driver touches of the node. Its methods are called
// without the Controller's lock held.
type DriverEnv interface {
	// Now is the node's clock.
	Now() time.Time
	// View is the node's current view.
	View() *View
	// Born reports whether the node's cluster is born; MarkBorn records
	// that it is.
	Born() bool
	MarkBorn()
	// ReadyAt is when the node became ready; zero before.
	ReadyAt() time.Time
	// Host is the node's raft host.
	Host() Host
	// AskShards asks leader for the voters of the shards it leads (a
	// wire.KindShards request, forwarded) and calls done with its answer;
	// sl is nil when no shard list came back, err the forward's error.
	AskShards(leader string, done func(sl *wire.ShardList, err error))
	// ShardMap is the cluster's shard map as the node knows it: the live
	// shards, a split's children among them.
	ShardMap() *router.ShardMap
}

// Host is what a Driver asks of the node's raft host (*raftmux.Host).
type Host interface {
	// Submit asks for op and calls done with its result.
	Submit(op raftmux.Op, done func(raftmux.Result))
	// NodeAlive tells the host that the node of a raft id is alive: the
	// groups it shares with it wake up.
	NodeAlive(raftID uint64)
}

// Lease is what a Driver reads of the node's lease room (*lease.Agent).
type Lease interface {
	// TakeUpLeaderships takes up the leaderships won and not yet taken
	// up.
	TakeUpLeaderships()
	// WithRoundsFrom runs fn with when a lease round last arrived from
	// each peer; fn keeps no reference to the map.
	WithRoundsFrom(fn func(from map[string]time.Time))
	// Since returns when this node became shard's leader.
	Since(shard uint64) (time.Time, bool)
	// LastRound returns when a lease round last arrived from peer.
	LastRound(peer string) time.Time
	// Propose proposes cmd, an encoded meta command, on shard and calls
	// done with what its apply returned (nil if it did not apply).
	Propose(shard uint64, cmd []byte, done func(res *shardsm.Result, err error))
}

// Events is what a Driver reads of the node's events room
// (*events.Loop): which shards the replicas lead, as the raft host last
// said, and how many leadership and configuration changes they saw.
type Events interface {
	// Leads reports whether this node's replica of shard leads its group.
	Leads(shard uint64) bool
	// ShardEvents counts the leadership and configuration changes of the
	// node's replicas.
	ShardEvents() uint64
}

// Machine is what a Driver reads of the shards' state machine
// (*shardsm.Machine).
type Machine interface {
	WithShard(shard uint64, fn func(sh *shardsm.Shard)) error
	StateVersion() uint64
}

// DriverConfig configures a Driver.
type DriverConfig struct {
	// Controller decides; the Driver makes its decisions. Required.
	Controller *Controller
	// Lease is the node's lease room, Machine its state machine and
	// Events its events room. Required.
	Lease   Lease
	Machine Machine
	Events  Events
	// Join is the addresses the node joins through, said while it waits
	// to be born.
	Join   []string
	Logger *slog.Logger
	// Split sets when this node splits the shards it leads on its own
	// (SplitConfig); the zero value never does.
	Split SplitConfig
	// Env is the rest of the node. Required.
	Env DriverEnv
}

// Driver makes a Controller's decisions against the node's raft host and
// state machine: the reconcile task's passes (Run), the cluster's birth
// (Birth), and the owners' rule the lease room asks about (PrevSilent,
// KnowsAll). It starts no goroutine and arms no timer, reads the node
// only through its Env and its Config's parts, and reports the end of
// everything it started back to the Controller. Safe for concurrent use.
type Driver struct {
	c   *Controller
	cfg DriverConfig
	env DriverEnv
	log *slog.Logger

	counters driverCounters

	// Automatic splits (split): the Splitter, the pass's samples, and
	// whether a split this node proposed is in flight.
	splitter  *Splitter
	samples   []SplitSample
	splitting atomic.Bool
}

type driverCounters struct {
	reassigned, confChanges, transfers, straysDropped, autoSplits atomic.Uint64
}

// NewDriver returns a Driver of cfg.Controller.
func NewDriver(cfg DriverConfig) (*Driver, error) {
	if cfg.Controller == nil || cfg.Lease == nil || cfg.Machine == nil || cfg.Events == nil || cfg.Env == nil {
		return nil, errors.New("reconcile: Controller, Lease, Machine, Events and Env required")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Split.Validate(); err != nil {
		return nil, err
	}
	d := &Driver{c: cfg.Controller, cfg: cfg, env: cfg.Env, log: log}
	if cfg.Split.On() {
		d.splitter = NewSplitter(cfg.Split)
	}
	return d, nil
}

// DriverStats are a Driver's counters.
type DriverStats struct {
	// TopicsReassigned counts the topics moved off dead, drained or
	// silent owners.
	TopicsReassigned uint64
	// ConfChanges counts the raft configuration changes made, and
	// LeaderTransfers the leaderships handed over.
	ConfChanges, LeaderTransfers uint64
	// StraysDropped counts the stray replicas dropped.
	StraysDropped uint64
	// AutoSplits counts the splits this node proposed on its own and saw
	// applied.
	AutoSplits uint64
}

// Stats returns a snapshot of the counters.
func (d *Driver) Stats() DriverStats {
	c := &d.counters
	return DriverStats{TopicsReassigned: c.reassigned.Load(), ConfChanges: c.confChanges.Load(),
		LeaderTransfers: c.transfers.Load(), StraysDropped: c.straysDropped.Load(), AutoSplits: c.autoSplits.Load()}
}

// Run is the reconcile task's work: once the cluster is born, it takes up
// new leaderships, moves the topics of dead, drained or silent owners,
// and fixes differences between the raft configurations of the shards
// this node leads and the ring. It does not wait: what it asks raft for
// completes later, and what is still in flight from an earlier run is not
// asked again. It is next due one reconcile interval after now.
func (d *Driver) Run(now time.Time) time.Time {
	if d.env.Born() {
		v := d.env.View()
		d.cfg.Lease.TakeUpLeaderships()
		d.reassign(v)
		d.manage(v)
		d.split(v)
	}
	return now.Add(d.c.cfg.Interval)
}

// reassign proposes, in every shard this node leads, the moves of the
// topics of owners the Controller's look says must move (OwnerLook) to
// live members that are not drained.
func (d *Driver) reassign(v *View) {
	now := d.env.Now()
	// Copied only for a look: most intervals end at the cadence check.
	var due bool
	var roundsFrom map[string]time.Time
	d.cfg.Lease.WithRoundsFrom(func(from map[string]time.Time) {
		if due = d.c.OwnersDue(v, now, from); due {
			roundsFrom = maps.Clone(from)
		}
	})
	if !due {
		return
	}
	look := d.c.Owners(v, now, roundsFrom, d.KnowsAll(), d.cfg.Machine.StateVersion(), d.cfg.Events.ShardEvents())
	if look == nil {
		return
	}
	for id := range d.env.ShardMap().Shards() {
		shard := uint64(id)
		if !d.cfg.Events.Leads(shard) {
			continue
		}
		since, leads := d.cfg.Lease.Since(shard)
		var cmds []meta.Command
		_ = d.cfg.Machine.WithShard(shard, func(sh *shardsm.Shard) {
			st := sh.State
			owners := look.Shard(leads, since, sh.LastAsk)
			if !st.AnyOwner(owners.Moves) {
				return // the common case, without sorting the owners
			}
			for _, o := range st.Owners() {
				switch owners.Why(o.ID) {
				case Stays:
					continue
				case Drained:
					d.log.Info("owner drained: moving its topics", "shard", shard, "owner", o.ID)
				case Silent:
					d.log.Info("owner silent: moving its topics", "shard", shard, "owner", o.ID)
				}
				cmd, err := st.PlanReassign(o.ID, v.Candidates(st), 0)
				if err != nil || len(cmd.Moves) == 0 {
					continue
				}
				// Moves alias st's strings only, and Topic bytes are
				// owned by the command: encode before leaving the lock.
				cmds = append(cmds, cmd)
			}
		})
		if len(cmds) == 0 || !d.c.BeginReassign(shard, len(cmds)) {
			continue
		}
		for i := range cmds {
			dead := cmds[i].Node
			data, err := meta.AppendCommand(nil, &cmds[i])
			if err != nil {
				d.log.Error("node: encode reassign", "shard", shard, "err", err)
				d.c.Reassigned(shard)
				continue
			}
			d.cfg.Lease.Propose(shard, data, func(res *shardsm.Result, err error) {
				defer d.c.Reassigned(shard)
				if err != nil {
					d.log.Warn("node: reassign", "shard", shard, "dead", dead, "err", err)
					return
				}
				if res != nil && res.Err == nil {
					d.counters.reassigned.Add(uint64(res.Moved))
					d.log.Info("reassigned topics of a dead owner", "shard", shard, "dead", dead, "moved", res.Moved)
				}
			})
		}
	}
	look.Done()
}

// split samples every shard this node leads and proposes the split its
// Splitter names, one at a time.
func (d *Driver) split(v *View) {
	if d.splitter == nil || d.splitting.Load() {
		return
	}
	sm := d.env.ShardMap()
	sp := sm.Space()
	d.samples = d.samples[:0]
	for id := range sm.Shards() {
		shard := uint64(id)
		if !d.cfg.Events.Leads(shard) {
			continue
		}
		_, depth, _, _ := sp.Range(id)
		_, _, err := sp.Children(id)
		smp := SplitSample{Shard: id, Depth: int(depth), Splittable: err == nil}
		if d.cfg.Machine.WithShard(shard, func(sh *shardsm.Shard) {
			smp.Topics, smp.Bytes, smp.Applied = sh.State.Count(), sh.State.Bytes(), sh.Applied
			smp.Splittable = smp.Splittable && !sh.State.Split()
		}) != nil {
			continue
		}
		d.samples = append(d.samples, smp)
	}
	id, why, ok := d.splitter.Plan(d.env.Now(), d.samples, int(sm.Base()), sm.Len(), len(v.Live))
	if !ok {
		return
	}
	shard := uint64(id)
	data, err := meta.AppendCommand(nil, &meta.Command{Op: meta.OpSplit, Shard: shard})
	if err != nil {
		d.log.Error("node: encode split", "shard", shard, "err", err)
		return
	}
	d.splitting.Store(true)
	d.log.Info("splitting a shard", "shard", shard, "why", why.String(), "shards", sm.Len(), "members", len(v.Live))
	d.cfg.Lease.Propose(shard, data, func(res *shardsm.Result, err error) {
		defer d.splitting.Store(false)
		switch {
		case err != nil:
			d.log.Warn("node: split", "shard", shard, "err", err)
		case res != nil && res.Err != nil:
			d.log.Warn("node: split refused", "shard", shard, "err", res.Err)
		case res != nil:
			d.counters.autoSplits.Add(1)
		}
	})
}

// PrevSilent reports whether the OpenTopic of a topic of shard moved off
// prev says that prev cannot answer (wire.OpenTopic.PrevSilent): SWIM
// declared it dead (not left: a leaving node answers the pulls), or, by
// the Controller's rule, it is silent towards this node as the shard's
// leader — the two reasons for which this node moves topics off an owner
// without asking it. An owner moved for another reason (an assign, a
// drain, a leave) keeps sending rounds, so its new owner pulls in full; a
// drained owner SWIM counts alive is never taken for silent, as its
// rounds may reach a leader that took the shard over from it late on a
// loaded machine, and a short pull would leave its records behind.
func (d *Driver) PrevSilent(shard uint64, prev string) bool {
	if prev == "" || prev == d.c.cfg.Self {
		return false
	}
	v := d.env.View()
	if v.Died(prev) {
		return true
	}
	if v.Drained[prev] {
		return false
	}
	since, leads := d.cfg.Lease.Since(shard)
	if !leads {
		return false
	}
	lastRound := d.cfg.Lease.LastRound(prev)
	var lastAsk time.Time
	_ = d.cfg.Machine.WithShard(shard, func(sh *shardsm.Shard) { lastAsk = sh.LastAsk[prev] })
	return d.c.Silent(d.env.Now(), since, lastAsk, lastRound)
}

// KnowsAll reports whether a member SWIM does not know may be taken for
// gone (Controller.KnowsAll).
func (d *Driver) KnowsAll() bool {
	return d.c.KnowsAll(d.env.ReadyAt(), d.env.Now())
}

// manage starts a pass of the shard manager when one is due: the infos of
// every hosted replica are read from the raft host, and the Controller
// says what to do with them (ManagePass).
func (d *Driver) manage(v *View) {
	events := d.cfg.Events.ShardEvents()
	if !d.c.ManageDue(v, d.env.Now(), events) || !d.c.BeginPass() {
		return
	}
	d.env.Host().Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) {
		infos, _ := r.Value.([]raftmux.Info)
		if r.Err != nil {
			d.c.EndPass()
			return
		}
		d.ManagePass(v, events, infos)
	})
}

// ManagePass is one pass of the shard manager, begun (Controller.BeginPass),
// over the replicas' infos: it sends the stray checks, wakes the groups
// of nodes catching up and starts the steps the Controller returns.
// events is the count of shard events before the infos were read.
func (d *Driver) ManagePass(v *View, events uint64, infos []raftmux.Info) {
	// A shard that split is no longer managed: its keys are its
	// children's, whose replicas are.
	sm := d.env.ShardMap()
	infos = slices.DeleteFunc(slices.Clone(infos), func(in raftmux.Info) bool {
		return in.Shard <= uint64(^uint32(0)) && sm.HasSplit(uint32(in.Shard))
	})
	p := d.c.Manage(v, events, infos, d.env.Now())
	for _, a := range p.Asks {
		d.checkStray(a)
	}
	for _, id := range p.Wake {
		d.env.Host().NodeAlive(id)
	}
	for _, s := range p.Steps {
		d.startStep(s)
	}
}

// startStep asks the raft host for one step of a pass and reports its end
// to the Controller.
func (d *Driver) startStep(s Step) {
	if s.Kind == Transfer {
		d.env.Host().Submit(raftmux.Op{Kind: raftmux.OpTransferLeader, Shard: s.Shard, Node: s.Node}, func(r raftmux.Result) {
			if r.Err == nil {
				d.counters.transfers.Add(1)
			}
			d.c.StepDone(s, r.Err == nil, d.env.Now())
		})
		return
	}
	op, what := raftmux.OpRemoveReplica, "remove replica"
	switch s.Kind {
	case Promote:
		op, what = raftmux.OpPromote, "promote"
	case Replace:
		op, what = raftmux.OpReplace, "promote and remove"
	case RemoveLearner:
		what = "remove learner"
	case AddLearner:
		op, what = raftmux.OpAddLearner, "add learner"
	}
	d.env.Host().Submit(raftmux.Op{Kind: op, Shard: s.Shard, Node: s.Node, Out: s.Out}, func(r raftmux.Result) {
		if r.Err != nil {
			d.log.Debug("node: "+what, "shard", s.Shard, "node", s.Node, "err", r.Err)
			d.c.StepDone(s, false, d.env.Now())
			return
		}
		d.counters.confChanges.Add(1)
		switch s.Kind {
		case AddLearner:
			d.log.Info("shard: learner added", "shard", s.Shard, "node", s.Name)
		case RemoveRemoved:
			d.log.Info("shard: replica of a removed node removed", "shard", s.Shard, "node", s.Name)
		case RemoveVoter:
			d.log.Info("shard: replica removed", "shard", s.Shard, "node", s.Name)
		case Replace:
			d.log.Info("shard: learner promoted, replica removed", "shard", s.Shard, "node", s.Name, "removed", s.OutName)
		}
		d.c.StepDone(s, true, d.env.Now())
	})
}

// checkStray asks a shard leader for the voters of the shards whose
// replicas here may be strays, without waiting for its answer, and drops
// the strays the answer confirms.
func (d *Driver) checkStray(a Ask) {
	d.env.AskShards(a.Leader, func(sl *wire.ShardList, err error) {
		if sl == nil {
			d.log.Debug("node: stray check", "leader", a.Leader, "err", err)
			return
		}
		for _, s := range d.c.Judge(a, sl) {
			d.env.Host().Submit(raftmux.Op{Kind: raftmux.OpDropReplica, Shard: s}, func(r raftmux.Result) {
				d.c.Dropped(s, r.Err)
				if r.Err != nil {
					d.log.Warn("node: drop stray replica", "shard", s, "err", r.Err)
					return
				}
				d.counters.straysDropped.Add(1)
				d.log.Info("stray replica dropped", "shard", s, "leader", a.Leader)
			})
		}
	})
}

// Birth creates this node's groups, or joins a born cluster, when the
// Controller says so (Controller.Birth); a born node does nothing.
func (d *Driver) Birth() {
	if d.env.Born() {
		return
	}
	var rows []router.ShardLeader
	rows, _ = d.c.cfg.Leaders.Snapshot(rows[:0])
	v := d.env.View()
	b, err := d.c.Birth(v, rows, d.env.Now())
	if err != nil {
		d.log.Error("node: birth ring", "err", err)
		return
	}
	switch b.Step {
	case BirthWait:
		d.log.Info("waiting for members to create the cluster", "seen", len(v.Live), "expect", d.c.cfg.BootstrapExpect,
			"members", v.Live, "join", d.cfg.Join)
	case BirthJoin:
		d.log.Info("joined a born cluster")
		d.env.MarkBorn()
	case BirthCreate:
		d.log.Info("birth", "members", b.Members, "shards", d.c.cfg.Shards)
		if len(b.Groups) == 0 {
			d.env.MarkBorn()
			return
		}
		for _, g := range b.Groups {
			d.createGroup(g)
		}
	}
}

// createGroup bootstraps one group of the birth, and campaigns in it if
// this node is its preferred leader; the node is born once every group
// was answered.
func (d *Driver) createGroup(g Group) {
	finish := func() {
		if d.c.GroupDone() {
			d.env.MarkBorn()
		}
	}
	d.env.Host().Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: g.Shard, Voters: g.Voters}, func(r raftmux.Result) {
		if r.Err != nil {
			d.log.Warn("node: bootstrap", "shard", g.Shard, "err", r.Err)
			finish()
			return
		}
		if !g.Campaign {
			finish()
			return
		}
		d.env.Host().Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: g.Shard}, func(raftmux.Result) { finish() })
	})
}
