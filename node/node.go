package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/shoalmq/shoal/internal/session"
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/node/admin"
	"github.com/shoalmq/shoal/node/birth"
	"github.com/shoalmq/shoal/node/dispatch"
	"github.com/shoalmq/shoal/node/events"
	"github.com/shoalmq/shoal/node/feed"
	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/node/life"
	"github.com/shoalmq/shoal/node/metasync"
	"github.com/shoalmq/shoal/node/reconcile"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/sched"
	"github.com/shoalmq/shoal/node/security"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/node/view"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/node/world"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// Errors of the node's life cycle.
var (
	// ErrStarted: Start called twice.
	ErrStarted = life.ErrStarted
	// ErrClosed: the node is closed.
	ErrClosed = life.ErrClosed
	// ErrIDCollision: two member ids map to the same raft id.
	ErrIDCollision = view.ErrIDCollision
)

// localShard is the store's slot for what belongs to this node rather than
// to a raft group: the topics it was told to own, their epoch floors and
// the birth marker. It is never a raft shard (shard ids are below
// Config.Shards).
const localShard = shardstore.NodeSlot

// Node is one Shoal node: SWIM membership, the raft groups of the shards it
// hosts, the metadata state machine of each, the topics it owns, and the
// client and peer listeners.
type Node struct {
	cfg Config
	// hooks: a test's seams (config.go); zero in production.
	hooks testHooks
	log   *slog.Logger
	gen   uint64
	self  uint64 // raft id

	store *shardstore.Store
	rs    *raftio.Storage
	sm    *shardsm.Machine // the shards' state machine (shardsm.go)
	// records: the topics' records this node owns, and their handoffs
	// (node/records; records.go).
	records *records.Keeper

	net  world.PeerNet // netio or a caller's network
	rt   *raftio.Transport
	in   *raftio.Inbound
	host *raftmux.Host
	swim world.Membership // a SWIM driver or a caller's
	// started: the real transport and SWIM driver (nil when a caller
	// drives the node; node/world); clientAddr and peerAddr what the node
	// says of itself.
	started              *world.Started
	clientAddr, peerAddr string
	// drive: when a driven node's raft host next ticks (NewDriven).
	drive world.Drive

	leaders *router.LeaderTable
	// cache is the routing cache, emptied every
	// Config.MetadataSyncInterval so that no cached route is older than
	// that (by the events room).
	cache *router.Cache

	// view: the membership as last built from SWIM and the marks; views
	// builds it and knows the members' raft ids (node/view; view.go).
	view  atomic.Pointer[view.View]
	views *view.Builder

	// lease: the ownership protocol on this node, as an owner and as a
	// shard leader (node/lease; lease.go).
	lease *lease.Agent
	// ownFeed: the ownership events for an embedding program, pushed
	// once a change is durable, in the order the lease room makes
	// changes, from the first call of OwnershipEvents on (node/feed,
	// embed.go).
	ownFeed *feed.Feed
	// The node's duties (sched.go): the events, the reconcile pass, the
	// ownership messages due (dutyTask), the lease rounds with the rounds
	// peers send (leaseTask), the replies to this node's rounds, and the
	// raft frames from peers. eventsTask runs the events room's passes,
	// reconcileTask the reconcile room's Driver, and dutyTask, leaseTask
	// and leaseReplyTask the lease room's work (lease.Task).
	eventsTask, reconcileTask, dutyTask   *sched.Task
	leaseTask, leaseReplyTask, raftInTask *sched.Task
	// clock is the node's monotonic clock (time.Now); afterFunc its
	// timers (time.AfterFunc).
	clock     func() time.Time
	afterFunc func(d time.Duration, f func()) func() bool
	// ownedFn: Runtime.Owned (nil on a started node).
	ownedFn func(topic string, held, floor uint64)
	// randIntN draws the node's random choices (a peer to sync with).
	randMu  sync.Mutex
	randSrc *rand.Rand

	// srv serves metadata requests, on the shard's leader or forwarded to
	// it, and the forwards of peers (node/serve; serve.go).
	srv *serve.Server
	// admin serves the operators' requests (node/admin; admin.go).
	admin *admin.Handler
	// disp hands every frame the node receives to its room
	// (node/dispatch; dispatch.go).
	disp *dispatch.Dispatcher

	// events: the event loop, and which shards the replicas here lead
	// (node/events; events.go).
	events *events.Loop
	// birth: whether the node's cluster is born and whether the node is
	// ready (node/birth).
	birth *birth.State

	// marks: the operators' marks (drain, removals; marks.go); viewDirty
	// asks the event loop to rebuild the view although SWIM's members
	// did not change.
	marks     *reconcile.Marks
	viewDirty atomic.Bool

	// msync: the cluster metadata sync (metasync.go).
	msync     *metasync.Sync
	startedAt time.Time
	// rec and reconciler: the reconcile room's Controller (group changes,
	// owners' moves, strays, birth) and the Driver that makes its
	// decisions (reconcile.go).
	rec        *reconcile.Controller
	reconciler *reconcile.Driver

	// adm: the slots and bytes of the requests being served (node/serve).
	adm *serve.Admission
	sec security.Clients // client tokens (auth.go)

	// life: the node's life cycle and the work it spawns (node/life;
	// runtime.go).
	life *life.Cycle
	// watch answers Watch and ListTopics, and holds the watches waiting
	// for a change (node/watch; watch.go).
	watch   *watch.Server
	closeMu sync.Mutex
	closed  bool

	counters counters
	lat      latencyHists
}

type counters struct {
	// transfers counts the leaderships handed over by an operator's
	// request or a leaving node (the reconcile room counts its own).
	transfers atomic.Uint64
}

// New validates cfg, opens the store in cfg.DataDir and raises and persists
// the node's generation. Nothing listens until Start.
func New(cfg Config) (*Node, error) { return newHooked(cfg, testHooks{}) }

// newHooked is New with a test's seams.
func newHooked(cfg Config, hooks testHooks) (*Node, error) {
	if err := cfg.Fill(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("node: data dir: %w", err)
	}
	gen, err := shardstore.RaiseGeneration(cfg.DataDir, time.Now())
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	now := time.Now()
	return newNode(cfg, hooks, nil, gen, time.Now, realAfter, uint64(now.UnixNano()))
}

// newNode opens the store on fs (nil: the OS's) and builds the node.
func newNode(cfg Config, hooks testHooks, fs vfs.FS, gen uint64, clock func() time.Time, after func(time.Duration, func()) func() bool, seed uint64) (*Node, error) {
	// A store on a filesystem given (NewDriven's) runs in its caller's
	// time; Pebble would time a sync gap on the wall clock.
	gap := max(cfg.StoreLogSyncGap, 0)
	if fs != nil {
		gap = 0
	}
	store, err := shardstore.Open(filepath.Join(cfg.DataDir, "store"), shardstore.Config{FS: fs, Logger: cfg.Logger, MemTableBytes: cfg.StoreMemTableBytes, LogSyncRuntime: cfg.StoreLogSyncRuntime, LogSyncGap: gap})
	if err != nil {
		return nil, fmt.Errorf("node: open store: %w", err)
	}
	if err := settleShards(&cfg, store); err != nil {
		_ = store.Close()
		return nil, err
	}
	cache, err := router.NewCache(router.CacheConfig{Capacity: cfg.RouteCacheEntries})
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("node: cache: %w", err)
	}
	n := &Node{
		life:    life.New(),
		cfg:     cfg,
		hooks:   hooks,
		log:     cfg.Logger.With("node", cfg.ID),
		gen:     gen,
		self:    RaftID(cfg.ID),
		store:   store,
		rs:      raftio.NewStorage(store, localShard),
		leaders: router.NewLeaderTable(cfg.Shards),
		adm:     serve.NewAdmission(cfg.MaxRequests, cfg.MaxRequestBytes),

		clock:     clock,
		afterFunc: after,
		randSrc:   rand.New(rand.NewPCG(seed, RaftID(cfg.ID))),
		ownFeed:   feed.New(),
	}
	n.initSecurity()
	n.cache = cache
	// The rooms, in the order each needs the ones before it.
	rooms := []func() error{
		n.loadMarks,
		func() (err error) { n.views, err = n.newViews(); return err },
		func() (err error) { n.msync, err = n.newMetaSync(); return err },
		func() (err error) { n.watch, err = n.newWatch(); return err },
		func() (err error) { n.records, err = n.newRecords(); return err },
		func() (err error) { n.rec, err = n.newReconcile(); return err },
		func() error { n.sm = n.newStateMachine(); return nil },
		func() (err error) { n.lease, err = n.newLease(); return err },
		func() (err error) { n.events, err = n.newEvents(); return err },
		func() (err error) { n.reconciler, err = n.newReconciler(); return err },
		func() (err error) {
			own := session.WithIDWindowed(session.DrawID(seed, cfg.ID, gen))
			n.srv, err = n.newServer(n.randSrc.Uint64()>>1, own)
			return err
		},
		func() (err error) { n.admin, err = n.newAdmin(); return err },
		func() (err error) { n.disp, err = n.newDispatch(); return err },
	}
	for _, build := range rooms {
		if err := build(); err != nil {
			_ = store.Close()
			return nil, err
		}
	}
	// The records room asks the lease room, built after it, of the
	// topics held.
	n.records.SetLease(n.lease)
	n.eventsTask = newTask(n, n.events.Run)
	n.reconcileTask = newTask(n, n.reconciler.Run)
	n.dutyTask = newTask(n, n.lease.RunDue)
	n.leaseTask = newTask(n, n.lease.RunRounds)
	n.leaseReplyTask = newTask(n, n.lease.RunReplies)
	n.raftInTask = newTask(n, n.takeRaftFrames)
	n.view.Store(view.Empty())
	if err := n.lease.Load(); err != nil {
		_ = store.Close()
		return nil, err
	}
	born, err := store.Born()
	if err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("node: read birth marker: %w", err)
	}
	n.birth = birth.New(birth.Config{Born: born, Persist: n.persistBirth, Clock: clock, Logger: n.log})
	return n, nil
}

// Start binds the listeners, opens the raft groups found in the store,
// starts SWIM and joins through cfg.Join. ctx bounds the start only. After
// a failed Start, Close releases what was started.
func (n *Node) Start(ctx context.Context) error {
	if err := n.life.Begin(nil, nil); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	w, err := world.Listen(world.StartConfig{
		ClusterID:    n.cfg.ClusterID,
		NodeID:       n.cfg.ID,
		Generation:   n.gen,
		Rack:         n.cfg.Rack,
		Secret:       n.cfg.Secret,
		ClientAddr:   n.cfg.ClientAddr,
		PeerAddr:     n.cfg.PeerAddr,
		SwimAddr:     n.cfg.SwimAddr,
		Join:         n.cfg.Join,
		Swim:         n.cfg.SwimConfig(),
		Loops:        n.cfg.NetLoops,
		Security:     &n.cfg.Security,
		Clients:      &n.sec,
		Handler:      netio.HandlerFunc(func(c *netio.Conn, h wire.Header, frame []byte) bool { return n.disp.Deliver(c, h, frame) }),
		Overloaded:   serve.Overloaded,
		WrapConn:     n.hooks.swimConn,
		WrapPushPull: n.hooks.pushPull,
		Logger:       n.log,
	})
	if err != nil {
		return fmt.Errorf("node: listen: %w", err)
	}
	nt := w.Net
	n.net, n.started = nt, w
	n.clientAddr, n.peerAddr = nt.ClientAddr(), nt.PeerAddr()
	if err := n.openRaft(nt, nil); err != nil {
		return err
	}
	nt.OnPeerDown(n.PeerDown)
	if err := w.JoinSwim(n.marks.Meta(), n.events.Push); err != nil {
		return fmt.Errorf("node: swim: %w", err)
	}
	n.swim = w.Swim
	n.records.Enable()
	n.life.Go(n.pumpOwnershipEvents)
	n.open()
	n.log.Info("node started", "generation", n.gen, "client", nt.ClientAddr(), "peer", nt.PeerAddr(), "swim", w.Swim.Self().SwimAddr)
	w.LogSecurity()
	return nil
}

// Ready is closed once the node serves requests: its cluster is born and
// it knows the leader of every shard (or a grace period after birth ran out).
func (n *Node) Ready() <-chan struct{} { return n.birth.Ready() }

// maybeReady marks a born node ready once its cluster metadata is synced
// and it knows its leaders (reconcile.Controller.Ready).
func (n *Node) maybeReady() {
	n.birth.Check(func(bornAt time.Time) bool {
		var rows []router.ShardLeader
		rows, _ = n.leaders.Snapshot(rows)
		if !n.metadataSynced() || !n.rec.Ready(len(rows), bornAt, n.clock()) {
			return false
		}
		vs := n.MetadataVersions()
		n.log.Info("ready", "leaders_known", len(rows), "membership_version", vs.Membership, "ring_version", vs.Ring, "leader_version", vs.ShardLeaders)
		return true
	})
}

// Addrs returns the bound client, peer and SWIM addresses (empty before
// Start).
func (n *Node) Addrs() (client, peer, swimAddr string) {
	client, peer = n.clientAddr, n.peerAddr
	if n.swim != nil {
		swimAddr = n.swim.Self().SwimAddr
	}
	return
}

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.ID }

// Generation returns this life's generation.
func (n *Node) Generation() uint64 { return n.gen }

func (n *Node) nameOf(id uint64) (string, bool) { return n.views.NameOf(id) }

// settleShards sets cfg.Shards from the count the store recorded at the
// node's first start, or records it now (Config.AdoptShards).
func settleShards(cfg *Config, store *shardstore.Store) error {
	stored, recorded, err := store.BaseShards()
	if err != nil {
		return fmt.Errorf("node: %w", err)
	}
	born, err := store.Born()
	if err != nil {
		return fmt.Errorf("node: read birth marker: %w", err)
	}
	record, err := cfg.AdoptShards(stored, recorded, born)
	if err != nil || !record {
		return err
	}
	b := store.NewBatch()
	b.PutBaseShards(cfg.Shards)
	return b.Commit(true)
}

// persistBirth writes the birth marker (birth.Config.Persist).
func (n *Node) persistBirth() error {
	b := n.store.NewBatch()
	b.PutBorn()
	return b.Commit(true)
}

// Close stops the node abruptly but cleanly: SWIM stops without a word,
// connections close, raft stops, every goroutine ends, the store closes.
func (n *Node) Close() error {
	n.closeMu.Lock()
	defer n.closeMu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	var errs []error
	if n.life.Close() {
		n.life.Cancel()
		if n.started != nil {
			errs = append(errs, n.started.Close())
		}
		if n.host != nil {
			n.host.Stop()
		}
		n.events.Close()
		n.life.Wait()
	}
	if err := n.store.Close(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// openRaft builds the raft transport over peers, the raft host (its
// configuration as Start and NewDriven share it, then adjusted) and its
// inbound, and marks a node whose store holds shards born.
func (n *Node) openRaft(peers world.PeerNet, adjust func(*raftmux.Config)) error {
	n.rt = raftio.NewTransport(peers, n.nameOf)
	hc := n.hostConfig()
	if adjust != nil {
		adjust(&hc)
	}
	host, err := raftmux.NewHost(hc)
	if err != nil {
		return fmt.Errorf("node: raft host: %w", err)
	}
	n.host = host
	if n.in, err = raftio.NewInbound(raftio.InboundConfig{Receiver: host, RaftID: RaftID, Logger: n.log}); err != nil {
		return fmt.Errorf("node: raft inbound: %w", err)
	}
	if ids, _ := n.rs.Shards(); len(ids) > 0 && !n.birth.Born() {
		n.birth.MarkBorn()
	}
	return nil
}

// open starts serving once every part is wired (Start and NewDriven): the
// view built, requests served, the duties started.
func (n *Node) open() {
	n.rebuildView()
	n.startedAt = n.clock()
	n.disp.Open()
	n.startDuties()
}

func (n *Node) hostConfig() raftmux.Config {
	return raftmux.Config{
		NodeID:         n.self,
		Storage:        n.rs,
		Transport:      n.rt,
		StateMachine:   n.sm,
		OnLeaderChange: n.events.LeaderChange,
		OnConfState:    n.events.ConfState,
		AcceptReplica:  n.acceptReplica,
		TickInterval:   n.cfg.RaftTickInterval,
		Clock:          n.clock,
		Logger:         n.log,
	}
}
