package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
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
