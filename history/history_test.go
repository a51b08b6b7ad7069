package history

import (
	"strings"
	"testing"
	"time"
)

var t0 = time.Unix(1000, 0)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func op(kind Kind, topic string, start, end int, epoch uint64, node string) Op {
	return Op{Client: "c", Kind: kind, Topic: topic, Start: at(start), End: at(end), OK: true, Epoch: epoch, Node: node}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name  string
		ops   []Op
		final map[string]Final
		want  []string // rule prefixes, in order
	}{
		{"a clean move", []Op{
			op(Produce, "t", 0, 10, 1, "n1"),
			op(Produce, "t", 20, 30, 2, "n2"),
			op(Produce, "t", 25, 40, 2, "n2"),
		}, nil, nil},
		{"writes that overlap in time may be at either epoch", []Op{
			op(Produce, "t", 0, 30, 2, "n2"),
			op(Produce, "t", 10, 40, 1, "n1"), // began before the epoch-2 write completed
		}, nil, nil},
		{"the old owner acknowledges after the new one did", []Op{
			op(Produce, "t", 0, 10, 2, "n2"),
			op(Produce, "t", 11, 12, 1, "n1"),
		}, nil, []string{"two owners"}},
		{"other topics do not count", []Op{
			op(Produce, "t", 0, 10, 2, "n2"),
			op(Produce, "u", 11, 12, 1, "n1"),
		}, nil, nil},
		{"a failed write does not count", []Op{
			op(Produce, "t", 0, 10, 2, "n2"),
			{Client: "c", Kind: Produce, Topic: "t", Start: at(11), End: at(12), Epoch: 1, Err: "timeout"},
		}, nil, nil},
		{"a lookup at an older epoch after a newer answer", []Op{
			op(Lookup, "t", 0, 10, 3, "n1"),
			op(Lookup, "t", 11, 12, 2, "n2"),
		}, nil, []string{"epoch went backwards"}},
		{"a write below a completed revoke", []Op{
			op(Revoke, "t", 0, 10, 3, "n1"),
			op(Produce, "t", 11, 12, 2, "n2"),
		}, nil, []string{"epoch went backwards"}},
		{"an acknowledged assign above the final state is lost", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
		}, map[string]Final{"t": {Epoch: 3}}, []string{"assignment lost"}},
		{"a revoked topic may be gone", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			op(Revoke, "t", 20, 30, 5, "n1"),
		}, map[string]Final{"t": {Gone: true}}, nil},
		{"a revoke with no answer may have taken effect", []Op{
			op(Assign, "t", 20, 30, 4, "n1"),
			{Client: "c", Kind: Revoke, Topic: "t", Start: at(0), End: at(10), Err: "timeout"},
		}, map[string]Final{"t": {Gone: true}}, nil},
		{"a gone topic whose assign was never revoked is lost", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Check(tt.ops, tt.final)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d violations %v, want %v", len(got), got, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i].Rule, w) {
					t.Fatalf("violation %d: %q, want %q", i, got[i].Rule, w)
				}
			}
		})
	}
}

func TestSummary(t *testing.T) {
	got := Summary([]Op{op(Produce, "t", 0, 1, 1, "n1"), op(Produce, "t", 0, 1, 1, "n1"), {Kind: Produce}, op(Assign, "t", 0, 1, 1, "n1")})
	if got != "2 produce acknowledged, 1 produce failed, 1 assign acknowledged" {
		t.Fatalf("summary %q", got)
	}
}
