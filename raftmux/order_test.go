package raftmux_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
)

// orderStore checks, after every committed batch, that no shard's written
// applied index is above its written commit index: a crash between two
// batches keeps whatever the first wrote, and raft refuses to start from
// an applied index above the commit index.
// storage is raftmux.Storage under a name that does not clash with its
// Storage method when embedded.
type storage = raftmux.Storage

type orderStore struct {
	storage
	t       testing.TB
	mu      sync.Mutex
	commit  map[uint64]uint64
	applied map[uint64]uint64
	checked int
}

type orderBatch struct {
	raftmux.Batch
	s       *orderStore
	commit  map[uint64]uint64
	applied map[uint64]uint64
}

func (s *orderStore) NewBatch() raftmux.Batch {
	return &orderBatch{Batch: s.storage.NewBatch(), s: s, commit: map[uint64]uint64{}, applied: map[uint64]uint64{}}
}

func (b *orderBatch) Append(shard uint64, hs *raftpb.HardState, ents []raftpb.Entry) {
	if hs != nil {
		b.commit[shard] = hs.Commit
	}
	b.Batch.Append(shard, hs, ents)
}

func (b *orderBatch) SetApplied(shard, idx uint64) {
	b.applied[shard] = idx
	b.Batch.SetApplied(shard, idx)
}

func (b *orderBatch) Commit(sync bool) error {
	if err := b.Batch.Commit(sync); err != nil {
		return err
	}
	s := b.s
	s.mu.Lock()
	defer s.mu.Unlock()
	for sh, c := range b.commit {
		s.commit[sh] = c
	}
	for sh, a := range b.applied {
		s.applied[sh] = a
	}
	for sh := range b.applied {
		if s.applied[sh] > s.commit[sh] {
			s.t.Errorf("shard %d: applied index %d written while the written commit index is %d", sh, s.applied[sh], s.commit[sh])
		}
	}
	s.checked++
	clear(b.commit)
	clear(b.applied)
	return nil
}

// TestAppliedIndexNeverWrittenAboveCommitIndex: a round never persists an
// applied index above the commit index it persisted (a store left so by
// an older version is repaired when the shard opens,
// TestStartsFromAppliedIndexAboveCommitIndex).
func TestAppliedIndexNeverWrittenAboveCommitIndex(t *testing.T) {
	stores := map[uint64]*orderStore{}
	var mu sync.Mutex
	c := newCluster(t, 3, func(cfg *raftmux.Config) {
		mu.Lock()
		defer mu.Unlock()
		s := &orderStore{storage: cfg.Storage, t: t, commit: map[uint64]uint64{}, applied: map[uint64]uint64{}}
		stores[cfg.NodeID] = s
		cfg.Storage = s
	})
	shards := shardList(8)
	c.bootstrap(len(shards), []uint64{1, 2, 3})
	c.waitLeaders(shards, 5*time.Second)
	var wg sync.WaitGroup
	for _, sh := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if _, err := c.propose(sh, fmt.Appendf(nil, "k%d-%d", sh, i)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for id, s := range stores {
		s.mu.Lock()
		if s.checked == 0 {
			t.Errorf("host %d: no batch checked", id)
		}
		s.mu.Unlock()
	}
}

// TestStartsFromAppliedIndexAboveCommitIndex: a store written with the
// applied index above the commit index (as an earlier version could leave
// it after a crash) still opens; the commit index is raised to the applied
// one, and the shard serves.
func TestStartsFromAppliedIndexAboveCommitIndex(t *testing.T) {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	for i := range 3 {
		if _, err := c.propose(0, fmt.Appendf(nil, "k%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	victim := uint64(3)
	if victim == lead {
		victim = 2
	}
	c.waitFor("victim to apply", 5*time.Second, func() bool { return c.stores[victim].Len(0) == 3 })
	c.stop(victim)
	st := c.stores[victim]
	rs, err := st.Storage(0)
	if err != nil {
		t.Fatal(err)
	}
	hs, _, err := rs.InitialState()
	if err != nil {
		t.Fatal(err)
	}
	applied, err := st.Applied(0)
	if err != nil || applied < 2 {
		t.Fatalf("applied %d, %v", applied, err)
	}
	b := st.NewBatch()
	b.Append(0, &raftpb.HardState{Term: hs.Term, Vote: hs.Vote, Commit: applied - 1}, nil)
	if err := b.Commit(true); err != nil {
		t.Fatal(err)
	}
	c.start(victim)
	if _, err := c.propose(0, []byte("k3")); err != nil {
		t.Fatal(err)
	}
	c.waitFor("restarted replica to apply", 5*time.Second, func() bool { return c.stores[victim].Len(0) == 4 })
}
