package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/shoalmq/shoal/faultnet"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/shardsm"
	"github.com/shoalmq/shoal/node/world"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// host is one simulated machine: a node, its SWIM core, its disk and its
// clock, which keeps running across the node's lives.
type host struct {
	w     *World
	index int
	id    string
	// gen counts the host's lives (the events of an earlier one are void);
	// nodeGen is the node generation of the current one.
	gen, nodeGen uint64
	// rate is the clock's rate against true time (1 ± the drift bound).
	rate float64
	fs   *vfs.MemFS
	node *node.Node
	swim *swim.Node
	// down: crashed, not restarted yet; paused: stopped (SIGSTOP), its
	// events held until it resumes.
	down, paused bool
	held         []*event
	// driveAt and swimAt are the pending wake-ups of the node and of its
	// SWIM core (zero: none).
	driveAt, swimAt time.Time
	// linkFree is when each outgoing link to another host is next free:
	// deliveries on a link keep their order unless a fault delays them.
	linkFree map[int]time.Time
	// sent counts what the host sent (Scale reports it).
	sent traffic
}

func (h *host) swimAddr() string   { return h.id + ":swim" }
func (h *host) clientAddr() string { return h.id + ":client" }
func (h *host) peerAddr() string   { return h.id + ":peer" }

// clock is the host's clock at the world's now.
func (h *host) clock() time.Time {
	return epoch.Add(time.Duration(float64(h.w.now.Sub(epoch)) * h.rate))
}

// worldTime is when the host's clock shows t.
func (h *host) worldTime(t time.Time) time.Time {
	return epoch.Add(time.Duration(float64(t.Sub(epoch)) / h.rate))
}

// boot starts a new life of the host: a node on its disk (as the crash
// left it) and a SWIM core with a new generation, joining the others.
func (h *host) boot() error {
	if err := h.startSwim(); err != nil {
		return err
	}
	if err := h.startNode(); err != nil {
		return err
	}
	h.swim.Join(h.seeds())
	h.w.logf("%s boots (generation %d)", h.id, h.nodeGen)
	h.wake()
	return nil
}

// bootSwim starts a new life of the host with its SWIM core alone, joining
// the others; bootNode adds the node later. (Scale forms a large
// cluster's membership first: see there.)
func (h *host) bootSwim() error {
	if err := h.startSwim(); err != nil {
		return err
	}
	h.swim.Join(h.seeds())
	h.w.logf("%s: SWIM boots (generation %d)", h.id, h.nodeGen)
	h.wake()
	return nil
}

// bootNode starts the node of a host whose SWIM core runs alone.
func (h *host) bootNode() error {
	if err := h.startNode(); err != nil {
		return err
	}
	h.w.logf("%s boots (generation %d)", h.id, h.nodeGen)
	h.wake()
	return nil
}

// seeds are the SWIM addresses the host joins through.
func (h *host) seeds() []string {
	var seeds []string
	for _, o := range h.w.hosts {
		if h.w.opts.seeds > 0 && o.index >= h.w.opts.seeds {
			break
		}
		seeds = append(seeds, o.swimAddr())
	}
	return seeds
}

func (h *host) rack() string { return fmt.Sprintf("r%d", h.index%3) }

// startSwim begins a new life of the host with a new SWIM core.
func (h *host) startSwim() error {
	w := h.w
	h.gen++
	h.nodeGen++
	h.node = nil
	h.down, h.paused, h.held = false, false, nil
	h.driveAt, h.swimAt = time.Time{}, time.Time{}
	h.linkFree = make(map[int]time.Time)
	sc := swim.LocalConfig()
	if w.opts.lan {
		sc = swim.LANConfig()
	}
	sc.NodeID, sc.SwimAddr, sc.ClientAddr, sc.PeerAddr = h.id, h.swimAddr(), h.clientAddr(), h.peerAddr()
	sc.Rack = h.rack()
	sc.Generation = h.nodeGen
	sc.Seed = w.rng.Uint64()
	sw, err := swim.New(sc)
	if err != nil {
		return err
	}
	h.swim = sw
	return nil
}

// startNode makes the host's node, on its disk as the last life left it.
func (h *host) startNode() error {
	w := h.w
	preset := "fast"
	if w.opts.lan {
		preset = "lan"
	}
	expect := len(w.hosts)
	if w.opts.expect > 0 {
		expect = w.opts.expect
	}
	cfg := node.Config{
		ID: h.id, Rack: h.rack(), DataDir: "/" + h.id,
		ClientAddr: h.clientAddr(), PeerAddr: h.peerAddr(), SwimAddr: h.swimAddr(),
		Join: h.seeds(), BootstrapExpect: expect, Shards: w.cfg.Shards, Replicas: 3,
		SwimPreset: preset, Logger: w.cfg.Logger.With("node", h.id),
		// Small memtables: cheap to make at every boot, and flushed often,
		// so crashes land around flushes too.
		StoreMemTableBytes: 1 << 20,
		RouteCacheEntries:  w.opts.routeCache,
		OwnershipWindow:    w.opts.ownershipWindow,
		OnHandoff: func(topic string, epoch uint64, prev string, complete bool) {
			if complete {
				w.handoffs = append(w.handoffs, history.Handoff{Topic: topic, Node: h.id, Prev: prev, Epoch: epoch, At: w.now})
			}
		},
		OnWriteApplied: func(shard, index uint64, aw shardsm.AnsweredWrite) { w.writeApplied(h.id, shard, index, aw) },
	}
	if w.cfg.AutoSplits {
		sc := AutoSplitConfig()
		cfg.Splits = &sc
	}
	n, err := node.NewDriven(cfg, world.Runtime{
		Now:        h.clock,
		After:      h.afterFunc,
		Go:         h.goFunc,
		Yield:      h.yieldFunc,
		Peers:      peerNet{h},
		Swim:       membership{h},
		FS:         h.fs,
		SyncLag:    h.syncLag,
		Generation: h.nodeGen,
		Seed:       w.rng.Uint64(),
		ClientAddr: h.clientAddr(), PeerAddr: h.peerAddr(),
		Owned: func(topic string, held, floor uint64) { w.noteOwned(h, topic, held, floor) },
	})
	if err != nil {
		return fmt.Errorf("sim: boot %s: %w", h.id, err)
	}
	h.node = n
	return nil
}

// afterFunc is the node's timers: f runs after d on the host's clock.
func (h *host) afterFunc(d time.Duration, f func()) func() bool {
	stopped := false
	done := false
	h.w.after(time.Duration(float64(d)/h.rate), h, func() {
		if stopped {
			return
		}
		done = true
		f()
		h.wake()
	})
	return func() bool {
		if stopped || done {
			return false
		}
		stopped = true
		return true
	}
}

// goFunc is the node's spawned work (a request, a queue's worker, a duty,
// a pull's step): f runs after a delay the seed draws, as a goroutine
// would once a core got to it. Mostly that is within half a millisecond;
// one time in fifty it is 1-20 ms (a busy machine, a collection), so that
// work a started node does concurrently is interleaved every way in turn.
func (h *host) goFunc(f func()) {
	w := h.w
	d := w.between(0, 500*time.Microsecond)
	if w.rng.IntN(50) == 0 {
		d = w.between(time.Millisecond, 20*time.Millisecond)
	}
	h.afterFunc(d, f)
}

// syncLag is how long one fsync of the node's raft log takes: mostly a
// fast disk's 50 µs to 1 ms; one time in four a busy node's, whose
// Pebble holds the sync back for its gap (node.DefaultStoreLogSyncGap)
// or a slower disk, 1-6 ms; one time in a hundred a stalled disk's, 10-60
// ms. A crash before it ends may lose the round's writes; one fsync in
// syncCutOdds, while the faults last and at most one every 20 s, ends in
// a power cut of every node (World.powerCut), which tests that no node
// told anyone of an entry before that entry was durable.
func (h *host) syncLag() time.Duration {
	w := h.w
	var lag time.Duration
	switch r := w.rng.IntN(100); {
	case r == 0:
		lag = w.between(10*time.Millisecond, 60*time.Millisecond)
	case r < 25:
		lag = w.between(time.Millisecond, 6*time.Millisecond)
	default:
		lag = w.between(50*time.Microsecond, time.Millisecond)
	}
	if w.now.Before(w.slowDisks) && h != w.fastDisk {
		lag = w.between(2*time.Millisecond, 20*time.Millisecond)
	}
	if w.midFaults && !w.quiet && !w.now.Before(w.cutFree) && w.rng.IntN(syncCutOdds) == 0 {
		hold := w.between(time.Second, 6*time.Second)
		w.cutFree = w.now.Add(hold + 20*time.Second)
		w.after(w.between(0, lag), nil, func() {
			if !w.quiet {
				w.powerCut(hold, h, nil)
			}
		})
	}
	return lag
}

// yieldFunc is the rest of a piece of work the node began (a produce's
// second lease check and answer, after its append): run as goFunc runs
// spawned work, except that one time in midFaultOdds, while the faults
// last, the host is paused (SIGSTOP) or crashed right there, so that
// faults land between an append and its acknowledgement. One such fault
// at a time.
func (h *host) yieldFunc(f func()) {
	w := h.w
	w.yields++
	if w.midFaults && !w.quiet && !w.now.Before(w.midFaultFree) && w.rng.IntN(midFaultOdds) == 0 {
		hold := w.between(time.Second, 6*time.Second)
		w.midFaultFree = w.now.Add(hold + 5*time.Second)
		w.pressOn(h, hold)
		if w.rng.IntN(3) == 0 {
			w.logf("fault: %s crashes between an append and its answer, for %v", h.id, hold)
			w.after(0, nil, func() {
				if !h.down {
					h.crash()
					w.after(hold, nil, func() { w.restart(h) })
				}
			})
		} else {
			w.logf("fault: %s paused between an append and its answer, for %v", h.id, hold)
			h.paused = true
			w.after(hold, nil, func() { w.resume(h) })
		}
	}
	h.goFunc(f)
}

// pressOn makes a topic h owns hot for hold, as the faults that cut an
// owner off do (World.nextFault): someone moves it away at once, and the
// clients that hear of the move write to its new owner, while h, paused
// or crashed between an append and its answer, cannot answer yet.
func (w *World) pressOn(h *host, hold time.Duration) {
	if w.hot != "" || w.mover.cur != nil {
		return
	}
	var owned []string
	for i := range w.cfg.Topics {
		topic := fmt.Sprintf("topic-%d", i)
		if w.owners[topic].owner == h.id {
			owned = append(owned, topic)
		}
	}
	if len(owned) == 0 {
		return
	}
	topic := owned[w.rng.IntN(len(owned))]
	w.hot, w.hotOwner = topic, h
	w.after(w.between(5*time.Millisecond, 40*time.Millisecond), nil, func() {
		if w.hot == topic && w.mover.cur == nil {
			w.mover.moveAway(topic, h)
		}
	})
	w.after(hold, nil, func() {
		if w.hot == topic {
			w.hot, w.hotOwner, w.hotTarget = "", nil, nil
		}
	})
}

// syncCutOdds: one fsync of a raft log in this many, while the faults
// last, is cut short by a power cut of every node (host.syncLag).
const syncCutOdds = 4000

// midFaultOdds: one produce in this many, while the faults last, is
// interrupted between its append and its answer (yieldFunc).
const midFaultOdds = 400

// wake runs what is due on the host now: the node's duties and raft
// rounds, and what its SWIM core has to send.
func (h *host) wake() {
	if h.down || h.paused {
		return
	}
	if h.node == nil {
		h.flushSwim() // the SWIM core alone, as yet
		return
	}
	next := h.node.Drive()
	h.flushSwim()
	h.scheduleDrive(h.worldTime(next))
}

func (h *host) scheduleDrive(at time.Time) {
	if !at.After(h.w.now) {
		at = h.w.now.Add(time.Millisecond)
	}
	if !h.driveAt.IsZero() && !h.driveAt.After(at) && h.driveAt.After(h.w.now) {
		return // an earlier wake-up is pending
	}
	h.driveAt = at
	h.w.at(at, h, func() {
		if !h.w.now.Equal(h.driveAt) {
			return // superseded
		}
		h.driveAt = time.Time{}
		h.wake()
	})
}

// flushSwim sends what the SWIM core produced, hands its events to the
// node, and schedules its next tick.
func (h *host) flushSwim() {
	w := h.w
	for h.swim.HasReady() {
		rd := h.swim.Ready()
		for _, p := range rd.Packets {
			w.sendDatagram(h, p.To, append([]byte(nil), p.Data...))
		}
		if len(rd.Events) > 0 {
			for _, e := range rd.Events {
				if e.Kind != swim.EventShardLeader && e.Kind != swim.EventMetadataVersion {
					w.logf("%s: swim %v %s (generation %d)", h.id, e.Kind, e.Member.ID, e.Member.Generation)
				}
			}
			w.noteMembership(h, rd.Events)
			if h.node != nil {
				h.node.SwimEvents(rd.Events...)
			}
		}
		for _, pp := range rd.PushPulls {
			w.pushPull(h, pp.ID, pp.Addr, append([]byte(nil), pp.Payload...))
		}
		h.swim.Advance()
		if len(rd.Events) > 0 && h.node != nil {
			next := h.node.Drive()
			h.scheduleDrive(h.worldTime(next))
		}
	}
	h.scheduleSwim(h.worldTime(h.swim.NextDeadline()))
}

func (h *host) scheduleSwim(at time.Time) {
	if at.IsZero() {
		return
	}
	if !at.After(h.w.now) {
		at = h.w.now.Add(time.Millisecond)
	}
	if !h.swimAt.IsZero() && !h.swimAt.After(at) && h.swimAt.After(h.w.now) {
		return
	}
	h.swimAt = at
	h.w.at(at, h, func() {
		if !h.w.now.Equal(h.swimAt) {
			return
		}
		h.swimAt = time.Time{}
		h.swim.Tick(h.clock())
		h.flushSwim()
	})
}

// crash stops the host at once. Half the crashes are power losses (the
// disk keeps only what was synced), half are process kills (the disk
// keeps every write). A crash keeping a random part of the unsynced
// writes would not repeat: MemFS draws its choices in map order.
// shardstore's crash tests cover those.
func (h *host) crash() {
	if h.w.rng.IntN(2) == 0 {
		h.stop(100, "killed")
		return
	}
	h.stop(0, "power loss")
}

// stop stops the host at once, its disk keeping kept percent of its
// unsynced writes.
func (h *host) stop(kept int, kind string) {
	w := h.w
	h.down = true
	clone := h.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: kept, RNG: rand.New(rand.NewPCG(w.rng.Uint64(), 1))})
	_ = h.node.Close()
	h.fs = clone
	w.logf("%s crashes (%s)", h.id, kind)
}

// peerNet is a host's network to the other nodes.
type peerNet struct{ h *host }

func (p peerNet) Send(to string, frame []byte) error {
	t := p.h.w.byID[to]
	if t == nil {
		return fmt.Errorf("sim: no node %q", to)
	}
	p.h.w.sendFrame(p.h, t, append([]byte(nil), frame...))
	return nil
}

func (peerNet) SetPeerAddr(string, string) {}
func (peerNet) RemovePeer(string)          {}

// peerConn is the connection frames from one node arrive on at another:
// an answer on it goes back to the sender.
type peerConn struct{ from, to *host }

func (c peerConn) Write(frame []byte) error {
	c.to.w.sendFrame(c.to, c.from, append([]byte(nil), frame...))
	return nil
}
func (peerConn) Role() wire.Role { return wire.RolePeer }
func (c peerConn) Node() string  { return c.from.id }

// membership is a host's SWIM core as the node sees it.
type membership struct{ h *host }

func (m membership) Members() []swim.Member { return m.h.swim.Members() }
func (m membership) Self() swim.Member      { return m.h.swim.Self() }
func (m membership) AnnounceShardLeader(shard uint64, leader string, term uint64) {
	m.h.swim.AnnounceShardLeader(shard, leader, term)
}
func (m membership) SetMetadataVersion(kind, version uint64) {
	m.h.swim.SetMetadataVersion(kind, version)
}
func (m membership) SetMeta(meta []byte) error { return m.h.swim.SetMeta(meta) }
func (m membership) Join(seeds []string)       { m.h.swim.Join(seeds) }

// baseLatency draws a message's delay on an unimpaired link.
func (w *World) baseLatency() time.Duration {
	return w.between(200*time.Microsecond, 1500*time.Microsecond)
}

// sendFrame carries a peer frame from one node to another, as the faults
// decide.
func (w *World) sendFrame(from, to *host, frame []byte) {
	kind := uint8(0)
	if len(frame) > 1 {
		kind = frame[1]
	}
	from.sent.frame(wire.Kind(kind), len(frame))
	v := w.net.DecideWith(w.rng, from.id, to.id, kind)
	for _, d := range v.Delays {
		at := w.now.Add(w.baseLatency())
		if free := from.linkFree[to.index]; at.Before(free) {
			at = free
		}
		from.linkFree[to.index] = at
		at = at.Add(d)
		gen := to.gen
		w.at(at, to, func() {
			if to.gen != gen || to.node == nil {
				return
			}
			to.node.DeliverFrame(peerConn{from: from, to: to}, frame)
			to.wake()
		})
	}
}

// sendDatagram carries a SWIM datagram to the node at addr.
func (w *World) sendDatagram(from *host, addr string, data []byte) {
	from.sent.datagrams++
	from.sent.datagramBytes += uint64(len(data))
	to := w.swimAt[addr]
	if to == nil {
		return
	}
	v := w.net.DecideWith(w.rng, from.id, to.id, faultnet.KindSwim)
	for _, d := range v.Delays {
		fromAddr := from.swimAddr()
		w.after(w.baseLatency()+d, to, func() {
			to.swim.Receive(to.clock(), fromAddr, data)
			to.flushSwim()
		})
	}
}

// pushPull runs a SWIM state exchange (push-pull) from one node with the node at
// addr; a cut either way fails it after a connect timeout.
func (w *World) pushPull(from *host, id uint64, addr string, req []byte) {
	from.sent.pushPulls++
	from.sent.pushPullBytes += uint64(len(req))
	to := w.swimAt[addr]
	fail := func() {
		w.after(time.Second, from, func() {
			from.swim.PushPullDone(from.clock(), id, nil, fmt.Errorf("sim: push-pull to %s failed", addr))
			from.flushSwim()
		})
	}
	if to == nil || to.down || w.net.DecideWith(w.rng, from.id, to.id, faultnet.KindSwim).Dropped() ||
		w.net.DecideWith(w.rng, to.id, from.id, faultnet.KindSwim).Dropped() {
		fail()
		return
	}
	fromGen := from.gen
	w.after(w.baseLatency(), to, func() {
		reply, err := to.swim.HandlePushPull(to.clock(), req)
		to.sent.pushPulls++
		to.sent.pushPullBytes += uint64(len(reply))
		to.flushSwim()
		w.after(w.baseLatency(), from, func() {
			if from.gen != fromGen {
				return
			}
			from.swim.PushPullDone(from.clock(), id, reply, err)
			from.flushSwim()
		})
	})
}
