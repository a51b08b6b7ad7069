package sim

import (
	"container/heap"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/shoalmq/shoal/faultnet"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/swim"
)

// Config describes one simulated run. Zero fields take the defaults.
type Config struct {
	// Seed decides everything: the network's delays and losses, the
	// faults, the clocks' rates, the workload, the nodes' random choices.
	Seed uint64
	// Nodes is the cluster's size, 3 to 9 (default 5).
	Nodes int
	// Shards is the number of metadata shards (default 64; 4 with
	// AutoSplits).
	Shards uint32
	// AutoSplits has the shard leaders split on their own, as a cluster
	// born without --shards does: down to two shards per member of one
	// width, and a shard applying more than 4 commands a second for 2 s,
	// up to 32 shards (AutoSplitConfig).
	AutoSplits bool
	// Faulty is how long (virtual) the workload runs under faults (default
	// 60 s); Calm how long it runs after every fault has stopped, before
	// the liveness checks (default 20 s).
	Faulty, Calm time.Duration
	// NoFaults runs the workload on a quiet network.
	NoFaults bool
	// NoSplits runs the workload on the shards the cluster was born with:
	// otherwise an operator splits the shard of one of the workload's
	// topics every few seconds while the faults run.
	NoSplits bool
	// Clients and Topics shape the workload (defaults 4 and 6).
	Clients, Topics int
	// Drift is how far each clock's rate may be off, as a fraction of the
	// bound the leases allow for (node.Config.MaxClockDrift): each rate is
	// drawn within ±Drift times the bound (default 0.8, inside it; past 1
	// the leases no longer promise one owner at a time).
	Drift float64
	// TraceLines bounds the trace kept for a failure's report (default
	// 4000 lines: the last ones).
	TraceLines int
	// Logger receives the nodes' logs (default: none).
	Logger *slog.Logger
}

// AutoSplitConfig is the nodes' split configuration with AutoSplits: the
// defaults' triggers (node.DefaultSplits) at the workload's scale, whose
// few topics take a few commands a second each.
func AutoSplitConfig() reconcile.SplitConfig {
	return reconcile.SplitConfig{PerMember: 2, Rate: 4, Window: 2 * time.Second, Every: 250 * time.Millisecond, MaxShards: 32}
}

func (c *Config) fill() error {
	if c.Nodes == 0 {
		c.Nodes = 5
	}
	if c.Nodes < 3 || c.Nodes > 9 {
		return fmt.Errorf("sim: %d nodes, want 3 to 9", c.Nodes)
	}
	if c.Shards == 0 {
		c.Shards = 64
		if c.AutoSplits {
			c.Shards = 4
		}
	}
	if c.Faulty == 0 {
		c.Faulty = 60 * time.Second
	}
	if c.Calm == 0 {
		c.Calm = 20 * time.Second
	}
	if c.Clients == 0 {
		c.Clients = 4
	}
	if c.Drift == 0 {
		c.Drift = 0.8
	}
	if c.Drift < 0 || c.Drift*maxClockDrift >= 0.5 {
		return fmt.Errorf("sim: clock drift %v times the bound, want 0 to %v", c.Drift, 0.5/maxClockDrift)
	}
	if c.Topics == 0 {
		c.Topics = 6
	}
	if c.TraceLines == 0 {
		c.TraceLines = 4000
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// epoch is virtual time zero.
var epoch = time.Unix(1_000_000_000, 0)

// event is one thing that happens at a virtual time.
type event struct {
	at  time.Time
	seq uint64
	// host is the node the event happens on (-1: the world's), and gen its
	// life when the event was made: a crash makes the events of the
	// earlier life void.
	host int
	gen  uint64
	// held: may wait while host is paused (everything but the world's).
	do func()
}

type eventQueue []*event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(*event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

// World is one simulated cluster: its nodes, network, clients and virtual
// time, all on one goroutine and one random source.
type World struct {
	cfg Config
	rng *rand.Rand
	// splits draws the operator's splits, apart from rng, so that turning
	// them off leaves every other draw of a seed as it was; splitsDone
	// counts those that applied.
	splits     *rand.Rand
	splitsDone int
	now        time.Time
	q          eventQueue
	seq        uint64
	net        *faultnet.Net
	hosts      []*host
	byID       map[string]*host
	// swimAt names the node at each SWIM address.
	swimAt  map[string]*host
	clients []*client
	// racer sends only beside another client's change, a conflicting one.
	racer *client
	// side writes, during a fault that cuts a topic's owner off, only to
	// that owner at the epoch it held: a producer on the owner's side of
	// the cut, which reaches no one else.
	side *client
	// mover moves a topic away from the owner a fault cut off.
	mover *client
	hist  *history.Recorder
	acks  []writeAck // every acknowledged write, as its node sent it
	// holds: every topic a node took, at the instant its store had it;
	// floors: each node's floor of each topic ("node/topic"), the epoch
	// up to which it closed the topic; reopened: the epochs that came
	// back to a node after it closed them.
	holds    []writeAck
	floors   map[string]uint64
	reopened []string
	// handoffs: the record pulls that ended complete (node.Config.OnHandoff).
	handoffs []history.Handoff
	// answered: each client write a replica answered for the first time
	// (node.Config.OnWriteApplied), as first seen; twice: the writes
	// answered for the first time at two raft entries, applied twice.
	answered map[writeKey]answeredWrite
	twice    []string
	// owners: each topic's owner as the latest answer named it; hot: a
	// topic whose owner a fault cut off, which the clients then press on.
	owners map[string]route
	hot    string
	// hotOwner is the node the fault cut off; hotTarget the node the
	// latest move of the hot topic named.
	hotOwner, hotTarget *host
	// cutOff: the node a fault cut off from all the others, whose clients
	// still reach it; linearizable lookups of topics whose shard it led
	// go to it (a leader that does not know it was deposed must not
	// answer them).
	cutOff *host
	// members: what each node's SWIM last said of each member; early and
	// seen: violations found while the run goes on.
	members map[string]memberSeen
	early   []string
	seen    map[string]bool
	lin     *linLog
	trace   *trace
	// quiet: the faults have stopped; calm: the calm period after them
	// has passed too.
	quiet, calm bool
	// midFaults: faults land between appends and their answers too
	// (host.yieldFunc), one at a time, none before midFaultFree; yields
	// counts the pieces of work that could have been interrupted.
	midFaults bool
	// cutFree: no power cut lands inside an fsync before this.
	cutFree time.Time
	// slowDisks: until then every fsync but fastDisk's is slow (a
	// fault: the disks are throttled, but one); cutAfterAnswer: the next
	// change answered while they are slow, of a shard fastDisk leads, is
	// followed at once by a power cut.
	slowDisks      time.Time
	fastDisk       *host
	cutAfterAnswer bool
	midFaultFree   time.Time
	yields         int
	// storm counts the events run since stormAt; stuck is set when more
	// than maxPerSecond run in one virtual second (nodes spinning, as a
	// message loop that never settles would burn a real CPU), and ends
	// the run.
	storm   int
	stormAt time.Time
	stuck   string
	// maxEvents is the bound on one virtual second's events (maxPerSecond,
	// or more for a large cluster, see worldOpts).
	maxEvents int
	// opts: how the hosts are built and what the world keeps (zero: Run's).
	opts worldOpts
	// onMember, when set, sees every membership event (not the leader and
	// version ones) a node's SWIM core reports.
	onMember func(observer *host, e swim.Event)
}

// worldOpts are what a large cluster (Scale) changes in how the world is
// built; the zero value is Run's.
type worldOpts struct {
	// lan: the nodes and SWIM cores run the production timing ("lan"),
	// not the fast one for tests.
	lan bool
	// seeds: each node joins through the first seeds hosts (0: all).
	seeds int
	// expect: BootstrapExpect of every node (0: the number of hosts).
	expect int
	// perNodeEvents, when set, bounds one virtual second's events to this
	// many per host.
	perNodeEvents int
	// routeCache: each node's routing cache capacity (0: the node's
	// default, 8 MiB a node).
	routeCache int
	// swimFirst: the hosts boot their SWIM cores alone; the caller boots
	// the nodes (host.bootNode).
	swimFirst bool
	// ownershipWindow: each node's Config.OwnershipWindow (0: the node's
	// default).
	ownershipWindow int
}

// maxPerSecond bounds the events of one virtual second: a busy run has a
// few thousand.
const maxPerSecond = 300_000

// at schedules do at virtual time t on host h (nil: the world).
func (w *World) at(t time.Time, h *host, do func()) {
	if t.Before(w.now) {
		t = w.now
	}
	w.seq++
	e := &event{at: t, seq: w.seq, host: -1, do: do}
	if h != nil {
		e.host, e.gen = h.index, h.gen
	}
	heap.Push(&w.q, e)
}

// after schedules do d from now.
func (w *World) after(d time.Duration, h *host, do func()) { w.at(w.now.Add(d), h, do) }

// runUntil processes every event up to t.
func (w *World) runUntil(t time.Time) {
	for len(w.q) > 0 && !w.q[0].at.After(t) && w.stuck == "" {
		e := heap.Pop(&w.q).(*event)
		if e.at.Sub(w.stormAt) >= time.Second {
			w.storm, w.stormAt = 0, e.at
		}
		if w.storm++; w.storm > w.maxEvents {
			w.stuck = fmt.Sprintf("more than %d events in the virtual second from %.3fs: nodes spin", w.maxEvents, w.stormAt.Sub(epoch).Seconds())
			return
		}
		w.now = e.at
		if e.host >= 0 {
			h := w.hosts[e.host]
			if e.gen != h.gen || h.down {
				continue // a crashed life's event
			}
			if h.paused {
				h.held = append(h.held, e)
				continue
			}
		}
		e.do()
	}
	if w.now.Before(t) && w.stuck == "" {
		w.now = t
	}
}

// elapsed is the virtual time since the start.
func (w *World) elapsed() time.Duration { return w.now.Sub(epoch) }

// between draws a duration in [lo, hi].
func (w *World) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

// logf adds a line to the trace.
func (w *World) logf(format string, args ...any) {
	w.trace.add(fmt.Sprintf("%9.3fs ", w.elapsed().Seconds()) + fmt.Sprintf(format, args...))
}

// trace keeps the last lines of what happened, for a failure's report.
type trace struct {
	lines []string
	next  int
	full  bool
}

func newTrace(n int) *trace { return &trace{lines: make([]string, n)} }

func (t *trace) add(s string) {
	t.lines[t.next] = s
	t.next++
	if t.next == len(t.lines) {
		t.next, t.full = 0, true
	}
}

// Lines returns the trace, oldest first.
func (t *trace) Lines() []string {
	if !t.full {
		return append([]string(nil), t.lines[:t.next]...)
	}
	return append(append([]string(nil), t.lines[t.next:]...), t.lines[:t.next]...)
}
