package watch

import (
	"fmt"

	"github.com/shoalmq/shoal/internal/invariants"
)

// The Log's invariants. Builds with invariants (the invariants tag, or
// -race) check them after every load and Persist and panic with an
// invariants.Violation when one breaks; other builds compile none of it.
//
// Each time: no more changes are unsaved than kept; the newest kept change
// is at or below the applied index, so a watcher given a position is never
// behind a change it was not given; after a Persist, the log holds at most
// its length and slack, or the changes of one raft index only.
//
// And every so often, amortized over the calls (invariants.Amortized), the
// order of the whole log: kept changes ascend by (index, seq), which
// since's binary search and the trim by whole indexes rely on.

// checkAfter runs the checks after what ("load", "persist").
func (l *Log) checkAfter(what string) {
	if !invariants.Enabled {
		return
	}
	if err := l.checkBounds(what == "persist"); err != nil {
		invariants.Failf("watch: shard %d: after %s: %w", l.shard, what, err)
	}
	if !l.check.Due(len(l.entries) - l.head) {
		return
	}
	if err := l.checkOrder(); err != nil {
		invariants.Failf("watch: shard %d: after %s: %w", l.shard, what, err)
	}
}

// checkBounds checks the log's counts; trimmed says a trim just ran.
func (l *Log) checkBounds(trimmed bool) error {
	kept := l.kept()
	if l.unsaved < 0 || l.unsaved > len(kept) {
		return fmt.Errorf("%d changes unsaved of %d kept", l.unsaved, len(kept))
	}
	if n := len(kept); n > 0 && kept[n-1].index > l.applied {
		return fmt.Errorf("change at index %d above the applied index %d", kept[n-1].index, l.applied)
	}
	if n := len(kept); trimmed && n > l.max+max(1, l.max/trimSlack) && kept[0].index != kept[n-1].index {
		return fmt.Errorf("%d changes kept after a trim, at most %d", n, l.max+max(1, l.max/trimSlack))
	}
	return nil
}

// checkOrder checks that the kept changes ascend by (index, seq).
func (l *Log) checkOrder() error {
	kept := l.kept()
	for i := 1; i < len(kept); i++ {
		a, b := &kept[i-1], &kept[i]
		if a.index > b.index || (a.index == b.index && a.seq >= b.seq) {
			return fmt.Errorf("change %d:%d kept after %d:%d", b.index, b.seq, a.index, a.seq)
		}
	}
	return nil
}
