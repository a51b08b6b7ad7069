package raftio_test

import (
	"bytes"
	"slices"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/shardstore"
)

func TestStorageOverShardstore(t *testing.T) {
	dir := t.TempDir()
	store, err := shardstore.Open(dir, shardstore.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	const local = ^uint64(0)
	st := raftio.NewStorage(store, local)

	// A batch dropped unused, as a round with nothing to apply does, takes
	// nothing from the store; an empty synced one still commits.
	_ = st.NewBatch()
	if err := st.NewBatch().Commit(true); err != nil {
		t.Fatal(err)
	}
	b := st.NewBatch()
	b.Append(3, &raftpb.HardState{Term: uint64(2), Commit: uint64(1)},
		[]raftpb.Entry{{Index: uint64(1), Term: uint64(2), Data: []byte("e1")}})
	b.SetApplied(3, 1)
	b.Put(3, []byte("k"), []byte("v"))
	b.Put(local, []byte("mine"), []byte("x"))
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	if s := st.Stats(); s.Commits != 2 || s.Fsyncs != 2 {
		t.Fatalf("stats %+v, want 2 commits, 2 fsyncs", s)
	}
	if ids, err := st.Shards(); err != nil || !slices.Equal(ids, []uint64{3}) {
		t.Fatalf("shards %v, %v: the local slot must not show as a raft group", ids, err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened, the shard has what was committed.
	store, err = shardstore.Open(dir, shardstore.Config{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	st = raftio.NewStorage(store, local)
	rs, err := st.Storage(3)
	if err != nil {
		t.Fatal(err)
	}
	hs, _, err := rs.InitialState()
	if err != nil || hs.Term != 2 || hs.Commit != 1 {
		t.Fatalf("hard state %v, %v", hs, err)
	}
	ents, err := rs.Entries(1, 2, 1<<20)
	if err != nil || len(ents) != 1 || !bytes.Equal(ents[0].Data, []byte("e1")) {
		t.Fatalf("entries %v, %v", ents, err)
	}
	if a, err := st.Applied(3); err != nil || a != 1 {
		t.Fatalf("applied %d, %v", a, err)
	}
	if v, err := store.Get(3, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("data %q, %v", v, err)
	}
}
