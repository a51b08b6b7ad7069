package main

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/shoalmq/shoal/node/status"
)

// leafFields lists the dotted paths of every non-struct field of t.
func leafFields(t reflect.Type, prefix string) []string {
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, leafFields(f.Type, prefix+f.Name+".")...)
			continue
		}
		out = append(out, prefix+f.Name)
	}
	return out
}

// TestMetricsCoverStats keeps the metrics table and status.Stats in step:
// every counter the node keeps is exported (or listed in notExported with
// a reason), and every metric reads a numeric field that exists.
func TestMetricsCoverStats(t *testing.T) {
	exported := map[string]bool{}
	names := map[string]metric{}
	for _, m := range metrics {
		if exported[m.field] {
			t.Errorf("%s exported twice", m.field)
		}
		exported[m.field] = true
		if _, err := statsField(reflect.ValueOf(status.Stats{}), m.field); err != nil {
			t.Error(err)
		}
		if prev, ok := names[m.name]; ok && (prev.reason == "" || m.reason == "" || prev.help != m.help || prev.kind != m.kind) {
			t.Errorf("metric %s declared twice with different shapes", m.name)
		}
		names[m.name] = m
		if m.kind == counter && !strings.HasSuffix(m.name, "_total") {
			t.Errorf("counter %s should end in _total", m.name)
		}
	}
	for _, f := range leafFields(reflect.TypeFor[status.Stats](), "") {
		if !exported[f] && notExported[f] == "" {
			t.Errorf("status.Stats.%s is not exported as a metric", f)
		}
	}
}

// TestDocsListEveryMetric: the metric tables of docs/operations.md name
// every metric the node exports.
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"shoal_build_info", "shoal_generation", "shoal_members_alive", "shoal_shards_hosted", "shoal_ready",
		metricRequestDuration, metricRequestsByCode, metricForwardDuration, metricRaftCommit, metricStorageSync,
		metricLeaseRoundTrip, metricSnapshotDuration}
	for _, m := range metrics {
		names = append(names, "shoal_"+m.name)
	}
	for _, name := range names {
		if !strings.Contains(string(b), "| `"+name+"` |") {
			t.Errorf("docs/operations.md has no row for %s", name)
		}
	}
}
