package shardstore

import (
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// clone copies the model so a crash can roll it back.
func (w *workload) clone() map[uint64]*modelShard {
	out := make(map[uint64]*modelShard, len(w.model))
	for sh, m := range w.model {
		c := *m
		c.ents = append(c.ents[:0:0], m.ents...)
		c.data = maps.Clone(m.data)
		out[sh] = &c
	}
	return out
}

// crashConfig keeps memtables small so crashes also land around flushes,
// and the cache small so reopened reads mix cache and disk.
var crashConfig = Config{MemTableBytes: 1 << 20, CacheBudgetBytes: 16 << 10}

// findState returns the first k >= from with digests[k] == got, or -1.
func findState(digests []string, from int, got string) int {
	for k := from; k < len(digests); k++ {
		if digests[k] == got {
			return k
		}
	}
	return -1
}

// TestCrashKeepsSyncedBatches writes raft rounds, crashes the filesystem at
// a random point (dropping a random share of the unsynced writes), reopens
// and checks that the store is exactly the state after some batch no older
// than the last synced one: nothing acknowledged is lost, no batch is torn,
// HardState and log agree, and no repair is needed. Each seed crashes
// several times in a row, continuing from what survived.
func TestCrashKeepsSyncedBatches(t *testing.T) {
	seeds := 40
	if testing.Short() || raceEnabled {
		seeds = 5
	}
	shards := []uint64{1, 2, 3, 1000}
	for seed := range uint64(seeds) {
		rng := rand.New(rand.NewPCG(seed, 99))
		fs := vfs.NewCrashableMem()
		s := openMem(t, fs, crashConfig)
		w := newWorkload(seed, shards)
		for gen := range 3 {
			digests := []string{w.digest()}
			models := []map[uint64]*modelShard{w.clone()}
			lastSynced := 0
			rounds := 1 + rng.IntN(40)
			for i := range rounds {
				b := s.NewBatch()
				w.step(b)
				sync := rng.IntN(3) == 0
				commit(t, b, sync)
				digests = append(digests, w.digest())
				models = append(models, w.clone())
				if sync {
					lastSynced = i + 1
				}
				if rng.IntN(15) == 0 {
					if err := s.db.Flush(); err != nil {
						t.Fatal(err)
					}
				}
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: rng.IntN(101), RNG: rand.New(rand.NewPCG(seed, uint64(gen)))})
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			fs = crashed
			s = openMem(t, fs, crashConfig)
			got := storeDigest(t, s, shards)
			k := findState(digests, lastSynced, got)
			if k < 0 {
				t.Fatalf("seed %d gen %d: recovered state matches no batch at or after the last synced (%d of %d):\n%s\nlast synced:\n%s",
					seed, gen, lastSynced, rounds, got, digests[lastSynced])
			}
			w.model = models[k]
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCrashDuringConcurrentCommits crashes while a writer is committing, so
// the crash lands inside WAL writes and syncs; every batch whose synced
// commit returned before the crash must survive.
func TestCrashDuringConcurrentCommits(t *testing.T) {
	iters := 10
	if testing.Short() || raceEnabled {
		iters = 3
	}
	shards := []uint64{4, 5, 6}
	for it := range uint64(iters) {
		fs := vfs.NewCrashableMem()
		s := openMem(t, fs, crashConfig)
		w := newWorkload(100+it, shards)
		var (
			mu      sync.Mutex
			digests = []string{w.digest()}
			acked   atomic.Int64 // synced batches whose Commit returned
			stop    atomic.Bool
			wg      sync.WaitGroup
		)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; !stop.Load() && i < 2000; i++ {
				b := s.NewBatch()
				w.step(b)
				sync := i%2 == 0
				mu.Lock()
				digests = append(digests, w.digest())
				mu.Unlock()
				if err := b.Commit(sync); err != nil {
					t.Error(err)
					return
				}
				if sync {
					acked.Store(int64(i))
				}
			}
		}()
		time.Sleep(time.Duration(5+it*7) * time.Millisecond)
		floor := int(acked.Load())
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(it * 20 % 101), RNG: rand.New(rand.NewPCG(it, it))})
		stop.Store(true)
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		s = openMem(t, crashed, crashConfig)
		got := storeDigest(t, s, shards)
		mu.Lock()
		k := findState(digests, floor, got)
		n := len(digests)
		mu.Unlock()
		if k < 0 {
			t.Fatalf("iteration %d: recovered state matches no batch at or after %d (of %d)", it, floor, n-1)
		}
		t.Logf("iteration %d: %d batches written, %d acknowledged synced before the crash, recovered %d", it, n-1, floor, k)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEmptySyncedCommitSyncsEarlierBatches: a synced Commit with nothing in
// it still makes every earlier unsynced batch durable.
func TestEmptySyncedCommitSyncsEarlierBatches(t *testing.T) {
	fs := vfs.NewCrashableMem()
	s := openMem(t, fs, crashConfig)
	b := s.NewBatch()
	b.Put(1, []byte("k"), []byte("v"))
	commit(t, b, false)
	commit(t, s.NewBatch(), true)
	crashed := fs.CrashClone(vfs.CrashCloneCfg{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openMem(t, crashed, crashConfig)
	defer s.Close()
	if v, err := s.Get(1, []byte("k")); err != nil || string(v) != "v" {
		t.Fatalf("after crash: %q, %v", v, err)
	}
}
