package watch

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/shardstore"
)

func openStore(tb testing.TB) *shardstore.Store {
	tb.Helper()
	st, err := shardstore.Open(filepath.Join(tb.TempDir(), "store"), shardstore.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = st.Close() })
	return st
}

// assigned is the change that gives topic its first owner.
func assigned(topic string) meta.Change {
	return meta.Change{Kind: meta.ChangeAssigned, Topic: topic, Owner: "n1", Epoch: 1, Partitions: 1}
}

// applyAt applies, as the raft entry at index, a command that made
// changes, and commits its batch with the applied index as the state
// machine does.
func applyAt(tb testing.TB, st *shardstore.Store, l *Log, index uint64, changes ...meta.Change) {
	tb.Helper()
	b := st.NewBatch()
	l.Apply(index, changes)
	l.Persist(b)
	b.SetApplied(l.shard, index)
	if err := b.Commit(false); err != nil {
		tb.Fatal(err)
	}
}

func load(tb testing.TB, st *shardstore.Store, shard uint64, max int, state *meta.State) *Log {
	tb.Helper()
	if state == nil {
		state = meta.New()
	}
	l, err := LoadLog(st, shard, max, state)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// lines lists the kept changes after index from as "index:topic".
func lines(l *Log, from uint64) []string {
	var out []string
	l.since(from, func(e *change) bool {
		out = append(out, fmt.Sprintf("%d:%s", e.index, e.c.Topic))
		return true
	})
	return out
}

// storedLines lists the changes of shard in the store as "index:topic".
func storedLines(tb testing.TB, st *shardstore.Store, shard uint64) []string {
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

// The change log keeps the last changes, trims whole raft indexes, and
// a reload (a restart, a snapshot restored) finds the same log and mark.
func TestALogTrimsWholeIndexesAndReloadsAsItWas(t *testing.T) {
	st := openStore(t)
	const shard = 5
	l := load(t, st, shard, 3, nil)
	applyAt(t, st, l, 10, assigned("a"))
	applyAt(t, st, l, 11, assigned("b"))
	// A command moving two topics at once: its changes share an index.
	applyAt(t, st, l, 12, assigned("a"), assigned("b"))
	applyAt(t, st, l, 13) // a command that changed nothing
	// Four changes: one past the length, within its slack (max(1, 3/8)),
	// so nothing is trimmed yet.
	if got := lines(l, 0); fmt.Sprint(got) != "[10:a 11:b 12:a 12:b]" || l.trimmed != 0 || l.applied != 13 {
		t.Fatalf("log %v, trimmed %d, applied %d", got, l.trimmed, l.applied)
	}
	// A fifth is past the slack: trimmed back to three, whole indexes
	// oldest first, in memory and in the store.
	applyAt(t, st, l, 14, assigned("c"))
	if got := lines(l, 0); fmt.Sprint(got) != "[12:a 12:b 14:c]" || l.trimmed != 11 {
		t.Fatalf("log %v, trimmed %d", got, l.trimmed)
	}
	if got := storedLines(t, st, shard); fmt.Sprint(got) != "[12:a 12:b 14:c]" {
		t.Fatalf("stored %v", got)
	}
	r := load(t, st, shard, 3, nil)
	if got := lines(r, 0); fmt.Sprint(got) != "[12:a 12:b 14:c]" || r.trimmed != 11 || r.applied != 14 {
		t.Fatalf("reloaded log %v, trimmed %d, applied %d", got, r.trimmed, r.applied)
	}

	// A shard whose log never trimmed keeps position 0 valid across a
	// restart; one with state written before logs existed starts its mark
	// at the applied index.
	l6 := load(t, st, 6, 3, nil)
	applyAt(t, st, l6, 3, assigned("x"))
	if r := load(t, st, 6, 3, nil); r.trimmed != 0 || len(r.kept()) != 1 {
		t.Fatalf("fresh shard reloaded: trimmed %d, kept %d", r.trimmed, len(r.kept()))
	}
	b := st.NewBatch()
	b.Delete(6, shardstore.ChangeTrimKey)
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	state := meta.New()
	if err := state.Apply(&meta.Command{Op: meta.OpAssign, Topic: []byte("x"), Owner: "n1"}, nil); err != nil {
		t.Fatal(err)
	}
	if r := load(t, st, 6, 3, state); r.trimmed != 3 || !r.trimDirty {
		t.Fatalf("shard without a trim mark: trimmed %d, mark to write %v", r.trimmed, r.trimDirty)
	}
	if r := load(t, st, 6, 3, nil); r.trimmed != 0 {
		t.Fatalf("empty shard without a trim mark: trimmed %d", r.trimmed)
	}
}

// The changes of one raft index are never split: a log holds them all
// even past its length, and drops them together.
func TestALogNeverSplitsTheChangesOfOneIndex(t *testing.T) {
	st := openStore(t)
	l := load(t, st, 1, 1, nil)
	applyAt(t, st, l, 7, assigned("a"), assigned("b"), assigned("c"), assigned("d"))
	if got := lines(l, 0); fmt.Sprint(got) != "[7:a 7:b 7:c 7:d]" || l.trimmed != 0 {
		t.Fatalf("log %v, trimmed %d", got, l.trimmed)
	}
	applyAt(t, st, l, 8, assigned("e"))
	if got := lines(l, 0); fmt.Sprint(got) != "[8:e]" || l.trimmed != 7 {
		t.Fatalf("log %v, trimmed %d", got, l.trimmed)
	}
	if got := storedLines(t, st, 1); fmt.Sprint(got) != "[8:e]" {
		t.Fatalf("stored %v", got)
	}
}

// since gives the changes after a position, in order, and stops when
// asked.
func TestSinceGivesTheChangesAfterAPosition(t *testing.T) {
	l := &Log{shard: 1, max: 100}
	for i := uint64(1); i <= 9; i += 2 {
		l.Apply(i, []meta.Change{assigned(fmt.Sprint("t", i)), assigned(fmt.Sprint("u", i))})
	}
	for _, c := range []struct {
		from uint64
		want string
	}{
		{0, "[1:t1 1:u1 3:t3 3:u3 5:t5 5:u5 7:t7 7:u7 9:t9 9:u9]"},
		{1, "[3:t3 3:u3 5:t5 5:u5 7:t7 7:u7 9:t9 9:u9]"},
		{4, "[5:t5 5:u5 7:t7 7:u7 9:t9 9:u9]"},
		{8, "[9:t9 9:u9]"},
		{9, "[]"},
		{100, "[]"},
	} {
		if got := fmt.Sprint(lines(l, c.from)); got != c.want {
			t.Errorf("since %d: %s, want %s", c.from, got, c.want)
		}
	}
	var first []uint64
	l.since(2, func(e *change) bool {
		first = append(first, e.index)
		return len(first) < 3
	})
	if !slices.Equal(first, []uint64{3, 3, 5}) {
		t.Fatalf("stopped after %v", first)
	}
}

// recordBatch records what Persist writes.
type recordBatch struct{ ops []string }

func (b *recordBatch) Put(shard uint64, key, value []byte) {
	b.ops = append(b.ops, fmt.Sprintf("put %d %s", shard, describeKey(key)))
}

func (b *recordBatch) Delete(shard uint64, key []byte) {
	b.ops = append(b.ops, fmt.Sprintf("delete %d %s", shard, describeKey(key)))
}

func describeKey(key []byte) string {
	if bytes.Equal(key, shardstore.ChangeTrimKey) {
		return "trim"
	}
	index, seq, err := shardstore.ParseChangeKey(key)
	if err != nil {
		return fmt.Sprintf("%x", key)
	}
	return fmt.Sprintf("%d.%d", index, seq)
}

// Persist writes each change once, deletes the written ones a trim drops,
// and neither writes nor deletes one trimmed before it was written.
func TestPersistWritesEachChangeOnceAndDeletesOnlyWhatItWrote(t *testing.T) {
	l := &Log{shard: 2, max: 2}
	b := &recordBatch{}
	l.Apply(1, []meta.Change{assigned("a")})
	l.Persist(b)
	l.Apply(2, []meta.Change{assigned("b")})
	l.Apply(3, []meta.Change{assigned("c")})
	l.Apply(4, []meta.Change{assigned("d")}) // past 2 and a slack of 1: trims 1 and 2
	l.Persist(b)
	l.Persist(b) // nothing new
	want := []string{"put 2 1.0", "put 2 3.0", "put 2 4.0", "delete 2 1.0", "put 2 trim"}
	if !slices.Equal(b.ops, want) {
		t.Fatalf("written\n got %q\nwant %q", b.ops, want)
	}
	if l.trimmed != 2 {
		t.Fatalf("trimmed %d, want 2", l.trimmed)
	}
}

// The trim mark as older builds wrote it, a bare uvarint, is read back
// and written again in the same bytes; bytes that are no uvarint are
// refused.
func TestAnOldTrimMarkIsReadAndWrittenAlike(t *testing.T) {
	st := openStore(t)
	const shard = 3
	b := st.NewBatch()
	b.Put(shard, shardstore.ChangeTrimKey, []byte{0x05})
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	l := load(t, st, shard, 16, nil)
	if l.trimmed != 5 || l.trimDirty {
		t.Fatalf("trim mark %d (to write %v), want 5", l.trimmed, l.trimDirty)
	}
	b = st.NewBatch()
	b.Delete(shard, shardstore.ChangeTrimKey)
	l.trimDirty = true
	l.Persist(b)
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if got, err := st.Get(shard, shardstore.ChangeTrimKey); err != nil || !bytes.Equal(got, []byte{0x05}) {
		t.Fatalf("trim mark written as %x, %v; want 05", got, err)
	}
	b = st.NewBatch()
	b.Put(shard, shardstore.ChangeTrimKey, []byte{0x80})
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadLog(st, shard, 16, meta.New()); !errors.Is(err, meta.ErrBadChange) {
		t.Fatalf("a truncated trim mark: %v, want meta.ErrBadChange", err)
	}
	if _, err := LoadLog(st, shard, 0, meta.New()); err == nil {
		t.Fatal("a log of length 0 was loaded")
	}
}
