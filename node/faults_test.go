package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/faultnet"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// faultCluster is an in-process test cluster whose peer frames, SWIM
// datagrams and push-pull exchanges pass through one faultnet.Net, and
// whose nodes a test can pause: a paused node's messages are held, and
// its requests stop where a stopped process would stop them. Clients are
// never cut: a node cut off from its peers still serves its own clients.
type faultCluster struct {
	*testCluster
	net *faultnet.Net

	mu     sync.Mutex
	swimAt map[netip.AddrPort]string
	// clientCut: client addresses that confined clients cannot reach;
	// clientConns: the connections they hold, which a cut breaks.
	clientCut   map[string]bool
	clientConns map[string][]net.Conn
	// reqHeld: paused nodes' requests, released before their messages.
	reqHeld map[string]chan struct{}
	// delivered counts the peer frames each node took, by sender and kind.
	delivered map[frameKey]int
}

type frameKey struct {
	from, to string
	kind     wire.Kind
}

func startFaultCluster(t *testing.T, size int, seed uint64) *faultCluster {
	t.Helper()
	fc := &faultCluster{net: faultnet.New(seed), swimAt: make(map[netip.AddrPort]string), clientCut: make(map[string]bool),
		clientConns: make(map[string][]net.Conn), reqHeld: make(map[string]chan struct{}), delivered: make(map[frameKey]int)}
	fc.testCluster = startClusterHooked(t, size, fc.hook)
	for _, n := range fc.nodes {
		fc.register(n)
	}
	// Before the nodes close (cleanups run last first): release what a
	// pause holds.
	t.Cleanup(func() {
		for _, n := range fc.nodes {
			fc.resume(n.ID())
		}
	})
	return fc
}

// pause stops node as SIGSTOP would: its messages are held, and so are its
// requests, at the start or between an append and its acknowledgement.
func (fc *faultCluster) pause(node string) {
	fc.mu.Lock()
	if fc.reqHeld[node] == nil {
		fc.reqHeld[node] = make(chan struct{})
	}
	fc.mu.Unlock()
	fc.net.Pause(node)
}

// resume lets a paused node go on: first what it was doing (as a resumed
// process runs before it reads what arrived meanwhile), then its messages.
func (fc *faultCluster) resume(node string) {
	fc.mu.Lock()
	ch := fc.reqHeld[node]
	delete(fc.reqHeld, node)
	fc.mu.Unlock()
	if ch == nil {
		return
	}
	close(ch)
	time.Sleep(20 * time.Millisecond)
	fc.net.Resume(node)
}

// held waits while node's requests are held.
func (fc *faultCluster) holdRequests(node string) {
	fc.mu.Lock()
	ch := fc.reqHeld[node]
	fc.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

// hook puts the cluster's faults on a node's test seams.
func (fc *faultCluster) hook(cfg *Config, h *testHooks) {
	self := cfg.ID
	h.peerIn = func(from string, kind wire.Kind) frameFate {
		f := fc.fate(from, self, uint8(kind))
		if f.hold != nil || len(f.delays) > 0 {
			fc.mu.Lock()
			fc.delivered[frameKey{from, self, kind}]++
			fc.mu.Unlock()
		}
		return f
	}
	h.swimConn = func(pc swim.PacketConn) swim.PacketConn { return &faultConn{PacketConn: pc, self: self, fc: fc} }
	h.pushPull = func(pp swim.PushPullTransport) swim.PushPullTransport {
		return &faultPushPull{PushPullTransport: pp, self: self, fc: fc}
	}
	h.beforeServe = func() { fc.holdRequests(self) }
	h.afterAppend = func(string) { fc.holdRequests(self) }
}

// deliveredFrames is how many frames of kind node to took from node from.
func (fc *faultCluster) deliveredFrames(from, to string, kind wire.Kind) int {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return fc.delivered[frameKey{from, to, kind}]
}

func (fc *faultCluster) register(n *Node) {
	_, _, s := n.Addrs()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		fc.t.Fatalf("swim address %q: %v", s, err)
	}
	fc.mu.Lock()
	fc.swimAt[ap] = n.ID()
	fc.mu.Unlock()
}

func (fc *faultCluster) nodeAt(a netip.AddrPort) (string, bool) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	id, ok := fc.swimAt[a]
	return id, ok
}

func (fc *faultCluster) fate(from, to string, kind uint8) frameFate {
	v := fc.net.Decide(from, to, kind)
	if v.Hold {
		return frameFate{hold: fc.net.Resumed(v.Paused)}
	}
	return frameFate{delays: v.Delays}
}

// faultConn judges every SWIM datagram as it is sent.
type faultConn struct {
	swim.PacketConn
	self string
	fc   *faultCluster
}

func (c *faultConn) WriteTo(b []byte, addr netip.AddrPort) error {
	to, ok := c.fc.nodeAt(addr)
	if !ok {
		return c.PacketConn.WriteTo(b, addr)
	}
	v := c.fc.net.Decide(c.self, to, faultnet.KindSwim)
	if v.Hold {
		cp := append([]byte(nil), b...)
		go func() {
			<-c.fc.net.Resumed(v.Paused)
			_ = c.WriteTo(cp, addr)
		}()
		return nil
	}
	for _, d := range v.Delays {
		if d == 0 {
			_ = c.PacketConn.WriteTo(b, addr)
			continue
		}
		cp := append([]byte(nil), b...)
		time.AfterFunc(d, func() { _ = c.PacketConn.WriteTo(cp, addr) })
	}
	return nil
}

// faultPushPull fails a push-pull exchange that a cut either way would
// break, and holds one with a paused node.
type faultPushPull struct {
	swim.PushPullTransport
	self string
	fc   *faultCluster
}

var errCut = errors.New("faultnet: cut")

func (p *faultPushPull) Exchange(ctx context.Context, addr string, req []byte) ([]byte, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return p.PushPullTransport.Exchange(ctx, addr, req)
	}
	to, ok := p.fc.nodeAt(ap)
	if !ok {
		return p.PushPullTransport.Exchange(ctx, addr, req)
	}
	for _, pair := range [][2]string{{p.self, to}, {to, p.self}} {
		v := p.fc.net.Decide(pair[0], pair[1], faultnet.KindSwim)
		if v.Hold {
			select {
			case <-p.fc.net.Resumed(v.Paused):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		} else if v.Dropped() {
			return nil, errCut
		}
	}
	return p.PushPullTransport.Exchange(ctx, addr, req)
}

// confine makes clients confined with confinedClient unable to reach
// node's client address, breaking the connections they hold to it, as a
// partition would (or able again).
func (fc *faultCluster) confine(node string, cut bool) {
	addr, _, _ := fc.node(node).Addrs()
	fc.mu.Lock()
	fc.clientCut[addr] = cut
	var conns []net.Conn
	if cut {
		conns = fc.clientConns[addr]
		delete(fc.clientConns, addr)
	}
	fc.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
}

// confinedClient returns a client that asks servers only and dials only
// the nodes confine has not cut.
func (fc *faultCluster) confinedClient(servers ...string) *client.Client {
	var addrs []string
	for _, s := range servers {
		a, _, _ := fc.node(s).Addrs()
		addrs = append(addrs, a)
	}
	only := make(map[string]bool)
	for _, a := range addrs {
		only[a] = true
	}
	var d net.Dialer
	cl, err := client.New(client.Config{Servers: addrs, ClusterID: 42, RequestTimeout: time.Second, MaxRetries: 3,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Logger: testLogger(),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			fc.mu.Lock()
			cut := fc.clientCut[addr]
			fc.mu.Unlock()
			if cut {
				return nil, fmt.Errorf("dial %s: %w", addr, errCut)
			}
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				fc.mu.Lock()
				fc.clientConns[addr] = append(fc.clientConns[addr], c)
				fc.mu.Unlock()
			}
			return c, err
		}})
	if err != nil {
		fc.t.Fatalf("client: %v", err)
	}
	fc.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// onlyClient returns a client that reaches node only, as a producer on
// that node's side of a partition would.
func (fc *faultCluster) onlyClient(node string) *client.Client {
	return fc.onlyClientWaiting(node, time.Second)
}

// onlyClientWaiting is onlyClient waiting up to requestTimeout for each
// answer: a client patient enough to get the answer of a request a paused
// node was in the middle of.
func (fc *faultCluster) onlyClientWaiting(node string, requestTimeout time.Duration) *client.Client {
	addr, _, _ := fc.node(node).Addrs()
	var d net.Dialer
	cl, err := client.New(client.Config{Servers: []string{addr}, ClusterID: 42, RequestTimeout: requestTimeout, MaxRetries: 3,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Logger: testLogger(),
		Dial: func(ctx context.Context, network, a string) (net.Conn, error) {
			if a != addr {
				return nil, fmt.Errorf("dial %s: %w", a, errCut)
			}
			return d.DialContext(ctx, network, a)
		}})
	if err != nil {
		fc.t.Fatalf("client: %v", err)
	}
	fc.t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// producers runs one producer per client on topic until stop is called,
// recording every produce into rec.
type producers struct {
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

func startProducers(rec *history.Recorder, topic string, clients map[string]*client.Client) *producers {
	return startProducersWaiting(rec, topic, clients, 2*time.Second)
}

// startProducersWaiting is startProducers giving each produce up to
// opTimeout.
func startProducersWaiting(rec *history.Recorder, topic string, clients map[string]*client.Client, opTimeout time.Duration) *producers {
	ctx, cancel := context.WithCancel(context.Background())
	p := &producers{cancel: cancel}
	for name, cl := range clients {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				rctx, rcancel := context.WithTimeout(ctx, opTimeout)
				start := time.Now()
				res, err := cl.Produce(rctx, topic, [][]byte{fmt.Appendf(nil, "%s-%d", name, i)})
				end := time.Now()
				rcancel()
				op := history.Op{Client: name, Kind: history.Produce, Topic: topic, Start: start, End: end}
				if err == nil {
					op.OK, op.Epoch, op.Offset = true, res.Epoch, res.Offset
					if r, ok := cl.Route(topic); ok {
						op.Node = r.Owner
					}
				} else {
					op.Err = err.Error()
					time.Sleep(5 * time.Millisecond)
				}
				if err == nil || ctx.Err() == nil {
					rec.Add(op)
				}
			}
		}()
	}
	return p
}

func (p *producers) stop() {
	p.cancel()
	p.wg.Wait()
}

// checkHistory fails the test on any broken promise of what rec saw, and
// logs a summary.
func checkHistory(t *testing.T, rec *history.Recorder) []history.Op {
	t.Helper()
	ops := rec.Ops()
	t.Logf("history: %s", history.Summary(ops))
	if vs := history.Check(ops, nil); len(vs) > 0 {
		for i, v := range vs {
			if i == 5 {
				t.Errorf("... and %d more", len(vs)-5)
				break
			}
			t.Errorf("%v", v)
		}
		t.FailNow()
	}
	return ops
}

// maxAckedEpoch is the highest epoch at which any write of topic was
// acknowledged, and when the first such acknowledgement came back.
func maxAckedEpoch(ops []history.Op, topic string) (uint64, time.Time) {
	var e uint64
	var at time.Time
	for _, o := range ops {
		if !o.OK || o.Topic != topic {
			continue
		}
		if o.Epoch > e || (o.Epoch == e && o.End.Before(at)) {
			e, at = o.Epoch, o.End
		}
	}
	return e, at
}

// afterMove is how long a fault test keeps its load on once the fault took
// effect (a write acknowledged at the topic's next owner): an earlier
// owner still serving would acknowledge its producer's next write, a few
// milliseconds later.
const afterMove = time.Second

// waitWrittenAbove waits, with the load running, until rec holds a write
// of topic acknowledged at an epoch above epoch, after since.
func waitWrittenAbove(t *testing.T, rec *history.Recorder, topic string, epoch uint64, since time.Time) {
	t.Helper()
	waitUntil(t, 30*time.Second, fmt.Sprintf("a write of %s above epoch %d", topic, epoch), func() bool {
		for _, o := range rec.Ops() {
			if o.OK && o.Topic == topic && o.Epoch > epoch && o.End.After(since) {
				return true
			}
		}
		return false
	})
}

// topicLedBy returns a topic name, with prefix, whose shard leader is
// leader (as leader's replica knows it).
func (c *testCluster) topicLedBy(prefix, leader string) (string, uint32) {
	n := c.node(leader)
	// A shard the placement prefers leader to lead too: the shard manager
	// does not hand its leadership away meanwhile.
	for _, preferred := range []bool{true, false} {
		v := n.view.Load()
		for i := 0; i < 100000; i++ {
			topic := fmt.Sprintf("%s-%d", prefix, i)
			s := router.ShardOf([]byte(topic), testShards)
			if n.events.Leads(uint64(s)) && (!preferred || (v.Placement() != nil && v.Placement().Leader(s) == leader)) {
				return topic, s
			}
		}
	}
	c.t.Fatalf("%s leads no shard", leader)
	return "", 0
}

// unwritable reports, from a history, the longest time between two
// acknowledged writes of topic.
func unwritable(ops []history.Op, topic string) time.Duration {
	var ends []time.Time
	for _, o := range ops {
		if o.OK && o.Topic == topic {
			ends = append(ends, o.End)
		}
	}
	var worst time.Duration
	slices.SortFunc(ends, time.Time.Compare)
	for i := 1; i < len(ends); i++ {
		if d := ends[i].Sub(ends[i-1]); d > worst {
			worst = d
		}
	}
	return worst
}
