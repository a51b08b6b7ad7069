//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runJSON runs clusterbench with args and -json -dir DIR, and decodes its
// one line of output into v. It checks that no process started with DIR
// in its command line is left once the run is over.
func runJSON(t *testing.T, v any, args ...string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "cluster")
	args = append(args, "-json", "-dir", dir)
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	t.Logf("clusterbench %s:\n%s%s", strings.Join(args, " "), errOut.String(), out.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	if strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("want one line of JSON, got %q", out.String())
	}
	if err := json.Unmarshal(out.Bytes(), v); err != nil {
		t.Fatalf("bad JSON: %v", err)
	}
	if left := processesWith(dir); len(left) > 0 {
		t.Fatalf("processes left running: %v", left)
	}
	for _, id := range []string{"n1", "n2", "n3"} {
		if _, err := os.Stat(filepath.Join(dir, id+".log")); err != nil {
			t.Errorf("the node log kept in -dir: %v", err)
		}
	}
}

// processesWith lists the pids whose command line mentions s.
func processesWith(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(s)) {
			out = append(out, e.Name())
		}
	}
	return out
}

func TestIdleEndToEnd(t *testing.T) {
	var r idleReport
	runJSON(t, &r, "-mode", "idle", "-nodes", "3", "-shards", "16", "-topics", "10", "-window", "2s")
	if r.Mode != "idle" || r.Nodes != 3 || r.Shards != 16 || r.Topics != 10 || len(r.PerNode) != 3 {
		t.Fatalf("report: %+v", r)
	}
	owned := 0
	for _, n := range r.PerNode {
		owned += n.TopicsOwned
		if n.RSSBytes == 0 || n.CPUPct < 0 || n.LeaseMsgsPerS <= 0 || n.LeaseBytesPerS <= 0 || n.FramesPerS <= 0 {
			t.Errorf("node figures: %+v", n)
		}
		if n.LinkBytesPerS != nil {
			t.Errorf("link bytes without -netns: %+v", n)
		}
	}
	if owned != 10 {
		t.Errorf("%d topics owned, want 10", owned)
	}
	if r.Note == "" || r.LinkBytesPerSSum != nil {
		t.Errorf("note %q, link sum %v", r.Note, r.LinkBytesPerSSum)
	}
}

func TestFailoverEndToEnd(t *testing.T) {
	var r failoverReport
	runJSON(t, &r, "-mode", "failover", "-fault", "kill", "-trials", "1", "-shards", "16")
	if r.Mode != "failover" || r.Fault != "kill" || r.Trials != 1 || r.Shards != 16 || r.Preset != "fast" || len(r.TrialResults) != 1 {
		t.Fatalf("report: %+v", r)
	}
	tr := r.TrialResults[0]
	if tr.Victim != "n1" || len(tr.Topics) != 4 {
		t.Fatalf("trial: %+v", tr)
	}
	led := false
	for _, x := range tr.Topics {
		if x.Acks == 0 || x.Epoch == 0 || x.LastEpoch < x.Epoch || x.UnwritableMs <= 0 || x.Leader == "" {
			t.Errorf("topic: %+v", x)
		}
		led = led || x.Leader == "n1"
	}
	if led != tr.VictimLed || (r.TrialsVictimLed == 1) != led {
		t.Errorf("victim led: %v, trial %v, run %d", led, tr.VictimLed, r.TrialsVictimLed)
	}
	if r.TopicsLed > r.TopicsFailedOver || (r.TopicsLed > 0) != (r.FailoverLedMaxMs > 0) {
		t.Errorf("victim-led split: %+v", r)
	}
	if r.TopicsFailedOver+r.TopicsMovedBefore+countNil(tr.Topics) != 4 {
		t.Errorf("topics do not add up: %+v", r)
	}
}

func countNil(ts []topicResult) int {
	n := 0
	for _, x := range ts {
		if x.FailoverMs == nil {
			n++
		}
	}
	return n
}

// TestMassEndToEnd kills the owner of a few hundred topics and checks
// that the probe led by the watch of the moves had every topic take a
// produce elsewhere.
func TestMassEndToEnd(t *testing.T) {
	var r massReport
	runJSON(t, &r, "-mode", "mass", "-nodes", "3", "-shards", "16", "-topics", "300", "-trials", "1")
	if r.Mode != "mass" || r.Probe != "moved" || r.Topics != 300 || len(r.TrialResults) != 1 {
		t.Fatalf("report: %+v", r)
	}
	tr := r.TrialResults[0]
	if tr.Victim != "n1" || tr.NotWritten != 0 || tr.AllWritableS <= 0 || tr.Produces < 300 || tr.OpenedS <= 0 {
		t.Fatalf("trial: %+v", tr)
	}
}

// TestVolumeEndToEnd fills a small cluster, kills every node at once and
// checks that the restarted cluster serves and lists every topic as
// before.
func TestVolumeEndToEnd(t *testing.T) {
	var r volumeReport
	runJSON(t, &r, "-mode", "volume", "-nodes", "3", "-shards", "16", "-topics", "3000", "-preset", "fast",
		"-lookup-window", "1s", "-settle", "1s")
	if r.Mode != "volume" || r.Topics != 3000 || r.Replicas != 3 || len(r.PerNode) != 3 || r.FillS <= 0 {
		t.Fatalf("report: %+v", r)
	}
	owned := 0
	for _, n := range r.PerNode {
		owned += n.TopicsOwned
		if n.PeakRSSAssigning == 0 || n.RSSAtRest == 0 || n.RSSAfterRestart == 0 || n.BytesPerTopicReplica <= 0 ||
			n.HeapAllocAtRest == nil || n.HeapAllocAfterRestart == nil {
			t.Errorf("node figures: %+v", n)
		}
	}
	if owned != 3000 {
		t.Errorf("%d topics owned, want 3000", owned)
	}
	for _, l := range []volumeLookups{r.LookupBaseline, r.LookupFull} {
		if l.Topics != 3000 || l.Lookups == 0 || l.P50Ms <= 0 || l.P999Ms < l.P50Ms {
			t.Errorf("lookups: %+v", l)
		}
	}
	if r.Listed != 3000 || r.ListMismatch || r.Relisted != 3000 || r.RelistMismatch || r.Lost != 0 {
		t.Errorf("listings: %d before, %d after, %d lost", r.Listed, r.Relisted, r.Lost)
	}
	if r.RestartSampled != 1000 || r.RestartServingS <= 0 ||
		r.RestartServingS != max(r.RestartReadyS, r.RestartSampleS, r.RestartAssignS) {
		t.Errorf("restart: %+v", r)
	}
}
