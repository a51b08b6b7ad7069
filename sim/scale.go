package sim

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Scale mode: the evidence for the claim that a Shoal cluster has no
// controller, that what each node does stays the same as the cluster
// grows. Scale boots a cluster of many nodes (the same hosts as Run: real
// node code, SWIM cores, raft groups and Pebble stores on MemFS), on a
// quiet network and with the production timing ("lan"), with one shard
// per node (3 replicas each, so about 3 replicas and one leadership per
// node whatever the size), assigns a few topics, and then measures:
//
//   - over a steady window, what each node sends (peer frames by class,
//     SWIM datagrams and push-pulls: the world carries every one), the
//     simulator's wall time and the process's CPU time per node per
//     virtual second, and the shard leaders and replicas per node;
//   - a join: a new node boots; virtual time until every member's SWIM
//     reports it alive, until it is ready, and until it is a voter of every
//     shard the ring places on it with the ring's replica set;
//   - a kill: the node leading the most shards stops at once; virtual time
//     until a survivor suspects it, until every survivor's SWIM reports it
//     dead, and until every survivor names the same live leader for each
//     shard it led.
//
// Nothing is stubbed: every shard is a real raft group over its nodes'
// Pebble stores, every node runs its whole node code. Two things differ
// from Run and from a production node, both for the simulator's sake: each
// node's routing cache holds 1,024 topics, not 65,536 (scaleRouteCache),
// and the cluster forms in two steps: the SWIM cores first, until each sees
// every member, then every node at once. Started together with their SWIM
// cores, N nodes would each place every shard again on every batch of
// joins they hear of, and the one goroutine that runs them all would pay
// N times over for what N machines do side by side. Joins through a few
// seeds (scaleSeeds), as an operator starts a cluster. The join and the
// kill measured afterwards take the ordinary path.
//
// Everything but the wall, CPU and memory figures repeats for a seed.

// ScaleConfig describes one scale run. Zero fields take the defaults.
type ScaleConfig struct {
	Seed uint64
	// Nodes is the cluster's size (at least 5).
	Nodes int
	// Shards is the number of metadata shards (default: Nodes).
	Shards uint32
	// Topics is how many topics are assigned before the window (default
	// Nodes/10, at least 4): their owners renew leases during it.
	Topics int
	// Window is the steady window (virtual). The default is one period of
	// SWIM's state exchange (push-pull) at this size (pushPullPeriod), in which
	// every node starts one: 90 s at 100 nodes, 180 s at 1,000. A shorter
	// window counts those exchanges by the chance of their phase.
	Window time.Duration
	// Bound bounds each convergence measurement (virtual, default 60 s).
	Bound time.Duration
	// Logger receives the nodes' logs (default: none).
	Logger *slog.Logger
	// CPUProfile, when set, receives a CPU profile of the window.
	CPUProfile io.Writer
	// Progress, when set, is told as each phase ends.
	Progress func(string)
}

// Traffic is what the nodes sent, per node per virtual second (the mean
// over nodes).
type Traffic struct {
	Msgs  float64 `json:"msgs_per_node_s"`
	Bytes float64 `json:"bytes_per_node_s"`
}

// ScaleResult is what a scale run measured. Durations are virtual unless
// named wall; a convergence that did not happen within ScaleConfig.Bound
// is -1.
type ScaleResult struct {
	Seed   uint64 `json:"seed"`
	Nodes  int    `json:"nodes"`
	Shards uint32 `json:"shards"`
	Topics int    `json:"topics"`
	// Assigned counts the topics whose assign was acknowledged.
	Assigned int `json:"assigned"`
	// Members is when every SWIM core saw every member, from the start;
	// Ready when every node was ready, from the nodes' start (right
	// after).
	Members time.Duration `json:"members_ns"`
	Ready   time.Duration `json:"ready_ns"`
	// Quiet is when every SWIM core had gossiped all it had to (its
	// broadcast queue empty), from the nodes' start; the window starts
	// then (-1: not within 5 minutes, and the window starts anyway).
	Quiet time.Duration `json:"quiet_ns"`
	// Window is the steady window.
	Window time.Duration `json:"window_ns"`

	// Sent is everything the nodes sent in the window; Max the busiest
	// node's; Classes the same split by kind: "raft", "lease",
	// "metadata", "ownership", "forward", "other" (peer frames),
	// "swim" (datagrams) and "pushpull" (SWIM's state exchanges,
	// request and answer).
	Sent    Traffic            `json:"sent"`
	Max     Traffic            `json:"max"`
	Classes map[string]Traffic `json:"classes"`
	// WallPerNode is the simulator's wall time per node per virtual second
	// (one goroutine runs every node); CPUPerNode the process's CPU time
	// (user and system: the Pebble stores' goroutines and the garbage
	// collector too), both in seconds.
	WallPerNode float64 `json:"wall_s_per_node_s"`
	CPUPerNode  float64 `json:"cpu_s_per_node_s"`
	// LeadersMax and LeadersMean are the shards led per node at the
	// window's end; ReplicasMax and ReplicasMean the shards hosted.
	LeadersMax   int     `json:"leaders_max"`
	LeadersMean  float64 `json:"leaders_mean"`
	ReplicasMax  int     `json:"replicas_max"`
	ReplicasMean float64 `json:"replicas_mean"`

	// JoinSeen: from a new node's boot until every member's SWIM reports
	// it alive; JoinReady until it is ready; JoinPlaced until it is a
	// voter of every shard the ring places on it, each with the ring's
	// replica set (JoinShards of them).
	JoinSeen   time.Duration `json:"join_seen_ns"`
	JoinReady  time.Duration `json:"join_ready_ns"`
	JoinPlaced time.Duration `json:"join_placed_ns"`
	JoinShards int           `json:"join_shards"`
	// KillSuspect: from the kill of the node leading the most shards
	// (KillLed of them) until a survivor first suspects it; KillDead until
	// every survivor's SWIM reports it dead; KillLeaders until every
	// survivor names the same live leader for each shard it led.
	KillSuspect time.Duration `json:"kill_suspect_ns"`
	KillDead    time.Duration `json:"kill_dead_ns"`
	KillLeaders time.Duration `json:"kill_leaders_ns"`
	KillLed     int           `json:"kill_led"`

	// Load is the machine's load average (one minute) at the window's end,
	// where the system reports it: the wall and CPU figures share the
	// machine with it.
	Load float64 `json:"load_avg"`
	// HeapBytes is the live heap after the window (every node, the
	// simulator), MaxRSS the process's peak resident set; Wall the run's
	// wall time.
	HeapBytes uint64        `json:"heap_bytes"`
	MaxRSS    uint64        `json:"max_rss_bytes"`
	Wall      time.Duration `json:"wall_ns"`

	// Violations are the promises the run broke, as the checkers that
	// apply to a quiet network see them (scaleChecks): SWIM's, liveness
	// once the kill has settled, and one owner at a time. Empty when it
	// passed.
	Violations []Violation `json:"violations,omitempty"`
}

func (c *ScaleConfig) fill() error {
	if c.Nodes < 5 {
		return fmt.Errorf("sim: scale of %d nodes, want at least 5", c.Nodes)
	}
	if c.Window < 0 || c.Bound < 0 || c.Topics < 0 {
		return fmt.Errorf("sim: scale window %v, bound %v, topics %d: none may be negative", c.Window, c.Bound, c.Topics)
	}
	if c.Shards == 0 {
		c.Shards = uint32(c.Nodes)
	}
	if c.Topics == 0 {
		c.Topics = max(4, c.Nodes/10)
	}
	if c.Window == 0 {
		c.Window = pushPullPeriod(c.Nodes)
	}
	if c.Bound == 0 {
		c.Bound = 60 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// pushPullPeriod is how often each SWIM core of a cluster of n starts a
// state exchange with the production timing: the interval, longer
// for larger clusters as swim.Node scales it.
func pushPullPeriod(n int) time.Duration {
	mult := 1.0
	if size := float64(n); size > 32 {
		mult = math.Ceil(math.Log2(size)-5) + 1
	}
	return time.Duration(mult * float64(swim.LANConfig().PushPullInterval))
}

// scaleRouteCache is each node's routing cache capacity in a scale run:
// 1,024 entries (128 KiB) instead of 65,536 (8 MiB, which would be 8 GiB
// of a 1,000-node run's heap); the run assigns far fewer topics.
const scaleRouteCache = 1024

// scaleSeeds is how many nodes every node joins through, as an operator
// names a few seed nodes.
const scaleSeeds = 3

// Scale runs one scale measurement. Like Run it replaces crypto/rand.Reader
// while it runs: runs must not overlap in one process.
func Scale(cfg ScaleConfig) (*ScaleResult, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	wallStart := time.Now()
	w, restore, err := buildWorld(Config{
		Seed: cfg.Seed, Nodes: cfg.Nodes, Shards: cfg.Shards, TraceLines: 400, Logger: cfg.Logger,
	}, worldOpts{lan: true, seeds: scaleSeeds, expect: cfg.Nodes, perNodeEvents: maxPerSecond / 5, routeCache: scaleRouteCache, swimFirst: true})
	if err != nil {
		return nil, err
	}
	defer restore()
	defer w.close()
	res := &ScaleResult{Seed: cfg.Seed, Nodes: cfg.Nodes, Shards: cfg.Shards, Topics: cfg.Topics, Window: cfg.Window}
	fail := func(format string, args ...any) (*ScaleResult, error) {
		msg := fmt.Sprintf(format, args...)
		if w.stuck != "" {
			msg += ": " + w.stuck
		}
		tr := w.trace.Lines()
		if len(tr) > 20 {
			tr = tr[len(tr)-20:]
		}
		for _, l := range tr {
			msg += "\n  " + l
		}
		return nil, fmt.Errorf("sim: scale %d nodes, seed %d: %s", cfg.Nodes, cfg.Seed, msg)
	}

	progress := func(format string, args ...any) {
		if cfg.Progress != nil {
			cfg.Progress(fmt.Sprintf("%d nodes, %.1fs virtual, %v wall: ", cfg.Nodes, w.elapsed().Seconds(), time.Since(wallStart).Round(time.Second)) +
				fmt.Sprintf(format, args...))
		}
	}
	progress("SWIM cores booted")
	if !w.waitMembers(2 * time.Minute) {
		return fail("SWIM cores did not all see %d members %v after the start", cfg.Nodes, w.elapsed())
	}
	res.Members = w.elapsed()
	progress("every SWIM core sees every member")
	for _, h := range w.hosts {
		if err := h.bootNode(); err != nil {
			return nil, err
		}
	}
	if !w.waitReady(5 * time.Minute) {
		return fail("not ready %v after the start", w.elapsed())
	}
	res.Ready = w.elapsed() - res.Members
	progress("every node ready")
	// Let the shard managers move leaderships to their preferred nodes.
	if !w.runUntilLed(time.Minute) {
		return fail("some shard had no leader a minute after the cluster was ready")
	}
	w.runUntil(w.now.Add(5 * time.Second))
	for i := range cfg.Topics {
		h := w.hosts[w.rng.IntN(len(w.hosts))]
		kind, _, ok := w.ask(h, wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: []byte(fmt.Sprintf("topic-%d", i)), Partitions: 1}))
		if ok && kind == wire.KindAssignment {
			res.Assigned++
		}
	}
	// The owners take their topics up and their first leases; then the
	// SWIM cores gossip what the birth made them announce (a leader per
	// shard, each node's metadata versions) until every queue is empty.
	w.runUntil(w.now.Add(5 * time.Second))
	progress("%d of %d topics assigned", res.Assigned, cfg.Topics)
	res.Quiet = -1
	if w.runUntilQuiet(5 * time.Minute) {
		res.Quiet = w.elapsed() - res.Members
	}
	if w.stuck != "" {
		return fail("before the window")
	}
	progress("gossip quiet; the window starts")

	// The steady window.
	for _, h := range w.hosts {
		h.sent = traffic{}
	}
	if cfg.CPUProfile != nil {
		if err := pprof.StartCPUProfile(cfg.CPUProfile); err != nil {
			return nil, err
		}
	}
	cpu0, wall0 := cpuTime(), time.Now()
	w.runUntil(w.now.Add(cfg.Window))
	wall, cpu := time.Since(wall0), cpuTime()-cpu0
	if cfg.CPUProfile != nil {
		pprof.StopCPUProfile()
	}
	if w.stuck != "" {
		return fail("in the window")
	}
	w.measureWindow(res, wall, cpu)
	progress("window done")

	if err := w.measureJoin(res, cfg); err != nil {
		return fail("%v", err)
	}
	progress("join measured")
	if err := w.measureKill(res, cfg); err != nil {
		return fail("%v", err)
	}
	progress("kill measured")
	w.scaleChecks(res, cfg)
	progress("checked: %d violations", len(res.Violations))
	res.MaxRSS = maxRSS()
	res.Wall = time.Since(wallStart)
	return res, nil
}

// waitMembers runs until every host's SWIM core sees every host alive,
// for at most d.
func (w *World) waitMembers(d time.Duration) bool {
	deadline := w.now.Add(d)
	for w.now.Before(deadline) && w.stuck == "" {
		all := true
		for _, h := range w.hosts {
			alive := 0
			for _, m := range h.swim.Members() {
				if m.State == swim.StateAlive {
					alive++
				}
			}
			if alive < len(w.hosts) {
				all = false
				break
			}
		}
		if all {
			return true
		}
		w.runUntil(w.now.Add(100 * time.Millisecond))
	}
	return false
}

// runUntilQuiet runs until no SWIM core has anything left to gossip, for
// at most d.
func (w *World) runUntilQuiet(d time.Duration) bool {
	deadline := w.now.Add(d)
	for w.now.Before(deadline) && w.stuck == "" {
		queued := 0
		for _, h := range w.hosts {
			queued += h.swim.QueueLen()
		}
		if queued == 0 {
			return true
		}
		w.runUntil(w.now.Add(100 * time.Millisecond))
	}
	return false
}

// runUntilLed runs until every shard has a leader (by the nodes' own
// count of the shards they lead), for at most d.
func (w *World) runUntilLed(d time.Duration) bool {
	deadline := w.now.Add(d)
	for w.now.Before(deadline) && w.stuck == "" {
		led := 0
		for _, h := range w.hosts {
			led += h.node.Status().ShardsLed
		}
		if led >= int(w.cfg.Shards) {
			return true
		}
		w.runUntil(w.now.Add(100 * time.Millisecond))
	}
	return false
}

// measureWindow fills res's window figures from what the hosts sent.
func (w *World) measureWindow(res *ScaleResult, wall, cpu time.Duration) {
	secs := res.Window.Seconds()
	n := float64(len(w.hosts))
	var all traffic
	var maxMsgs, maxBytes uint64
	var hosted int
	for _, h := range w.hosts {
		t := &h.sent
		for c := range numClasses {
			all.frames[c] += t.frames[c]
			all.frameBytes[c] += t.frameBytes[c]
		}
		all.datagrams += t.datagrams
		all.datagramBytes += t.datagramBytes
		all.pushPulls += t.pushPulls
		all.pushPullBytes += t.pushPullBytes
		maxMsgs, maxBytes = max(maxMsgs, t.msgs()), max(maxBytes, t.bytes())
		st := h.node.Status()
		res.LeadersMax = max(res.LeadersMax, st.ShardsLed)
		res.ReplicasMax = max(res.ReplicasMax, st.ShardsHosted)
		hosted += st.ShardsHosted
	}
	per := func(v uint64) float64 { return float64(v) / n / secs }
	res.Sent = Traffic{Msgs: per(all.msgs()), Bytes: per(all.bytes())}
	res.Max = Traffic{Msgs: float64(maxMsgs) / secs, Bytes: float64(maxBytes) / secs}
	res.Classes = make(map[string]Traffic)
	for c := range numClasses {
		res.Classes[classNames[c]] = Traffic{Msgs: per(all.frames[c]), Bytes: per(all.frameBytes[c])}
	}
	res.Classes["swim"] = Traffic{Msgs: per(all.datagrams), Bytes: per(all.datagramBytes)}
	res.Classes["pushpull"] = Traffic{Msgs: per(all.pushPulls), Bytes: per(all.pushPullBytes)}
	res.WallPerNode = wall.Seconds() / n / secs
	res.CPUPerNode = cpu.Seconds() / n / secs
	res.LeadersMean = float64(res.Shards) / n
	res.ReplicasMean = float64(hosted) / n
	res.HeapBytes = liveHeap()
	res.Load = loadAvg()
}

// pollEvery is how often the convergence measurements look at the nodes'
// tables; they are exact to this.
const pollEvery = 20 * time.Millisecond

// shardList asks h for its shard list (answered from its tables).
func (w *World) shardList(h *host) (wire.ShardList, bool) {
	var sl wire.ShardList
	kind, p, ok := w.ask(h, wire.KindShards, nil)
	return sl, ok && kind == wire.KindShardList && wire.DecodeShardList(p, &sl) == nil
}

// measureJoin boots one more node and times its join.
func (w *World) measureJoin(res *ScaleResult, cfg ScaleConfig) error {
	var live []*host
	var members []router.Member
	for _, h := range w.hosts {
		live = append(live, h)
		members = append(members, router.Member{ID: h.id, Rack: fmt.Sprintf("r%d", h.index%3)})
	}
	nh := w.addHost()
	members = append(members, router.Member{ID: nh.id, Rack: fmt.Sprintf("r%d", nh.index%3)})
	ring, err := router.NewRing(members, router.RingConfig{})
	if err != nil {
		return err
	}
	pl := ring.Placement(w.cfg.Shards, 3)
	want := make(map[uint64][]string)
	var reps []string
	for s := range w.cfg.Shards {
		reps = pl.Replicas(s, reps[:0])
		if slices.Contains(reps, nh.id) {
			want[uint64(s)] = slices.Sorted(slices.Values(reps))
		}
	}
	res.JoinShards = len(want)

	seen := make(map[string]bool)
	start := w.now
	res.JoinSeen, res.JoinReady, res.JoinPlaced = -1, -1, -1
	w.onMember = func(o *host, e swim.Event) {
		if o != nh && e.Member.ID == nh.id && e.Member.State == swim.StateAlive && res.JoinSeen < 0 {
			seen[o.id] = true
			if len(seen) == len(live) {
				res.JoinSeen = w.now.Sub(start)
			}
		}
	}
	defer func() { w.onMember = nil }()
	if err := nh.boot(); err != nil {
		return err
	}
	deadline := start.Add(cfg.Bound)
	for w.now.Before(deadline) && w.stuck == "" && (res.JoinSeen < 0 || res.JoinReady < 0 || res.JoinPlaced < 0) {
		w.runUntil(w.now.Add(pollEvery))
		if res.JoinReady < 0 && nh.node.Status().Ready {
			res.JoinReady = w.now.Sub(start)
		}
		if res.JoinPlaced < 0 && w.placed(nh, want) {
			res.JoinPlaced = w.now.Sub(start)
		}
	}
	if w.stuck != "" {
		return fmt.Errorf("in the join")
	}
	return nil
}

// placed reports whether h is a voter of every shard in want, with want's
// replica set, as each shard's leader (which hosts it) reports its voters.
func (w *World) placed(h *host, want map[uint64][]string) bool {
	lists := make(map[string]wire.ShardList)
	for _, s := range slices.Sorted(maps.Keys(want)) {
		rs := want[s]
		name, _, ok := h.node.ShardLeader(uint32(s))
		if !ok {
			return false
		}
		l := w.byID[name]
		if l == nil || l.down {
			return false
		}
		ll, ok := lists[l.id]
		if !ok {
			if ll, ok = w.shardList(l); !ok {
				return false
			}
			lists[l.id] = ll
		}
		if s >= uint64(len(ll.Shards)) || string(ll.Shards[s].Leader) != l.id {
			return false
		}
		var have []string
		for _, r := range ll.Shards[s].Replicas {
			have = append(have, string(r))
		}
		slices.Sort(have)
		if !slices.Equal(have, rs) {
			return false
		}
	}
	return true
}

// measureKill stops the node leading the most shards and times how the
// others learn it.
func (w *World) measureKill(res *ScaleResult, cfg ScaleConfig) error {
	var victim *host
	for _, h := range w.hosts {
		if h.down {
			continue
		}
		if victim == nil || h.node.Status().ShardsLed > victim.node.Status().ShardsLed {
			victim = h
		}
	}
	var led []uint64
	for s := range w.cfg.Shards {
		if l, _, ok := victim.node.ShardLeader(s); ok && l == victim.id {
			led = append(led, uint64(s))
		}
	}
	res.KillLed = len(led)
	var survivors []*host
	for _, h := range w.hosts {
		if h != victim && !h.down {
			survivors = append(survivors, h)
		}
	}
	dead := make(map[string]bool)
	start := w.now
	res.KillSuspect, res.KillDead, res.KillLeaders = -1, -1, -1
	gen := victim.nodeGen
	w.onMember = func(o *host, e swim.Event) {
		if o == victim || e.Member.ID != victim.id || e.Member.Generation != gen {
			return
		}
		if e.Member.State == swim.StateSuspect && res.KillSuspect < 0 {
			res.KillSuspect = w.now.Sub(start)
		}
		if (e.Member.State == swim.StateDead || e.Member.State == swim.StateLeft) && res.KillDead < 0 {
			dead[o.id] = true
			if len(dead) == len(survivors) {
				res.KillDead = w.now.Sub(start)
			}
		}
	}
	defer func() { w.onMember = nil }()
	w.logf("%s killed", victim.id)
	victim.down = true
	_ = victim.node.Close()

	deadline := start.Add(cfg.Bound)
	for w.now.Before(deadline) && w.stuck == "" && (res.KillDead < 0 || res.KillLeaders < 0) {
		w.runUntil(w.now.Add(pollEvery))
		if res.KillLeaders < 0 && leadersMoved(survivors, victim.id, led) {
			res.KillLeaders = w.now.Sub(start)
		}
	}
	if w.stuck != "" {
		return fmt.Errorf("after the kill")
	}
	return nil
}

// leadersMoved reports whether every host in hs names the same leader,
// not gone, for each of shards.
func leadersMoved(hs []*host, gone string, shards []uint64) bool {
	for _, s := range shards {
		var want string
		var wantTerm uint64
		for i, h := range hs {
			l, t, ok := h.node.ShardLeader(uint32(s))
			if !ok || l == gone || (i > 0 && (l != want || t != wantTerm)) {
				return false
			}
			want, wantTerm = l, t
		}
	}
	return true
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// loadAvg is the one-minute load average on Linux, else 0.
func loadAvg() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// scaleSettle is how long a scale run goes on after the kill before its
// checks: the victim's topics move once its leases have run out.
const scaleSettle = 30 * time.Second

// scaleSample bounds the topics whose lookups the checks compare across
// nodes (each costs a lookup on every node).
const scaleSample = 50

// scaleChecks runs, after the kill has settled, the checkers that apply to
// a scale run: SWIM's promises as every node reported them, liveness
// (every live node ready and naming the same leader of every shard, every
// assigned topic owned by a live node and writable there, a sample of
// topics answered alike by every node), and one owner at a time over the
// writes the checks acknowledged.
func (w *World) scaleChecks(res *ScaleResult, cfg ScaleConfig) {
	w.runUntil(w.now.Add(scaleSettle))
	add := func(c Checker, texts ...string) {
		for _, t := range texts {
			res.Violations = append(res.Violations, Violation{Checker: c, Text: t})
		}
	}
	add(Membership, w.early...)
	if w.stuck != "" {
		add(Liveness, w.stuck)
		return
	}
	var live []*host
	for _, h := range w.hosts {
		if !h.down {
			live = append(live, h)
		}
	}
	var leaders []string
	for _, h := range live {
		if !h.node.Status().Ready {
			add(Liveness, fmt.Sprintf("%s is not ready %v after the kill", h.id, scaleSettle))
		}
		sl, ok := w.shardList(h)
		if !ok {
			add(Liveness, fmt.Sprintf("%s does not list its shards", h.id))
			continue
		}
		names := make([]string, len(sl.Shards))
		for i, si := range sl.Shards {
			names[i] = fmt.Sprintf("%s@%d", si.Leader, si.Term)
			if l := w.byID[string(si.Leader)]; len(si.Leader) == 0 || l == nil || l.down {
				add(Liveness, fmt.Sprintf("%s names %q leader of shard %d, not a live node", h.id, si.Leader, si.Shard))
				break
			}
		}
		if leaders == nil {
			leaders = names
			continue
		}
		for i := range min(len(names), len(leaders)) {
			if names[i] != leaders[i] {
				add(Liveness, fmt.Sprintf("%s names %s leader of shard %d, %s names %s", h.id, names[i], i, live[0].id, leaders[i]))
				break
			}
		}
	}
	for i := range cfg.Topics {
		topic := fmt.Sprintf("topic-%d", i)
		h := live[w.rng.IntN(len(live))]
		kind, p, ok := w.ask(h, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic), Linearizable: true}))
		var a wire.Assignment
		if !ok || kind != wire.KindAssignment || wire.DecodeAssignment(p, &a) != nil {
			add(Liveness, fmt.Sprintf("%s: no linearizable lookup answered by %s", topic, h.id))
			continue
		}
		owner := w.byID[string(a.Owner)]
		if owner == nil || owner.down {
			add(Liveness, fmt.Sprintf("%s is owned by %s, not a live node, %v after the kill", topic, a.Owner, scaleSettle))
			continue
		}
		if why := w.writable(owner, topic, a.Epoch); why != "" {
			add(Liveness, fmt.Sprintf("%s is not writable at its owner %s@%d: %s", topic, a.Owner, a.Epoch, why))
		}
		if i >= scaleSample {
			continue
		}
		want := fmt.Sprintf("%s@%d", a.Owner, a.Epoch)
		for _, o := range live {
			kind, p, ok := w.ask(o, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic)}))
			var b wire.Assignment
			if ok && kind == wire.KindAssignment && wire.DecodeAssignment(p, &b) == nil {
				if got := fmt.Sprintf("%s@%d", b.Owner, b.Epoch); got != want {
					add(Liveness, fmt.Sprintf("%s answers %s for %s, the leader %s", o.id, got, topic, want))
				}
			}
		}
	}
	add(Owners, checkOwners(w.acks, w.holds)...)
	add(Owners, w.reopened...)
}
