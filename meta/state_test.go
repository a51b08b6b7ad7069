package meta

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// step applies cmd and expects either err (and an unchanged state) or
// exactly want.
type step struct {
	cmd  Command
	err  error
	want Result
}

func ok(a Assignment, changed bool, effects ...Effect) Result {
	return Result{Assignment: a, Changed: changed, Effects: effects}
}

// checkChanges checks that an applied command's changes say what its
// topics became: one change per topic it changed (a compaction changes
// none a watcher sees), each matching the topic's record.
func checkChanges(t *testing.T, step int, s *State, c *Command, res *Result) {
	t.Helper()
	if want := res.Changed && c.Op != OpCompact; want != (len(res.Changes) > 0) {
		t.Fatalf("step %d (%s): changed %v but %d changes", step, c.Op, res.Changed, len(res.Changes))
	}
	if c.Op == OpReassignNode && len(res.Changes) != res.Moved {
		t.Fatalf("step %d (%s): %d moves, %d changes", step, c.Op, res.Moved, len(res.Changes))
	}
	for _, ch := range res.Changes {
		a, ok := s.Get([]byte(ch.Topic))
		if !ok || a.Owner != ch.Owner || a.Epoch != ch.Epoch || a.Partitions != ch.Partitions || (a.State == Revoked) != (ch.Kind == ChangeRevoked) {
			t.Fatalf("step %d (%s): change %+v, record %+v", step, c.Op, ch, a)
		}
		var want ChangeKind
		switch {
		case c.Op == OpRevoke:
			want = ChangeRevoked
		case c.Op == OpUpdatePartition:
			want = ChangeUpdated
		case c.Op == OpReassignNode || a.Epoch > 1 && a.Previous != "" && ch.Kind == ChangeMoved:
			want = ChangeMoved
		default:
			want = ChangeAssigned
		}
		if ch.Kind != want {
			t.Fatalf("step %d (%s): change %v, want %v", step, c.Op, ch.Kind, want)
		}
	}
}

func runScenario(t *testing.T, steps []step) *State {
	t.Helper()
	s := New()
	for i, st := range steps {
		before := snapshot(s)
		var res Result
		err := applyEncoded(s, &st.cmd, &res)
		if st.err != nil {
			if !errors.Is(err, st.err) {
				t.Fatalf("step %d (%s): err %v, want %v", i, st.cmd.Op, err, st.err)
			}
			if after := snapshot(s); !bytes.Equal(before, after) {
				t.Fatalf("step %d (%s): rejected command changed the state", i, st.cmd.Op)
			}
		} else {
			if err != nil {
				t.Fatalf("step %d (%s): %v", i, st.cmd.Op, err)
			}
			if len(res.Effects) == 0 {
				res.Effects = nil
			}
			checkChanges(t, i, s, &st.cmd, &res)
			res.Changes = nil
			if !reflect.DeepEqual(res, st.want) {
				t.Fatalf("step %d (%s):\n got %+v\nwant %+v", i, st.cmd.Op, res, st.want)
			}
		}
		if err := s.checkInvariants(); err != nil {
			t.Fatalf("step %d (%s): %v", i, st.cmd.Op, err)
		}
	}
	return s
}

func TestApplySpec(t *testing.T) {
	long := strings.Repeat("x", MaxTopicLen+1)
	longID := strings.Repeat("n", MaxNodeIDLen+1)
	tests := []struct {
		name  string
		steps []step
	}{
		{"first assign creates the topic at epoch 1 with default partitions", []step{
			{cmd: assign("t", "n1", 0), want: ok(active("t", "n1", 1, 1), true, open("n1", "t", 1, 1))},
		}},
		{"repeating an assign to the same owner changes nothing", []step{
			{cmd: assign("t", "n1", 3), want: ok(active("t", "n1", 1, 3), true, open("n1", "t", 1, 3))},
			{cmd: assign("t", "n1", 3), want: ok(active("t", "n1", 1, 3), false)},
			{cmd: assign("t", "n1", 0), want: ok(active("t", "n1", 1, 3), false)},
		}},
		{"assign without owner returns an active topic unchanged", []step{
			{cmd: assign("t", "n1", 0), want: ok(active("t", "n1", 1, 1), true, open("n1", "t", 1, 1))},
			{cmd: assign("t", "", 0), want: ok(active("t", "n1", 1, 1), false)},
		}},
		{"assign to another owner moves the topic at epoch+1", []step{
			{cmd: assign("t", "n1", 2), want: ok(active("t", "n1", 1, 2), true, open("n1", "t", 1, 2))},
			{cmd: assign("t", "n2", 0), want: ok(active("t", "n2", 2, 2).from("n1"), true, closeFx("n1", "t", 2, 2), open("n2", "t", 2, 2).movedFrom("n1"))},
			{cmd: assign("t", "n2", 0), want: ok(active("t", "n2", 2, 2).from("n1"), false)},
			{cmd: assign("t", "n1", 2), want: ok(active("t", "n1", 3, 2).from("n2"), true, closeFx("n2", "t", 3, 2), open("n1", "t", 3, 2).movedFrom("n2"))},
		}},
		{"revoke leaves a tombstone and a re-assign continues above its epoch", []step{
			{cmd: assign("t", "n1", 4), want: ok(active("t", "n1", 1, 4), true, open("n1", "t", 1, 4))},
			{cmd: revoke("t"), want: ok(revoked("t", "n1", 2), true, revokeFx("n1", "t", 2))},
			{cmd: revoke("t"), want: ok(revoked("t", "n1", 2), false)},
			{cmd: assign("t", "n1", 0), want: ok(active("t", "n1", 3, 1), true, open("n1", "t", 3, 1))},
			{cmd: revoke("t"), want: ok(revoked("t", "n1", 4), true, revokeFx("n1", "t", 4))},
			{cmd: assign("t", "n2", 0), want: ok(active("t", "n2", 5, 1).from("n1"), true, open("n2", "t", 5, 1))},
		}},
		{"a topic that is not active needs a named owner", []step{
			{cmd: assign("t", "", 0), err: ErrNoOwner},
			{cmd: assign("t", "n1", 0), want: ok(active("t", "n1", 1, 1), true, open("n1", "t", 1, 1))},
			{cmd: revoke("t"), want: ok(revoked("t", "n1", 2), true, revokeFx("n1", "t", 2))},
			{cmd: assign("t", "", 0), err: ErrNoOwner},
		}},
		{"assign with a different partition count is refused and moves nothing", []step{
			{cmd: assign("t", "n1", 4), want: ok(active("t", "n1", 1, 4), true, open("n1", "t", 1, 4))},
			{cmd: assign("t", "n1", 8), err: ErrPartitionsConflict},
			{cmd: assign("t", "n2", 8), err: ErrPartitionsConflict},
			{cmd: assign("t", "", 0), want: ok(active("t", "n1", 1, 4), false)},
		}},
		{"update grows partitions at the same epoch and re-opens on the owner", []step{
			{cmd: update("t", 2), err: ErrUnknownTopic},
			{cmd: assign("t", "n1", 2), want: ok(active("t", "n1", 1, 2), true, open("n1", "t", 1, 2))},
			{cmd: update("t", 8), want: ok(active("t", "n1", 1, 8), true, open("n1", "t", 1, 8))},
			{cmd: update("t", 8), want: ok(active("t", "n1", 1, 8), false)},
			{cmd: update("t", 4), err: ErrBadPartitions},
			{cmd: update("t", 0), err: ErrBadPartitions},
			{cmd: update("t", MaxPartitions+1), err: ErrBadPartitions},
			{cmd: revoke("t"), want: ok(revoked("t", "n1", 2), true, revokeFx("n1", "t", 2))},
			{cmd: update("t", 16), err: ErrUnknownTopic},
		}},
		{"revoking an unknown topic is refused", []step{
			{cmd: revoke("t"), err: ErrUnknownTopic},
		}},
		{"fields out of their domain are refused", []step{
			{cmd: assign("", "n1", 0), err: ErrEmptyTopic},
			{cmd: assign(long, "n1", 0), err: ErrTopicTooLong},
			{cmd: assign("t", longID, 0), err: ErrBadNodeID},
			{cmd: assign("t", "n1", MaxPartitions+1), err: ErrBadPartitions},
			{cmd: revoke(""), err: ErrEmptyTopic},
			{cmd: Command{Op: 0}, err: ErrBadCommand},
			{cmd: Command{Op: 200}, err: ErrBadCommand},
			{cmd: assign(strings.Repeat("x", MaxTopicLen), strings.Repeat("n", MaxNodeIDLen), MaxPartitions),
				want: ok(active(strings.Repeat("x", MaxTopicLen), strings.Repeat("n", MaxNodeIDLen), 1, MaxPartitions), true,
					open(strings.Repeat("n", MaxNodeIDLen), strings.Repeat("x", MaxTopicLen), 1, MaxPartitions))},
		}},
		{"reassign moves only topics the dead node still owns", []step{
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 1, 1), true, open("n1", "a", 1, 1))},
			{cmd: assign("b", "n1", 0), want: ok(active("b", "n1", 1, 1), true, open("n1", "b", 1, 1))},
			{cmd: assign("c", "n1", 0), want: ok(active("c", "n1", 1, 1), true, open("n1", "c", 1, 1))},
			{cmd: assign("d", "n2", 0), want: ok(active("d", "n2", 1, 1), true, open("n2", "d", 1, 1))},
			{cmd: revoke("c"), want: ok(revoked("c", "n1", 2), true, revokeFx("n1", "c", 2))},
			{cmd: reassign("n1", "a", "n2", "b", "n3", "c", "n2", "d", "n3", "e", "n2"), want: Result{
				Changed: true, Moved: 2, Skipped: 3,
				Effects: []Effect{closeFx("n1", "a", 2, 1), open("n2", "a", 2, 1).movedFrom("n1"), closeFx("n1", "b", 2, 1), open("n3", "b", 2, 1).movedFrom("n1")},
			}},
			{cmd: reassign("n1", "a", "n2", "b", "n3"), want: Result{Skipped: 2}},
			{cmd: assign("a", "", 0), want: ok(active("a", "n2", 2, 1).from("n1"), false)},
			{cmd: assign("d", "", 0), want: ok(active("d", "n2", 1, 1), false)},
		}},
		{"reassign skips a move planned at an epoch the topic has left", []step{
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 1, 1), true, open("n1", "a", 1, 1))},
			{cmd: assign("a", "n2", 0), want: ok(active("a", "n2", 2, 1).from("n1"), true, closeFx("n1", "a", 2, 1), open("n2", "a", 2, 1).movedFrom("n1"))},
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 3, 1).from("n2"), true, closeFx("n2", "a", 3, 1), open("n1", "a", 3, 1).movedFrom("n2"))},
			// Planned when n1 held "a" at epoch 1; n1 owns it again, at 3.
			{cmd: reassignAt("n1", "a", "n3", 1), want: Result{Skipped: 1}},
			{cmd: reassignAt("n1", "a", "n3", 3), want: Result{
				Changed: true, Moved: 1,
				Effects: []Effect{closeFx("n1", "a", 4, 1), open("n3", "a", 4, 1).movedFrom("n1")},
			}},
		}},
		{"malformed reassign is refused whole", []step{
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 1, 1), true, open("n1", "a", 1, 1))},
			{cmd: assign("b", "n1", 0), want: ok(active("b", "n1", 1, 1), true, open("n1", "b", 1, 1))},
			{cmd: reassign("n1", "a", "n2", "b", "n1"), err: ErrBadCommand},
			{cmd: reassign("n1", "b", "n2", "a", "n2"), err: ErrBadCommand},
			{cmd: reassign("n1", "a", "n2", "a", "n3"), err: ErrBadCommand},
			{cmd: reassign("n1", "a", "n2", "b", ""), err: ErrBadNodeID},
			{cmd: reassign("n1", "a", "n2", "", "n3"), err: ErrEmptyTopic},
			{cmd: reassign("", "a", "n2"), err: ErrBadNodeID},
			{cmd: tooManyMoves(), err: ErrTooManyMoves},
			{cmd: assign("b", "", 0), want: ok(active("b", "n1", 1, 1), false)},
		}},
		{"compact drops tombstones and later topics start above the floor", []step{
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 1, 1), true, open("n1", "a", 1, 1))},
			{cmd: assign("a", "n2", 0), want: ok(active("a", "n2", 2, 1).from("n1"), true, closeFx("n1", "a", 2, 1), open("n2", "a", 2, 1).movedFrom("n1"))},
			{cmd: revoke("a"), want: ok(revoked("a", "n2", 3), true, revokeFx("n2", "a", 3))},
			{cmd: assign("b", "n1", 0), want: ok(active("b", "n1", 1, 1), true, open("n1", "b", 1, 1))},
			{cmd: compactCmd(), want: Result{Changed: true, Compacted: 1}},
			{cmd: compactCmd(), want: Result{}},
			{cmd: revoke("a"), err: ErrUnknownTopic},
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 4, 1), true, open("n1", "a", 4, 1))},
			{cmd: assign("c", "n1", 0), want: ok(active("c", "n1", 4, 1), true, open("n1", "c", 4, 1))},
			{cmd: assign("b", "", 0), want: ok(active("b", "n1", 1, 1), false)},
		}},
		{"a marker changes nothing", []step{
			{cmd: assign("a", "n1", 0), want: ok(active("a", "n1", 1, 1), true, open("n1", "a", 1, 1))},
			{cmd: marker(7), want: Result{}},
			{cmd: assign("a", "", 0), want: ok(active("a", "n1", 1, 1), false)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runScenario(t, tt.steps) })
	}
}

func tooManyMoves() Command {
	c := Command{Op: OpReassignNode, Node: "n1"}
	for i := range MaxMoves + 1 {
		c.Moves = append(c.Moves, Move{Topic: []byte{byte(i >> 16), byte(i >> 8), byte(i)}, Owner: "n2"})
	}
	return c
}

func TestEpochNeverExceedsItsRange(t *testing.T) {
	// A shard whose floor is the largest epoch cannot create topics.
	s := New()
	s.floor = ^uint64(0)
	before := snapshot(s)
	if err := s.Apply(ptr(assign("t", "n1", 0)), nil); !errors.Is(err, ErrEpochExhausted) {
		t.Fatalf("assign at exhausted floor: %v", err)
	}
	if !bytes.Equal(before, snapshot(s)) {
		t.Fatal("refused assign changed the state")
	}
	// A topic at the largest epoch neither moves nor revokes, and a
	// reassign skips it.
	s = New()
	mustApply(t, s, assign("t", "n1", 0))
	setEpoch(s, "t", ^uint64(0))
	for _, c := range []Command{assign("t", "n2", 0), revoke("t")} {
		if err := s.Apply(&c, nil); !errors.Is(err, ErrEpochExhausted) {
			t.Fatalf("%s at the last epoch: %v", c.Op, err)
		}
	}
	if res := mustApply(t, s, reassign("n1", "t", "n2")); res.Moved != 0 || res.Skipped != 1 {
		t.Fatalf("reassign at the last epoch: %+v", res)
	}
	if a, _ := s.Get([]byte("t")); a.Owner != "n1" || a.Epoch != ^uint64(0) {
		t.Fatalf("topic changed: %+v", a)
	}
}

func ptr[T any](v T) *T { return &v }

func TestEpochsAreMonotonicAcrossTheLifecycle(t *testing.T) {
	s := New()
	seq := []Command{
		assign("t", "n1", 0), assign("t", "n2", 0), reassign("n2", "t", "n3"), revoke("t"),
		assign("t", "n3", 0), revoke("t"), compactCmd(), assign("t", "n1", 0), assign("t", "n1", 0),
		update("t", 5), assign("t", "n2", 0),
	}
	var last uint64
	var lastOwner string
	for i, c := range seq {
		mustApply(t, s, c)
		a, ok := s.Get([]byte("t"))
		if !ok {
			// Only compaction forgets a tombstone, and the floor keeps its
			// epoch.
			if c.Op != OpCompact || s.Floor() < last {
				t.Fatalf("step %d (%s): topic vanished, floor %d below epoch %d", i, c.Op, s.Floor(), last)
			}
			lastOwner = ""
			continue
		}
		if a.Epoch < last {
			t.Fatalf("step %d (%s): epoch went back from %d to %d", i, c.Op, last, a.Epoch)
		}
		if a.Owner != lastOwner && a.Epoch == last {
			t.Fatalf("step %d (%s): owner changed %q→%q at the same epoch %d", i, c.Op, lastOwner, a.Owner, last)
		}
		last, lastOwner = a.Epoch, a.Owner
	}
	if last != 8 {
		t.Fatalf("final epoch %d, want 8 (seven ownership changes after the first assign)", last)
	}
}

func TestQueries(t *testing.T) {
	s := New()
	for _, c := range []Command{
		assign("m", "n1", 0), assign("c", "n2", 0), assign("x", "n1", 3), assign("a", "n1", 0),
		assign("q", "n3", 0), revoke("q"), assign("b", "n2", 0),
	} {
		mustApply(t, s, c)
	}
	if s.Count() != 5 || s.Tombstones() != 1 {
		t.Fatalf("count %d tombstones %d, want 5 and 1", s.Count(), s.Tombstones())
	}
	if a, ok := s.Get([]byte("x")); !ok || a != active("x", "n1", 1, 3) {
		t.Fatalf("Get(x) = %+v, %v", a, ok)
	}
	if a, ok := s.Get([]byte("q")); !ok || a != revoked("q", "n3", 2) {
		t.Fatalf("Get(q) = %+v, %v", a, ok)
	}
	if _, ok := s.Get([]byte("nope")); ok {
		t.Fatal("Get(nope) found a record")
	}
	topics := func(as []Assignment) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.Topic)
		}
		return out
	}
	if got := topics(s.TopicsOwnedBy("n1")); !slices.Equal(got, []string{"a", "m", "x"}) {
		t.Fatalf("TopicsOwnedBy(n1) = %v", got)
	}
	if got := s.TopicsOwnedBy("n3"); len(got) != 0 {
		t.Fatalf("TopicsOwnedBy(n3) = %v, want none (its topic is revoked)", got)
	}
	if got := topics(slices.Collect(s.Topics())); !slices.Equal(got, []string{"a", "b", "c", "m", "x"}) {
		t.Fatalf("Topics() = %v", got)
	}
	for from, want := range map[string][]string{"": {"a", "b", "c", "m", "x"}, "b": {"b", "c", "m", "x"}, "bb": {"c", "m", "x"},
		"q": {"x"}, "x": {"x"}, "y": nil} {
		if got := topics(slices.Collect(s.TopicsFrom([]byte(from)))); !slices.Equal(got, want) {
			t.Fatalf("TopicsFrom(%q) = %v, want %v", from, got, want)
		}
	}
	if got := topics(slices.Collect(s.All())); !slices.Equal(got, []string{"a", "b", "c", "m", "q", "x"}) {
		t.Fatalf("All() = %v", got)
	}
	if got := s.Owners(); !slices.Equal(got, []Node{{"n1", 3}, {"n2", 2}}) {
		t.Fatalf("Owners() = %v", got)
	}
	for id, want := range map[string]bool{"n1": true, "n2": true, "n3": false, "n9": false} {
		if got := s.AnyOwner(func(o string) bool { return o == id }); got != want {
			t.Fatalf("AnyOwner(is %s) = %v, want %v (n3 owns only a revoked topic)", id, got, want)
		}
	}
	if s.Load("n1") != 3 || s.Load("n3") != 0 {
		t.Fatalf("Load n1=%d n3=%d", s.Load("n1"), s.Load("n3"))
	}
	n := 0
	for range s.Topics() {
		n++
		break
	}
	if n != 1 {
		t.Fatal("Topics() ignored an early stop")
	}
}

func TestApplyWithoutResult(t *testing.T) {
	s := New()
	c := assign("t", "n1", 0)
	if err := s.Apply(&c, nil); err != nil {
		t.Fatal(err)
	}
	if s.Count() != 1 {
		t.Fatal("apply with a nil result did not apply")
	}
}

func TestResultIsReused(t *testing.T) {
	s := New()
	var res Result
	c := assign("t", "n1", 0)
	if err := s.Apply(&c, &res); err != nil {
		t.Fatal(err)
	}
	c = assign("t", "n1", 0)
	if err := s.Apply(&c, &res); err != nil {
		t.Fatal(err)
	}
	if res.Changed || len(res.Effects) != 0 {
		t.Fatalf("stale result kept: %+v", res)
	}
	c = revoke("missing")
	if err := s.Apply(&c, &res); err == nil || res.Changed || res.Assignment != (Assignment{}) {
		t.Fatalf("refused command left a result: %+v, %v", res, err)
	}
}

func TestApplyEntry(t *testing.T) {
	s := New()
	var res Result
	enc := func(c Command) []byte {
		b, err := AppendCommand(nil, &c)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if err := s.ApplyEntry(enc(assign("a", "n1", 0)), &res); err != nil || !res.Changed {
		t.Fatalf("assign entry: %+v, %v", res, err)
	}
	if err := s.ApplyEntry(nil, &res); err != nil || res.Changed || len(res.Effects) != 0 {
		t.Fatalf("empty entry: %+v, %v", res, err)
	}
	if err := s.ApplyEntry([]byte{1, 99}, &res); !errors.Is(err, ErrBadCommand) || res.Changed {
		t.Fatalf("garbage entry: %+v, %v", res, err)
	}
	if err := s.ApplyEntry(enc(revoke("zzz")), &res); !errors.Is(err, ErrUnknownTopic) {
		t.Fatalf("refused entry: %v", err)
	}
	entry := enc(reassign("n1", "a", "n2"))
	if err := s.ApplyEntry(entry, &res); err != nil || res.Moved != 1 {
		t.Fatalf("reassign entry: %+v, %v", res, err)
	}
	// The state keeps nothing that aliases the entry's bytes.
	for i := range entry {
		entry[i] = 0
	}
	if a, _ := s.Get([]byte("a")); a != active("a", "n2", 2, 1).from("n1") {
		t.Fatalf("after clobbering the entry: %+v", a)
	}
	if err := s.checkInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A watcher is told each kind of change, in the order the commands
// applied.
func TestChangesOfEachKind(t *testing.T) {
	s := New()
	var got []Change
	for _, c := range []Command{
		assign("a", "n1", 2), assign("a", "n2", 0), {Op: OpUpdatePartition, Topic: []byte("a"), Partitions: 5},
		revoke("a"), assign("a", "n1", 0), assign("a", "n1", 0),
	} {
		var res Result
		if err := applyEncoded(s, &c, &res); err != nil {
			t.Fatal(err)
		}
		got = append(got, res.Changes...)
	}
	want := []Change{
		{Kind: ChangeAssigned, Topic: "a", Owner: "n1", Epoch: 1, Partitions: 2},
		{Kind: ChangeMoved, Topic: "a", Owner: "n2", Epoch: 2, Partitions: 2},
		{Kind: ChangeUpdated, Topic: "a", Owner: "n2", Epoch: 2, Partitions: 5},
		{Kind: ChangeRevoked, Topic: "a", Epoch: 3},
		{Kind: ChangeAssigned, Topic: "a", Owner: "n1", Epoch: 4, Partitions: 1},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes\n got %+v\nwant %+v", got, want)
	}
	for _, c := range want {
		b := AppendChange(nil, &c)
		d, err := DecodeChange(b)
		if err != nil || d != c {
			t.Fatalf("change %+v decodes as %+v, %v", c, d, err)
		}
		if _, err := DecodeChange(b[:len(b)-1]); !errors.Is(err, ErrBadChange) {
			t.Fatalf("truncated change: %v", err)
		}
	}
	for _, bad := range []Change{
		{Kind: 9, Topic: "a", Owner: "n1", Epoch: 1, Partitions: 1},
		{Kind: ChangeAssigned, Topic: "a", Epoch: 1, Partitions: 1},
		{Kind: ChangeRevoked, Topic: "a", Owner: "n1", Epoch: 1},
		{Kind: ChangeMoved, Topic: "a", Owner: "n1", Partitions: 1},
		{Kind: ChangeMoved, Owner: "n1", Epoch: 1, Partitions: 1},
	} {
		if _, err := DecodeChange(AppendChange(nil, &bad)); !errors.Is(err, ErrBadChange) {
			t.Errorf("%+v decodes: %v", bad, err)
		}
	}
}

// A shard's size counts every record's name, tombstones included, until a
// compaction drops them; a snapshot and a load from records give the same.
func TestBytesFollowTheRecords(t *testing.T) {
	s := New()
	if s.Bytes() != 0 {
		t.Fatalf("empty shard: %d bytes", s.Bytes())
	}
	mustApply(t, s, assign("a", "n1", 1))
	mustApply(t, s, assign("a-much-longer-topic-name", "n2", 1))
	want := int64(len("a") + len("a-much-longer-topic-name") + 2*RecordBytes)
	if s.Bytes() != want {
		t.Fatalf("two topics: %d bytes, want %d", s.Bytes(), want)
	}
	mustApply(t, s, assign("a", "n2", 1)) // a move adds no record
	mustApply(t, s, revoke("a-much-longer-topic-name"))
	if s.Bytes() != want {
		t.Fatalf("a tombstone: %d bytes, want %d still", s.Bytes(), want)
	}
	snap, err := DecodeSnapshot(s.AppendSnapshot(nil))
	if err != nil {
		t.Fatal(err)
	}
	if snap.Bytes() != want {
		t.Fatalf("from a snapshot: %d bytes, want %d", snap.Bytes(), want)
	}
	l := NewLoader()
	for _, k := range []string{"a", "a-much-longer-topic-name"} {
		v, _ := s.AppendRecord(nil, k)
		if err := l.Add([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := l.State()
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Bytes() != want {
		t.Fatalf("from records: %d bytes, want %d", loaded.Bytes(), want)
	}
	mustApply(t, s, compactCmd())
	if want := int64(len("a") + RecordBytes); s.Bytes() != want {
		t.Fatalf("compacted: %d bytes, want %d", s.Bytes(), want)
	}
}
