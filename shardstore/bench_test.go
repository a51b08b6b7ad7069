package shardstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/wire"
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

// BenchmarkTopicFirstTouch is what the first request for a topic since the
// store opened costs the store: loading the topic's log bounds and its
// producer sessions (topicLocked), as a node's first produce to each of a
// dead owner's topics it took over does. The store, on disk and flushed,
// holds 100,000 topics of one 256-byte record written in a session each
// (about 30 MB); "held" touches those in turn, "new" topics it never held
// (what a node that takes over another's topics mostly finds), each with
// a block cache of 16 MiB (the default before) and of 64 MiB.
func BenchmarkTopicFirstTouch(b *testing.B) {
	const topics = 100_000
	dir := b.TempDir()
	s, err := Open(dir, Config{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	rec := [][]byte{make([]byte, 256)}
	for i := range topics {
		if _, _, err := s.AppendRecordsOnce(fmt.Appendf(nil, "held-%d", i), 1, 0, rec, wire.Session{ID: uint64(i + 1), Seq: 1}, false); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.db.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	for _, cache := range []int64{16 << 20, 64 << 20} {
		for _, kind := range []string{"held", "new"} {
			b.Run(fmt.Sprintf("cache=%dMiB/%s", cache>>20, kind), func(b *testing.B) {
				s, err := Open(dir, Config{Logger: quietLogger(), BlockCacheBytes: cache})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				names := make([][]byte, min(b.N, topics))
				for i := range names {
					names[i] = fmt.Appendf(nil, "%s-%d", kind, i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					if i > 0 && i%topics == 0 {
						s.topicsMu.Lock()
						clear(s.topics)
						s.topicsMu.Unlock()
					}
					if _, err := s.HighWatermark(names[i%topics]); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
