package sim

import (
	crand "crypto/rand"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/faultnet"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/wire"
)

// Checker names the checker that reports a violation.
type Checker string

// The checkers (doc.go has what each checks).
const (
	// Linearizability: each topic's assigns, revokes, updates and
	// linearizable lookups (lin.go).
	Linearizability Checker = "linearizability"
	// Unchecked: the linearizability search ran out of its budget on a
	// topic, which is then not checked; the seed fails (linBudget).
	Unchecked Checker = "linearizability-unchecked"
	// Owners: one owner at a time, where it happens (owners.go).
	Owners Checker = "owners"
	// History: the clients' history (history.Check).
	History Checker = "history"
	// Records: the records produced and fetched (history.CheckRecords).
	Records Checker = "records"
	// Membership: SWIM's promises (members.go).
	Membership Checker = "membership"
	// Liveness: the cluster settles once the faults stop, and never spins.
	Liveness Checker = "liveness"
)

// Violation is one broken promise and the checker that found it.
type Violation struct {
	Checker Checker
	Text    string
}

func (v Violation) String() string { return string(v.Checker) + ": " + v.Text }

// Result is what a run found.
type Result struct {
	Seed uint64
	// Violations lists every broken promise; empty when the run passed.
	Violations []Violation
	// Records counts the records the clients produced and fetched, and
	// those lost in the ways docs/ownership.md documents (history.CheckRecords).
	Records history.RecordStats
	// Trace is the end of what happened (nodes booting and crashing,
	// faults, acknowledged requests), for a failure's report.
	Trace []string
	// Ops counts the requests recorded; Acked those acknowledged.
	Ops, Acked int
	// Digest is a hash of the whole history, to compare runs.
	Digest string
	// Virtual is the virtual time the run covered.
	Virtual time.Duration
	// Splits counts the operator's splits that applied (Config.NoSplits).
	Splits int
	// Grown is how many more live shards a node counted at the end than
	// the cluster was born with: one for each split, the operator's and
	// those the shard leaders made on their own.
	Grown int
}

// Failed reports whether a promise was broken.
func (r *Result) Failed() bool { return len(r.Violations) > 0 }

// add records checker c's violations.
func (r *Result) add(c Checker, texts ...string) {
	for _, t := range texts {
		r.Violations = append(r.Violations, Violation{Checker: c, Text: t})
	}
}

// linBudget is the wall time the linearizability search may take per
// topic. A search that runs out of it fails the seed (Unchecked): a topic
// whose history was not checked is not a pass. Most searches take
// milliseconds (at most 14 ms a topic over seeds 1 to 30); each write
// whose outcome is unknown multiplies the orders to try, and after power
// cuts a topic could have twenty-odd (seed 12400000247: 24 of 142
// operations, whose search did not end in 20 minutes). The unanswered
// writes are now settled first by what the replicas applied (linLog.
// resolve), so only those without a session stay unknown. The budget is
// far above what a search takes, so that only a history that makes the
// search explode runs it out; such a history is usually one a mutant
// broke.
const linBudget = 90 * time.Second

// Report is a failure's readable account: the violations, the command
// that replays the run, and the trace's end.
func (r *Result) Report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violations\n", r.Seed, len(r.Violations))
	for _, v := range r.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	fmt.Fprintf(&b, "records: %v\n", r.Records)
	fmt.Fprintf(&b, "replay: make sim SEED=%d\n", r.Seed)
	fmt.Fprintf(&b, "trace (last %d lines):\n", len(r.Trace))
	for _, l := range r.Trace {
		fmt.Fprintf(&b, "  %s\n", l)
	}
	return b.String()
}

// detRand is a deterministic stand-in for crypto/rand.Reader: raft draws
// its election timeouts from crypto/rand, and a run must repeat.
type detRand struct{ r *rand.ChaCha8 }

func (d detRand) Read(p []byte) (int, error) { return d.r.Read(p) }

// Run runs one simulation. It replaces crypto/rand.Reader while it runs
// (raft draws its election timeouts from it): runs must not overlap in
// one process.
func Run(cfg Config) (*Result, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	w, restore, err := newWorld(cfg)
	if err != nil {
		return nil, err
	}
	defer restore()
	defer w.close()
	res := &Result{Seed: cfg.Seed}
	if !w.waitReady(60 * time.Second) {
		res.add(Liveness, "the cluster was not ready 60 s after its start")
		res.Trace = w.trace.Lines()
		return res, nil
	}
	w.logf("cluster ready")
	for i := range cfg.Clients {
		c := &client{w: w, id: fmt.Sprintf("c%d", i+1), routes: make(map[string]route)}
		w.clients = append(w.clients, c)
		w.after(w.between(0, thinkMax), nil, c.step)
	}
	w.racer = &client{w: w, id: "racer", routes: make(map[string]route)}
	w.side = &client{w: w, id: "side", routes: make(map[string]route)}
	w.mover = &client{w: w, id: "mover", routes: make(map[string]route)}
	start := w.now
	if !cfg.NoFaults {
		w.midFaults = true
		w.after(w.between(time.Second, 3*time.Second), nil, w.nextFault)
	}
	if !cfg.NoSplits {
		w.after(splitEvery/2+time.Duration(w.splits.Int64N(int64(splitEvery))), nil, w.nextSplit)
	}
	w.runUntil(start.Add(cfg.Faulty))
	w.healAll()
	w.runUntil(w.now.Add(cfg.Calm))
	w.calm = true
	// Let the requests in flight end.
	w.runUntil(w.now.Add(opTimeout + time.Second))

	res.add(Membership, w.early...)
	if w.stuck != "" {
		res.add(Liveness, w.stuck)
		res.Trace = w.trace.Lines()
		return res, nil
	}
	res.add(Liveness, w.checkLiveness()...)
	final := w.finalState()
	ops := w.hist.Ops()
	for _, v := range history.Check(ops, final) {
		res.add(History, v.String())
	}
	res.add(Owners, checkOwners(w.acks, w.holds)...)
	res.add(Owners, w.reopened...)
	res.add(History, w.twice...)
	w.lin.resolve(w.answered)
	bad, unknown := w.lin.check(linBudget)
	res.add(Linearizability, bad...)
	for _, t := range unknown {
		res.add(Unchecked, fmt.Sprintf("the search for a linearization of %s's %d operations ran out of its %v budget: the topic is not checked, so the seed fails", t, len(w.lin.byTopic[t]), linBudget))
	}
	recs, _, stats := history.CheckRecords(ops, w.handoffs)
	for _, v := range recs {
		res.add(Records, v.String())
	}
	res.Records = stats
	res.Ops = len(ops)
	for _, o := range ops {
		if o.OK {
			res.Acked++
		}
	}
	res.Digest = digest(ops)
	res.Virtual = w.elapsed()
	res.Splits = w.splitsDone
	for _, h := range w.hosts {
		if !h.down && h.node != nil {
			res.Grown = max(res.Grown, h.node.Stats().ShardsLive-int(w.cfg.Shards))
		}
	}
	res.Trace = w.trace.Lines()
	return res, nil
}

// runOwnershipWindows are the nodes' Config.OwnershipWindow in a run,
// by seed: the default, so that messages to one node interleave as they
// do in production, and tiny ones, so that a leader's messages to an
// owner wait for room whenever a few topics move at once, as thousands do
// on a real cluster whose owner died.
var runOwnershipWindows = [...]int{0, 1, 2}

// newWorld builds cfg's cluster and boots its nodes. restore gives
// crypto/rand back its reader (the run replaces it, see Run); the caller
// closes w and then calls restore.
func newWorld(cfg Config) (w *World, restore func(), err error) {
	if err := cfg.fill(); err != nil {
		return nil, nil, err
	}
	return buildWorld(cfg, worldOpts{ownershipWindow: runOwnershipWindows[cfg.Seed%uint64(len(runOwnershipWindows))]})
}

// buildWorld is newWorld for a filled cfg, with opts.
func buildWorld(cfg Config, opts worldOpts) (w *World, restore func(), err error) {
	var key [32]byte
	for i := range 4 {
		v := cfg.Seed ^ uint64(i)*0x9e3779b97f4a7c15
		for j := range 8 {
			key[i*8+j] = byte(v >> (8 * j))
		}
	}
	saved := crand.Reader
	crand.Reader = detRand{rand.NewChaCha8(key)}
	restore = func() { crand.Reader = saved }

	w = &World{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x5eed)),
		splits:   rand.New(rand.NewPCG(cfg.Seed, 0x5917)),
		now:      epoch,
		net:      faultnet.New(cfg.Seed),
		byID:     make(map[string]*host),
		swimAt:   make(map[string]*host),
		hist:     &history.Recorder{},
		members:  make(map[string]memberSeen),
		owners:   make(map[string]route),
		floors:   make(map[string]uint64),
		seen:     make(map[string]bool),
		lin:      newLinLog(),
		answered: make(map[writeKey]answeredWrite),
		trace:    newTrace(cfg.TraceLines),
		opts:     opts,

		maxEvents: maxPerSecond,
	}
	if opts.perNodeEvents > 0 {
		w.maxEvents = opts.perNodeEvents * cfg.Nodes
	}
	for range cfg.Nodes {
		w.addHost()
	}
	for _, h := range w.hosts {
		boot := h.boot
		if opts.swimFirst {
			boot = h.bootSwim
		}
		if err := boot(); err != nil {
			w.close()
			restore()
			return nil, nil, err
		}
	}
	return w, restore, nil
}

// maxClockDrift is the nodes' node.Config.MaxClockDrift (its default).
const maxClockDrift = 0.01

// addHost adds a host, not booted yet, to the world.
func (w *World) addHost() *host {
	i := len(w.hosts)
	h := &host{w: w, index: i, id: fmt.Sprintf("n%d", i+1), fs: vfs.NewCrashableMem()}
	// Each clock runs at its own rate, within Config.Drift times the bound
	// the leases allow for.
	h.rate = 1 + (w.rng.Float64()*2-1)*w.cfg.Drift*maxClockDrift
	w.hosts = append(w.hosts, h)
	w.byID[h.id] = h
	w.swimAt[h.swimAddr()] = h
	return h
}

// stopped: the clients stop sending once the run is calm.
func (w *World) stopped() bool { return w.calm }

func (w *World) close() {
	for _, h := range w.hosts {
		if h.node != nil && !h.down {
			_ = h.node.Close()
		}
	}
}

// waitReady runs until every node is ready, for at most d.
func (w *World) waitReady(d time.Duration) bool {
	deadline := w.now.Add(d)
	for w.now.Before(deadline) {
		w.runUntil(w.now.Add(100 * time.Millisecond))
		ready := true
		for _, h := range w.hosts {
			if !h.down && !h.node.Status().Ready {
				ready = false
			}
		}
		if ready {
			return true
		}
	}
	return false
}

// nextFault starts one fault, schedules its end, and the next fault.
func (w *World) nextFault() {
	if w.quiet {
		return
	}
	hold := w.between(time.Second, 8*time.Second)
	i := w.rng.IntN(len(w.hosts))
	h := w.hosts[i]
	switch w.rng.IntN(11) {
	case 0:
		w.logf("fault: %s cut off for %v", h.id, hold)
		w.net.Isolate(h.id)
		w.cutOff = h
		w.after(hold, nil, func() {
			w.net.HealLink(h.id, "*")
			w.net.HealLink("*", h.id)
			if w.cutOff == h {
				w.cutOff = nil
			}
			w.logf("heal: %s", h.id)
		})
	case 1:
		o := w.hosts[(i+1+w.rng.IntN(len(w.hosts)-1))%len(w.hosts)]
		w.logf("fault: %s cannot send to %s for %v", h.id, o.id, hold)
		w.net.Cut(h.id, o.id)
		w.after(hold, nil, func() { w.net.HealLink(h.id, o.id); w.logf("heal: %s -> %s", h.id, o.id) })
	case 2:
		if h.down || h.paused {
			break
		}
		w.logf("fault: %s paused for %v", h.id, hold)
		h.paused = true
		w.after(hold, nil, func() { w.resume(h) })
	case 3:
		if h.down || h.paused {
			break
		}
		if w.rng.IntN(4) == 0 {
			w.powerCut(hold, nil, nil)
			break
		}
		h.crash()
		w.after(hold, nil, func() { w.restart(h) })
	case 4:
		l := faultnet.Link{Loss: 0.05, Dup: 0.1, DelayMax: 40 * time.Millisecond}
		w.logf("fault: every link lossy (5%%), duplicating (10%%) and reordering (up to 40 ms) for %v", hold)
		w.net.SetDefault(l)
		w.after(hold, nil, func() { w.net.SetDefault(faultnet.Link{}); w.logf("heal: links") })
	case 5:
		perm := w.rng.Perm(len(w.hosts))
		k := 1 + w.rng.IntN(len(w.hosts)/2)
		var a, b []string
		for j, p := range perm {
			if j < k {
				a = append(a, w.hosts[p].id)
			} else {
				b = append(b, w.hosts[p].id)
			}
		}
		slices.Sort(a)
		slices.Sort(b)
		w.logf("fault: partition %v | %v for %v", a, b, hold)
		w.net.Partition(a, b)
		w.after(hold, nil, func() { w.net.Heal(); w.logf("heal: partition") })
	case 8:
		// A slow node (an overloaded host, a slow NIC): everything to and
		// from it is late, by different amounts, so that what it says
		// about itself (an ack, a refutation) races what the others
		// conclude about it.
		slow := faultnet.Link{DelayMin: 50 * time.Millisecond, DelayMax: w.between(200*time.Millisecond, 1500*time.Millisecond)}
		w.logf("fault: %s slow (links delayed %v to %v) for %v", h.id, slow.DelayMin, slow.DelayMax, hold)
		for _, o := range w.hosts {
			if o != h {
				w.net.SetLink(h.id, o.id, slow)
				w.net.SetLink(o.id, h.id, slow)
			}
		}
		w.after(hold, nil, func() {
			for _, o := range w.hosts {
				w.net.ClearLink(h.id, o.id)
				w.net.ClearLink(o.id, h.id)
			}
			w.logf("heal: %s not slow", h.id)
		})
		// And an operator moves a topic to the slow node and, once that
		// move is answered, away again: OpenTopics sent again while the
		// first was on its way may reach the node after the CloseTopic
		// that ends that epoch there.
		if w.mover.cur == nil && w.hot == "" {
			topic := fmt.Sprintf("topic-%d", w.rng.IntN(w.cfg.Topics))
			w.logf("fault: %s moved to the slow %s and back", topic, h.id)
			w.mover.then = func() { w.mover.moveTo(topic, w.hosts[(h.index+1+w.rng.IntN(len(w.hosts)-1))%len(w.hosts)]) }
			w.mover.moveTo(topic, h)
		}
	case 10:
		// Throttled disks: every fsync but h's takes milliseconds, longer
		// than a round trip, for hold; and, unless a power cut came
		// lately, the first change answered meanwhile in a shard h leads
		// is followed by one (World.cutAfterAnswer), while its
		// followers' fsyncs may still run.
		w.logf("fault: every disk but %s's slow (fsyncs of 2-20 ms) for %v", h.id, hold)
		w.slowDisks, w.fastDisk = w.now.Add(hold), h
		if !w.now.Before(w.cutFree) {
			w.cutFree = w.now.Add(hold + 20*time.Second)
			w.cutAfterAnswer = true
		}
	case 6, 7, 9:
		// The owner of a topic cut off from the other nodes or only from
		// their messages (it still sends), while its
		// clients still reach it and the others press on its topic.
		// A topic whose owner does not also lead its shard, when there is
		// one (else a move waits for a new leader, and the old owner's
		// lease has run out before the topic can move).
		topic := fmt.Sprintf("topic-%d", w.rng.IntN(w.cfg.Topics))
		for range w.cfg.Topics {
			if w.owners[topic].owner != w.shardLeader(topic) {
				break
			}
			topic = fmt.Sprintf("topic-%d", w.rng.IntN(w.cfg.Topics))
		}
		o := w.byID[w.owners[topic].owner]
		if o == nil || o.down || w.hot != "" {
			break
		}
		hold = w.between(300*time.Millisecond, 3*time.Second)
		if c := w.rng.IntN(2); c == 0 {
			w.logf("fault: %s, owner of %s, cut off for %v", o.id, topic, hold)
			w.net.Isolate(o.id)
		} else {
			w.logf("fault: %s, owner of %s, hears no one for %v", o.id, topic, hold)
			w.net.Cut("*", o.id)
		}
		w.hot, w.hotOwner = topic, o
		if w.side != nil && w.side.cur == nil {
			w.side.stickTo(o, topic, w.owners[topic].epoch)
		}
		// And someone moves the topic away from it at once; in a third of
		// these, an operator hands the shard's leadership to another
		// replica first, so that the new owners are opened by a leader
		// that never saw the grants the cut-off owner still serves on.
		move := func() {
			if w.hot == topic && w.mover.cur == nil {
				w.mover.moveAway(topic, o)
			}
		}
		if w.rng.IntN(3) == 0 {
			w.handLeadership(topic, o, move)
		} else {
			w.after(w.between(5*time.Millisecond, 40*time.Millisecond), nil, move)
		}
		w.after(hold, nil, func() {
			w.net.HealLink(o.id, "*")
			w.net.HealLink("*", o.id)
			w.hot, w.hotOwner, w.hotTarget = "", nil, nil
			w.logf("heal: %s", o.id)
		})
	}
	w.after(w.between(2*time.Second, 6*time.Second), nil, w.nextFault)
}

// handLeadership has an operator move the leadership of topic's shard
// from its leader to another replica, not o, as shoalctl transfer-leader
// does, and calls then once the leader answered (whatever it answered).
func (w *World) handLeadership(topic string, o *host, then func()) {
	shard := w.shardOf(topic)
	l := w.byID[w.shardLeader(topic)]
	if l == nil || l.down || l.paused {
		w.after(w.between(5*time.Millisecond, 40*time.Millisecond), nil, then)
		return
	}
	// then runs once: after the transfer's answer, or when an answer lost
	// with its node's crash would have come.
	called := false
	once := func() {
		if !called {
			called = true
			then()
		}
	}
	w.after(opTimeout, nil, once)
	// Each answer comes inside the node's own turn: the next request goes
	// in a turn of its own.
	deliver := func(kind wire.Kind, payload []byte, done func(wire.Kind, []byte)) {
		f, start := wire.BeginFrame(nil, kind, 1)
		f = append(f, payload...)
		f, _ = wire.EndFrame(f, start)
		w.after(w.between(clientLag, clientLagX), l, func() {
			l.node.DeliverFrame(answerConn{done: func(frame []byte) {
				var hd wire.Header
				if wire.DecodeHeader(frame, &hd) == nil {
					w.after(w.between(clientLag, clientLagX), nil, func() { done(hd.Kind, frame[wire.HeaderSize:]) })
				}
			}}, f)
			l.wake()
		})
	}
	deliver(wire.KindShards, nil, func(kind wire.Kind, p []byte) {
		var sl wire.ShardList
		if kind != wire.KindShardList || wire.DecodeShardList(p, &sl) != nil {
			once()
			return
		}
		var to []string
		for _, s := range sl.Shards {
			if s.Shard != uint64(shard) || string(s.Leader) != l.id {
				continue
			}
			for _, r := range s.Replicas {
				if h := w.byID[string(r)]; h != nil && h != l && h != o && !h.down {
					to = append(to, h.id)
				}
			}
		}
		if len(to) == 0 {
			once()
			return
		}
		target := to[w.rng.IntN(len(to))]
		w.logf("fault: leadership of shard %d (topic %s) handed from %s to %s", shard, topic, l.id, target)
		deliver(wire.KindTransferLeader, wire.AppendTransferLeader(nil, &wire.TransferLeader{Shard: uint64(shard), Node: []byte(target)}),
			func(kind wire.Kind, p []byte) {
				w.logf("transfer of shard %d to %s: %v", shard, target, kind)
				once()
			})
	})
}

// cutAfter cuts every node's power just after the change of topic was
// answered, its shard's leader back last: the others may elect a leader
// among themselves first, from what their disks kept.
func (w *World) cutAfter(topic string) {
	w.cutAfterAnswer = false
	leader := w.byID[w.shardLeader(topic)]
	hold := w.between(time.Second, 6*time.Second)
	w.after(w.between(0, 500*time.Microsecond), nil, func() {
		if !w.quiet {
			w.logf("fault: power cut just after a change of %s was answered", topic)
			w.powerCut(hold, nil, leader)
		}
	})
}

// powerCut cuts every node's power at the same instant: each loses what
// it had not synced, and they come back one by one within hold.
// first, when not nil, is back first (the node whose fsync the cut
// interrupted: with whichever node is back next, it may elect a leader
// of the shards they share before their old leader is back); last, when
// not nil, is back last (the leader that had just answered a change).
func (w *World) powerCut(hold time.Duration, first, last *host) {
	w.logf("fault: power cut, every node down, back within %v", hold)
	for _, o := range w.hosts {
		if o.down {
			continue
		}
		o.stop(0, "power loss")
		back := w.between(hold/4, hold)
		switch o {
		case first:
			back = hold / 8
		case last:
			back = hold + 500*time.Millisecond
		}
		w.after(back, nil, func() { w.restart(o) })
	}
}

func (w *World) resume(h *host) {
	if !h.paused || h.down {
		return
	}
	h.paused = false
	held := h.held
	h.held = nil
	w.logf("resume: %s", h.id)
	for _, e := range held {
		w.at(w.now, h, e.do)
	}
	h.wake()
}

func (w *World) restart(h *host) {
	if !h.down {
		return
	}
	if err := h.boot(); err != nil {
		w.logf("%s does not boot: %v", h.id, err)
	}
}

// shardLeader is the leader of topic's shard as the first live node's
// table has it ("" if none).
func (w *World) shardLeader(topic string) string {
	for _, h := range w.hosts {
		if !h.down {
			l, _, _ := h.node.ShardLeader(h.node.ShardOf(topic))
			return l
		}
	}
	return ""
}

// healAll ends every fault.
func (w *World) healAll() {
	w.quiet = true
	w.net.Heal()
	w.net.SetDefault(faultnet.Link{})
	for _, h := range w.hosts {
		for _, o := range w.hosts {
			w.net.ClearLink(h.id, o.id)
		}
	}
	for _, h := range w.hosts {
		w.resume(h)
		w.restart(h)
	}
	w.logf("every fault healed")
}

// ask sends one request to h as a client would, runs the world until the
// answer comes (or a timeout), and returns it.
func (w *World) ask(h *host, kind wire.Kind, payload []byte) (wire.Kind, []byte, bool) {
	var gotKind wire.Kind
	var got []byte
	done := false
	f, start := wire.BeginFrame(nil, kind, 1)
	f = append(f, payload...)
	f, _ = wire.EndFrame(f, start)
	conn := answerConn{done: func(frame []byte) {
		var hd wire.Header
		if wire.DecodeHeader(frame, &hd) == nil {
			gotKind, got, done = hd.Kind, frame[wire.HeaderSize:], true
		}
	}}
	h.node.DeliverFrame(conn, f)
	h.wake()
	deadline := w.now.Add(opTimeout)
	for !done && w.now.Before(deadline) {
		w.runUntil(w.now.Add(10 * time.Millisecond))
	}
	return gotKind, got, done
}

// answerConn hands a node's answer to done.
type answerConn struct{ done func([]byte) }

func (a answerConn) Write(frame []byte) error { a.done(append([]byte(nil), frame...)); return nil }
func (answerConn) Role() wire.Role            { return wire.RoleClient }
func (answerConn) Node() string               { return "" }

// finalState reads every topic with a linearizable lookup once the run is
// calm.
func (w *World) finalState() map[string]history.Final {
	out := make(map[string]history.Final)
	for i := range w.cfg.Topics {
		topic := fmt.Sprintf("topic-%d", i)
		for try := range 20 {
			h := w.hosts[try%len(w.hosts)]
			kind, p, ok := w.ask(h, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic), Linearizable: true}))
			if !ok {
				continue
			}
			if kind == wire.KindAssignment {
				var a wire.Assignment
				if wire.DecodeAssignment(p, &a) == nil {
					out[topic] = history.Final{Epoch: a.Epoch, At: w.now}
					break
				}
			}
			var e wire.Error
			if kind == wire.KindError && wire.DecodeError(p, &e) == nil && e.Code == wire.CodeNotFound {
				out[topic] = history.Final{Gone: true, At: w.now}
				break
			}
		}
	}
	return out
}

// checkLiveness checks, once the faults have stopped for Config.Calm, that
// every node is ready, that every shard has one leader every node knows,
// that every assigned topic is owned by a live node, and that every node
// answers a plain lookup as the shard's leader does.
func (w *World) checkLiveness() []string {
	var out []string
	for _, h := range w.hosts {
		if !h.node.Status().Ready {
			out = append(out, fmt.Sprintf("%s is not ready %v after the faults stopped", h.id, w.cfg.Calm))
		}
	}
	var leaders []string
	for _, h := range w.hosts {
		kind, p, ok := w.ask(h, wire.KindShards, nil)
		var sl wire.ShardList
		if !ok || kind != wire.KindShardList || wire.DecodeShardList(p, &sl) != nil {
			out = append(out, fmt.Sprintf("%s does not list its shards", h.id))
			continue
		}
		for _, si := range sl.Shards {
			if len(si.Leader) == 0 {
				out = append(out, fmt.Sprintf("%s knows no leader of shard %d", h.id, si.Shard))
				break
			}
		}
		if leaders == nil {
			for _, si := range sl.Shards {
				leaders = append(leaders, fmt.Sprintf("%s@%d", si.Leader, si.Term))
			}
			continue
		}
		for i, si := range sl.Shards {
			if i < len(leaders) && fmt.Sprintf("%s@%d", si.Leader, si.Term) != leaders[i] {
				out = append(out, fmt.Sprintf("%s names %s@%d leader of shard %d, %s names %s", h.id, si.Leader, si.Term, si.Shard, w.hosts[0].id, leaders[i]))
				break
			}
		}
	}
	for i := range w.cfg.Topics {
		topic := fmt.Sprintf("topic-%d", i)
		var want, refused string
		answered := false
		for try := range 10 {
			kind, p, ok := w.ask(w.hosts[try%len(w.hosts)], wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic), Linearizable: true}))
			if !ok {
				continue
			}
			answered = true
			var e wire.Error
			if kind == wire.KindError && wire.DecodeError(p, &e) == nil && e.Code != wire.CodeNotFound {
				// Not an answer about the topic: the cluster cannot say.
				refused = fmt.Sprintf("%v: %s", e.Code, e.Message)
				continue
			}
			var a wire.Assignment
			if kind == wire.KindAssignment && wire.DecodeAssignment(p, &a) == nil {
				want = fmt.Sprintf("%s@%d", a.Owner, a.Epoch)
				if h := w.byID[string(a.Owner)]; h == nil || h.down {
					out = append(out, fmt.Sprintf("%s is owned by %s, not a live node", topic, a.Owner))
				} else if why := w.writable(h, topic, a.Epoch); why != "" {
					out = append(out, fmt.Sprintf("%s is not writable at its owner %s: %s", topic, want, why))
				}
			} else {
				want = "none"
			}
			break
		}
		if want == "" && refused != "" {
			out = append(out, fmt.Sprintf("%s cannot be read %v after the faults stopped: %s", topic, w.cfg.Calm, refused))
		}
		if !answered {
			out = append(out, fmt.Sprintf("%s: no node answered a lookup of it %v after the faults stopped", topic, w.cfg.Calm))
		}
		for _, h := range w.hosts {
			kind, p, ok := w.ask(h, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic)}))
			got := "none"
			var a wire.Assignment
			if ok && kind == wire.KindAssignment && wire.DecodeAssignment(p, &a) == nil {
				got = fmt.Sprintf("%s@%d", a.Owner, a.Epoch)
			}
			if ok && want != "" && got != want {
				out = append(out, fmt.Sprintf("%s answers %s for %s, the leader %s", h.id, got, topic, want))
			}
		}
	}
	return out
}

// writable produces one record to topic at its owner h, at epoch, and
// says why that failed ("" if it did not); the owner may need a lease
// round first, so it tries a few times.
func (w *World) writable(h *host, topic string, epoch uint64) string {
	why := ""
	for range 3 {
		kind, p, ok := w.ask(h, wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte(topic), Epoch: epoch, Records: [][]byte{[]byte("probe")}}))
		switch {
		case !ok:
			why = "no answer"
		case kind == wire.KindProduceAck:
			return ""
		default:
			var e wire.Error
			_ = wire.DecodeError(p, &e)
			why = fmt.Sprintf("%v: %s", e.Code, e.Message)
		}
		w.runUntil(w.now.Add(time.Second))
	}
	return why
}

// digest hashes a history (in a canonical order) for comparing runs.
func digest(ops []history.Op) string {
	lines := make([]string, len(ops))
	for i, o := range ops {
		lines[i] = fmt.Sprintf("%d %d %s %s %v %v %d %s %d %s", o.Start.UnixNano(), o.End.UnixNano(), o.Client, o.Topic, o.Kind, o.OK, o.Epoch, o.Node, o.Offset, o.Err)
	}
	slices.Sort(lines)
	h := uint64(14695981039346656037)
	for _, l := range lines {
		for i := 0; i < len(l); i++ {
			h ^= uint64(l[i])
			h *= 1099511628211
		}
		h ^= '\n'
		h *= 1099511628211
	}
	return fmt.Sprintf("%016x", h)
}
