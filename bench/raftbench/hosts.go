package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftio"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

const clusterID = 0x7261667462656e63 // "raftbenc"

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

// host is one raftmux host and the parts under it: either the stand-ins
// (mem, inproc) or the real ones (pebble, netio).
type host struct {
	id uint64
	h  *raftmux.Host

	mem *raftmuxtest.MemStore // -storage mem

	store   *shardstore.Store // -storage pebble
	walFS   *walFS            // -storage pebble: its WAL fsyncs, timed
	storage *raftio.Storage

	net    *netio.Transport // -transport netio
	tr     *raftio.Transport
	in     *raftio.Inbound
	cancel context.CancelFunc
	done   chan struct{}

	swim *swim.Driver // -detector swim

	stopOnce sync.Once
}

// newHost builds host id's storage and transport and starts its raftmux
// host; the caller wires peers (connect) once every host exists.
func (c *cluster) newHost(id uint64, dir string) (*host, error) {
	o := c.o
	hs := &host{id: id}
	var st raftmux.Storage
	switch o.storage {
	case "mem":
		path := ""
		if o.fsync {
			path = filepath.Join(dir, fmt.Sprintf("host%d.log", id))
		}
		m, err := raftmuxtest.NewMemStore(path)
		if err != nil {
			return nil, err
		}
		hs.mem, st = m, m
	case "pebble":
		hs.walFS = newWALFS()
		s, err := shardstore.Open(filepath.Join(dir, nodeName(id)), shardstore.Config{MemTableBytes: uint64(o.memtableMiB) << 20, FS: hs.walFS})
		if err != nil {
			return nil, err
		}
		hs.store = s
		hs.storage = raftio.NewStorage(s)
		st = hs.storage
	default:
		return nil, fmt.Errorf("unknown -storage %q (pebble or mem)", o.storage)
	}
	var tr raftmux.Transport
	var inbound atomic.Pointer[raftio.Inbound]
	switch o.transport {
	case "inproc":
		tr = c.net.Endpoint(id)
	case "netio":
		var err error
		hs.net, err = netio.New(netio.Config{
			ClusterID:  clusterID,
			NodeID:     nodeName(id),
			Generation: uint64(time.Now().UnixNano()),
			PeerAddr:   "127.0.0.1:0",
			Handler: netio.HandlerFunc(func(cn *netio.Conn, h wire.Header, f []byte) bool {
				// Frames before the inbound exists are dropped; raft
				// retransmits.
				in := inbound.Load()
				return in != nil && in.Deliver(cn, h, f)
			}),
		})
		if err != nil {
			hs.closeStorage()
			return nil, err
		}
		hs.tr = raftio.NewTransport(hs.net, func(rid uint64) (string, bool) {
			return nodeName(rid), rid >= 1 && rid <= uint64(o.hosts)
		})
		tr = hs.tr
	default:
		hs.closeStorage()
		return nil, fmt.Errorf("unknown -transport %q (netio or inproc)", o.transport)
	}
	var sm raftmux.StateMachine = raftmuxtest.NewKV(hs.mem, false)
	if o.sm == "memory" {
		sm = newMemSM()
	}
	h, err := raftmux.NewHost(raftmux.Config{
		NodeID:         id,
		Storage:        st,
		Transport:      tr,
		StateMachine:   sm,
		Workers:        o.workers,
		OnLeaderChange: c.onLeader,
		DisableQuiesce: o.noQuiesce,
		AckWait:        o.ackWait,
		TickInterval:   o.tick,
		HeartbeatTicks: o.heartbeatTicks,
	})
	if err != nil {
		if hs.net != nil {
			_ = hs.net.Close()
		}
		hs.closeStorage()
		return nil, err
	}
	hs.h = h
	switch o.transport {
	case "inproc":
		c.net.Register(id, h)
	case "netio":
		in, err := raftio.NewInbound(raftio.InboundConfig{Receiver: h, RaftID: raftID})
		if err != nil {
			hs.stop(c)
			return nil, err
		}
		hs.in = in
		inbound.Store(in)
		ctx, cancel := context.WithCancel(context.Background())
		hs.cancel, hs.done = cancel, make(chan struct{})
		go func() {
			defer close(hs.done)
			in.Run(ctx)
		}()
		hs.net.OnPeerDown(func(node string) { h.Unreachable(raftID(node)) })
	}
	return hs, nil
}

// connect tells every netio host where the others listen.
func (c *cluster) connect() {
	for _, a := range c.hosts {
		for _, b := range c.hosts {
			if a != b && a.net != nil {
				a.net.SetPeerAddr(nodeName(b.id), b.net.PeerAddr())
			}
		}
	}
}

// startSwim runs a real SWIM driver (LAN profile) per host on 127.0.0.1,
// joined through the first, and reports membership events to the hosts
// as the node does.
func (c *cluster) startSwim() error {
	var seeds []string
	for _, hs := range c.hosts {
		sc := swim.LANConfig()
		sc.NodeID = nodeName(hs.id)
		sc.Generation = uint64(time.Now().UnixNano())
		sc.ClusterID = clusterID
		h := hs.h
		self := sc.NodeID
		drv, err := swim.Listen("127.0.0.1:0", swim.DriverConfig{
			Node:   sc,
			Seeds:  seeds,
			Logger: slog.Default(),
			OnEvent: func(e swim.Event) {
				if e.Member.ID == self {
					return
				}
				rid := raftID(e.Member.ID)
				switch e.Kind {
				case swim.EventSuspect:
					h.NodeSuspect(rid)
					c.noteDetect(rid, false)
				case swim.EventDead, swim.EventLeft:
					h.NodeDead(rid)
					c.noteDetect(rid, true)
				case swim.EventJoined, swim.EventAliveAgain, swim.EventUpdated:
					h.NodeAlive(rid)
				}
			},
		}, netio.UDPConfig{})
		if err != nil {
			return err
		}
		hs.swim = drv
		if seeds == nil {
			seeds = []string{drv.Self().SwimAddr}
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, hs := range c.hosts {
			all = all && hs.swim.NumLive() == len(c.hosts)-1 // self excluded
		}
		if all {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("swim: members did not all see each other within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop halts the host abruptly: sockets first (peers see the connection
// and the SWIM member vanish), then the raft host and its storage.
func (hs *host) stop(c *cluster) {
	hs.stopOnce.Do(func() {
		if hs.swim != nil {
			_ = hs.swim.Close()
		}
		if hs.net != nil {
			_ = hs.net.Close()
		} else {
			c.net.Unregister(hs.id)
		}
		if hs.h != nil {
			hs.h.Stop()
		}
		if hs.cancel != nil {
			hs.cancel()
			<-hs.done
		}
		hs.closeStorage()
	})
}

func (hs *host) closeStorage() {
	if hs.mem != nil {
		_ = hs.mem.Close()
	}
	if hs.store != nil {
		_ = hs.store.Close()
	}
}

func (hs *host) fsyncs() int64 {
	if hs.mem != nil {
		return hs.mem.Fsyncs()
	}
	return int64(hs.storage.Stats().Fsyncs)
}

// wireFrames and wireBytes count raft frames and the bytes of every frame
// sent between hosts (netio keepalives included).
func (c *cluster) wireFrames() int64 {
	if c.o.transport == "inproc" {
		return c.net.Frames()
	}
	var n int64
	for _, hs := range c.hosts {
		n += int64(hs.tr.Stats().FramesOut)
	}
	return n
}

func (c *cluster) wireBytes() int64 {
	if c.o.transport == "inproc" {
		return c.net.Bytes()
	}
	var n int64
	for _, hs := range c.hosts {
		n += int64(hs.tr.Stats().BytesOut) + int64(hs.net.Counters().KeepalivesSent.Load())*wire.HeaderSize
	}
	return n
}
