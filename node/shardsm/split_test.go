package shardsm

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/shardstore"
)

// seedingBatch is a store batch that seeds as raftmux's would, or refuses
// every seed with err.
type seedingBatch struct {
	raftmux.Batch
	err    error
	seeded []uint64
}

func (b *seedingBatch) SeedChild(child, index, term uint64) (bool, error) {
	if b.err != nil {
		return false, b.err
	}
	b.seeded = append(b.seeded, child)
	b.Batch.Seed(child, index, term, &raftpb.ConfState{Voters: []uint64{1, 2, 3}})
	return true, nil
}

func splitEntry(tb testing.TB, shard, index uint64) raftmux.Command {
	tb.Helper()
	data, err := meta.AppendCommand(nil, &meta.Command{Op: meta.OpSplit, Shard: shard})
	if err != nil {
		tb.Fatal(err)
	}
	return raftmux.Command{Data: data, Index: index, Term: 2}
}

func applyOne(tb testing.TB, st *shardstore.Store, sm *Machine, shard uint64, c raftmux.Command, seedErr error) (*Result, []uint64) {
	tb.Helper()
	b := &seedingBatch{Batch: st.NewBatch(), err: seedErr}
	cmds := []raftmux.Command{c}
	if err := sm.Apply(shard, cmds, b); err != nil {
		tb.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		tb.Fatal(err)
	}
	return cmds[0].Result.(*Result), b.seeded
}

// A split gives each child the parent's topics of its range (every topic
// to exactly one), the floor and every session, at the split's index; the
// parent, marked split also after a reload, refuses what follows. A split
// every replica must refuse changes nothing.
func TestSplitFillsTheChildren(t *testing.T) {
	st, _ := openTestStore(t)
	space := router.ShardSpace(4)
	sm := New(Config{Store: st, ChangeLogLen: testLogLen, Space: space})
	const parent = 2
	// 3,000 topics of the parent's range, the session's among them.
	var cmds []raftmux.Command
	session := ""
	for i := 0; len(cmds) < 3000; i++ {
		topic := fmt.Sprintf("topic-%06d", i)
		if router.ShardOfString(topic, space.Base()) != parent {
			continue
		}
		if session == "" {
			session = topic
			continue
		}
		cmds = append(cmds, assignEntry(t, topic, "n1"))
	}
	b := st.NewBatch()
	if err := sm.Apply(parent, cmds, b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	w := assignEntry(t, session, "n2")
	var sc meta.Command
	if err := meta.DecodeCommand(w.Data, &sc); err != nil {
		t.Fatal(err)
	}
	sc.Session = meta.SessionRef{ID: 77, Seq: 1}
	data, err := meta.AppendCommand(nil, &sc)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := applyOne(t, st, sm, parent, raftmux.Command{Data: data, Index: 9, Term: 2}, nil); r.Err != nil {
		t.Fatal(r.Err)
	}
	var parentTopics []string
	if err := sm.With(parent, func(s *meta.State) {
		for a := range s.All() {
			parentTopics = append(parentTopics, a.Topic)
		}
	}); err != nil {
		t.Fatal(err)
	}

	// Refused alike everywhere: another shard's split, a joint parent.
	if r, seeded := applyOne(t, st, sm, parent, splitEntry(t, parent+1, 10), nil); !errors.Is(r.Err, errSplitRefused) || len(seeded) != 0 {
		t.Fatalf("split of another shard: %v, seeded %v", r.Err, seeded)
	}
	if r, _ := applyOne(t, st, sm, parent, splitEntry(t, parent, 11), raftmux.ErrSplitJoint); !errors.Is(r.Err, raftmux.ErrSplitJoint) {
		t.Fatalf("split of a joint parent: %v", r.Err)
	}

	if sm.Ended(parent) {
		t.Fatal("ended before its split")
	}
	r, seeded := applyOne(t, st, sm, parent, splitEntry(t, parent, 12), nil)
	if !sm.Ended(parent) || sm.Ended(uint64(space.ID(0, 1))) {
		t.Fatal("Ended does not follow the split")
	}
	low, high, _ := space.Children(parent)
	if r.Err != nil || !slices.Equal(seeded, []uint64{uint64(low), uint64(high)}) {
		t.Fatalf("split: %v, seeded %v", r.Err, seeded)
	}
	fresh := New(Config{Store: st, ChangeLogLen: testLogLen, Space: space})
	if !fresh.Ended(parent) {
		t.Fatal("a machine reading the store does not find the split")
	}
	var got []string
	for _, child := range seeded {
		n := 0
		if err := fresh.With(child, func(s *meta.State) {
			for a := range s.All() {
				if !space.Holds(uint32(child), router.KeyHashString(a.Topic)) {
					t.Errorf("child %d holds %q, outside its range", child, a.Topic)
				}
				got = append(got, a.Topic)
				n++
			}
			if s.Sessions() != 1 || s.Split() {
				t.Errorf("child %d: %d sessions, split %v", child, s.Sessions(), s.Split())
			}
		}); err != nil {
			t.Fatal(err)
		}
		if n < 1200 {
			t.Fatalf("child %d holds %d of 3001 topics", child, n)
		}
		if applied, _ := st.Applied(child); applied != 12 {
			t.Fatalf("child %d starts at %d, want the split's index 12", child, applied)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, parentTopics) {
		t.Fatalf("the children hold %d topics, the parent %d", len(got), len(parentTopics))
	}
	// A retry of the session's write at the child its topic went to gets
	// its first answer.
	home := uint64(space.ID(router.KeyHashString(session), 1))
	if r, _ := applyOne(t, st, fresh, home, raftmux.Command{Data: data, Index: 13, Term: 2}, nil); r.Err != nil || !r.Replayed {
		t.Fatalf("retry at the child: %+v", r)
	}
	for _, m := range []*Machine{sm, fresh} {
		if r, _ := applyOne(t, st, m, parent, assignEntry(t, "late", "n1"), nil); !errors.Is(r.Err, meta.ErrShardSplit) {
			t.Fatalf("an assign after the split: %v", r.Err)
		}
	}
}

// BenchmarkSplit is what a split costs a replica: the apply of the split
// entry of a shard of 20,000 topics (its children's records written into
// the batch) and the batch's commit, unsynced as applies are.
func BenchmarkSplit(b *testing.B) {
	space := router.ShardSpace(1)
	for i := range b.N {
		b.StopTimer()
		st, err := shardstore.Open(b.TempDir()+fmt.Sprintf("/s%d", i), shardstore.Config{})
		if err != nil {
			b.Fatal(err)
		}
		sm := New(Config{Store: st, ChangeLogLen: testLogLen, Space: space})
		fill(b, st, sm, 0, 20000)
		b.StartTimer()
		r, seeded := applyOne(b, st, sm, 0, splitEntry(b, 0, 100), nil)
		b.StopTimer()
		if r.Err != nil || len(seeded) != 2 {
			b.Fatal(r.Err, seeded)
		}
		_ = st.Close()
	}
}
