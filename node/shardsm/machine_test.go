package shardsm

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
)

// testLogLen is the change log length of the tests' machines.
const testLogLen = 1024

// countingBatch counts the bytes an Apply writes.
type countingBatch struct {
	raftmux.Batch
	puts, bytes int
}

func (b *countingBatch) Put(shard uint64, key, value []byte) {
	b.puts++
	b.bytes += len(key) + len(value)
	b.Batch.Put(shard, key, value)
}

func openTestStore(tb testing.TB) (*shardstore.Store, *Machine) {
	tb.Helper()
	st, err := shardstore.Open(filepath.Join(tb.TempDir(), "store"), shardstore.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st, New(Config{Store: st, ChangeLogLen: testLogLen})
}

func assignEntry(tb testing.TB, topic, owner string) raftmux.Command {
	tb.Helper()
	data, err := meta.AppendCommand(nil, &meta.Command{Op: meta.OpAssign, Topic: []byte(topic), Owner: owner})
	if err != nil {
		tb.Fatal(err)
	}
	return raftmux.Command{Data: data}
}

// fill assigns n topics to shard in batches of 500, committed.
func fill(tb testing.TB, st *shardstore.Store, sm *Machine, shard uint64, n int) {
	tb.Helper()
	for i := 0; i < n; {
		var cmds []raftmux.Command
		for ; i < n && len(cmds) < 500; i++ {
			cmds = append(cmds, assignEntry(tb, fmt.Sprintf("topic-%06d", i), "n1"))
		}
		b := st.NewBatch()
		if err := sm.Apply(shard, cmds, b); err != nil {
			tb.Fatal(err)
		}
		if err := b.Commit(false); err != nil {
			tb.Fatal(err)
		}
	}
}

// An apply writes the records it changed, not the shard: its bytes do not
// grow with the topics the shard holds, and a reload finds the same state.
func TestApplyWritesOnlyChangedRecords(t *testing.T) {
	st, sm := openTestStore(t)
	const shard = 3
	fill(t, st, sm, shard, 2000)
	cb := &countingBatch{Batch: st.NewBatch()}
	cmds := []raftmux.Command{assignEntry(t, "topic-000007", "n2"), assignEntry(t, "new-topic", "n3")}
	if err := sm.Apply(shard, cmds, cb); err != nil {
		t.Fatal(err)
	}
	ents := make([]raftpb.Entry, 100)
	for i := range ents {
		ents[i] = raftpb.Entry{Index: uint64(i + 1), Term: 1}
	}
	cb.Append(shard, &raftpb.HardState{Term: 1, Commit: 100}, ents)
	cb.SetApplied(shard, 100)
	if err := cb.Commit(false); err != nil {
		t.Fatal(err)
	}
	// Two records and their two entries in the change log.
	if cb.puts != 4 || cb.bytes > 300 {
		t.Fatalf("an apply of two changes wrote %d values, %d bytes", cb.puts, cb.bytes)
	}
	want := sm.shards[shard].State.AppendSnapshot(nil)
	fresh := New(Config{Store: st, ChangeLogLen: testLogLen})
	s, err := fresh.shard(shard)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s.State.AppendSnapshot(nil), want) {
		t.Fatal("reloaded state differs from the applied one")
	}
	// A raft snapshot carries the records: restoring it elsewhere rebuilds
	// the state.
	sr, err := st.SnapshotData(shard)
	if err != nil {
		t.Fatal(err)
	}
	defer sr.Close()
	st2, sm2 := openTestStore(t)
	snap := &raftpb.Snapshot{Metadata: *sr.Meta()}
	if err := st2.ApplySnapshot(shard, snap, sr); err != nil {
		t.Fatal(err)
	}
	if err := sm2.Restore(shard, snap.Metadata.Index); err != nil {
		t.Fatal(err)
	}
	if got := sm2.shards[shard].State.AppendSnapshot(nil); !bytes.Equal(got, want) {
		t.Fatal("restored snapshot differs from the applied state")
	}
}

// A shard stored whole under the earlier single key loads, and its next
// apply replaces that key by records.
func TestLegacyWholeStateIsMigratedToRecords(t *testing.T) {
	st, sm := openTestStore(t)
	const shard = 1
	old := meta.New()
	for i := range 10 {
		c := meta.Command{Op: meta.OpAssign, Topic: fmt.Appendf(nil, "t%d", i), Owner: "n1"}
		if err := old.Apply(&c, nil); err != nil {
			t.Fatal(err)
		}
	}
	b := st.NewBatch()
	b.Put(shard, shardstore.LegacyMetaKey, old.AppendSnapshot(nil))
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b = st.NewBatch()
	if err := sm.Apply(shard, []raftmux.Command{assignEntry(t, "t10", "n2")}, b); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if v, _ := st.Get(shard, shardstore.LegacyMetaKey); v != nil {
		t.Fatal("legacy key kept")
	}
	fresh := New(Config{Store: st, ChangeLogLen: testLogLen})
	s, err := fresh.shard(shard)
	if err != nil {
		t.Fatal(err)
	}
	if s.State.Count() != 11 {
		t.Fatalf("%d topics after migration, want 11", s.State.Count())
	}
}

// BenchmarkApply: one AssignTopic applied into a shard holding 100 or
// 10,000 topics (the batch is built, not committed): the cost must not
// grow with the shard.
func BenchmarkApply(b *testing.B) {
	for _, n := range []int{100, 10000} {
		b.Run(fmt.Sprintf("topics=%d", n), func(b *testing.B) {
			st, sm := openTestStore(b)
			fill(b, st, sm, 0, n)
			owners := []string{"n1", "n2"}
			cmds := []raftmux.Command{{}}
			entries := [2]raftmux.Command{assignEntry(b, "topic-000042", owners[0]), assignEntry(b, "topic-000042", owners[1])}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				// Move one topic back and forth: a real change each time.
				cmds[0] = entries[(i+1)%2]
				batch := st.NewBatch()
				if err := sm.Apply(0, cmds, batch); err != nil {
					b.Fatal(err)
				}
				batch.Close()
			}
		})
	}
}

// applyAt applies cmds to shard as the raft entries from index on, and
// commits them with the applied index.
func applyAt(tb testing.TB, st *shardstore.Store, sm *Machine, shard, index uint64, cmds ...raftmux.Command) {
	tb.Helper()
	for i := range cmds {
		cmds[i].Index = index + uint64(i)
	}
	b := st.NewBatch()
	if err := sm.Apply(shard, cmds, b); err != nil {
		tb.Fatal(err)
	}
	b.SetApplied(shard, index+uint64(len(cmds))-1)
	if err := b.Commit(false); err != nil {
		tb.Fatal(err)
	}
}

// storedChanges lists the changes of shard in the store as "index:topic".
func storedChanges(tb testing.TB, st *shardstore.Store, shard uint64) []string {
	tb.Helper()
	var out []string
	if err := st.Iterate(shard, shardstore.ChangePrefix, func(key, value []byte) bool {
		index, _, err := shardstore.ParseChangeKey(key)
		if err != nil {
			tb.Fatal(err)
		}
		c, err := meta.DecodeChange(value)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%d:%s", index, c.Topic))
		return true
	}); err != nil {
		tb.Fatal(err)
	}
	return out
}

// An apply logs the changes of its commands in the shard's change log
// (node/watch), written in the round's batch and trimmed to
// Config.ChangeLogLen, and tells the watchers of the shard once per run
// that changed something; a snapshot restored tells them too.
func TestApplyLogsChangesAndTellsTheWatchers(t *testing.T) {
	st, sm := openTestStore(t)
	sm.changeLogLen = 3
	const shard = 5
	var woken []uint64
	sm.logged = func(s uint64) { woken = append(woken, s) }
	applyAt(t, st, sm, shard, 10, assignEntry(t, "a", "n1"), assignEntry(t, "b", "n1"))
	// A command moving two topics at once: its changes share an index.
	data, err := meta.AppendCommand(nil, &meta.Command{Op: meta.OpReassignNode, Node: "n1",
		Moves: []meta.Move{{Topic: []byte("a"), Owner: "n2", Epoch: 1}, {Topic: []byte("b"), Owner: "n2", Epoch: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	applyAt(t, st, sm, shard, 12, raftmux.Command{Data: data}, assignEntry(t, "a", "n2"))
	applyAt(t, st, sm, shard, 14, assignEntry(t, "a", "n2")) // changes nothing
	if got := storedChanges(t, st, shard); fmt.Sprint(got) != "[10:a 11:b 12:a 12:b]" {
		t.Fatalf("stored %v", got)
	}
	if fmt.Sprint(woken) != "[5 5]" {
		t.Fatalf("watchers woken for %v", woken)
	}
	// A fifth change is past the length and its slack: trimmed back to
	// three, whole indexes oldest first.
	applyAt(t, st, sm, shard, 15, assignEntry(t, "c", "n3"))
	if got := storedChanges(t, st, shard); fmt.Sprint(got) != "[12:a 12:b 15:c]" {
		t.Fatalf("stored %v", got)
	}
	fresh := New(Config{Store: st, ChangeLogLen: 3})
	fresh.logged = func(s uint64) { woken = append(woken, s) }
	if _, err := fresh.shard(shard); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Restore(shard, 15); err != nil || fmt.Sprint(woken) != "[5 5 5 5]" {
		t.Fatalf("restore: %v; watchers woken for %v", err, woken)
	}
}

// A lease grant covers what an owner holds without listing it when the
// owner lacks only some of its newest opens (their OpenTopics still on
// their way), and lists when it lacks an older one or holds a topic that
// has moved on.
func TestGrantCoversAnOwnerLackingOnlyItsNewestOpens(t *testing.T) {
	st, sm := openTestStore(t)
	applyAt(t, st, sm, 0, 1, assignEntry(t, "a", "n1"), assignEntry(t, "b", "n1"), assignEntry(t, "c", "n1"),
		assignEntry(t, "d", "n1"), assignEntry(t, "e", "n1"))
	at := func(topic string, epoch uint64) uint64 { return meta.TopicDigest(topic, epoch) }
	listed := func(owner string, digest uint64) bool {
		t.Helper()
		g, _, ok := sm.Grant(0, owner, digest, time.Now, func(time.Time) (uint64, bool) { return 1, true })
		if !ok {
			t.Fatal("no grant")
		}
		return g.Listed
	}
	all := at("a", 1) ^ at("b", 1) ^ at("c", 1) ^ at("d", 1) ^ at("e", 1)
	for _, c := range []struct {
		name   string
		digest uint64
		listed bool
	}{
		{"all", all, false},
		{"all but the newest", all ^ at("e", 1), false},
		{"all but the three newest", all ^ at("c", 1) ^ at("d", 1) ^ at("e", 1), false},
		{"none", 0, false},
		{"all but an older one", all ^ at("c", 1), true},
		{"one more", all ^ at("f", 1), true},
		{"one at another epoch", all ^ at("e", 1) ^ at("e", 2), true},
	} {
		if got := listed("n1", c.digest); got != c.listed {
			t.Errorf("%s: listed %v, want %v", c.name, got, c.listed)
		}
	}
	// e, n1's newest open, moves to n2: n1 still holding it must get a
	// list, however new the open was.
	applyAt(t, st, sm, 0, 6, assignEntry(t, "e", "n2"))
	if !listed("n1", all) {
		t.Error("a grant covered a topic that moved on")
	}
	if listed("n1", all^at("e", 1)) || listed("n2", at("e", 2)) || listed("n2", 0) {
		t.Error("listed an owner holding what the state gives it, or less of its newest")
	}
}

// A grant to an owner that lacks only its two newest opens, against one to
// an owner that lacks an older topic (which lists what it owns), in a
// shard where it owns 100 or 10,000 topics: the first costs the same
// whatever the owner holds.
func BenchmarkGrant(b *testing.B) {
	for _, n := range []int{100, 10000} {
		st, sm := openTestStore(b)
		fill(b, st, sm, 0, n)
		var all uint64
		for i := range n {
			all ^= meta.TopicDigest(fmt.Sprintf("topic-%06d", i), 1)
		}
		newest := meta.TopicDigest(fmt.Sprintf("topic-%06d", n-1), 1) ^ meta.TopicDigest(fmt.Sprintf("topic-%06d", n-2), 1)
		older := meta.TopicDigest("topic-000000", 1)
		may := func(time.Time) (uint64, bool) { return 1, true }
		for _, c := range []struct {
			name   string
			digest uint64
			listed bool
		}{{"opens-on-their-way", all ^ newest, false}, {"listed", all ^ older, true}} {
			b.Run(fmt.Sprintf("topics=%d/%s", n, c.name), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					g, _, ok := sm.Grant(0, "n1", c.digest, time.Now, may)
					if !ok || g.Listed != c.listed {
						b.Fatalf("granted %v, listed %v", ok, g.Listed)
					}
				}
			})
		}
	}
}

// A shard whose replica halted is neither served nor loaded again, until
// the replica is removed (a new one starts afresh).
func TestHaltedShardIsNotServed(t *testing.T) {
	_, m := openTestStore(t)
	const shard = 3
	if err := m.With(shard, func(*meta.State) {}); err != nil {
		t.Fatal(err)
	}
	if !m.Hosted(shard, func(*meta.State) {}) {
		t.Fatal("a loaded shard is not hosted")
	}
	m.Halted(shard)
	if m.Hosted(shard, func(*meta.State) {}) {
		t.Fatal("a halted shard is still hosted")
	}
	if hosted, busy := m.TryHosted(shard, func(*meta.State) {}); hosted || busy {
		t.Fatalf("TryHosted of a halted shard = %v, %v", hosted, busy)
	}
	if err := m.With(shard, func(*meta.State) {}); !errors.Is(err, raftmux.ErrHalted) {
		t.Fatalf("With on a halted shard: %v, want ErrHalted", err)
	}
	m.Remove(shard)
	if err := m.With(shard, func(*meta.State) {}); err != nil {
		t.Fatalf("With after the replica was removed: %v", err)
	}
}

// TestLoadsConcurrently: a node that starts with topics loads each shard
// on first use; callers of the same shard share one load (one state), and
// those of other shards need not wait for it.
func TestLoadsConcurrently(t *testing.T) {
	st, sm := openTestStore(t)
	const shards, topics = 4, 2000
	for s := uint64(0); s < shards; s++ {
		fill(t, st, sm, s, topics)
	}
	fresh := New(Config{Store: st, ChangeLogLen: testLogLen})
	var wg sync.WaitGroup
	states := make([][]*meta.State, shards)
	var mu sync.Mutex
	for s := uint64(0); s < shards; s++ {
		for range 4 {
			wg.Go(func() {
				if err := fresh.With(s, func(state *meta.State) {
					mu.Lock()
					states[s] = append(states[s], state)
					mu.Unlock()
					if state.Count() != topics {
						t.Errorf("shard %d: %d topics loaded, want %d", s, state.Count(), topics)
					}
				}); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	for s, got := range states {
		for _, state := range got[1:] {
			if state != got[0] {
				t.Fatalf("shard %d loaded more than once: callers saw different states", s)
			}
		}
	}
	// A halt while loaded drops the state; it is not loaded again.
	fresh.Halted(2)
	if err := fresh.With(2, func(*meta.State) {}); !errors.Is(err, raftmux.ErrHalted) {
		t.Fatalf("halted shard: %v, want ErrHalted", err)
	}
}

// A lease answer never waits for a shard's load: a shard not loaded yet is
// refused, and stays unloaded, until something that applies or reads it
// (With) loads it; then it is granted.
func TestGrantDoesNotLoad(t *testing.T) {
	st, sm := openTestStore(t)
	fill(t, st, sm, 5, 100)
	fresh := New(Config{Store: st, ChangeLogLen: testLogLen})
	may := func(time.Time) (uint64, bool) { return 1, true }
	if _, _, ok := fresh.Grant(5, "n1", 0, time.Now, may); ok {
		t.Fatal("granted on a shard not loaded")
	}
	if fresh.WithLoadedShard(5, func(*Shard) {}) {
		t.Fatal("the refused grant loaded the shard")
	}
	if err := fresh.With(5, func(*meta.State) {}); err != nil {
		t.Fatal(err)
	}
	var asked bool
	if !fresh.WithLoadedShard(5, func(s *Shard) { _, asked = s.LastAsk["n1"] }) {
		t.Fatal("not loaded after With")
	}
	if asked {
		t.Fatal("the refused grant counted as the owner asking")
	}
	g, _, ok := fresh.Grant(5, "n1", 0, time.Now, may)
	if !ok || len(g.Topics) != 100 {
		t.Fatalf("loaded shard: ok %v, %d topics listed; want a grant listing 100", ok, len(g.Topics))
	}
}
