package shardstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
)

// FormatVersion is the on-disk format this build writes and the newest it
// reads. Version 2 stopped writing the HardState when only its commit index
// moved (see Batch.Append); a build that reads only version 1 would start
// raft from a commit index below the applied one, so a version-1 store is
// marked version 2 when this build opens it. Version 3 stores the epoch a
// record was written at in front of its value; an older store's records
// are rewritten at epoch 0 when this build opens it, before it is marked.
// Version 4 may hold shards born of a split (Batch.Seed) beside the shard
// they split from, marked split, which a build without splits would keep
// serving and never route to its halves; an older store needs no change.
const FormatVersion = 4

// formatFile names the file beside the Pebble files that marks a directory as
// a Shoal store and records its format version.
const (
	formatFile  = "FORMAT"
	formatMagic = "shoal-store"
)

// Defaults of Config.
const (
	// DefaultCacheBudgetBytes is the default budget shared by every shard's
	// recent-entry cache: 64 MiB, so 10,000 shards average 6.5 KiB each
	// (about 50 entries of 128 bytes) while a busy shard may hold more.
	DefaultCacheBudgetBytes = 64 << 20
	// DefaultMemTableBytes is the default Pebble memtable size: 32 MiB. A
	// raft log is written, read back while hot and truncated soon after; a
	// large memtable lets most entries die before they are flushed.
	DefaultMemTableBytes = 32 << 20
	// DefaultBlockCacheBytes is the default Pebble block cache: 64 MiB; the
	// entry caches serve the hot raft reads, the block cache the cold ones
	// and the records' (a topic's first request since the store opened
	// reads its bounds and sessions: after a failover, for every topic
	// taken over; docs/decisions/shardstore-block-cache.md).
	DefaultBlockCacheBytes = 64 << 20
	// shardCacheShare: one shard's cache may use at most 1/shardCacheShare
	// of the budget, so one busy shard cannot evict every other.
	shardCacheShare = 8
	// MaxLogSyncGap bounds Config.LogSyncGap: every synced commit of a
	// busy store may wait that long.
	MaxLogSyncGap = 100 * time.Millisecond
)

// Config configures a Store. The zero value is valid.
type Config struct {
	// FS is the filesystem; nil means the OS filesystem (vfs.Default).
	// Tests pass vfs.NewCrashableMem() to simulate crashes.
	FS vfs.FS
	// CacheBudgetBytes bounds the memory of all shards' recent-entry caches
	// together. 0 means DefaultCacheBudgetBytes; negative disables the cache
	// (every Entries call reads Pebble).
	CacheBudgetBytes int64
	// MemTableBytes is Pebble's memtable size. 0 means DefaultMemTableBytes.
	MemTableBytes uint64
	// LogSyncRuntime syncs the write-ahead log on the OS filesystem through
	// the Go runtime's system call path, which hands the P on while the
	// disk works, instead of a raw fdatasync that keeps it
	// (walsync_linux.go). The raw call costs a node less CPU per sync; this
	// path keeps a node fully running (membership, reads) through a sync
	// that stalls for seconds, where with the raw call a stop of the world
	// (a GC phase) waits for the sync to end.
	LogSyncRuntime bool
	// LogSyncGap is the least time from the end of one sync of the
	// write-ahead log to the start of the next: synced commits that come
	// within it wait for its end and share one fdatasync. 0 syncs as soon
	// as a commit asks. The gap holds only while the CPU is busy
	// (syncgap.go: this process uses nearly all it may, or the machine's
	// cores are nearly all in use); otherwise the log syncs at once. Each
	// sync costs a fixed share of the CPU (about 120 µs per fdatasync on a
	// virtual machine), which fewer, fuller syncs save where CPU bounds the
	// writes; elsewhere a gap would only make writes wait
	// (docs/decisions/shardstore-log-sync-gap.md). At most MaxLogSyncGap.
	// Pebble times the gap on the wall clock.
	LogSyncGap time.Duration
	// syncGapAlways holds the gap whether or not the CPU is busy (tests).
	syncGapAlways bool
	// BlockCacheBytes is Pebble's block cache size. 0 means
	// DefaultBlockCacheBytes.
	BlockCacheBytes int64
	// Logger receives the store's and Pebble's messages; nil means
	// slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.FS == nil {
		c.FS = vfs.Default
	}
	if c.CacheBudgetBytes == 0 {
		c.CacheBudgetBytes = DefaultCacheBudgetBytes
	}
	if c.CacheBudgetBytes < 0 {
		c.CacheBudgetBytes = 0
	}
	if c.MemTableBytes == 0 {
		c.MemTableBytes = DefaultMemTableBytes
	}
	if c.MemTableBytes < 1<<20 || c.MemTableBytes > 1<<30 {
		return c, fmt.Errorf("shardstore: MemTableBytes %d outside [1 MiB, 1 GiB]: %w", c.MemTableBytes, ErrInvalid)
	}
	if c.LogSyncGap < 0 || c.LogSyncGap > MaxLogSyncGap {
		return c, fmt.Errorf("shardstore: LogSyncGap %v outside [0, %v]: %w", c.LogSyncGap, MaxLogSyncGap, ErrInvalid)
	}
	if c.BlockCacheBytes == 0 {
		c.BlockCacheBytes = DefaultBlockCacheBytes
	}
	if c.BlockCacheBytes < 0 {
		return c, fmt.Errorf("shardstore: negative BlockCacheBytes: %w", ErrInvalid)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}

// Store is one node's database. All methods are safe for concurrent use,
// within the single-writer-per-shard rule of the package doc.
type Store struct {
	dir    string
	cfg    Config
	db     *pebble.DB
	log    *slog.Logger
	closed atomic.Bool

	mu     sync.RWMutex // guards shards and ring
	shards map[uint64]*RaftStorage
	ring   []*RaftStorage // CLOCK order for cache eviction

	cache entryCache

	topicsMu sync.Mutex
	topics   map[string]*topicLog

	// free holds released batches for NewBatch (at most maxFreeBatches):
	// a batch keeps its per-shard slices and map, sized to the rounds it
	// carried. A free list rather than a sync.Pool, which the collector
	// empties, and under the raft layer's allocation rate it collects often.
	freeMu sync.Mutex
	free   []*Batch

	// floors: the topics that may have an epoch floor (floorfilter.go).
	floors floorFilter
}

// maxFreeBatches bounds the released batches a Store keeps for reuse (a
// few per raft worker), and maxKeptOps the shards a kept batch keeps room
// for.
const (
	maxFreeBatches   = 8
	maxKeptOps       = 4096
	maxKeptHeldBytes = 1 << 20
)

// Open opens the store in dir, creating it if dir is missing or empty. A
// directory with files but no store marker fails with ErrNotStore, one
// written by a newer format with ErrNewerFormat; both before anything is
// written.
func Open(dir string, cfg Config) (*Store, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	older, err := prepareDir(cfg.FS, dir)
	if err != nil {
		return nil, err
	}
	pfs := cfg.FS
	if pfs == vfs.Default && !cfg.LogSyncRuntime {
		pfs = walSyncFS(pfs)
	}
	opts := &pebble.Options{
		FS:                 pfs,
		Logger:             pebbleLogger{cfg.Logger},
		MemTableSize:       cfg.MemTableBytes,
		CacheSize:          cfg.BlockCacheBytes,
		FormatMajorVersion: pebble.FormatNewest,
	}
	if cfg.LogSyncGap > 0 {
		g := newSyncGap(cfg.LogSyncGap)
		if cfg.syncGapAlways {
			g.read = nil
		}
		opts.WALMinSyncInterval = g.interval
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("shardstore: open %s: %w", dir, err)
	}
	s := &Store{
		dir:    dir,
		cfg:    cfg,
		db:     db,
		log:    cfg.Logger,
		shards: make(map[uint64]*RaftStorage),
		topics: make(map[string]*topicLog),
	}
	s.cache.init(cfg.CacheBudgetBytes)
	if older != 0 {
		err := s.migrateRecords(older)
		if err == nil {
			err = writeMarker(cfg.FS, dir)
		}
		if err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	if err := s.loadFloors(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return s, nil
}

// prepareDir checks that dir is empty, missing or a store of a format this
// build reads, and marks a new store. It returns the version of an older
// store (0: new or current), which Open marks with this build's version
// once it rewrote what changed. Nothing is written unless the directory is
// new.
func prepareDir(fsys vfs.FS, dir string) (older uint64, err error) {
	names, err := fsys.List(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("shardstore: open %s: %w", dir, err)
	}
	if len(names) > 0 {
		if !slices.Contains(names, formatFile) {
			return 0, fmt.Errorf("shardstore: open %s: %w: %d files but no %s marker", dir, ErrNotStore, len(names), formatFile)
		}
		v, err := checkFormat(fsys, dir)
		if err != nil || v == FormatVersion {
			return 0, err
		}
		return v, nil
	}
	if err := mkdirDurable(fsys, dir); err != nil {
		return 0, fmt.Errorf("shardstore: create %s: %w", dir, err)
	}
	return 0, writeMarker(fsys, dir)
}

// mkdirDurable creates dir and its missing parents, syncing the parent of
// each one it creates: a directory entry that was never synced may vanish
// in a crash, and with it a store whose every write was synced.
func mkdirDurable(fsys vfs.FS, dir string) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	parent := fsys.PathDir(dir)
	if parent != dir {
		if err := mkdirDurable(fsys, parent); err != nil {
			return err
		}
	}
	if err := fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if parent == dir {
		return nil
	}
	return syncDir(fsys, parent)
}

// writeMarker writes the format marker of this build into dir, atomically.
func writeMarker(fsys vfs.FS, dir string) error {
	tmp := fsys.PathJoin(dir, formatFile+".tmp")
	f, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fmt.Errorf("shardstore: create %s: %w", tmp, err)
	}
	_, err = fmt.Fprintf(f, "%s %d\n", formatMagic, FormatVersion)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsys.Rename(tmp, fsys.PathJoin(dir, formatFile))
	}
	if err == nil {
		err = syncDir(fsys, dir)
	}
	if err != nil {
		return fmt.Errorf("shardstore: mark %s: %w", dir, err)
	}
	return nil
}

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// checkFormat returns the format version of the store in dir, an error if
// this build cannot read it.
func checkFormat(fsys vfs.FS, dir string) (uint64, error) {
	name := fsys.PathJoin(dir, formatFile)
	f, err := fsys.Open(name)
	if err != nil {
		return 0, fmt.Errorf("shardstore: open %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return 0, fmt.Errorf("shardstore: read %s: %w", name, err)
	}
	magic, ver, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
	if !ok || magic != formatMagic {
		return 0, fmt.Errorf("shardstore: %s: %w: bad marker %q", name, ErrNotStore, bytes.TrimSpace(b))
	}
	v, err := strconv.ParseUint(ver, 10, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("shardstore: %s: %w: bad format version %q", name, ErrNotStore, ver)
	}
	if v > FormatVersion {
		return 0, fmt.Errorf("shardstore: %s: %w: version %d, this build reads up to %d", name, ErrNewerFormat, v, FormatVersion)
	}
	return v, nil
}

// Close flushes the memtable and releases the database. Every user of the
// store must have stopped; handles obtained from it fail afterwards.
//
// The flush is not for durability (synced batches are durable already): a
// table Pebble writes while replaying its WAL at open is read without its
// block cache, so a clean shutdown leaves no WAL to replay.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	if err := s.db.Flush(); err != nil {
		s.log.Warn("shardstore: flush before close", "dir", s.dir, "err", err)
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("shardstore: close %s: %w", s.dir, err)
	}
	return nil
}

// Shards returns the shards with any state on disk, sorted.
func (s *Store) Shards() []uint64 {
	if s.closed.Load() {
		return nil
	}
	var out []uint64
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{prefixShard}, UpperBound: []byte{prefixShard + 1}})
	if err != nil {
		s.log.Error("shardstore: list shards", "err", err)
		return nil
	}
	defer it.Close()
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < shardPrefixLen {
			valid = it.Next()
			continue
		}
		shard := binary.BigEndian.Uint64(k[1:])
		out = append(out, shard)
		if shard == ^uint64(0) {
			break
		}
		valid = it.SeekGE(appendShardPrefix(nil, shard+1))
	}
	if err := it.Error(); err != nil {
		s.log.Error("shardstore: list shards", "err", err)
	}
	return out
}

// Storage returns the raft.Storage of shard, loading its state from disk or
// creating it empty. The same handle is returned until DeleteShard.
func (s *Store) Storage(shard uint64) (*RaftStorage, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	s.mu.RLock()
	r := s.shards[shard]
	s.mu.RUnlock()
	if r != nil {
		return r, nil
	}
	r, err := s.loadShard(shard)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.shards[shard]; cur != nil {
		return cur, nil
	}
	r.ringPos = len(s.ring)
	s.ring = append(s.ring, r)
	s.shards[shard] = r
	return r, nil
}

// loadShard reads a shard's log bounds, HardState and applied index.
func (s *Store) loadShard(shard uint64) (*RaftStorage, error) {
	r := &RaftStorage{store: s, shard: shard}
	key := make([]byte, 0, logKeyLen)
	var err error
	if err = s.getValue(appendStateKey(key[:0], shard, stateTruncated), func(k, v []byte) error {
		r.truncIndex, r.truncTerm, err = decodeTruncated(k, v)
		return err
	}); err != nil {
		return nil, err
	}
	if err = s.getValue(appendStateKey(key[:0], shard, stateHardState), func(k, v []byte) error {
		r.hs, err = decodeHardState(k, v)
		return err
	}); err != nil {
		return nil, err
	}
	if err = s.getValue(appendStateKey(key[:0], shard, stateApplied), func(k, v []byte) error {
		r.applied, err = decodeUint64Value(k, v)
		return err
	}); err != nil {
		return nil, err
	}
	r.last, r.lastTerm = r.truncIndex, r.truncTerm
	lo, hi := logSpan(shard, r.truncIndex+1, 0)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, fmt.Errorf("shardstore: shard %d: %w", shard, err)
	}
	if it.Last() {
		k := it.Key()
		if len(k) != logKeyLen {
			it.Close()
			return nil, corrupt(k, errors.New("bad log key length"))
		}
		v, err := it.ValueAndErr()
		if err == nil {
			r.lastTerm, err = decodeEntryTerm(k, v)
		}
		if err != nil {
			it.Close()
			return nil, err
		}
		r.last = binary.BigEndian.Uint64(k[shardPrefixLen+1:])
	}
	if err := it.Close(); err != nil {
		return nil, fmt.Errorf("shardstore: shard %d: %w", shard, err)
	}
	if c := max(r.hs.commit, r.applied); c > r.last {
		return nil, fmt.Errorf("shardstore: shard %d: %w: commit %d (applied %d) beyond last index %d", shard, ErrCorrupt, r.hs.commit, r.applied, r.last)
	}
	return r, nil
}

// getValue calls fn with the value of key, or does nothing if key is absent.
func (s *Store) getValue(key []byte, fn func(k, v []byte) error) error {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("shardstore: read %s: %w", keyString(key), err)
	}
	defer closer.Close()
	return fn(key, v)
}

// Applied returns the applied index recorded for shard (0 if none).
func (s *Store) Applied(shard uint64) (uint64, error) {
	if s.closed.Load() {
		return 0, ErrClosed
	}
	s.mu.RLock()
	r := s.shards[shard]
	s.mu.RUnlock()
	if r != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.applied, nil
	}
	var applied uint64
	err := s.getValue(appendStateKey(nil, shard, stateApplied), func(k, v []byte) (err error) {
		applied, err = decodeUint64Value(k, v)
		return err
	})
	return applied, err
}

// Tombstone returns the tombstone DeleteShard left for shard; ok is false
// if there is none.
func (s *Store) Tombstone(shard uint64) (t Tombstone, ok bool, err error) {
	if s.closed.Load() {
		return Tombstone{}, false, ErrClosed
	}
	err = s.getValue(appendTombKey(nil, shard), func(k, v []byte) error {
		h, err := decodeHardState(k, v)
		t, ok = Tombstone{Term: h.term, Vote: h.vote, Applied: h.commit}, err == nil
		return err
	})
	return t, ok, err
}

// Get returns a copy of the value of key in shard's state-machine data, or
// (nil, nil) if it is absent.
func (s *Store) Get(shard uint64, key []byte) ([]byte, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	var out []byte
	err := s.getValue(appendDataKey(nil, shard, key), func(_, v []byte) error {
		out = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	return out, err
}

// Iterate calls fn for each key of shard's state-machine data that starts
// with prefix, in key order, until fn returns false. key and value are valid
// only during the call.
func (s *Store) Iterate(shard uint64, prefix []byte, fn func(key, value []byte) bool) error {
	if s.closed.Load() {
		return ErrClosed
	}
	lo, hi := dataSpan(shard, prefix)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("shardstore: shard %d: iterate: %w", shard, err)
	}
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return fmt.Errorf("shardstore: %s: %w", keyString(it.Key()), err)
		}
		if !fn(it.Key()[dataPrefixLen:], v) {
			break
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("shardstore: shard %d: iterate: %w", shard, err)
	}
	return nil
}

// Tombstone is what the store keeps of a shard it deleted: the term and
// vote its replica last held and the index it had applied. A replica of
// the shard created here later starts from that term and vote, so it never
// votes twice in one term, and knows which snapshots come from a history
// it has already passed.
type Tombstone struct {
	Term, Vote, Applied uint64
}

// DeleteShard removes every key of shard (log, state, data) and writes its
// tombstone, in one synced batch, and forgets its in-memory state. Handles
// to it fail with ErrShardDeleted afterwards.
func (s *Store) DeleteShard(shard uint64, tomb Tombstone) error {
	if s.closed.Load() {
		return ErrClosed
	}
	lo, hi := shardSpan(shard)
	b := s.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return fmt.Errorf("shardstore: delete shard %d: %w", shard, err)
	}
	hs := raftpb.HardState{Term: tomb.Term, Vote: tomb.Vote, Commit: tomb.Applied}
	if err := b.Set(appendTombKey(nil, shard), appendHardState(nil, &hs), nil); err != nil {
		return fmt.Errorf("shardstore: delete shard %d: %w", shard, err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("shardstore: delete shard %d: %w", shard, err)
	}
	s.mu.Lock()
	r := s.shards[shard]
	if r != nil {
		delete(s.shards, shard)
		last := s.ring[len(s.ring)-1]
		s.ring[r.ringPos] = last
		last.ringPos = r.ringPos
		s.ring[len(s.ring)-1] = nil
		s.ring = s.ring[:len(s.ring)-1]
	}
	s.mu.Unlock()
	if r != nil {
		r.mu.Lock()
		r.deleted = true
		s.cache.release(r.dropCacheLocked())
		r.mu.Unlock()
	}
	return nil
}

// pebbleLogger routes Pebble's messages to slog; its routine messages are
// debug level.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf is Pebble's report of a broken internal invariant; Pebble requires
// that it does not return.
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

// Metrics returns Pebble's metrics (block cache, compactions, WAL) for
// export by the node.
func (s *Store) Metrics() *pebble.Metrics { return s.db.Metrics() }

// CacheBytes returns the memory the recent-entry caches hold now.
func (s *Store) CacheBytes() int64 { return s.cache.used.Load() }
