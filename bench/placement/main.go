// Command placement measures how the router's ring places shards: balance of
// replicas and preferred leaders over nodes, rack spread, and how many shards
// move when one node joins or leaves, against the least that could.
//
//	go run ./bench/placement -nodes 10 -shards 4096 -rf 3 -racks 3 -json
//
// The walk is the router's default (rendezvous) unless -walk tokens picks
// the token ring. Nodes are named n1..nN and put in racks r0..r(K-1) round-robin. The join
// adds node n(N+1) in the next rack of the round-robin; the leave removes
// nN. -trials T repeats the run on T differently named member sets and
// reports the worst of each figure; -sweep 64,256,1024 prints one human line
// per token count instead.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shoalmq/shoal/router"
)

type params struct {
	nodes, shards, rf, racks, vnodes, trials int
	walk                                     router.Walk
	slack                                    float64
}

// result is the JSON output; every ratio is max over nodes divided by the
// mean, and every fraction is a share of all shards.
type result struct {
	Nodes  int    `json:"nodes"`
	Shards int    `json:"shards"`
	RF     int    `json:"rf"`
	Racks  int    `json:"racks"`
	Walk   string `json:"walk"`
	VNodes int    `json:"vnodes"`
	Trials int    `json:"trials"`
	// The ring's ReplicaSlack: 0 is the plain walk.
	ReplicaSlack float64 `json:"replica_slack"`

	ReplicasMaxOverMean float64 `json:"replicas_max_over_mean"`
	// The least replicas max/mean any placement can reach while every shard
	// spans min(rf, racks) racks: with unequal racks the nodes of the
	// smaller racks must carry more.
	ReplicasFloorMaxOverMean float64 `json:"replicas_floor_max_over_mean"`
	// Max over nodes of replicas held / that node's share in the best
	// rack-respecting placement.
	ReplicasMaxOverIdeal float64 `json:"replicas_max_over_ideal"`
	LeadersMaxOverMean   float64 `json:"leaders_max_over_mean"`
	// The least leaderships of a node over the mean (the one ratio that is
	// min, not max).
	LeadersMinOverMean float64 `json:"leaders_min_over_mean"`
	MinRacksPerShard   int     `json:"min_racks_per_shard"`
	WantRacksPerShard  int     `json:"want_racks_per_shard"`

	// Shards whose replica set changes when one node joins, and the least
	// that could: the new node's share in the best rack-respecting placement.
	JoinMovedFraction float64 `json:"join_moved_fraction"`
	JoinMinFraction   float64 `json:"join_min_fraction"`
	JoinMovedOverMin  float64 `json:"join_moved_over_min"`
	// Shards whose replica set changes when one node leaves, and the least
	// that could: the shards that held it.
	LeaveMovedFraction float64 `json:"leave_moved_fraction"`
	LeaveMinFraction   float64 `json:"leave_min_fraction"`
	// Shards that moved on the leave without holding the leaving node.
	LeaveMovedNotHolding int `json:"leave_moved_not_holding"`
	// Shards that moved on the join without gaining the new node.
	JoinMovedNotGaining int `json:"join_moved_not_gaining"`
	// Shards whose preferred leader changes on the join and on the leave.
	JoinLeadersMovedFraction  float64 `json:"join_leaders_moved_fraction"`
	LeaveLeadersMovedFraction float64 `json:"leave_leaders_moved_fraction"`

	BuildMicros     float64 `json:"build_us"`
	PlacementMicros float64 `json:"placement_us"`
}

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "placement:", err)
		os.Exit(1)
	}
}

func run(args []string, w io.Writer) error {
	fs := flag.NewFlagSet("placement", flag.ContinueOnError)
	var p params
	fs.IntVar(&p.nodes, "nodes", 10, "number of nodes")
	fs.IntVar(&p.shards, "shards", 4096, "number of shards")
	fs.IntVar(&p.rf, "rf", 3, "replication factor")
	fs.IntVar(&p.racks, "racks", 3, "number of racks (nodes assigned round-robin)")
	fs.IntVar(&p.vnodes, "vnodes", router.DefaultVNodes, "ring tokens per node (-walk tokens)")
	walk := fs.String("walk", "rendezvous", "replica walk: rendezvous or tokens")
	fs.IntVar(&p.trials, "trials", 1, "member sets to try (worst figure reported)")
	fs.Float64Var(&p.slack, "slack", 0, "replica load slack (router.RingConfig.ReplicaSlack); 0: the plain walk")
	asJSON := fs.Bool("json", false, "print one JSON object")
	sweep := fs.String("sweep", "", "comma-separated token counts: print one line per count (implies -walk tokens)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *walk {
	case "rendezvous":
		p.walk = router.WalkRendezvous
	case "tokens":
		p.walk = router.WalkTokens
	default:
		return fmt.Errorf("unknown -walk %q", *walk)
	}
	if p.nodes < 2 || p.shards < 1 || p.rf < 1 || p.racks < 1 || p.trials < 1 || p.shards > 1<<24 {
		return fmt.Errorf("need nodes >= 2, shards in [1, 2^24], rf, racks, trials >= 1")
	}
	if !(p.slack >= 0 && p.slack <= router.MaxReplicaSlack) {
		return fmt.Errorf("need slack in [0, %d]", router.MaxReplicaSlack)
	}
	if *sweep != "" {
		for _, f := range strings.Split(*sweep, ",") {
			v, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("sweep: %w", err)
			}
			q := p
			q.vnodes, q.walk = v, router.WalkTokens
			res, err := measure(q)
			if err != nil {
				return err
			}
			human(w, res)
		}
		return nil
	}
	res, err := measure(p)
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(w)
		return enc.Encode(res)
	}
	human(w, res)
	return nil
}

func human(w io.Writer, r result) {
	fmt.Fprintf(w, "walk=%s nodes=%d shards=%d rf=%d racks=%d vnodes=%d slack=%g trials=%d: replicas max/mean %.3f (floor %.3f, max/ideal %.3f) leaders max/mean %.3f min/mean %.3f racks/shard min %d (want %d) join moved %.4f min %.4f (x%.3f) leave moved %.4f min %.4f (not holding %d) leaders moved join %.3f leave %.3f build %.0fus placement %.0fus\n",
		r.Walk, r.Nodes, r.Shards, r.RF, r.Racks, r.VNodes, r.ReplicaSlack, r.Trials,
		r.ReplicasMaxOverMean, r.ReplicasFloorMaxOverMean, r.ReplicasMaxOverIdeal,
		r.LeadersMaxOverMean, r.LeadersMinOverMean, r.MinRacksPerShard, r.WantRacksPerShard,
		r.JoinMovedFraction, r.JoinMinFraction, r.JoinMovedOverMin,
		r.LeaveMovedFraction, r.LeaveMinFraction, r.LeaveMovedNotHolding,
		r.JoinLeadersMovedFraction, r.LeaveLeadersMovedFraction,
		r.BuildMicros, r.PlacementMicros)
}

func members(prefix string, n, racks int) []router.Member {
	ms := make([]router.Member, n)
	for i := range ms {
		ms[i] = router.Member{ID: fmt.Sprintf("%sn%d", prefix, i+1), Rack: fmt.Sprintf("r%d", i%racks)}
	}
	return ms
}

// measure runs p.trials member sets and keeps the worst of each figure.
func measure(p params) (result, error) {
	var worst result
	for t := range p.trials {
		prefix := ""
		if t > 0 {
			prefix = fmt.Sprintf("t%d-", t)
		}
		r, err := measureOne(p, prefix)
		if err != nil {
			return result{}, err
		}
		if t == 0 {
			worst = r
			continue
		}
		worst.ReplicasMaxOverMean = max(worst.ReplicasMaxOverMean, r.ReplicasMaxOverMean)
		worst.ReplicasMaxOverIdeal = max(worst.ReplicasMaxOverIdeal, r.ReplicasMaxOverIdeal)
		worst.LeadersMaxOverMean = max(worst.LeadersMaxOverMean, r.LeadersMaxOverMean)
		worst.LeadersMinOverMean = min(worst.LeadersMinOverMean, r.LeadersMinOverMean)
		worst.MinRacksPerShard = min(worst.MinRacksPerShard, r.MinRacksPerShard)
		if r.JoinMovedOverMin > worst.JoinMovedOverMin {
			worst.JoinMovedFraction, worst.JoinMinFraction, worst.JoinMovedOverMin = r.JoinMovedFraction, r.JoinMinFraction, r.JoinMovedOverMin
		}
		worst.JoinLeadersMovedFraction = max(worst.JoinLeadersMovedFraction, r.JoinLeadersMovedFraction)
		worst.LeaveLeadersMovedFraction = max(worst.LeaveLeadersMovedFraction, r.LeaveLeadersMovedFraction)
		worst.LeaveMovedNotHolding = max(worst.LeaveMovedNotHolding, r.LeaveMovedNotHolding)
		worst.JoinMovedNotGaining = max(worst.JoinMovedNotGaining, r.JoinMovedNotGaining)
		worst.BuildMicros = max(worst.BuildMicros, r.BuildMicros)
		worst.PlacementMicros = max(worst.PlacementMicros, r.PlacementMicros)
	}
	worst.Trials = p.trials
	return worst, nil
}

func measureOne(p params, prefix string) (result, error) {
	ms := members(prefix, p.nodes, p.racks)
	cfg := router.RingConfig{Walk: p.walk, VNodes: p.vnodes, ReplicaSlack: p.slack}
	start := time.Now()
	ring, err := router.NewRing(ms, cfg)
	if err != nil {
		return result{}, err
	}
	build := time.Since(start)
	shards := uint32(p.shards)
	start = time.Now()
	base := rows(ring.Placement(shards, p.rf))
	place := time.Since(start)

	res := result{
		Nodes: p.nodes, Shards: p.shards, RF: p.rf, Racks: p.racks, VNodes: ring.VNodes(), Walk: p.walk.String(), ReplicaSlack: p.slack,
		WantRacksPerShard:  min(p.rf, ring.Racks()),
		MinRacksPerShard:   p.racks,
		LeadersMinOverMean: math.Inf(1),
		BuildMicros:        float64(build.Nanoseconds()) / 1e3,
		PlacementMicros:    float64(place.Nanoseconds()) / 1e3,
	}
	rackOf := map[string]string{}
	for _, m := range ms {
		rackOf[m.ID] = m.Rack
	}
	replicas := map[string]int{}
	leaders := map[string]int{}
	for _, row := range base {
		if len(row) == 0 {
			continue
		}
		leaders[row[0]]++
		seen := map[string]bool{}
		for _, id := range row {
			replicas[id]++
			seen[rackOf[id]] = true
		}
		res.MinRacksPerShard = min(res.MinRacksPerShard, len(seen))
	}
	rf := min(p.rf, p.nodes)
	meanReplicas := float64(p.shards*rf) / float64(p.nodes)
	meanLeaders := float64(p.shards) / float64(p.nodes)
	ideal := idealLoads(ring, p.shards, rf)
	for _, m := range ms {
		res.ReplicasMaxOverMean = max(res.ReplicasMaxOverMean, float64(replicas[m.ID])/meanReplicas)
		res.ReplicasFloorMaxOverMean = max(res.ReplicasFloorMaxOverMean, ideal[m.ID]/meanReplicas)
		res.ReplicasMaxOverIdeal = max(res.ReplicasMaxOverIdeal, float64(replicas[m.ID])/ideal[m.ID])
		res.LeadersMaxOverMean = max(res.LeadersMaxOverMean, float64(leaders[m.ID])/meanLeaders)
		res.LeadersMinOverMean = min(res.LeadersMinOverMean, float64(leaders[m.ID])/meanLeaders)
	}

	// One node joins.
	joiner := router.Member{ID: fmt.Sprintf("%sn%d", prefix, p.nodes+1), Rack: fmt.Sprintf("r%d", p.nodes%p.racks)}
	joined := append(slices.Clone(ms), joiner)
	jr, err := router.NewRing(joined, cfg)
	if err != nil {
		return result{}, err
	}
	after := rows(jr.Placement(shards, p.rf))
	moved := 0
	res.JoinLeadersMovedFraction = leadersMoved(base, after)
	for s := range base {
		if !sameSet(base[s], after[s]) {
			moved++
			if !slices.Contains(after[s], joiner.ID) {
				res.JoinMovedNotGaining++
			}
		}
	}
	res.JoinMovedFraction = float64(moved) / float64(p.shards)
	res.JoinMinFraction = idealLoads(jr, p.shards, p.rf)[joiner.ID] / float64(p.shards)
	res.JoinMovedOverMin = res.JoinMovedFraction / res.JoinMinFraction

	// One node leaves.
	leaver := ms[len(ms)-1]
	lr, err := router.NewRing(ms[:len(ms)-1], cfg)
	if err != nil {
		return result{}, err
	}
	after = rows(lr.Placement(shards, p.rf))
	res.LeaveLeadersMovedFraction = leadersMoved(base, after)
	moved, held := 0, 0
	for s := range base {
		holds := slices.Contains(base[s], leaver.ID)
		if holds {
			held++
		}
		if !sameSet(base[s], after[s]) {
			moved++
			if !holds {
				res.LeaveMovedNotHolding++
			}
		}
	}
	res.LeaveMovedFraction = float64(moved) / float64(p.shards)
	res.LeaveMinFraction = float64(held) / float64(p.shards)
	return res, nil
}

func rows(p *router.Placement) [][]string {
	out := make([][]string, p.Shards())
	for s := range out {
		out[s] = p.Replicas(uint32(s), nil)
	}
	return out
}

func leadersMoved(a, b [][]string) float64 {
	n := 0
	for s := range a {
		if len(a[s]) > 0 && len(b[s]) > 0 && a[s][0] != b[s][0] {
			n++
		}
	}
	return float64(n) / float64(len(a))
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// idealLoads returns each node's replica count in the most even placement
// that respects the rack rule (router's Ring.FairShares), by node id.
func idealLoads(r *router.Ring, shards, rf int) map[string]float64 {
	out := map[string]float64{}
	for i, share := range r.FairShares(uint32(shards), rf) {
		m, _ := r.Member(i)
		out[m.ID] = share
	}
	return out
}
