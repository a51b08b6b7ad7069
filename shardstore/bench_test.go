package shardstore

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// benchShard returns a store whose shard 1 holds entries 1..n of 128 bytes.
func benchShard(b *testing.B, n uint64, budget int64) (*Store, *RaftStorage) {
	b.Helper()
	s := openMem(b, vfs.NewMem(), Config{CacheBudgetBytes: budget})
	data := bytes.Repeat([]byte("e"), 128)
	for i := uint64(1); i <= n; i += 10 {
		bt := s.NewBatch()
		ents := make([]raftpb.Entry, 0, 10)
		for j := i; j < i+10 && j <= n; j++ {
			ents = append(ents, newEntry(j, 1, data))
		}
		bt.Append(1, &raftpb.HardState{Term: 1, Commit: i}, ents)
		commit(b, bt, false)
	}
	r, err := s.Storage(1)
	if err != nil {
		b.Fatal(err)
	}
	return s, r
}

func BenchmarkEntriesCached(b *testing.B) {
	s, r := benchShard(b, 100, 0)
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		ents, err := r.Entries(91, 101, 1<<20)
		if err != nil || len(ents) != 10 {
			b.Fatal(len(ents), err)
		}
	}
}

func BenchmarkEntriesDisk(b *testing.B) {
	s, r := benchShard(b, 100, -1)
	defer s.Close()
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		ents, err := r.Entries(91, 101, 1<<20)
		if err != nil || len(ents) != 10 {
			b.Fatal(len(ents), err)
		}
	}
}

func BenchmarkTermCached(b *testing.B) {
	s, r := benchShard(b, 100, 0)
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if t, err := r.Term(95); err != nil || t != 1 {
			b.Fatal(t, err)
		}
	}
}

func BenchmarkLastIndex(b *testing.B) {
	s, r := benchShard(b, 100, 0)
	defer s.Close()
	b.ReportAllocs()
	for b.Loop() {
		if i, err := r.LastIndex(); err != nil || i != 100 {
			b.Fatal(i, err)
		}
	}
}

// BenchmarkBatchRound builds and commits (without fsync) a round touching 64
// shards with one 128-byte entry and a HardState each; ns/op and allocs/op
// are per round.
func BenchmarkBatchRound(b *testing.B) {
	s := openMem(b, vfs.NewMem(), Config{})
	defer s.Close()
	const shards = 64
	data := bytes.Repeat([]byte("e"), 128)
	hs := make([]raftpb.HardState, shards)
	ents := make([][]raftpb.Entry, shards)
	for i := range shards {
		hs[i] = raftpb.HardState{Term: 1}
		ents[i] = []raftpb.Entry{newEntry(0, 1, data)}
	}
	idx := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		idx++
		bt := s.NewBatch()
		for sh := range shards {
			// The store keeps entries, so each round needs fresh ones, as
			// raft's do.
			ents[sh][0] = newEntry(idx, 1, data)
			hs[sh].Commit = idx
			bt.Append(uint64(sh), &hs[sh], ents[sh])
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchRoundManyShards is a round as a raft worker of a node with
// many groups builds it: 512 shards touched in arrival order (not key
// order), each with a 16-byte entry, its HardState, its applied index and
// one state-machine key. ns/op and allocs/op are per round.
func BenchmarkBatchRoundManyShards(b *testing.B) {
	s := openMem(b, vfs.NewMem(), Config{})
	defer s.Close()
	const shards = 512
	order := rand.New(rand.NewPCG(1, 2)).Perm(shards)
	data := bytes.Repeat([]byte("e"), 16)
	hs := &raftpb.HardState{Term: 1}
	ents := make([]raftpb.Entry, 1)
	idx := uint64(0)
	b.ReportAllocs()
	for b.Loop() {
		idx++
		bt := s.NewBatch()
		for _, sh := range order {
			ents[0] = newEntry(idx, 1, data)
			hs.Commit = idx - 1
			bt.Append(uint64(sh), hs, ents)
			if idx > 1 {
				bt.SetApplied(uint64(sh), idx-1)
			}
			bt.Put(uint64(sh), data[:8], data)
		}
		if err := bt.Commit(false); err != nil {
			b.Fatal(err)
		}
	}
}
