package node

import (
	"fmt"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
)

// A shard's change log: the last Config.ChangeLogLen changes of its topic
// assignments (an eighth more between trims), each at the raft index of
// the command that made it, kept in the shard's data keys (written in the
// batch of the apply that made them, so streamed with a raft snapshot and
// found again after a restart) and in memory for the watchers. A watcher's
// position in a shard is a raft index: it has seen every change up to it.
// Trimming drops whole raft indexes, oldest first, and raises the trim
// mark: a position below it may have missed changes and is refused as
// compacted.

// loggedChange is one change of the log.
type loggedChange struct {
	index uint64
	seq   uint32
	c     meta.Change
}

// changeLog is one shard's change log. Under its shardState's lock.
type changeLog struct {
	max int
	// entries ascend by (index, seq); entries[head:] are kept, the ones
	// before head were trimmed (compacted away when head passes half).
	entries []loggedChange
	head    int
	// trimmed: every change at an index up to it may be gone.
	trimmed uint64
	// applied is the raft index of the last command applied to the
	// state: a watcher served from it has seen every change up to it.
	applied uint64
	// unsaved counts the newest entries not yet written to the store;
	// dropped holds the keys of trimmed entries not yet deleted from it;
	// trimDirty says the trim mark must be written.
	unsaved   int
	dropped   []loggedChange
	trimDirty bool
}

func (l *changeLog) kept() []loggedChange { return l.entries[l.head:] }

// add logs the changes of the command applied at index.
func (l *changeLog) add(index uint64, changes []meta.Change) {
	for i, c := range changes {
		l.entries = append(l.entries, loggedChange{index: index, seq: uint32(i), c: c})
		l.unsaved++
	}
}

// trimSlack is how far past its length, as a fraction of it, a change
// log grows before it is trimmed back: trimming in runs writes the trim
// mark once per run instead of once per change (every assignment of a
// busy shard would write it).
const trimSlack = 8

// trim drops the oldest raft indexes, once more than max and a slack of
// max/trimSlack changes are kept, until at most max are, or only one
// index is.
func (l *changeLog) trim() {
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
			l.entries[l.head] = loggedChange{}
			l.head++
		}
		l.trimmed, l.trimDirty = first, true
	}
	if l.head > len(l.entries)/2 {
		l.entries = append(l.entries[:0], l.entries[l.head:]...)
		l.head = 0
	}
}

// persist writes the log's new entries, deletions and trim mark into b.
func (l *changeLog) persist(shard uint64, b raftmux.Batch, key, val []byte) ([]byte, []byte) {
	kept := l.kept()
	for _, e := range kept[len(kept)-l.unsaved:] {
		key = shardstore.ChangeKey(key[:0], e.index, e.seq)
		val = meta.AppendChange(val[:0], &e.c)
		b.Put(shard, key, val)
	}
	l.unsaved = 0
	for _, e := range l.dropped {
		key = shardstore.ChangeKey(key[:0], e.index, e.seq)
		b.Delete(shard, key)
	}
	clear(l.dropped)
	l.dropped = l.dropped[:0]
	if l.trimDirty {
		val = shardstore.AppendChangeTrim(val[:0], l.trimmed)
		b.Put(shard, shardstore.ChangeTrimKey, val)
		l.trimDirty = false
	}
	return key, val
}

// since calls fn with the kept changes after index from, in order, until
// fn returns false.
func (l *changeLog) since(from uint64, fn func(e *loggedChange) bool) {
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

// loadChangeLog reads a shard's change log from the store. A shard that
// holds topic records but no trim mark was written before the log existed:
// its history up to the applied index is unknown, so the mark starts
// there (and is written at the next apply).
func loadChangeLog(store *shardstore.Store, shard uint64, max int, st *meta.State) (changeLog, error) {
	l := changeLog{max: max}
	applied, err := store.Applied(shard)
	if err != nil {
		return l, fmt.Errorf("node: shard %d: applied index: %w", shard, err)
	}
	l.applied = applied
	switch b, err := store.Get(shard, shardstore.ChangeTrimKey); {
	case err != nil:
		return l, fmt.Errorf("node: shard %d: load change trim mark: %w", shard, err)
	case b != nil:
		t, err := shardstore.DecodeChangeTrim(b)
		if err != nil {
			return l, fmt.Errorf("node: shard %d: %w: change trim mark %x", shard, meta.ErrBadChange, b)
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
		l.entries = append(l.entries, loggedChange{index: index, seq: seq, c: c})
		return true
	}); err != nil {
		return l, fmt.Errorf("node: shard %d: load change log: %w", shard, err)
	}
	if decodeErr != nil {
		return l, fmt.Errorf("node: shard %d: load change log: %w", shard, decodeErr)
	}
	if n := len(l.entries); n > 0 && l.entries[n-1].index > l.applied {
		l.applied = l.entries[n-1].index
	}
	return l, nil
}
