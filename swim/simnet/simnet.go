// Package simnet runs many swim cores in virtual time over a simulated
// network: latency spread, loss, partitions, crashes and pauses. One
// seeded random source drives the network and every node, so a run is
// replayed exactly from its seed. It is the test bed of swim's tests and of
// bench/swimsim.
package simnet

import (
	"container/heap"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/shoalmq/shoal/swim"
)

// Config describes a simulated cluster.
type Config struct {
	N    int
	Seed uint64
	// Loss is the probability that a datagram is lost.
	Loss float64
	// LatencyMin and LatencyMax bound the one-way delay (uniform).
	LatencyMin, LatencyMax time.Duration
	// Node is the template for every node's swim.Config (NodeID, SwimAddr,
	// Seed and Generation are set per node).
	Node swim.Config
}

// Host is one simulated node.
type Host struct {
	Index   int
	Addr    string
	Node    *swim.Node
	Crashed bool
	paused  bool
	held    []item
	wakeAt  time.Time
	gen     uint64
}

type kind uint8

const (
	kDeliver kind = iota
	kWake
	kPPRequest
	kPPReply
	kResume
)

type item struct {
	at   time.Time
	seq  uint64
	kind kind
	host int
	from string
	data []byte
	ppID uint64
	err  error
	gen  uint64 // the target host's generation when sent
}

type queue []item

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(item)) }
func (q *queue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// Net is the simulated cluster.
type Net struct {
	cfg    Config
	rng    *rand.Rand
	Now    time.Time
	Start  time.Time
	Hosts  []*Host
	byAddr map[string]int
	q      queue
	seq    uint64
	// Blocked, when set, says whether datagrams and push-pulls from host a
	// to host b are cut (a partition).
	Blocked func(a, b int) bool
	// OnEvent observes every event every node reports.
	OnEvent func(host int, ev swim.Event)

	Packets, Bytes uint64 // datagrams and datagram bytes sent
	PPBytes        uint64 // push-pull payload bytes sent (both ways)
	PPCount        uint64
}

// ErrUnreachable is the push-pull error for a crashed or cut-off peer.
var ErrUnreachable = errors.New("simnet: peer unreachable")

// New builds the cluster; nothing runs until Join or Run.
func New(cfg Config) (*Net, error) {
	n := &Net{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0x5eed)), byAddr: make(map[string]int)}
	n.Start = time.Unix(1_000_000, 0)
	n.Now = n.Start
	for i := range cfg.N {
		h := &Host{Index: i, Addr: fmt.Sprintf("sim-%d", i)}
		n.byAddr[h.Addr] = i
		n.Hosts = append(n.Hosts, h)
		if err := n.boot(h); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func (n *Net) boot(h *Host) error {
	c := n.cfg.Node
	c.NodeID = fmt.Sprintf("n%d", h.Index)
	c.SwimAddr = h.Addr
	c.Seed = n.rng.Uint64()
	c.Rand = nil
	h.gen++
	c.Generation = h.gen
	node, err := swim.New(c)
	if err != nil {
		return err
	}
	h.Node = node
	h.Crashed = false
	h.paused = false
	h.held = nil
	h.wakeAt = time.Time{}
	return nil
}

func (n *Net) push(it item) {
	n.seq++
	it.seq = n.seq
	heap.Push(&n.q, it)
}

func (n *Net) latency() time.Duration {
	d := n.cfg.LatencyMax - n.cfg.LatencyMin
	if d <= 0 {
		return n.cfg.LatencyMin
	}
	return n.cfg.LatencyMin + time.Duration(n.rng.Int64N(int64(d)))
}

// JoinAll makes host i join through host 0 (host 0 joins nobody), all at
// once.
func (n *Net) JoinAll() {
	for i, h := range n.Hosts {
		if i > 0 {
			h.Node.Join([]string{n.Hosts[0].Addr})
		}
		n.schedule(h, n.Now)
	}
}

// Crash stops host i: its datagrams are lost from now on.
func (n *Net) Crash(i int) { n.Hosts[i].Crashed = true }

// Restart boots host i again with a new generation and joins it through
// the seeds.
func (n *Net) Restart(i int, seeds []string) error {
	h := n.Hosts[i]
	if err := n.boot(h); err != nil {
		return err
	}
	h.Node.Join(seeds)
	n.schedule(h, n.Now)
	return nil
}

// Pause freezes host i for d: what arrives meanwhile waits in its socket
// buffer, and its timers do not run.
func (n *Net) Pause(i int, d time.Duration) {
	h := n.Hosts[i]
	h.paused = true
	n.push(item{at: n.Now.Add(d), kind: kResume, host: i, gen: h.gen})
}

func (n *Net) schedule(h *Host, at time.Time) {
	if at.Before(n.Now) {
		at = n.Now
	}
	if !h.wakeAt.IsZero() && !at.Before(h.wakeAt) && !h.wakeAt.Before(n.Now) {
		return
	}
	h.wakeAt = at
	n.push(item{at: at, kind: kWake, host: h.Index, gen: h.gen})
}

// flush sends what host h's node produced and reschedules its wake-up.
func (n *Net) flush(h *Host) {
	node := h.Node
	rd := node.Ready()
	for _, p := range rd.Packets {
		n.Packets++
		n.Bytes += uint64(len(p.Data))
		to, ok := n.byAddr[p.To]
		if !ok || n.rng.Float64() < n.cfg.Loss {
			continue
		}
		if n.Blocked != nil && n.Blocked(h.Index, to) {
			continue
		}
		n.push(item{at: n.Now.Add(n.latency()), kind: kDeliver, host: to, from: h.Addr, data: append([]byte(nil), p.Data...), gen: n.Hosts[to].gen})
	}
	if n.OnEvent != nil {
		for _, ev := range rd.Events {
			n.OnEvent(h.Index, ev)
		}
	}
	for _, pp := range rd.PushPulls {
		n.PPCount++
		n.PPBytes += uint64(len(pp.Payload))
		to, ok := n.byAddr[pp.Addr]
		if !ok || (n.Blocked != nil && n.Blocked(h.Index, to)) || n.Hosts[to].Crashed {
			// A connect that fails: refused at once, or a timeout.
			n.push(item{at: n.Now.Add(time.Second), kind: kPPReply, host: h.Index, ppID: pp.ID, err: ErrUnreachable, gen: h.gen})
			continue
		}
		n.push(item{at: n.Now.Add(n.latency()), kind: kPPRequest, host: to, from: h.Addr, data: pp.Payload, ppID: pp.ID, gen: n.Hosts[to].gen})
	}
	node.Advance()
	next := node.NextDeadline()
	if !next.After(n.Now) {
		next = n.Now.Add(time.Millisecond)
	}
	n.schedule(h, next)
}

// RunUntil processes everything scheduled up to t (virtual time).
func (n *Net) RunUntil(t time.Time) {
	for len(n.q) > 0 && !n.q[0].at.After(t) {
		it := heap.Pop(&n.q).(item)
		n.Now = it.at
		h := n.Hosts[it.host]
		if it.gen != h.gen || h.Crashed {
			if it.kind == kPPRequest {
				// The peer died between connect and answer.
				src := n.Hosts[n.byAddr[it.from]]
				n.push(item{at: n.Now.Add(n.latency()), kind: kPPReply, host: src.Index, ppID: it.ppID, err: ErrUnreachable, gen: src.gen})
			}
			continue
		}
		if h.paused && it.kind != kResume {
			if it.kind != kWake {
				h.held = append(h.held, it)
			}
			continue
		}
		switch it.kind {
		case kWake:
			if !it.at.Equal(h.wakeAt) {
				continue
			}
			h.wakeAt = time.Time{}
			h.Node.Tick(n.Now)
		case kDeliver:
			h.Node.Receive(n.Now, it.from, it.data)
		case kPPRequest:
			reply, err := h.Node.HandlePushPull(n.Now, it.data)
			src := n.Hosts[n.byAddr[it.from]]
			if err == nil {
				n.PPBytes += uint64(len(reply))
			}
			n.push(item{at: n.Now.Add(n.latency()), kind: kPPReply, host: src.Index, ppID: it.ppID, data: reply, err: err, gen: src.gen})
		case kPPReply:
			h.Node.PushPullDone(n.Now, it.ppID, it.data, it.err)
		case kResume:
			h.paused = false
			held := h.held
			h.held = nil
			h.Node.Tick(n.Now)
			for _, x := range held {
				switch x.kind {
				case kDeliver:
					h.Node.Receive(n.Now, x.from, x.data)
				case kPPRequest, kPPReply:
					x.at = n.Now
					n.push(x)
				}
			}
		}
		n.flush(h)
	}
	n.Now = t
}

// Run advances virtual time by d.
func (n *Net) Run(d time.Duration) { n.RunUntil(n.Now.Add(d)) }

// Elapsed is the virtual time since the start.
func (n *Net) Elapsed() time.Duration { return n.Now.Sub(n.Start) }

// Kick makes host i send what its node has ready now (after the caller
// called one of its methods directly).
func (n *Net) Kick(i int) {
	if h := n.Hosts[i]; !h.Crashed {
		n.flush(h)
	}
}
