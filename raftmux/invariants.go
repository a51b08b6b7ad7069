package raftmux

import (
	"fmt"

	"github.com/shoalmq/shoal/internal/invariants"
)

// checkIndexes checks, in builds with invariants (the invariants tag, or
// -race), a replica whose Ready was just handled and advanced: what it
// applied is what raft counts as applied, no more than raft's commit index,
// which is no more than the last index of its log. It costs a look at
// raft's status; other builds compile none of it.
func (r *replica) checkIndexes() {
	st := r.rn.BasicStatus()
	if err := indexOrder(r.applied, st.Applied, st.Commit, r.tail); err != nil {
		invariants.Failf("raftmux: shard %d after a ready round: %w", r.shard, err)
	}
}

// indexOrder reports how a replica's indexes break applied ≤ committed ≤
// last: applied is the replica's, raftApplied raft's.
func indexOrder(applied, raftApplied, commit, last uint64) error {
	switch {
	case applied != raftApplied:
		return fmt.Errorf("applied %d, raft counts %d", applied, raftApplied)
	case applied > commit:
		return fmt.Errorf("applied %d, past the commit index %d", applied, commit)
	case commit > last:
		return fmt.Errorf("commit index %d, past the log's last index %d", commit, last)
	}
	return nil
}
