package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/router"
)

func TestJSONHasTheReportedKeys(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-nodes", "10", "-shards", "512", "-rf", "3", "-racks", "3", "-json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, out.String())
	}
	for _, k := range []string{"replicas_max_over_mean", "leaders_max_over_mean", "min_racks_per_shard",
		"join_moved_fraction", "join_min_fraction", "leave_moved_fraction", "leave_min_fraction",
		"replicas_floor_max_over_mean", "replicas_max_over_ideal"} {
		if _, ok := got[k]; !ok {
			t.Errorf("missing key %q", k)
		}
	}
	if got["min_racks_per_shard"].(float64) != 3 || got["leave_moved_not_holding"].(float64) != 0 || got["join_moved_not_gaining"].(float64) != 0 {
		t.Fatalf("placement broke a rule: %s", out.String())
	}
	// Racks of 4, 3 and 3 nodes: a node of a 3-node rack holds a third of
	// all shards, 10/9 of the mean.
	if f := got["replicas_floor_max_over_mean"].(float64); math.Abs(f-10.0/9) > 1e-9 {
		t.Fatalf("floor %v, want 10/9", f)
	}
	if got["leave_moved_fraction"] != got["leave_min_fraction"] {
		t.Fatalf("leave moved more than the shards that held the leaver: %s", out.String())
	}
}

func TestHumanLineAndBadFlags(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-nodes", "6", "-shards", "128", "-walk", "tokens", "-vnodes", "32"}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "walk=tokens nodes=6 shards=128") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("human line: %q", out.String())
	}
	for _, args := range [][]string{{"-nodes", "1"}, {"-walk", "spiral"}, {"-shards", "0"}, {"-sweep", "x"}, {"-slack", "-1"}} {
		if err := run(args, &bytes.Buffer{}); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// The ideal loads are the fair share when racks are equal, and favour the
// nodes of small racks otherwise, always summing to shards × rf.
func TestIdealLoads(t *testing.T) {
	cases := []struct {
		sizes  []int
		rf     int
		shards int
		want   map[int]float64 // rack index -> per-node load
	}{
		{[]int{3, 3, 3}, 3, 900, map[int]float64{0: 300, 1: 300, 2: 300}},
		{[]int{4, 3, 3}, 3, 1200, map[int]float64{0: 300, 1: 400, 2: 400}},
		{[]int{1, 5}, 2, 600, map[int]float64{0: 600, 1: 120}},
		{[]int{2, 2, 2, 2}, 3, 800, map[int]float64{0: 300, 1: 300, 2: 300, 3: 300}},
		{[]int{1, 1, 6}, 3, 600, map[int]float64{0: 600, 1: 600, 2: 100}},
		{[]int{2, 4}, 3, 600, map[int]float64{0: 300, 1: 300}},
	}
	for _, c := range cases {
		var ms []router.Member
		for r, n := range c.sizes {
			for i := range n {
				ms = append(ms, router.Member{ID: fmt.Sprintf("r%d-n%d", r, i), Rack: fmt.Sprintf("r%d", r)})
			}
		}
		got := idealLoads(ms, c.shards, c.rf)
		sum := 0.0
		for _, m := range ms {
			var r int
			fmt.Sscanf(m.Rack, "r%d", &r)
			if math.Abs(got[m.ID]-c.want[r]) > 1e-6 {
				t.Errorf("sizes %v rf %d: %s load %.3f, want %.3f", c.sizes, c.rf, m.ID, got[m.ID], c.want[r])
			}
			sum += got[m.ID]
		}
		if math.Abs(sum-float64(c.shards*c.rf)) > 1e-6 {
			t.Errorf("sizes %v rf %d: loads sum to %.3f, want %d", c.sizes, c.rf, sum, c.shards*c.rf)
		}
	}
}
