// Command storebench measures the shard store on a real directory: group
// commits of raft-shaped rounds with fsync, bytes written to disk per entry,
// Entries latency from the cache and from Pebble, and memory per idle shard.
//
//	go run ./bench/storebench -shards 1024 -json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/shardstore"
)

type result struct {
	Shards            int     `json:"shards"`
	MemTableMB        int     `json:"memtable_mb"`
	Workers           int     `json:"workers"`
	EntryBytes        int     `json:"entry_bytes"`
	Rounds            int64   `json:"rounds"`
	Entries           int64   `json:"entries"`
	ElapsedS          float64 `json:"elapsed_s"`
	AppendsPerS       float64 `json:"appends_per_s"`
	RoundsPerS        float64 `json:"rounds_per_s"`
	CommitP50us       float64 `json:"commit_p50_us"`
	CommitP99us       float64 `json:"commit_p99_us"`
	BytesPerEntry     float64 `json:"bytes_per_entry"`
	EntriesCacheNs    float64 `json:"entries_cache_ns"`
	EntriesDiskNs     float64 `json:"entries_disk_ns"`
	EntriesCacheCPUNs float64 `json:"entries_cache_cpu_ns"`
	EntriesDiskCPUNs  float64 `json:"entries_disk_cpu_ns"`
	CPUPerEntryNs     float64 `json:"cpu_per_entry_ns"`
	IdleShards        int     `json:"idle_shards"`
	IdleBytesPerShard float64 `json:"idle_bytes_per_shard"`
}

func main() {
	var (
		shards     = flag.Int("shards", 1024, "shards committing together")
		workers    = flag.Int("workers", runtime.GOMAXPROCS(0), "committing goroutines, each owning shards id mod workers (as the raft layer's Ready loop)")
		duration   = flag.Duration("duration", 5*time.Second, "length of the append phase")
		entryBytes = flag.Int("entry-bytes", 128, "payload of each entry")
		maxEnts    = flag.Int("max-entries", 3, "each shard appends 1..max-entries entries per round")
		idleShards = flag.Int("idle-shards", 0, "shards for the idle-memory measurement (0: max(shards, 10000))")
		memtableMB = flag.Int("memtable-mb", 0, "Pebble memtable size in MiB (0: the store's default)")
		dir        = flag.String("dir", "", "store directory (default: a new temporary directory, removed after)")
		asJSON     = flag.Bool("json", false, "print one JSON object")
		cpuProfile = flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	)
	flag.Parse()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	if *shards < 1 || *workers < 1 || *entryBytes < 0 || *maxEnts < 1 {
		fmt.Fprintln(os.Stderr, "storebench: -shards, -workers and -max-entries must be positive")
		os.Exit(2)
	}
	*workers = min(*workers, *shards)
	if *idleShards == 0 {
		*idleShards = max(*shards, 10000)
	}
	base := *dir
	if base == "" {
		d, err := os.MkdirTemp("", "storebench-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		base = d
	}
	memtable := uint64(*memtableMB) << 20
	if memtable == 0 {
		memtable = shardstore.DefaultMemTableBytes
	}
	res := result{MemTableMB: int(memtable >> 20), Shards: *shards, Workers: *workers, EntryBytes: *entryBytes, IdleShards: *idleShards}
	if err := appendPhase(&res, base+"/append", memtable, *shards, *workers, *duration, *entryBytes, *maxEnts); err != nil {
		fail(err)
	}
	if err := idlePhase(&res, base+"/idle", *idleShards); err != nil {
		fail(err)
	}
	if *asJSON {
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			fail(err)
		}
		return
	}
	fmt.Printf("shards %d, workers %d, %d-byte entries, memtable %d MiB, %.1fs\n", res.Shards, res.Workers, res.EntryBytes, res.MemTableMB, res.ElapsedS)
	fmt.Printf("appends/s (fsync per round) %12.0f   rounds/s %8.1f   commit p50 %.0fµs p99 %.0fµs\n", res.AppendsPerS, res.RoundsPerS, res.CommitP50us, res.CommitP99us)
	fmt.Printf("CPU per appended entry      %12.0f ns\n", res.CPUPerEntryNs)
	fmt.Printf("bytes written per entry     %12.1f\n", res.BytesPerEntry)
	fmt.Printf("Entries() from cache        %12.0f ns (CPU %.0f ns)\n", res.EntriesCacheNs, res.EntriesCacheCPUNs)
	fmt.Printf("Entries() from Pebble       %12.0f ns (CPU %.0f ns)\n", res.EntriesDiskNs, res.EntriesDiskCPUNs)
	fmt.Printf("memory per idle shard       %12.0f bytes (%d shards)\n", res.IdleBytesPerShard, res.IdleShards)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "storebench:", err)
	os.Exit(1)
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// shardLog is the append state of one shard, owned by one worker.
type shardLog struct {
	id      uint64
	last    uint64
	applied uint64
	trunc   uint64
	hs      raftpb.HardState
}

// appendPhase runs raft-shaped rounds: each worker, in a loop, builds one
// batch with every shard it owns appending 1..maxEnts entries and a new
// HardState, applies what the previous round committed, compacts the log
// every 64 rounds to the last 32 entries, and commits with fsync.
func appendPhase(res *result, dir string, memtable uint64, shards, workers int, d time.Duration, entryBytes, maxEnts int) error {
	fs := &countingFS{FS: vfs.Default}
	s, err := shardstore.Open(dir, shardstore.Config{FS: fs, Logger: quiet(), MemTableBytes: memtable})
	if err != nil {
		return err
	}
	payload := bytes.Repeat([]byte("p"), entryBytes)
	owned := make([][]*shardLog, workers)
	for i := range shards {
		owned[i%workers] = append(owned[i%workers], &shardLog{id: uint64(i), hs: raftpb.HardState{Term: 1, Vote: 1}})
	}
	var (
		entries, rounds atomic.Int64
		mu              sync.Mutex
		lat             []time.Duration
		firstErr        error
		wg              sync.WaitGroup
	)
	startBytes := fs.written.Load()
	startCPU := cpuTime()
	start := time.Now()
	deadline := start.Add(d)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []time.Duration
			for round := 1; time.Now().Before(deadline); round++ {
				b := s.NewBatch()
				n := 0
				for _, sh := range owned[w] {
					k := 1 + rng.IntN(maxEnts)
					ents := make([]raftpb.Entry, k)
					for i := range ents {
						sh.last++
						ents[i] = raftpb.Entry{Term: 1, Index: sh.last, Type: raftpb.EntryNormal, Data: payload}
					}
					commitIdx := sh.hs.Commit
					sh.hs.Commit = sh.last
					b.Append(sh.id, &sh.hs, ents)
					if commitIdx > sh.applied {
						sh.applied = commitIdx
						b.SetApplied(sh.id, sh.applied)
					}
					if round%64 == 0 && sh.applied > sh.trunc+32 {
						sh.trunc = sh.applied - 32
						b.Compact(sh.id, sh.trunc)
					}
					n += k
				}
				t0 := time.Now()
				if err := b.Commit(true); err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(t0))
				entries.Add(int64(n))
				rounds.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	cpu := cpuTime() - startCPU
	if firstErr != nil {
		return firstErr
	}
	res.Rounds, res.Entries, res.ElapsedS = rounds.Load(), entries.Load(), elapsed.Seconds()
	res.AppendsPerS = float64(res.Entries) / elapsed.Seconds()
	res.RoundsPerS = float64(res.Rounds) / elapsed.Seconds()
	res.CPUPerEntryNs = float64(cpu.Nanoseconds()) / float64(max(res.Entries, 1))
	slices.Sort(lat)
	if len(lat) > 0 {
		res.CommitP50us = float64(lat[len(lat)/2].Microseconds())
		res.CommitP99us = float64(lat[len(lat)*99/100].Microseconds())
	}

	// Entries of the last few indexes, as a leader sends to followers.
	const reads = 20000
	t0, c0 := time.Now(), cpuTime()
	for i := range reads {
		sh := owned[i%workers][i%len(owned[i%workers])]
		r, err := s.Storage(sh.id)
		if err != nil {
			return err
		}
		if _, err := r.Entries(sh.last-1, sh.last+1, 1<<20); err != nil {
			return err
		}
	}
	res.EntriesCacheNs = float64(time.Since(t0).Nanoseconds()) / reads
	res.EntriesCacheCPUNs = float64((cpuTime() - c0).Nanoseconds()) / reads

	// Count what the flush of the memtable writes too: every entry is
	// eventually flushed or deleted before it is.
	if err := s.Close(); err != nil {
		return err
	}
	res.BytesPerEntry = float64(fs.written.Load()-startBytes) / float64(max(res.Entries, 1))

	s, err = shardstore.Open(dir, shardstore.Config{FS: vfs.Default, Logger: quiet(), CacheBudgetBytes: -1})
	if err != nil {
		return err
	}
	defer s.Close()
	handles := map[uint64]*shardstore.RaftStorage{}
	for _, mine := range owned {
		for _, sh := range mine {
			if handles[sh.id], err = s.Storage(sh.id); err != nil {
				return err
			}
		}
	}
	// Let the flush and compactions that follow an open finish (they would
	// be billed to the reads), then one pass, so the figure is Pebble's
	// block-cache path rather than the first read of each file.
	for wait := time.Now(); time.Since(wait) < 30*time.Second; time.Sleep(50 * time.Millisecond) {
		if m := s.Metrics(); m.Compact.NumInProgress == 0 && m.Flush.NumInProgress == 0 && m.Compact.EstimatedDebt == 0 {
			break
		}
	}
	for i := range 2 * shards {
		sh := owned[i%workers][i%len(owned[i%workers])]
		if _, err := handles[sh.id].Entries(sh.last-1, sh.last+1, 1<<20); err != nil {
			return err
		}
	}
	t0, c0 = time.Now(), cpuTime()
	for i := range reads {
		sh := owned[i%workers][i%len(owned[i%workers])]
		if _, err := handles[sh.id].Entries(sh.last-1, sh.last+1, 1<<20); err != nil {
			return err
		}
	}
	res.EntriesDiskNs = float64(time.Since(t0).Nanoseconds()) / reads
	res.EntriesDiskCPUNs = float64((cpuTime() - c0).Nanoseconds()) / reads
	return nil
}

// idlePhase measures the heap per loaded shard whose log is applied and
// compacted: the store's overhead for a shard that does nothing.
func idlePhase(res *result, dir string, n int) error {
	s, err := shardstore.Open(dir, shardstore.Config{Logger: quiet()})
	if err != nil {
		return err
	}
	data := []byte("x")
	for lo := 0; lo < n; lo += 1000 {
		b := s.NewBatch()
		for id := lo; id < min(lo+1000, n); id++ {
			b.Append(uint64(id), &raftpb.HardState{Term: 1, Vote: 1, Commit: 1},
				[]raftpb.Entry{{Term: 1, Index: 1, Data: data}})
			b.SetApplied(uint64(id), 1)
			b.Compact(uint64(id), 1)
		}
		if err := b.Commit(false); err != nil {
			return err
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	s, err = shardstore.Open(dir, shardstore.Config{Logger: quiet()})
	if err != nil {
		return err
	}
	defer s.Close()
	// Load half, then the other half, and take the difference, so memory
	// the database allocates or frees on its own around open cancels out.
	half := n / 2
	if _, err := s.Storage(0); err != nil {
		return err
	}
	h1 := heap()
	for id := 1; id <= half; id++ {
		if _, err := s.Storage(uint64(id)); err != nil {
			return err
		}
	}
	h2 := heap()
	for id := half + 1; id < n; id++ {
		if _, err := s.Storage(uint64(id)); err != nil {
			return err
		}
	}
	h3 := heap()
	a, b := float64(h2-h1)/float64(half), float64(h3-h2)/float64(n-1-half)
	res.IdleBytesPerShard = (a + b) / 2
	return nil
}

func heap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// countingFS counts the bytes written through it.
type countingFS struct {
	vfs.FS
	written atomic.Int64
}

func (c *countingFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, n: &c.written}, nil
}

func (c *countingFS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return c.wrap(c.FS.Create(name, cat))
}

func (c *countingFS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	return c.wrap(c.FS.OpenReadWrite(name, cat, opts...))
}

func (c *countingFS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	return c.wrap(c.FS.ReuseForWrite(oldname, newname, cat))
}

type countingFile struct {
	vfs.File
	n *atomic.Int64
}

func (f *countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.n.Add(int64(n))
	return n, err
}

func (f *countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.n.Add(int64(n))
	return n, err
}

var _ io.Writer = (*countingFile)(nil)
