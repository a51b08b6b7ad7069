package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/shoalmq/shoal/meta"
)

// Unanswered writes are settled by what the replicas applied: one a
// replica answered becomes that answer, returned when it first applied;
// one answered with an error, or never applied, is dropped; others stay.
// The settled history is checked as any other: a wrong answer is found.
func TestResolveSettlesUnansweredWrites(t *testing.T) {
	at := func(s float64) time.Time { return epoch.Add(time.Duration(s * float64(time.Second))) }
	l := newLinLog()
	l.add("t", linOp{kind: linAssign, owner: "n1", parts: 1, found: true, gotOwner: "n1", gotParts: 1, epoch: 1}, at(0), at(1), true)
	applied, refused, lost, anon := writeKey{7, 1}, writeKey{7, 2}, writeKey{7, 3}, writeKey{}
	l.addWrite("t", linOp{kind: linAssign, owner: "n2", parts: 1, unknown: true}, at(2), at(5), false, applied)
	l.addWrite("t", linOp{kind: linRevoke, unknown: true}, at(2), at(5), false, refused)
	l.addWrite("t", linOp{kind: linRevoke, unknown: true}, at(2), at(5), false, lost)
	l.addWrite("t", linOp{kind: linUpdate, parts: 3, unknown: true}, at(2), at(5), false, anon)
	l.add("t", linOp{kind: linLookup, found: true, gotOwner: "n2", gotParts: 1, epoch: 2}, at(4), at(4.5), true)
	answered := map[writeKey]answeredWrite{
		applied: {shard: 1, index: 9, at: at(3), a: meta.Assignment{Owner: "n2", Partitions: 1, Epoch: 2}},
		refused: {shard: 1, index: 10, at: at(3), err: errors.New("refused")},
	}
	if n := l.resolve(answered); n != 3 {
		t.Fatalf("settled %d writes, want 3", n)
	}
	ents := l.byTopic["t"]
	if len(ents) != 4 {
		t.Fatalf("%d operations left, want 4: %+v", len(ents), ents)
	}
	if e := ents[1]; e.op.unknown || e.op.gotOwner != "n2" || e.op.epoch != 2 || !e.end.Equal(at(3)) {
		t.Fatalf("the applied write settled as %+v ending %v", e.op, e.end)
	}
	if e := ents[2]; !e.op.unknown || e.op.kind != linUpdate {
		t.Fatalf("a write of no session settled: %+v", e.op)
	}
	if bad, unknown := l.check(10 * time.Second); len(bad) != 0 || len(unknown) != 0 {
		t.Fatalf("settled history: %v %v", bad, unknown)
	}
	// The same, with the applied write answering an epoch the lookup
	// after it contradicts.
	l2 := newLinLog()
	l2.add("t", linOp{kind: linAssign, owner: "n1", parts: 1, found: true, gotOwner: "n1", gotParts: 1, epoch: 1}, at(0), at(1), true)
	l2.addWrite("t", linOp{kind: linAssign, owner: "n2", parts: 1, unknown: true}, at(2), at(5), false, applied)
	l2.add("t", linOp{kind: linLookup, found: true, gotOwner: "n1", gotParts: 1, epoch: 1}, at(4), at(4.5), true)
	l2.resolve(answered)
	if bad, _ := l2.check(10 * time.Second); len(bad) != 1 {
		t.Fatalf("a lookup after the write's apply that misses it: %v", bad)
	}
}
