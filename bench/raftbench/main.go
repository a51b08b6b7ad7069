// Command raftbench measures raftmux: several hosts in one process. By
// default on the real parts (raftmux/raftio): a Pebble store per host in its
// own directory (shardstore) and netio peer connections over 127.0.0.1;
// `-storage mem -transport inproc` selects the stand-ins of raftmuxtest
// (memory storage with an fsync'd append-only file per host, in-process
// network), so both can be compared in one sitting.
//
//	go run ./bench/raftbench -hosts 3 -shards 1024 -payload 16 -clients 256 -duration 30s -json
//	go run ./bench/raftbench -idle -shards 10000 -json
//	go run ./bench/raftbench -failover -shards 1024 -json
//	go run ./bench/raftbench -storage mem -transport inproc -shards 1024 -json
//
// Load shape (as the Dragonboat harness): each client has one proposal in
// flight, round-robins over its shards (client c owns c, c+clients, ...),
// sends to the shard's current leader, done when applied on the leader.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

type options struct {
	hosts, shards, payload, clients, workers, keys int
	duration, warmup, idleWindow, settle, detect   time.Duration
	suspect, ackWait                               time.Duration
	idle, failover, jsonOut, fsync, noQuiesce      bool
	dir, cpuprofile, trace, memprofile, timeline   string
	storage, transport, detector, sm               string
	memtableMiB                                    int
	slow, tick                                     time.Duration
	heartbeatTicks                                 int
}

type report struct {
	Hosts     int    `json:"hosts"`
	Shards    int    `json:"shards"`
	Payload   int    `json:"payload"`
	Clients   int    `json:"clients,omitempty"`
	Workers   int    `json:"workers_per_host"`
	Storage   string `json:"storage"`
	SM        string `json:"state_machine"`
	Transport string `json:"transport"`
	Quiesce   bool   `json:"quiesce"`
	// TickMs and HeartbeatTicks are set only when -tick or
	// -heartbeat-ticks changed raftmux's defaults.
	TickMs         float64 `json:"tick_ms,omitempty"`
	HeartbeatTicks int     `json:"heartbeat_ticks,omitempty"`

	StartAllLeadersMs float64 `json:"start_all_leaders_ms"`

	DurationS   float64 `json:"duration_s,omitempty"`
	Commits     int64   `json:"commits,omitempty"`
	CommitsPerS float64 `json:"commits_per_s,omitempty"`
	P50Ms       float64 `json:"p50_ms,omitempty"`
	P99Ms       float64 `json:"p99_ms,omitempty"`
	P999Ms      float64 `json:"p999_ms,omitempty"`
	MaxMs       float64 `json:"max_ms,omitempty"`
	Errors      int64   `json:"errors"`
	ErrNotLead  int64   `json:"errors_not_leader"`
	ErrTimeout  int64   `json:"errors_timeout"`
	CPUPer1000  float64 `json:"cpu_s_per_1000,omitempty"`
	FsyncsPerS  float64 `json:"fsyncs_per_s,omitempty"`
	FramesPerS  float64 `json:"frames_per_s,omitempty"`
	FsyncAvgMs  float64 `json:"fsync_avg_ms,omitempty"`
	// WALFsyncsPerS and WALFsyncAvgMs are the fsync calls on Pebble's
	// write-ahead logs and their own time (-storage pebble only):
	// fsync_avg_ms above is the synced commit, which also waits for an
	// fsync already under way and for earlier batches.
	WALFsyncsPerS float64 `json:"wal_fsyncs_per_s,omitempty"`
	WALFsyncAvgMs float64 `json:"wal_fsync_avg_ms,omitempty"`
	// WALBytesPerCommit is what all hosts' Pebble write-ahead logs took in
	// per commit: every key and value written for the raft logs, HardStates,
	// applied indexes and state machines (-storage pebble only).
	WALBytesPerCommit float64 `json:"wal_bytes_per_commit,omitempty"`
	// SlowPct is the share of proposals slower than -slow, overall and per
	// group of shards with the same leader host and worker ("h1/w0").
	SlowMs      float64            `json:"slow_ms,omitempty"`
	SlowPct     *float64           `json:"slow_pct,omitempty"`
	SlowByGroup map[string]float64 `json:"slow_pct_by_leader_worker,omitempty"`

	IdleCPUPct          *float64 `json:"idle_cpu_pct,omitempty"`
	IdleBytesPerS       *float64 `json:"idle_bytes_per_s,omitempty"`
	HeapBytesPerReplica *float64 `json:"heap_bytes_per_replica,omitempty"`
	Quiesced            int      `json:"quiesced_replicas,omitempty"`

	FailoverMs       *float64 `json:"failover_ms,omitempty"`
	FailoverAffected int      `json:"failover_affected,omitempty"`
	Detector         string   `json:"detector,omitempty"`
	SuspectMs        float64  `json:"suspect_ms,omitempty"`
	DetectDelayMs    float64  `json:"detect_delay_ms,omitempty"`
}

func main() {
	var o options
	flag.IntVar(&o.hosts, "hosts", 3, "hosts (every shard has a replica on each)")
	flag.IntVar(&o.shards, "shards", 1024, "shards (raft groups)")
	flag.IntVar(&o.payload, "payload", 16, "proposal bytes")
	flag.IntVar(&o.clients, "clients", 256, "concurrent clients, one proposal in flight each")
	flag.IntVar(&o.workers, "workers", 0, "workers per host (0: GOMAXPROCS)")
	flag.IntVar(&o.keys, "keys", 4096, "key space of the state machine")
	flag.DurationVar(&o.duration, "duration", 30*time.Second, "measured load window")
	flag.DurationVar(&o.warmup, "warmup", 3*time.Second, "load before the window")
	flag.BoolVar(&o.idle, "idle", false, "measure an idle cluster after quiescence instead of load")
	flag.DurationVar(&o.idleWindow, "idle-window", 20*time.Second, "idle measurement window")
	flag.DurationVar(&o.settle, "settle", 60*time.Second, "longest wait for all groups to quiesce")
	flag.BoolVar(&o.failover, "failover", false, "stop the host leading most shards and time re-election")
	flag.StringVar(&o.detector, "detector", "swim", "failover: how survivors learn of the stopped host: swim (real SWIM drivers, LAN profile, on 127.0.0.1) or delay (NodeSuspect and NodeDead after -suspect-delay and -detect-delay)")
	flag.DurationVar(&o.suspect, "suspect-delay", 1085*time.Millisecond, "failover with -detector delay: delay before NodeSuspect (SWIM's measured first suspicion, bench/README.md)")
	flag.DurationVar(&o.detect, "detect-delay", 2585*time.Millisecond, "failover with -detector delay: delay before NodeDead (SWIM's measured first dead, bench/README.md)")
	flag.StringVar(&o.sm, "sm", "store", "state machine: store (each command's key written into the round's storage batch) or memory (a map per shard, as the Dragonboat harness's in-memory KV)")
	flag.StringVar(&o.storage, "storage", "pebble", "pebble (shardstore, a directory per host) or mem (raftmuxtest.MemStore)")
	flag.IntVar(&o.memtableMiB, "memtable", 0, "-storage pebble: memtable MiB (0: shardstore's default)")
	flag.StringVar(&o.transport, "transport", "netio", "netio (peer connections on 127.0.0.1) or inproc (raftmuxtest.Network)")
	flag.BoolVar(&o.jsonOut, "json", false, "print one JSON object")
	flag.BoolVar(&o.fsync, "fsync", true, "-storage mem: fsync an append-only file per host on every synced commit")
	flag.BoolVar(&o.noQuiesce, "no-quiesce", false, "keep all groups ticking")
	flag.DurationVar(&o.ackWait, "ackwait", 0, "raftmux Config.AckWait: how long a worker holds its next round back for followers' acks (0: default, negative: off)")
	flag.StringVar(&o.dir, "dir", "", "directory for the hosts' Pebble directories or fsync files (default a temp dir)")
	flag.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the measured window")
	flag.StringVar(&o.trace, "trace", "", "write an execution trace of the measured window")
	flag.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile at the end of the measured window")
	flag.StringVar(&o.timeline, "timeline", "", "write the measured window as rows of 100 ms: commits, p50/p99/max latency, GC cycles, Pebble flushes and compactions")
	flag.DurationVar(&o.tick, "tick", 0, "raftmux Config.TickInterval (0: its default, 100 ms)")
	flag.IntVar(&o.heartbeatTicks, "heartbeat-ticks", 0, "raftmux Config.HeartbeatTicks (0: its default, 1)")
	flag.DurationVar(&o.slow, "slow", 0, "also report the share of proposals slower than this, overall and per leader host and worker (0: off)")
	flag.Parse()
	if o.memprofile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "raftbench:", err)
		os.Exit(1)
	}
}

type cluster struct {
	o     options
	net   *raftmuxtest.Network // -transport inproc
	hosts []*host              // index = id-1
	// leader[s] packs term<<16 | leader id, the newest reported.
	leader []atomic.Uint64

	// victim of -failover and when a survivor first heard it suspected
	// and dead (unix nanoseconds; 0: not yet).
	victim            atomic.Uint64
	suspectAt, deadAt atomic.Int64
}

func (c *cluster) noteDetect(node uint64, dead bool) {
	if node != c.victim.Load() {
		return
	}
	at := &c.suspectAt
	if dead {
		at = &c.deadAt
	}
	at.CompareAndSwap(0, time.Now().UnixNano())
}

func (c *cluster) onLeader(lc raftmux.LeaderChange) {
	if lc.Leader == 0 {
		return
	}
	v := lc.Term<<16 | lc.Leader
	p := &c.leader[lc.Shard]
	for {
		old := p.Load()
		if old>>16 > lc.Term || old == v {
			return
		}
		if p.CompareAndSwap(old, v) {
			return
		}
	}
}

func (c *cluster) leaderOf(s uint64) uint64 { return c.leader[s].Load() & 0xffff }

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func heapAlloc() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

func run(o options) error {
	if o.hosts < 1 || o.hosts > 1000 || o.shards < 1 || o.clients < 1 || o.payload < 1 {
		return errors.New("hosts, shards, clients and payload must be positive")
	}
	if o.detector != "swim" && o.detector != "delay" {
		return fmt.Errorf("unknown -detector %q (swim or delay)", o.detector)
	}
	if o.sm != "store" && o.sm != "memory" {
		return fmt.Errorf("unknown -sm %q (store or memory)", o.sm)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	dir := o.dir
	if dir == "" && (o.fsync || o.storage == "pebble") {
		d, err := os.MkdirTemp("", "raftbench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	heap0 := heapAlloc()
	c := &cluster{o: o, net: raftmuxtest.NewNetwork(), leader: make([]atomic.Uint64, o.shards)}
	voters := make([]uint64, o.hosts)
	for i := range voters {
		voters[i] = uint64(i + 1)
	}
	defer func() {
		for _, hs := range c.hosts {
			hs.stop(c)
		}
	}()
	for _, id := range voters {
		hs, err := c.newHost(id, dir)
		if err != nil {
			return err
		}
		c.hosts = append(c.hosts, hs)
	}
	c.connect()
	if o.failover && o.detector == "swim" {
		if err := c.startSwim(); err != nil {
			return err
		}
	}
	ctx := context.Background()
	start := time.Now()
	var bwg sync.WaitGroup
	berr := make([]error, len(c.hosts))
	for i, hs := range c.hosts {
		h := hs.h
		bwg.Add(1)
		go func() {
			defer bwg.Done()
			for s := uint64(0); s < uint64(o.shards) && berr[i] == nil; s++ {
				// A shard a peer already filled by snapshot is hosted.
				if err := h.Bootstrap(ctx, s, voters); !errors.Is(err, raftmux.ErrShardExists) {
					berr[i] = err
				}
			}
		}()
	}
	bwg.Wait()
	if err := errors.Join(berr...); err != nil {
		return err
	}
	for s := uint64(0); s < uint64(o.shards); s++ {
		if err := c.hosts[int(s)%o.hosts].h.Campaign(ctx, s); err != nil {
			return err
		}
	}
	if err := c.waitAllLeaders(120 * time.Second); err != nil {
		return err
	}
	workers := o.workers
	if workers == 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	storage := "pebble (shardstore, a directory per host), one group commit per worker round, fsync on"
	if o.storage == "mem" {
		storage = "memstore (raft.MemoryStorage per shard), one group commit per worker round"
		if o.fsync {
			storage += ", written to an append-only file per host and fsynced"
		} else {
			storage += ", no fsync"
		}
	}
	transport := "netio (one TCP peer connection per host pair on 127.0.0.1, raftio frames)"
	if o.transport == "inproc" {
		transport = "in-process (every message protobuf-encoded and decoded)"
	}
	rep := report{
		Hosts: o.hosts, Shards: o.shards, Payload: o.payload, Workers: workers,
		Storage:           storage,
		SM:                o.sm,
		Transport:         transport,
		Quiesce:           !o.noQuiesce,
		TickMs:            ms(o.tick),
		HeartbeatTicks:    o.heartbeatTicks,
		StartAllLeadersMs: ms(time.Since(start)),
	}
	switch {
	case o.idle || (o.failover && o.clients == 0):
		if err := c.idle(&rep, heap0); err != nil {
			return err
		}
	default:
		rep.Clients = o.clients
		c.load(&rep)
	}
	if o.failover {
		if err := c.failoverRun(&rep); err != nil {
			return err
		}
	}
	if o.jsonOut {
		b, _ := json.Marshal(rep)
		fmt.Println(string(b))
	} else {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
	}
	return nil
}

func startProfiles(o options) func() {
	var stops []func()
	if o.cpuprofile != "" {
		if f, err := os.Create(o.cpuprofile); err == nil {
			_ = pprof.StartCPUProfile(f)
			stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
		}
	}
	if o.trace != "" {
		if f, err := os.Create(o.trace); err == nil {
			_ = trace.Start(f)
			stops = append(stops, func() { trace.Stop(); f.Close() })
		}
	}
	if o.memprofile != "" {
		// The profile counts from the process start: the window's own
		// allocations are `go tool pprof -base FILE.base FILE`.
		if f, err := os.Create(o.memprofile + ".base"); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
		stops = append(stops, func() {
			if f, err := os.Create(o.memprofile); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		})
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (c *cluster) waitAllLeaders(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		for s := range c.leader {
			if c.leaderOf(uint64(s)) == 0 {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d shards without a leader after %v", missing, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (c *cluster) load(rep *report) {
	o := c.o
	var (
		measuring atomic.Bool
		stop      atomic.Bool
		errs      atomic.Int64
		errNL     atomic.Int64
		errTO     atomic.Int64
		wg        sync.WaitGroup
		lats      = make([][]time.Duration, o.clients)
		tl        *timeline
	)
	if o.timeline != "" {
		tl = newTimeline(c, o.clients)
	}
	var spread *slowSpread
	if o.slow > 0 {
		spread = newSlowSpread(o.slow, o.shards, rep.Workers)
	}
	for cl := 0; cl < o.clients; cl++ {
		// Client c owns shards c, c+clients, ...; with fewer shards than
		// clients, several clients share shard c mod shards.
		var mine []uint64
		for s := cl; s < o.shards; s += o.clients {
			mine = append(mine, uint64(s))
		}
		if o.shards < o.clients {
			mine = []uint64{uint64(cl % o.shards)}
		}
		if len(mine) == 0 {
			continue
		}
		wg.Add(1)
		go func(cl int, mine []uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(cl), 7))
			buf := make([]byte, o.payload)
			for i := 0; !stop.Load(); i++ {
				s := mine[i%len(mine)]
				for j := range buf {
					buf[j] = byte(rng.Uint32())
				}
				if len(buf) >= 8 {
					k := rng.IntN(o.keys)
					copy(buf, fmt.Appendf(nil, "%08d", k)[:8])
				}
				l := c.leaderOf(s)
				t0 := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				_, err := c.hosts[l-1].h.Propose(ctx, s, buf)
				cancel()
				d := time.Since(t0)
				if err != nil {
					var nl *raftmux.NotLeaderError
					if errors.As(err, &nl) && nl.Leader != 0 {
						c.onLeader(raftmux.LeaderChange{Shard: s, Leader: nl.Leader, Term: nl.Term})
					}
					if measuring.Load() {
						errs.Add(1)
						switch {
						case errors.Is(err, raftmux.ErrNotLeader):
							errNL.Add(1)
						case errors.Is(err, context.DeadlineExceeded):
							errTO.Add(1)
						}
					}
					time.Sleep(time.Millisecond)
					continue
				}
				if measuring.Load() {
					lats[cl] = append(lats[cl], d)
					if tl != nil {
						tl.record(cl, t0.Add(d), d)
					}
					if spread != nil {
						spread.record(s, l, d)
					}
				}
			}
		}(cl, mine)
	}
	time.Sleep(o.warmup)
	stopProf := startProfiles(o)
	cpu0, fs0, fr0, ft0, wal0 := cpuTime(), c.fsyncs(), c.wireFrames(), c.fsyncTime(), c.walBytes()
	ws0, wt0 := c.walSyncs()
	t0 := time.Now()
	if tl != nil {
		tl.begin()
	}
	measuring.Store(true)
	time.Sleep(o.duration)
	measuring.Store(false)
	el := time.Since(t0)
	if tl != nil {
		tl.end()
	}
	cpu := cpuTime() - cpu0
	fs, fr, ft, wal := c.fsyncs()-fs0, c.wireFrames()-fr0, c.fsyncTime()-ft0, c.walBytes()-wal0
	if fs > 0 {
		rep.FsyncAvgMs = ms(ft / time.Duration(fs))
	}
	if ws, wt := c.walSyncs(); ws > ws0 {
		rep.WALFsyncsPerS = float64(ws-ws0) / el.Seconds()
		rep.WALFsyncAvgMs = ms((wt - wt0) / time.Duration(ws-ws0))
	}
	stopProf()
	stop.Store(true)
	wg.Wait()
	if tl != nil {
		if err := tl.write(o.timeline, el); err != nil {
			fmt.Fprintln(os.Stderr, "raftbench: timeline:", err)
		}
	}
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	pct := func(p float64) float64 {
		if len(all) == 0 {
			return 0
		}
		i := int(p * float64(len(all)))
		if i >= len(all) {
			i = len(all) - 1
		}
		return ms(all[i])
	}
	if os.Getenv("RAFTBENCH_PCT") != "" {
		fmt.Fprintf(os.Stderr, "p80 %.1f p90 %.1f p95 %.1f p97 %.1f p98 %.1f\n", pct(0.8), pct(0.9), pct(0.95), pct(0.97), pct(0.98))
	}
	n := int64(len(all))
	rep.DurationS = el.Seconds()
	rep.Commits = n
	rep.CommitsPerS = float64(n) / el.Seconds()
	rep.P50Ms, rep.P99Ms, rep.P999Ms = pct(0.50), pct(0.99), pct(0.999)
	if n > 0 {
		rep.MaxMs = ms(all[n-1])
		rep.CPUPer1000 = cpu.Seconds() / (float64(n) / 1000)
		rep.WALBytesPerCommit = float64(wal) / float64(n)
	}
	rep.Errors = errs.Load()
	rep.ErrNotLead, rep.ErrTimeout = errNL.Load(), errTO.Load()
	rep.FsyncsPerS = float64(fs) / el.Seconds()
	rep.FramesPerS = float64(fr) / el.Seconds()
	if spread != nil {
		all, groups := spread.report()
		rep.SlowMs, rep.SlowPct, rep.SlowByGroup = ms(o.slow), &all, groups
	}
}

// walSyncs is the fsyncs of all hosts' Pebble WALs and their total time.
func (c *cluster) walSyncs() (n int64, d time.Duration) {
	for _, hs := range c.hosts {
		if hs.walFS != nil {
			n += hs.walFS.syncs.Load()
			d += time.Duration(hs.walFS.nanos.Load())
		}
	}
	return n, d
}

// walBytes is the bytes all hosts' Pebble WALs took in (0 with -storage mem).
func (c *cluster) walBytes() uint64 {
	var n uint64
	for _, hs := range c.hosts {
		if hs.store != nil {
			n += hs.store.Metrics().WAL.BytesIn
		}
	}
	return n
}

func (c *cluster) fsyncs() int64 {
	var n int64
	for _, hs := range c.hosts {
		n += hs.fsyncs()
	}
	return n
}

// fsyncTime is the hosts' time in synced commits: the stand-in storage's
// write and fsync, or a Pebble commit with its WAL fsync.
func (c *cluster) fsyncTime() time.Duration {
	var d time.Duration
	for _, hs := range c.hosts {
		if hs.mem != nil {
			d += hs.mem.FsyncTime()
		} else if hs.storage != nil {
			d += hs.storage.Stats().SyncTime
		}
	}
	return d
}

func (c *cluster) quiescedCount() (int, error) {
	n := 0
	for _, hs := range c.hosts {
		inf, err := hs.h.Shards(context.Background())
		if err != nil {
			return 0, err
		}
		for _, i := range inf {
			if i.Quiesced {
				n++
			}
		}
	}
	return n, nil
}

func (c *cluster) idle(rep *report, heap0 uint64) error {
	o := c.o
	want := o.hosts * o.shards
	deadline := time.Now().Add(o.settle)
	for !o.noQuiesce {
		n, err := c.quiescedCount()
		if err != nil {
			return err
		}
		if n == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	q, err := c.quiescedCount()
	if err != nil {
		return err
	}
	rep.Quiesced = q
	heap := float64(heapAlloc()-heap0) / float64(want)
	rep.HeapBytesPerReplica = &heap
	// Hand the start-up's freed heap back to the OS now: otherwise the
	// runtime's background scavenger does it during the window, which then
	// measures the allocator's clean-up after start-up (60% of the window's
	// CPU at 10,000 shards) rather than the idle cluster.
	debug.FreeOSMemory()
	stopProf := startProfiles(o)
	cpu0, b0 := cpuTime(), c.wireBytes()
	t0 := time.Now()
	time.Sleep(o.idleWindow)
	el := time.Since(t0)
	pct := 100 * (cpuTime() - cpu0).Seconds() / el.Seconds()
	stopProf()
	bps := float64(c.wireBytes()-b0) / el.Seconds()
	rep.IdleCPUPct, rep.IdleBytesPerS = &pct, &bps
	return nil
}

func (c *cluster) failoverRun(rep *report) error {
	o := c.o
	counts := make(map[uint64]int)
	for s := range c.leader {
		counts[c.leaderOf(uint64(s))]++
	}
	var victim uint64
	for id, n := range counts {
		if n > counts[victim] || (n == counts[victim] && id < victim) {
			victim = id
		}
	}
	var affected []uint64
	for s := range c.leader {
		if c.leaderOf(uint64(s)) == victim {
			affected = append(affected, uint64(s))
		}
	}
	c.victim.Store(victim)
	t0 := time.Now()
	c.hosts[victim-1].stop(c)
	switch o.detector {
	case "swim":
		rep.Detector = "swim: real SWIM drivers (LAN profile) on 127.0.0.1, events reported as the node does"
	case "delay":
		rep.Detector = "delay: NodeSuspect and NodeDead reported to the survivors after fixed delays (SWIM's measured detection)"
		time.AfterFunc(o.suspect, func() {
			c.noteDetect(victim, false)
			for _, hs := range c.hosts {
				if hs.id != victim {
					hs.h.NodeSuspect(victim)
				}
			}
		})
		time.AfterFunc(o.detect, func() {
			c.noteDetect(victim, true)
			for _, hs := range c.hosts {
				if hs.id != victim {
					hs.h.NodeDead(victim)
				}
			}
		})
	default:
		return fmt.Errorf("unknown -detector %q (swim or delay)", o.detector)
	}
	deadline := t0.Add(60 * time.Second)
	for {
		left := 0
		for _, s := range affected {
			if l := c.leaderOf(s); l == victim || l == 0 {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("failover: %d of %d shards without a new leader after 60s", left, len(affected))
		}
		time.Sleep(5 * time.Millisecond)
	}
	f := ms(time.Since(t0))
	rep.FailoverMs = &f
	rep.FailoverAffected = len(affected)
	if at := c.suspectAt.Load(); at != 0 {
		rep.SuspectMs = ms(time.Duration(at - t0.UnixNano()))
	}
	if at := c.deadAt.Load(); at != 0 {
		rep.DetectDelayMs = ms(time.Duration(at - t0.UnixNano()))
	}
	return nil
}
