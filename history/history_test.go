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

// unknown is an operation that got no answer.
func unknown(kind Kind, topic string, start, end int) Op {
	return Op{Client: "c", Kind: kind, Topic: topic, Start: at(start), End: at(end), Err: "timed out", Unknown: true}
}

// notFound is an operation refused because topic is not assigned.
func notFound(kind Kind, topic string, start, end int) Op {
	return Op{Client: "c", Kind: kind, Topic: topic, Start: at(start), End: at(end), Err: "NotFound: not assigned", NotFound: true}
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
			unknown(Revoke, "t", 0, 10),
		}, map[string]Final{"t": {Gone: true}}, nil},
		{"a gone topic whose assign was never revoked is lost", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
		{"a refused revoke excuses nothing", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Revoke, "t", 20, 30),
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
		{"a revoke refused for another reason excuses nothing", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			{Client: "c", Kind: Revoke, Topic: "t", Start: at(20), End: at(30), Err: "BadRequest: no"},
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
		{"a revoke with no answer sent after the final read excuses nothing", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			unknown(Revoke, "t", 50, 60),
		}, map[string]Final{"t": {Gone: true, At: at(40)}}, []string{"assignment lost"}},
		{"a revoke with no answer sent after the topic was seen gone excuses nothing", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Lookup, "t", 20, 30),
			unknown(Revoke, "t", 40, 50),
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
		{"an acknowledged revoke begun after the topic was seen gone excuses nothing", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Lookup, "t", 20, 30),
			op(Revoke, "t", 40, 50, 5, "n1"),
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
		{"a topic seen gone is lost even if it comes back", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Revoke, "t", 20, 30),
			op(Assign, "t", 40, 50, 6, "n1"),
		}, map[string]Final{"t": {Epoch: 6}}, []string{"assignment lost"}},
		{"a revoke with no answer sent before the topic was seen gone may have taken effect", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			unknown(Revoke, "t", 15, 18),
			notFound(Lookup, "t", 20, 30),
			op(Assign, "t", 40, 50, 6, "n1"),
		}, map[string]Final{"t": {Epoch: 6}}, nil},
		{"an acknowledged revoke racing the lookup that saw the topic gone", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Lookup, "t", 20, 30),
			op(Revoke, "t", 25, 35, 5, "n1"),
		}, map[string]Final{"t": {Gone: true}}, nil},
		{"a revoke at a lower epoch came before the assign", []Op{
			op(Revoke, "t", 0, 10, 3, "n1"),
			op(Assign, "t", 20, 30, 4, "n1"),
			notFound(Lookup, "t", 40, 50),
		}, map[string]Final{"t": {Gone: true}}, []string{"assignment lost"}},
		{"only a leader's answer shows the topic gone, not a data request's", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Fetch, "t", 20, 30),
		}, map[string]Final{"t": {Epoch: 4}}, nil},
		{"a not-found answer to a request begun before the assign completed", []Op{
			op(Assign, "t", 0, 10, 4, "n1"),
			notFound(Lookup, "t", 5, 15),
		}, map[string]Final{"t": {Epoch: 4}}, nil},
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
