// Command swimbench runs N real swim drivers on 127.0.0.1 in one process,
// as ../shared/peers/memberlist-swim does for memberlist, and measures the
// same things: join convergence, steady-state messages, bytes and CPU,
// false positives, and the detection of a crashed member.
//
//	go run ./bench/swimbench -n 128 -profile lan -duration 60s
//	go run ./bench/swimbench -n 256 -profile lan -skip-detect -duration 1s -warmup 0 -repeat 3
//	go run ./bench/swimbench -n 256 -profile fast -duration 60s
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/swim"
)

var (
	flagN        = flag.Int("n", 16, "members")
	flagDuration = flag.Duration("duration", 60*time.Second, "steady-state window")
	flagProfile  = flag.String("profile", "lan", "lan (LANConfig: probe 1s) | fast (probe 200ms, timeout 100ms, gossip 100ms, push-pull 15s)")
	flagWarmup   = flag.Duration("warmup", 5*time.Second, "wait after convergence before the steady window")
	flagJoinTO   = flag.Duration("join-timeout", 120*time.Second, "give up on convergence after this")
	flagDetTO    = flag.Duration("detect-timeout", 60*time.Second, "give up on detection after this")
	flagSkipDet  = flag.Bool("skip-detect", false, "skip the crash phase")
	flagRepeat   = flag.Int("repeat", 1, "repeat the whole run")
	flagProbe    = flag.Duration("probe-interval", 0, "override ProbeInterval (ProbeTimeout becomes half)")
)

type tracker struct {
	mu        sync.Mutex
	n         int
	start     time.Time
	live      []int
	full      int
	fullAt    []time.Duration // when each member first had the full view
	converged time.Duration
	crashed   map[string]bool
	victim    string
	victimGen uint64
	crashAt   time.Time
	firstSusp time.Duration
	firstDead time.Duration
	deadSeen  map[int]bool
	allDead   time.Duration
	window    bool
	falseDead map[string]bool
	falseSusp map[[3]string]bool
}

func (t *tracker) on(i int, ev swim.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Since(t.start)
	before := t.live[i]
	switch ev.Kind {
	case swim.EventJoined:
		t.live[i]++
	case swim.EventAliveAgain:
		if ev.Prev == swim.StateDead || ev.Prev == swim.StateLeft {
			t.live[i]++
		}
	case swim.EventDead, swim.EventLeft:
		if ev.Prev == swim.StateAlive || ev.Prev == swim.StateSuspect {
			t.live[i]--
		}
	}
	if before != t.n-1 && t.live[i] == t.n-1 {
		if t.fullAt[i] < 0 {
			t.fullAt[i] = now
		}
		t.full++
		if t.full == t.n && t.converged < 0 {
			t.converged = now
		}
	} else if before == t.n-1 && t.live[i] != t.n-1 {
		t.full--
	}
	id := ev.Member.ID
	if !t.crashed[id] {
		if ev.Kind == swim.EventDead && t.window {
			t.falseDead[fmt.Sprintf("%s/%d", id, ev.Member.Generation)] = true
		}
		if ev.Kind == swim.EventSuspect && t.window {
			t.falseSusp[[3]string{id, fmt.Sprint(ev.Member.Generation), fmt.Sprint(ev.Member.Incarnation)}] = true
		}
	}
	if id == t.victim && ev.Member.Generation == t.victimGen && !t.crashAt.IsZero() {
		since := time.Since(t.crashAt)
		if ev.Kind == swim.EventSuspect && t.firstSusp < 0 {
			t.firstSusp = since
		}
		if ev.Kind == swim.EventDead {
			if t.firstDead < 0 {
				t.firstDead = since
			}
			t.deadSeen[i] = true
			if len(t.deadSeen) == t.n-1 && t.allDead < 0 {
				t.allDead = since
			}
		}
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func msOrDash(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprint(d.Milliseconds())
}

func main() {
	flag.Parse()
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	for r := range *flagRepeat {
		if err := runOnce(r); err != nil {
			fmt.Fprintln(os.Stderr, "swimbench:", err)
			os.Exit(1)
		}
	}
}

func runOnce(rep int) error {
	n := *flagN
	cfg := swim.LANConfig()
	if *flagProfile == "fast" {
		cfg.ProbeInterval, cfg.ProbeTimeout = 200*time.Millisecond, 100*time.Millisecond
		cfg.GossipInterval = 100 * time.Millisecond
		cfg.PushPullInterval = 15 * time.Second
	} else if *flagProfile != "lan" {
		return fmt.Errorf("unknown profile %q", *flagProfile)
	}
	if *flagProbe > 0 {
		cfg.ProbeInterval, cfg.ProbeTimeout = *flagProbe, *flagProbe/2
	}
	cfg.ClusterID = 1
	t := &tracker{n: n, live: make([]int, n), fullAt: make([]time.Duration, n), converged: -1, crashed: map[string]bool{},
		firstSusp: -1, firstDead: -1, allDead: -1, deadSeen: map[int]bool{}, falseDead: map[string]bool{}, falseSusp: map[[3]string]bool{}}
	for i := range t.fullAt {
		t.fullAt[i] = -1
	}
	drivers := make([]*swim.Driver, n)
	defer func() {
		for _, d := range drivers {
			if d != nil {
				d.Close()
			}
		}
	}()
	// Create every member first (not joined), then join them all at once,
	// as the memberlist harness does.
	var seed string
	t.start = time.Now()
	for i := range n {
		c := cfg
		c.NodeID = fmt.Sprintf("m%d", i)
		c.Generation = uint64(rep + 1)
		c.Seed = uint64(i + 1)
		i := i
		dc := swim.DriverConfig{Node: c, OnEvent: func(ev swim.Event) { t.on(i, ev) }}
		d, err := swim.Listen("127.0.0.1:0", dc, netio.UDPConfig{})
		if err != nil {
			return err
		}
		drivers[i] = d
		if i == 0 {
			seed = d.Self().SwimAddr
		}
	}
	t.mu.Lock()
	t.start = time.Now()
	t.mu.Unlock()
	for i := 1; i < n; i++ {
		drivers[i].Join([]string{seed})
	}
	deadline := time.Now().Add(*flagJoinTO)
	for {
		t.mu.Lock()
		conv := t.converged
		t.mu.Unlock()
		if conv >= 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var ppFail, qDrop, malformed, readErr uint64
	for _, d := range drivers {
		s := d.Stats()
		ppFail += s.Core.PushPullFailures
		qDrop += s.Core.QueueDropped
		malformed += s.Core.DropMalformed
		readErr += s.ReadErrors
	}
	fmt.Fprintf(os.Stderr, "join: push-pull failures %d, queue drops %d, malformed %d, read errors %d\n", ppFail, qDrop, malformed, readErr)
	t.mu.Lock()
	conv := t.converged
	fa := slices.Clone(t.fullAt)
	t.mu.Unlock()
	slices.Sort(fa)
	p := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(n))) - 1
		return fa[max(0, i)]
	}
	time.Sleep(*flagWarmup)

	// Steady window.
	sum := func() (pk, by, pp uint64) {
		for _, d := range drivers {
			if d == nil {
				continue
			}
			s := d.Stats()
			pk += s.PacketsOut
			by += s.BytesOut
			pp += s.PushPullsSent
		}
		return
	}
	pk0, by0, pp0 := sum()
	cpu0, wall0 := cpuTime(), time.Now()
	t.mu.Lock()
	t.window = true
	t.mu.Unlock()
	time.Sleep(*flagDuration)
	pk1, by1, pp1 := sum()
	cpu1, wall := cpuTime(), time.Since(wall0)
	t.mu.Lock()
	t.window = false
	fp, fs := len(t.falseDead), len(t.falseSusp)
	t.mu.Unlock()
	secs := wall.Seconds()
	msgs := float64(pk1-pk0+pp1-pp0) / float64(n) / secs
	bytesPer := float64(by1-by0) / float64(n) / secs
	cpuPct := 100 * (cpu1 - cpu0).Seconds() / secs

	// Crash member n/2 with no goodbye.
	if !*flagSkipDet {
		v := n / 2
		t.mu.Lock()
		t.victim = drivers[v].Self().ID
		t.victimGen = drivers[v].Self().Generation
		t.crashed[t.victim] = true
		t.crashAt = time.Now()
		t.mu.Unlock()
		drivers[v].Close()
		drivers[v] = nil
		dl := time.Now().Add(*flagDetTO)
		for time.Now().Before(dl) {
			t.mu.Lock()
			done := t.allDead >= 0
			t.mu.Unlock()
			if done {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Printf("RESULT peer=shoal-swim profile=%s n=%d join_converge_ms=%s join_p50_ms=%s join_p90_ms=%s detect_first_ms=%s detect_first_dead_ms=%s detect_all_ms=%s msgs_per_member_s=%.2f bytes_per_member_s=%.0f cpu_pct=%.1f false_positives=%d false_suspects=%d steady_s=%.0f\n",
		*flagProfile, n, msOrDash(conv), msOrDash(p(0.5)), msOrDash(p(0.9)), msOrDash(t.firstSusp), msOrDash(t.firstDead), msOrDash(t.allDead),
		msgs, bytesPer, cpuPct, fp, fs, secs)
	return nil
}
