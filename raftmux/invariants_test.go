//go:build invariants || race

package raftmux

import (
	"log/slog"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
)

// After a ready round a replica's indexes keep applied ≤ committed ≤ last,
// with its applied index the one raft counts; a replica whose indexes
// break that stops the worker.
func TestReadyRoundChecksTheIndexes(t *testing.T) {
	st := raft.NewMemoryStorage()
	if err := st.ApplySnapshot(raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 5, Term: 1,
		ConfState: raftpb.ConfState{Voters: []uint64{1}}}}); err != nil {
		t.Fatal(err)
	}
	if err := st.Append([]raftpb.Entry{{Index: 6, Term: 1}, {Index: 7, Term: 1}}); err != nil {
		t.Fatal(err)
	}
	if err := st.SetHardState(raftpb.HardState{Term: 1, Commit: 6}); err != nil {
		t.Fatal(err)
	}
	rn, err := raft.NewRawNode(&raft.Config{ID: 1, ElectionTick: 10, HeartbeatTick: 1, Storage: st,
		MaxSizePerMsg: 1 << 20, MaxInflightMsgs: 16, Applied: 5, Logger: raftLogger{l: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{shard: 3, rn: rn, applied: 5, tail: 7}
	r.checkIndexes() // applied 5 ≤ commit 6 ≤ last 7
	for _, tt := range []struct {
		name, want string
		applied    uint64
		tail       uint64
	}{
		{"applied apart from raft's", "applied 4, raft counts 5", 4, 7},
		{"commit past the log", "commit index 6, past the log's last index 5", 5, 5},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r.applied, r.tail = tt.applied, tt.tail
			invariantstest.MustViolate(t, tt.want, r.checkIndexes)
		})
	}
	if err := indexOrder(7, 7, 6, 7); err == nil || !strings.Contains(err.Error(), "applied 7, past the commit index 6") {
		t.Fatalf("applied past commit: %v", err)
	}
}
