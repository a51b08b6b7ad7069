package watch

import (
	"fmt"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/shardstore"
)

// A shard's change log: the last max changes of its topic assignments (an
// eighth more between trims), each at the raft index of the command that
// made it, kept in the shard's data keys (written in the batch of the
// apply that made them, so streamed with a raft snapshot and found again
// after a restart) and in memory for the watchers. A watcher's position in
// a shard is a raft index: it has seen every change up to it. Trimming
// drops whole raft indexes, oldest first, and raises the trim mark: a
// position below it may have missed changes and is refused as compacted.

// trimSlack is how far past its length, as a fraction of it, a change
// log grows before it is trimmed back: trimming in runs writes the trim
// mark once per run instead of once per change (every assignment of a
// busy shard would write it).
const trimSlack = 8

// Log is one shard's change log. It is not safe for concurrent use: the
// state machine holds it under the shard's lock, the one Replicas.Read
// takes.
type Log struct {
	shard uint64
	max   int
	// entries ascend by (index, seq); entries[head:] are kept, the ones
	// before head were trimmed (compacted away when head passes half).
	entries []change
	head    int
	// trimmed: every change at an index up to it may be gone.
	trimmed uint64
	// applied is the raft index of the last command applied to the
	// state: a watcher served from it has seen every change up to it.
	applied uint64
	// ended is the raft index at which the shard split (0: it did not):
	// it has no change after it, and its halves' logs start there.
	ended uint64
	// unsaved counts the newest entries not yet written to the store;
	// dropped holds the keys of trimmed entries not yet deleted from it;
	// trimDirty says the trim mark must be written.
	unsaved   int
	dropped   []change
	trimDirty bool
	// key and val are Persist's encoding buffers.
	key, val []byte
	check    invariants.Amortized
}

// change is one change of the log: the seq-th change of the command
// applied at index.
type change struct {
	index uint64
	seq   uint32
	c     meta.Change
}

// Batch is where Persist writes: the raft round's batch, committed with
// the applied index (raftmux.Batch). Put and Delete copy what they take.
type Batch interface {
	Put(shard uint64, key, value []byte)
	Delete(shard uint64, key []byte)
}

// LoadLog reads shard's change log from store, to keep the last max
// changes (at least 1). st is the shard's state, loaded from the same
// store: a shard that holds state but no trim mark was written before
// change logs existed, so its history up to the applied index is unknown
// and the mark starts there (and is written by the next Persist).
func LoadLog(store *shardstore.Store, shard uint64, max int, st *meta.State) (*Log, error) {
	if max < 1 {
		return nil, fmt.Errorf("watch: shard %d: change log length %d below 1", shard, max)
	}
	l := &Log{shard: shard, max: max}
	applied, err := store.Applied(shard)
	if err != nil {
		return nil, fmt.Errorf("watch: shard %d: applied index: %w", shard, err)
	}
	l.applied = applied
	switch b, err := store.Get(shard, shardstore.ChangeTrimKey); {
	case err != nil:
		return nil, fmt.Errorf("watch: shard %d: load change trim mark: %w", shard, err)
	case b != nil:
		t, err := shardstore.DecodeChangeTrim(b)
		if err != nil {
			return nil, fmt.Errorf("watch: shard %d: %w: change trim mark %x", shard, meta.ErrBadChange, b)
		}
		l.trimmed = t
	default:
		// Written at the next apply, so that a restart tells a shard
		// whose log starts empty from one written before logs existed.
		l.trimDirty = true
		if st.Count() > 0 || st.Tombstones() > 0 || st.Floor() > 0 {
			l.trimmed = applied
		}
	}
	switch b, err := store.Get(shard, shardstore.SplitMarkKey); {
	case err != nil:
		return nil, fmt.Errorf("watch: shard %d: load split mark: %w", shard, err)
	case b != nil:
		if l.ended, err = shardstore.DecodeSplitMark(b); err != nil {
			return nil, fmt.Errorf("watch: shard %d: %w", shard, err)
		}
	}
	var decodeErr error
	if err := store.Iterate(shard, shardstore.ChangePrefix, func(key, value []byte) bool {
		index, seq, err := shardstore.ParseChangeKey(key)
		if err != nil {
			decodeErr = err
			return false
		}
		c, err := meta.DecodeChange(value)
		if err != nil {
			decodeErr = err
			return false
		}
		l.entries = append(l.entries, change{index: index, seq: seq, c: c})
		return true
	}); err != nil {
		return nil, fmt.Errorf("watch: shard %d: load change log: %w", shard, err)
	}
	if decodeErr != nil {
		return nil, fmt.Errorf("watch: shard %d: load change log: %w", shard, decodeErr)
	}
	if n := len(l.entries); n > 0 && l.entries[n-1].index > l.applied {
		l.applied = l.entries[n-1].index
	}
	l.checkAfter("load")
	return l, nil
}

// Apply records that the command at raft index was applied (or that a
// snapshot up to index was restored, with no changes), with the changes
// it made, and reports whether it logged any. Indexes given with changes
// rise from one call to the next, as raft applies them.
func (l *Log) Apply(index uint64, changes []meta.Change) bool {
	l.applied = max(l.applied, index)
	for i, c := range changes {
		l.entries = append(l.entries, change{index: index, seq: uint32(i), c: c})
		l.unsaved++
	}
	return len(changes) > 0
}

// End records that the shard split at raft index: its last change came
// before, and watchers go on in its halves from there (the split mark,
// shardstore.SplitMarkKey, written by the state machine in the same
// batch, keeps it).
func (l *Log) End(index uint64) { l.ended = index }

// Ended returns the raft index at which the shard split, or 0.
func (l *Log) Ended() uint64 { return l.ended }

// Persist trims the log and writes into b what changed since the last
// Persist: the new changes, the deletions of the ones trimmed, and the
// trim mark.
func (l *Log) Persist(b Batch) {
	l.trim()
	kept := l.kept()
	for _, e := range kept[len(kept)-l.unsaved:] {
		l.key = shardstore.ChangeKey(l.key[:0], e.index, e.seq)
		l.val = meta.AppendChange(l.val[:0], &e.c)
		b.Put(l.shard, l.key, l.val)
	}
	l.unsaved = 0
	for _, e := range l.dropped {
		l.key = shardstore.ChangeKey(l.key[:0], e.index, e.seq)
		b.Delete(l.shard, l.key)
	}
	clear(l.dropped)
	l.dropped = l.dropped[:0]
	if l.trimDirty {
		l.val = shardstore.AppendChangeTrim(l.val[:0], l.trimmed)
		b.Put(l.shard, shardstore.ChangeTrimKey, l.val)
		l.trimDirty = false
	}
	l.checkAfter("persist")
}

func (l *Log) kept() []change { return l.entries[l.head:] }

// trim drops the oldest raft indexes, once more than max and a slack of
// max/trimSlack changes are kept, until at most max are, or only one
// index is.
func (l *Log) trim() {
	if len(l.entries)-l.head <= l.max+max(1, l.max/trimSlack) {
		return
	}
	for len(l.entries)-l.head > l.max {
		first := l.entries[l.head].index
		if l.entries[len(l.entries)-1].index == first {
			return // one command's changes are never split
		}
		for l.head < len(l.entries) && l.entries[l.head].index == first {
			if len(l.entries)-l.head <= l.unsaved {
				l.unsaved-- // never written: nothing to delete
			} else {
				l.dropped = append(l.dropped, l.entries[l.head])
			}
			l.entries[l.head] = change{}
			l.head++
		}
		l.trimmed, l.trimDirty = first, true
	}
	if l.head > len(l.entries)/2 {
		l.entries = append(l.entries[:0], l.entries[l.head:]...)
		l.head = 0
	}
}

// since calls fn with the kept changes after index from, in order, until
// fn returns false.
func (l *Log) since(from uint64, fn func(e *change) bool) {
	kept := l.kept()
	// Binary search for the first entry above from.
	lo, hi := 0, len(kept)
	for lo < hi {
		m := (lo + hi) / 2
		if kept[m].index <= from {
			lo = m + 1
		} else {
			hi = m
		}
	}
	for i := lo; i < len(kept); i++ {
		if !fn(&kept[i]) {
			return
		}
	}
}
