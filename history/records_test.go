package history

import (
	"math"
	"strings"
	"testing"
)

const e1, e2 = 0, 1 << 40 // the first offsets of epochs 1 and 2

// produced is a produce of value acknowledged at offset off.
func produced(start, end int, epoch uint64, node string, off uint64, value string) Op {
	o := op(Produce, "t", start, end, epoch, node)
	o.Offset = off
	o.Records = []Record{{Offset: off, Epoch: epoch, Value: value}}
	return o
}

// fetched is a fetch that read node's log from 0 to the end and got recs.
func fetched(start, end int, epoch uint64, node string, recs ...Record) Op {
	o := op(Fetch, "t", start, end, epoch, node)
	o.Next = math.MaxUint64
	o.Records = recs
	return o
}

func TestCheckRecords(t *testing.T) {
	a := Record{Offset: e1, Epoch: 1, Value: "a"}
	b := Record{Offset: e1 + 1, Epoch: 1, Value: "b"}
	tests := []struct {
		name  string
		ops   []Op
		hos   []Handoff
		want  []string // violation rule prefixes, in order
		lost  map[LossKind]int
		found int
		fresh int // records read by a later fetch
	}{
		{"a record fetched from its owner", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 1, "n1", a),
		}, nil, nil, nil, 1, 1},
		{"a fetch begun before the acknowledgement came does not count", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(5, 30, 1, "n1"),
		}, nil, nil, nil, 0, 0},
		{"a fetch that stopped below the offset does not count", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			produced(11, 12, 1, "n1", e1+1, "b"),
			func() Op { o := fetched(20, 30, 1, "n1", a); o.Next = e1 + 1; return o }(),
		}, nil, nil, nil, 1, 1},
		{"a record its owner does not return at its epoch is lost", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			produced(11, 12, 1, "n1", e1+1, "b"),
			fetched(20, 30, 1, "n1", b),
		}, nil, []string{"acknowledged record lost"}, nil, 1, 2},
		{"another node at the same epoch must have it too", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 1, "n2"),
		}, nil, []string{"acknowledged record lost"}, nil, 0, 1},
		{"a new owner that never got the record", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 2, "n2"),
			fetched(40, 50, 2, "n2"),
		}, nil, nil, map[LossKind]int{NotHandedOver: 1}, 0, 1},
		{"a new owner whose pull from the record's owner was complete has it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 2, "n2"),
		}, []Handoff{{Topic: "t", Node: "n2", Prev: "n1", Epoch: 2}}, []string{"acknowledged record lost"}, nil, 0, 1},
		{"a complete pull from another owner, or at another epoch, says nothing of it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 3, "n2"),
		}, []Handoff{{Topic: "t", Node: "n2", Prev: "n3", Epoch: 3}, {Topic: "t", Node: "n2", Prev: "n1", Epoch: 2}, {Topic: "u", Node: "n2", Prev: "n1", Epoch: 3}},
			nil, map[LossKind]int{NotHandedOver: 1}, 0, 1},
		{"a fetch at an older epoch does not count", []Op{
			produced(0, 10, 2, "n2", e2, "a"),
			fetched(20, 30, 1, "n1"),
		}, nil, nil, nil, 0, 0},
		{"its owner keeps it when the topic comes back", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 3, "n1", a),
		}, nil, nil, nil, 1, 1},
		{"its owner lost it when the topic came back, and no revoke came", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 3, "n1"),
		}, nil, []string{"acknowledged record lost"}, nil, 0, 1},
		{"a revoke in between deleted it before the move", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			op(Revoke, "t", 12, 14, 2, "n1"),
			fetched(20, 30, 3, "n2"),
		}, nil, nil, map[LossKind]int{Revoked: 1}, 0, 1},
		{"a revoke in between deleted it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			op(Revoke, "t", 12, 14, 2, "n1"),
			fetched(20, 30, 3, "n1"),
		}, nil, nil, map[LossKind]int{Revoked: 1}, 0, 1},
		{"a revoke with no answer may have deleted it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			unknown(Revoke, "t", 25, 26),
			fetched(20, 30, 3, "n1"),
		}, nil, nil, map[LossKind]int{Revoked: 1}, 0, 1},
		{"a revoke refused did not delete it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			notFound(Revoke, "t", 12, 14),
			fetched(20, 30, 3, "n1"),
		}, nil, []string{"acknowledged record lost"}, nil, 0, 1},
		{"a revoke with no answer sent after the fetch did not delete it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 3, "n1"),
			unknown(Revoke, "t", 40, 50),
		}, nil, []string{"acknowledged record lost"}, nil, 0, 1},
		{"a revoke above the epoch of the fetch came after it", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			op(Revoke, "t", 12, 14, 4, "n1"),
			fetched(20, 30, 3, "n1"),
		}, nil, []string{"acknowledged record lost"}, nil, 0, 1},
		{"an offset fetched with another record than the one acknowledged", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			fetched(20, 30, 1, "n1", Record{Offset: e1, Epoch: 1, Value: "x"}),
		}, nil, []string{"two records at one offset"}, nil, 1, 1},
		{"two fetches that disagree on an offset", []Op{
			fetched(0, 10, 1, "n1", a),
			fetched(20, 30, 2, "n2", Record{Offset: e1, Epoch: 2, Value: "a"}),
		}, nil, []string{"two records at one offset"}, nil, 0, 0},
		{"records of other topics do not count", []Op{
			produced(0, 10, 1, "n1", e1, "a"),
			func() Op { o := fetched(20, 30, 1, "n1"); o.Topic = "u"; return o }(),
		}, nil, nil, nil, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, losses, stats := CheckRecords(tt.ops, tt.hos)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d violations %v, want %v", len(got), got, tt.want)
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i].Rule, w) {
					t.Fatalf("violation %d: %q, want %q", i, got[i].Rule, w)
				}
			}
			n := 0
			for k, c := range tt.lost {
				n += c
				if stats.Lost[k] != c {
					t.Fatalf("lost %v: %d, want %d (%v)", k, stats.Lost[k], c, stats)
				}
			}
			if len(losses) != n {
				t.Fatalf("%d losses, want %d: %v", len(losses), n, losses)
			}
			if stats.Found != tt.found || stats.Read != tt.fresh {
				t.Fatalf("stats %v: want %d read later, %d found", stats, tt.fresh, tt.found)
			}
		})
	}
}
