// Command swimsim runs N swim cores in virtual time over a simulated
// network (loss, latency spread, crashes, pauses) and prints what the
// protocol achieved. The same flags and seed print the same bytes.
//
//	go run ./bench/swimsim -n 1000 -loss 0.05 -crash 1 -pause 1 -duration 10m -seed 7 -json
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"time"

	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/swim/simnet"
)

type result struct {
	N                   int     `json:"n"`
	Seed                uint64  `json:"seed"`
	Loss                float64 `json:"loss"`
	Preset              string  `json:"preset"`
	ProbeMs             int64   `json:"probe_ms"`
	DurationS           float64 `json:"duration_s"`
	JoinConvergeMs      int64   `json:"join_converge_ms"`
	Crashes             int     `json:"crashes"`
	Detected            int     `json:"detected"`
	DetectFirstP50Ms    int64   `json:"detect_first_p50_ms"`
	DetectFirstDeadP50  int64   `json:"detect_first_dead_p50_ms"`
	DetectAllP50Ms      int64   `json:"detect_all_p50_ms"`
	DetectAllP99Ms      int64   `json:"detect_all_p99_ms"`
	DetectAllMaxMs      int64   `json:"detect_all_max_ms"`
	DetectNodeP99Ms     int64   `json:"detect_node_p99_ms"`
	Pauses              int     `json:"pauses"`
	PausedDeclaredDead  int     `json:"paused_declared_dead"`
	FalsePositives      int     `json:"false_positives"`
	FalseDeadEvents     int     `json:"false_dead_events"`
	FalseSuspicions     int     `json:"false_suspicions"`
	MsgsPerNodeS        float64 `json:"msgs_per_node_s"`
	BytesPerNodeS       float64 `json:"bytes_per_node_s"`
	PushPullsPerNodeMin float64 `json:"pushpulls_per_node_min"`
	ShardLeaderSpreadMs int64   `json:"shardleader_spread_ms"`
	MetadataSpreadMs    int64   `json:"metadata_spread_ms"`
}

type crash struct {
	victim    int
	gen       uint64
	at        time.Duration
	firstSusp time.Duration
	firstDead time.Duration
	deadAt    map[int]time.Duration
	allDead   time.Duration
}

func main() {
	var (
		n        = flag.Int("n", 100, "nodes")
		loss     = flag.Float64("loss", 0, "datagram loss probability")
		crashes  = flag.Int("crash", 1, "nodes crashed during the steady window, one after another")
		pauses   = flag.Int("pause", 0, "nodes paused during the steady window, one after another")
		pauseFor = flag.Duration("pause-for", time.Second, "length of each pause")
		duration = flag.Duration("duration", 2*time.Minute, "steady window (virtual time)")
		warmup   = flag.Duration("warmup", 20*time.Second, "virtual time after the join before the steady window")
		seed     = flag.Uint64("seed", 1, "seed of the whole run")
		latMin   = flag.Duration("latency-min", 200*time.Microsecond, "one-way latency, lowest")
		latMax   = flag.Duration("latency-max", 5*time.Millisecond, "one-way latency, highest")
		preset   = flag.String("preset", "lan", "node config: lan | local")
		probe    = flag.Duration("probe", 0, "override ProbeInterval (ProbeTimeout becomes half)")
		asJSON   = flag.Bool("json", false, "print one JSON object")
	)
	flag.Parse()
	cfg := swim.LANConfig()
	if *preset == "local" {
		cfg = swim.LocalConfig()
	} else if *preset != "lan" {
		fmt.Fprintln(os.Stderr, "swimsim: -preset must be lan or local")
		os.Exit(2)
	}
	if *probe > 0 {
		cfg.ProbeInterval, cfg.ProbeTimeout = *probe, *probe/2
	}
	if *n < 2 || *crashes+*pauses >= *n {
		fmt.Fprintln(os.Stderr, "swimsim: need n >= 2 and crash+pause < n")
		os.Exit(2)
	}
	r, err := run(*n, *seed, *loss, *latMin, *latMax, cfg, *crashes, *pauses, *pauseFor, *warmup, *duration)
	if err != nil {
		fmt.Fprintln(os.Stderr, "swimsim:", err)
		os.Exit(1)
	}
	r.Preset = *preset
	if *asJSON {
		b, _ := json.Marshal(r)
		fmt.Println(string(b))
		return
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	fmt.Println(string(b))
}

// ms reports d in milliseconds, -1 for "never measured" (a negative d).
func ms(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return d.Milliseconds()
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func run(n int, seed uint64, loss float64, latMin, latMax time.Duration, cfg swim.Config, crashes, pauses int, pauseFor, warmup, duration time.Duration) (*result, error) {
	net, err := simnet.New(simnet.Config{N: n, Seed: seed, Loss: loss, LatencyMin: latMin, LatencyMax: latMax, Node: cfg})
	if err != nil {
		return nil, err
	}
	res := &result{N: n, Seed: seed, Loss: loss, ProbeMs: ms(cfg.ProbeInterval), DurationS: duration.Seconds(), Crashes: crashes, Pauses: pauses, JoinConvergeMs: -1, ShardLeaderSpreadMs: -1, MetadataSpreadMs: -1}

	// What each host believes live, from its events.
	liveView := make([]int, n)
	full := 0
	crashed := make([]bool, n)
	paused := make([]bool, n)
	var cr []*crash
	falseDead := map[[2]uint64]bool{}
	falseSusp := map[[3]uint64]bool{}
	var slAt, slDone, mvAt, mvDone time.Duration
	slSeen, mvSeen := 0, 0
	slStarted, mvStarted := false, false
	idOf := func(s string) int {
		var i int
		fmt.Sscanf(s, "n%d", &i)
		return i
	}
	net.OnEvent = func(h int, ev swim.Event) {
		now := net.Elapsed()
		before := liveView[h]
		switch ev.Kind {
		case swim.EventJoined:
			liveView[h]++
		case swim.EventAliveAgain:
			if ev.Prev == swim.StateDead || ev.Prev == swim.StateLeft {
				liveView[h]++
			}
		case swim.EventDead, swim.EventLeft:
			if ev.Prev == swim.StateAlive || ev.Prev == swim.StateSuspect {
				liveView[h]--
			}
		case swim.EventShardLeader:
			if slStarted {
				slSeen++
				if slSeen == n-1-crashes {
					slDone = now
				}
			}
			return
		case swim.EventMetadataVersion:
			if mvStarted {
				mvSeen++
				if mvSeen == n-1-crashes {
					mvDone = now
				}
			}
			return
		}
		if before != n-1 && liveView[h] == n-1 {
			full++
			if full == n && res.JoinConvergeMs < 0 {
				res.JoinConvergeMs = ms(now)
			}
		} else if before == n-1 && liveView[h] != n-1 {
			full--
		}
		v := idOf(ev.Member.ID)
		switch ev.Kind {
		case swim.EventSuspect:
			if !crashed[v] {
				falseSusp[[3]uint64{uint64(v), ev.Member.Generation, ev.Member.Incarnation}] = true
			}
		case swim.EventDead:
			if !crashed[v] {
				falseDead[[2]uint64{uint64(v), ev.Member.Generation}] = true
				res.FalseDeadEvents++
				if paused[v] {
					res.PausedDeclaredDead++
				}
			}
		}
		for _, c := range cr {
			if c.victim != v || ev.Member.Generation != c.gen {
				continue
			}
			if ev.Kind == swim.EventSuspect && c.firstSusp < 0 {
				c.firstSusp = now - c.at
			}
			if ev.Kind == swim.EventDead {
				if c.firstDead < 0 {
					c.firstDead = now - c.at
				}
				if _, ok := c.deadAt[h]; !ok && !crashed[h] {
					c.deadAt[h] = now - c.at
				}
			}
		}
	}
	net.JoinAll()
	// Join: run until converged or a minute.
	for res.JoinConvergeMs < 0 && net.Elapsed() < time.Minute {
		net.Run(100 * time.Millisecond)
	}
	net.Run(warmup)
	start := net.Elapsed()
	pk0, by0, pp0, ppc0 := net.Packets, net.Bytes, net.PPBytes, net.PPCount

	// The steady window: crashes and pauses spread over it, a shard
	// leader and a metadata version announced near the start.
	type action struct {
		at   time.Duration
		kind int // 0 crash, 1 pause, 2 shard leader, 3 metadata version
		who  int
	}
	var acts []action
	victims := make([]int, 0, crashes+pauses)
	rng := simnetPick(seed, n, crashes+pauses)
	victims = append(victims, rng...)
	for i := range crashes {
		acts = append(acts, action{at: start + duration*time.Duration(2*i+1)/time.Duration(2*crashes+2), kind: 0, who: victims[i]})
	}
	for i := range pauses {
		acts = append(acts, action{at: start + duration*time.Duration(2*i+1)/time.Duration(2*pauses+2) + duration/time.Duration(4*pauses+4), kind: 1, who: victims[crashes+i]})
	}
	leaderHost := 0
	for slices.Contains(victims, leaderHost) {
		leaderHost++
	}
	acts = append(acts, action{at: start + 3*time.Second, kind: 2, who: leaderHost}, action{at: start + 4*time.Second, kind: 3, who: leaderHost})
	slices.SortStableFunc(acts, func(a, b action) int { return int(a.at - b.at) })
	for _, a := range acts {
		net.RunUntil(net.Start.Add(a.at))
		h := net.Hosts[a.who]
		switch a.kind {
		case 0:
			crashed[a.who] = true
			cr = append(cr, &crash{victim: a.who, gen: h.Node.Self().Generation, at: net.Elapsed(), firstSusp: -1, firstDead: -1, allDead: -1, deadAt: map[int]time.Duration{}})
			net.Crash(a.who)
		case 1:
			paused[a.who] = true
			net.Pause(a.who, pauseFor)
		case 2:
			slStarted, slAt = true, net.Elapsed()
			h.Node.AnnounceShardLeader(1, h.Node.Self().ID, 5)
			net.Kick(a.who)
		case 3:
			mvStarted, mvAt = true, net.Elapsed()
			h.Node.SetMetadataVersion(1, 42)
			net.Kick(a.who)
		}
	}
	net.RunUntil(net.Start.Add(start + duration))
	window := (net.Elapsed() - start).Seconds()

	var firsts, firstDeads, alls, nodes []time.Duration
	for _, c := range cr {
		if c.firstSusp >= 0 {
			firsts = append(firsts, c.firstSusp)
		}
		if c.firstDead >= 0 {
			firstDeads = append(firstDeads, c.firstDead)
		}
		survivors := 0
		var last time.Duration
		for i := range n {
			if crashed[i] {
				continue
			}
			survivors++
			if d, ok := c.deadAt[i]; ok {
				nodes = append(nodes, d)
				last = max(last, d)
			}
		}
		if len(c.deadAt) >= survivors {
			// Crashes after this one are not survivors of it; count the
			// hosts alive at the end that saw it.
			res.Detected++
			alls = append(alls, last)
		}
	}
	res.DetectFirstP50Ms = ms(pct(firsts, 0.5))
	res.DetectFirstDeadP50 = ms(pct(firstDeads, 0.5))
	res.DetectAllP50Ms = ms(pct(alls, 0.5))
	res.DetectAllP99Ms = ms(pct(alls, 0.99))
	res.DetectAllMaxMs = ms(pct(alls, 1))
	res.DetectNodeP99Ms = ms(pct(nodes, 0.99))
	res.FalsePositives = len(falseDead)
	res.FalseSuspicions = len(falseSusp)
	res.MsgsPerNodeS = round2(float64(net.Packets-pk0+net.PPCount-ppc0) / float64(n) / window)
	res.BytesPerNodeS = round2(float64(net.Bytes-by0+net.PPBytes-pp0) / float64(n) / window)
	res.PushPullsPerNodeMin = round2(float64(net.PPCount-ppc0) / float64(n) / window * 60)
	if slDone > 0 {
		res.ShardLeaderSpreadMs = ms(slDone - slAt)
	}
	if mvDone > 0 {
		res.MetadataSpreadMs = ms(mvDone - mvAt)
	}
	return res, nil
}

func round2(f float64) float64 { return math.Round(f*100) / 100 }

// simnetPick chooses k distinct hosts other than host 0 (the seed),
// from the run's seed.
func simnetPick(seed uint64, n, k int) []int {
	out := make([]int, 0, k)
	x := seed*0x9e3779b97f4a7c15 + 1
	for len(out) < k {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		v := 1 + int(x%uint64(n-1))
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
