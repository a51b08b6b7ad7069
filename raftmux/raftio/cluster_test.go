package raftio_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// testTick is the raft tick of the test hosts: short, but long enough that
// a real fsync on a loaded machine does not read as a dead leader.
const testTick = 20 * time.Millisecond

// shardCount is 1,024 in normal runs; the race detector's slowdown on a
// small shared machine makes 64 the honest size there (and in -short).
func shardCount() int {
	if raceEnabled || testing.Short() {
		return 64
	}
	return 1024
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func nodeName(id uint64) string { return "h" + strconv.FormatUint(id, 10) }

func raftID(node string) uint64 {
	if len(node) < 2 || node[0] != 'h' {
		return 0
	}
	id, err := strconv.ParseUint(node[1:], 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// filter is a raftmux.Transport that drops what is sent to the nodes in
// its blocked set, as a network partition would.
type filter struct {
	raftmux.Transport
	blocked atomic.Pointer[[]uint64]
}

func (f *filter) drops(to uint64) bool {
	b := f.blocked.Load()
	return b != nil && slices.Contains(*b, to)
}

func (f *filter) block(nodes []uint64) {
	b := slices.Clone(nodes)
	f.blocked.Store(&b)
}

func (f *filter) Send(to uint64, b *raftmux.RaftBatch) error {
	if f.drops(to) {
		return nil
	}
	return f.Transport.Send(to, b)
}

func (f *filter) SendSnapshotChunk(to uint64, c *raftmux.SnapshotChunk) error {
	if f.drops(to) {
		return nil
	}
	return f.Transport.SendSnapshotChunk(to, c)
}

// host is one running host: Pebble store, loopback netio, raftio
// transport and inbound, raftmux host, a recording KV state machine.
type host struct {
	id      uint64
	store   *shardstore.Store
	storage *raftio.Storage
	net     *netio.Transport
	tr      *raftio.Transport
	filter  *filter
	in      *raftio.Inbound
	h       *raftmux.Host
	kv      *raftmuxtest.KV
	cancel  context.CancelFunc
	done    chan struct{}
}

// cluster is a set of hosts in this process, each with its own Pebble
// directory and its own netio transport on 127.0.0.1.
type cluster struct {
	t    testing.TB
	tune func(*raftmux.Config)
	base string // the hosts' Pebble directories live under it

	mu    sync.Mutex
	hosts map[uint64]*host
	dirs  map[uint64]string // every host ever started, running or not
	addrs map[uint64]string // peer address of each running host

	changesMu sync.Mutex
	changes   []raftmux.LeaderChange
}

func newCluster(t testing.TB, n int, tune func(*raftmux.Config)) *cluster {
	t.Helper()
	c := &cluster{
		t:     t,
		tune:  tune,
		base:  t.TempDir(), // before stopAll: cleanups run last-in first-out
		hosts: make(map[uint64]*host),
		dirs:  make(map[uint64]string),
		addrs: make(map[uint64]string),
	}
	t.Cleanup(c.stopAll)
	for id := uint64(1); id <= uint64(n); id++ {
		c.start(id)
	}
	return c
}

func (c *cluster) names(id uint64) (string, bool) {
	c.mu.Lock()
	_, ok := c.dirs[id]
	c.mu.Unlock()
	return nodeName(id), ok
}

// start starts host id, on its existing Pebble directory if it had one (a
// restart), on a fresh port that the running hosts are told about.
func (c *cluster) start(id uint64) *host {
	c.t.Helper()
	c.mu.Lock()
	dir, ok := c.dirs[id]
	if !ok {
		dir = filepath.Join(c.base, nodeName(id))
		c.dirs[id] = dir
	}
	c.mu.Unlock()
	store, err := shardstore.Open(dir, shardstore.Config{Logger: quiet()})
	if err != nil {
		c.t.Fatal(err)
	}
	hs := &host{id: id, store: store, storage: raftio.NewStorage(store), kv: raftmuxtest.NewKV(nil, true), done: make(chan struct{})}
	hs.kv.Iterate = func(shard uint64, fn func(key, value []byte) bool) error { return store.Iterate(shard, nil, fn) }
	var inbound atomic.Pointer[raftio.Inbound]
	nt, err := netio.New(netio.Config{
		ClusterID:  1,
		NodeID:     nodeName(id),
		Generation: uint64(time.Now().UnixNano()),
		PeerAddr:   "127.0.0.1:0",
		Handler: netio.HandlerFunc(func(cn *netio.Conn, h wire.Header, f []byte) bool {
			in := inbound.Load()
			return in != nil && in.Deliver(cn, h, f)
		}),
		BackoffMin: 10 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond,
		Logger:     quiet(),
	})
	if err != nil {
		_ = store.Close()
		c.t.Fatal(err)
	}
	hs.net = nt
	hs.tr = raftio.NewTransport(nt, c.names)
	hs.filter = &filter{Transport: hs.tr}
	cfg := raftmux.Config{
		NodeID:       id,
		Storage:      hs.storage,
		Transport:    hs.filter,
		StateMachine: hs.kv,
		Workers:      2,
		TickInterval: testTick,
		Logger:       quiet(),
		OnLeaderChange: func(lc raftmux.LeaderChange) {
			c.changesMu.Lock()
			c.changes = append(c.changes, lc)
			c.changesMu.Unlock()
		},
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	h, err := raftmux.NewHost(cfg)
	if err != nil {
		_ = nt.Close()
		_ = store.Close()
		c.t.Fatal(err)
	}
	hs.h = h
	in, err := raftio.NewInbound(raftio.InboundConfig{Receiver: h, RaftID: raftID, Logger: quiet()})
	if err != nil {
		c.t.Fatal(err)
	}
	hs.in = in
	inbound.Store(in)
	nt.OnPeerDown(func(node string) { h.Unreachable(raftID(node)) })
	ctx, cancel := context.WithCancel(context.Background())
	hs.cancel = cancel
	go func() {
		defer close(hs.done)
		in.Run(ctx)
	}()
	c.mu.Lock()
	for oid, addr := range c.addrs {
		nt.SetPeerAddr(nodeName(oid), addr)
		c.hosts[oid].net.SetPeerAddr(nodeName(id), nt.PeerAddr())
	}
	c.addrs[id] = nt.PeerAddr()
	c.hosts[id] = hs
	c.mu.Unlock()
	return hs
}

// stop halts host id abruptly: its sockets close first, then the host and
// its store, with no goodbye to anyone.
func (c *cluster) stop(id uint64) {
	c.mu.Lock()
	hs := c.hosts[id]
	delete(c.hosts, id)
	delete(c.addrs, id)
	c.mu.Unlock()
	_ = hs.net.Close()
	hs.h.Stop()
	hs.cancel()
	<-hs.done
	if err := hs.store.Close(); err != nil {
		c.t.Errorf("host %d: close store: %v", id, err)
	}
}

func (c *cluster) stopAll() {
	for _, id := range c.ids() {
		c.stop(id)
	}
}

func (c *cluster) host(id uint64) *host {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hosts[id]
}

func (c *cluster) ids() []uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var ids []uint64
	for id := range c.hosts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// partition cuts every link between a and b, both ways.
func (c *cluster) partition(a, b []uint64) {
	for _, id := range a {
		c.host(id).filter.block(b)
	}
	for _, id := range b {
		c.host(id).filter.block(a)
	}
}

func (c *cluster) heal() {
	for _, id := range c.ids() {
		c.host(id).filter.block(nil)
	}
}

// report tells every running host but about what the membership layer
// would say of node.
func (c *cluster) report(node uint64, fn func(h *raftmux.Host, node uint64)) {
	for _, id := range c.ids() {
		if id != node {
			fn(c.host(id).h, node)
		}
	}
}

// bootstrap creates shards 0..n-1 on voters and has voter shard%len campaign.
func (c *cluster) bootstrap(n int, voters []uint64) {
	c.t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make([]error, len(voters))
	for i, v := range voters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := uint64(0); s < uint64(n) && errs[i] == nil; s++ {
				// A shard a peer already filled by snapshot is hosted.
				if err := c.host(v).h.Bootstrap(ctx, s, voters); err != nil && !errors.Is(err, raftmux.ErrShardExists) {
					errs[i] = err
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.t.Fatal(err)
	}
	for s := uint64(0); s < uint64(n); s++ {
		if err := c.host(voters[int(s)%len(voters)]).h.Campaign(ctx, s); err != nil {
			c.t.Fatal(err)
		}
	}
}

// obs is the cluster as raftmuxtest observes it.
func (c *cluster) obs() raftmuxtest.Hosts {
	return raftmuxtest.Hosts{TB: c.t, IDs: c.ids, Host: func(id uint64) *raftmux.Host { return c.raftHost(id) }, KV: func(id uint64) *raftmuxtest.KV { return c.kvOf(id) }}
}

// infos returns every running host's view of every shard it hosts.
func (c *cluster) infos() map[uint64]map[uint64]raftmux.Info { return c.obs().Infos() }

func (c *cluster) leaders(shards []uint64) (map[uint64]uint64, bool) { return c.obs().Leaders(shards) }

func (c *cluster) waitLeaders(shards []uint64, timeout time.Duration) map[uint64]uint64 {
	c.t.Helper()
	return c.obs().WaitLeaders(shards, timeout)
}

func (c *cluster) waitFor(what string, timeout time.Duration, cond func() bool) {
	c.t.Helper()
	raftmuxtest.WaitFor(c.t, what, timeout, cond)
}

// propose sends cmd to shard's leader, following NotLeader hints.
func (c *cluster) propose(shard uint64, cmd []byte) (uint64, error) {
	return c.obs().Propose(shard, cmd, 15*time.Second)
}

// proposeAll proposes cmd(s) to every shard in shards, 32 at a time.
func (c *cluster) proposeAll(shards []uint64, cmd func(s uint64) []byte) {
	c.t.Helper()
	sem := make(chan struct{}, 32)
	errc := make(chan error, len(shards))
	for _, s := range shards {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := c.propose(s, cmd(s))
			errc <- err
		}()
	}
	for range shards {
		if err := <-errc; err != nil {
			c.t.Fatal(err)
		}
	}
}

// keys counts the state-machine keys host id stores for shard.
func (c *cluster) keys(id, shard uint64) int {
	n := 0
	if err := c.host(id).store.Iterate(shard, nil, func(_, _ []byte) bool { n++; return true }); err != nil {
		c.t.Fatal(err)
	}
	return n
}

func (c *cluster) value(id, shard uint64, key string) string {
	v, err := c.host(id).store.Get(shard, []byte(key))
	if err != nil {
		c.t.Fatal(err)
	}
	return string(v)
}

func (c *cluster) checkSameLogs(shards []uint64) {
	c.t.Helper()
	c.obs().CheckSameLogs(shards)
}

func shardList(n int) []uint64 { return raftmuxtest.ShardList(n) }

func quiesced(c *cluster, shard uint64) bool { return c.obs().Quiesced(shard) }

// cmd is a command whose KV key is the whole command: 8 bytes.
func cmd(tag byte, n uint64) []byte { return fmt.Appendf(nil, "%c%07d", tag, n) }

// raftHost returns host id's raft host, or nil when it is not running.
func (c *cluster) raftHost(id uint64) *raftmux.Host {
	if hs := c.host(id); hs != nil {
		return hs.h
	}
	return nil
}

// kvOf returns running host id's state machine.
func (c *cluster) kvOf(id uint64) *raftmuxtest.KV { return c.host(id).kv }
