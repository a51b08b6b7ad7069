package node

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// rawRequest sends one request frame to a node's client address and
// returns the answer's kind and payload.
func rawRequest(t *testing.T, addr string, kind wire.Kind, payload []byte) (wire.Kind, []byte) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := netio.ClientHandshake(nc, 42, nil); err != nil {
		t.Fatalf("handshake: %v", err)
	}
	f, start := wire.BeginFrame(nil, kind, 7)
	f = append(f, payload...)
	f, _ = wire.EndFrame(f, start)
	if _, err := nc.Write(f); err != nil {
		t.Fatalf("write: %v", err)
	}
	hb := make([]byte, wire.HeaderSize)
	if _, err := ioReadFull(nc, hb); err != nil {
		t.Fatalf("read: %v", err)
	}
	var h wire.Header
	if err := wire.DecodeHeader(hb, &h); err != nil {
		t.Fatalf("header: %v", err)
	}
	p := make([]byte, h.Length)
	if _, err := ioReadFull(nc, p); err != nil {
		t.Fatalf("read: %v", err)
	}
	return h.Kind, p
}

func ioReadFull(c net.Conn, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := c.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func TestOwnerDiesItsTopicsMoveToLiveNodesWithHigherEpochs(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := clientOf(t, c.node("n1"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topics = 100
	before := map[string]client.Assignment{}
	for i := range topics {
		topic := fmt.Sprintf("moving-%03d", i)
		a, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n3"})
		if err != nil {
			t.Fatalf("assign %s: %v", topic, err)
		}
		if a.Owner != "n3" {
			t.Fatalf("assign %s to n3 gave %+v", topic, a)
		}
		before[topic] = a
	}
	n3 := c.node("n3")
	waitUntil(t, 10*time.Second, "n3 holds its topics", func() bool { return n3.Status().TopicsOwned == topics })
	if _, err := cl.Produce(ctx, "moving-000", [][]byte{[]byte("before")}); err != nil {
		t.Fatalf("produce at n3: %v", err)
	}

	if err := n3.Close(); err != nil {
		t.Fatalf("close n3: %v", err)
	}
	after := map[string]client.Assignment{}
	waitUntil(t, 30*time.Second, "every topic of n3 moved", func() bool {
		for topic := range before {
			if _, ok := after[topic]; ok {
				continue
			}
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			a, err := cl.Lookup(lctx, topic, true)
			lcancel()
			if err != nil || a.Owner == "n3" {
				return false
			}
			after[topic] = a
		}
		return true
	})
	for topic, a := range after {
		if a.Owner != "n1" && a.Owner != "n2" {
			t.Fatalf("%s moved to %q", topic, a.Owner)
		}
		if a.Epoch <= before[topic].Epoch {
			t.Fatalf("%s moved at epoch %d, not above %d", topic, a.Epoch, before[topic].Epoch)
		}
	}
	// Plain lookups through any live node agree once the moves replicated.
	c2 := clientOf(t, c.node("n2"))
	waitUntil(t, 10*time.Second, "plain lookups agree", func() bool {
		for topic, want := range after {
			for _, x := range []*client.Client{cl, c2} {
				got, err := x.Lookup(ctx, topic, false)
				if err != nil || got.Owner != want.Owner || got.Epoch != want.Epoch {
					return false
				}
			}
		}
		return true
	})
	// The new owner refuses a produce at the old epoch and names the new one.
	a := after["moving-000"]
	p := wire.AppendProduce(nil, &wire.Produce{Topic: []byte("moving-000"), Epoch: before["moving-000"].Epoch, Records: [][]byte{[]byte("stale")}})
	waitUntil(t, 10*time.Second, "new owner opened the topic", func() bool {
		return c.node(a.Owner).lease.Owned() > 0
	})
	kind, out := rawRequest(t, a.OwnerAddr, wire.KindProduce, p)
	var e wire.Error
	if kind != wire.KindError || wire.DecodeError(out, &e) != nil || e.Code != wire.CodeNotLeaderForTopic {
		t.Fatalf("produce at the old epoch answered %v %x, want NotLeaderForTopic", kind, out)
	}
	if e.Epoch != a.Epoch {
		t.Fatalf("NotLeaderForTopic names epoch %d, want %d", e.Epoch, a.Epoch)
	}
	// The client follows the move.
	res, err := cl.Produce(ctx, "moving-000", [][]byte{[]byte("after")})
	if err != nil || res.Epoch != a.Epoch {
		t.Fatalf("produce after the move: %+v, %v (want epoch %d)", res, err, a.Epoch)
	}
}

func TestStaleRouteIsRefusedInvalidatedAndRetried(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stale := clientOf(t, c.node("n1"))
	other := clientOf(t, c.node("n2"))
	a1, err := stale.Assign(ctx, "stale-topic", client.AssignOptions{Owner: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "n1 holds the topic", func() bool { _, ok := held(c.node("n1"), "stale-topic"); return ok })
	if _, err := stale.Produce(ctx, "stale-topic", [][]byte{[]byte("one")}); err != nil {
		t.Fatalf("produce: %v", err)
	}
	a2, err := other.Assign(ctx, "stale-topic", client.AssignOptions{Owner: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if a2.Owner != "n2" || a2.Epoch <= a1.Epoch {
		t.Fatalf("move: %+v after %+v", a2, a1)
	}
	if r, ok := stale.Route("stale-topic"); !ok || r.Epoch != a1.Epoch {
		t.Fatalf("the first client should still hold the old route, has %+v %v", r, ok)
	}
	waitUntil(t, 10*time.Second, "n1 closed the topic", func() bool { _, ok := held(c.node("n1"), "stale-topic"); return !ok })
	before := c.node("n1").Stats().TopicRejections
	res, err := stale.Produce(ctx, "stale-topic", [][]byte{[]byte("two")})
	if err != nil {
		t.Fatalf("produce on a stale route: %v", err)
	}
	if res.Epoch != a2.Epoch {
		t.Fatalf("produce landed at epoch %d, want %d", res.Epoch, a2.Epoch)
	}
	if c.node("n1").Stats().TopicRejections == before {
		t.Fatalf("the old owner never refused the stale route")
	}
	if r, _ := stale.Route("stale-topic"); r.Owner != "n2" || r.Epoch != a2.Epoch {
		t.Fatalf("route after retry: %+v", r)
	}
}

func TestShardLeaderDiesShardServesAgain(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	victim := c.node("n2")
	// A topic whose shard n2 leads.
	var topic string
	var shard uint32
	for i := 0; topic == ""; i++ {
		cand := fmt.Sprintf("led-%d", i)
		s := router.ShardOf([]byte(cand), testShards)
		if victim.events.Leads(uint64(s)) {
			topic, shard = cand, s
		}
		if i > 10000 {
			t.Fatal("n2 leads no shard")
		}
	}
	var second string
	for i := 0; second == ""; i++ {
		if cand := fmt.Sprintf("led-second-%d", i); router.ShardOf([]byte(cand), testShards) == shard {
			second = cand
		}
	}
	cl := clientOf(t, c.node("n1"))
	if _, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n1"}); err != nil {
		t.Fatal(err)
	}
	if err := victim.Close(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var got client.Assignment
	waitUntil(t, 20*time.Second, "the shard answers again", func() bool {
		lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
		defer lcancel()
		a, err := cl.Assign(lctx, second, client.AssignOptions{})
		if err != nil {
			return false
		}
		got = a
		return true
	})
	if got.Shard != uint64(shard) {
		t.Fatalf("answer names shard %d, want %d", got.Shard, shard)
	}
	waitUntil(t, 5*time.Second, "n1's leader table forgets the dead leader", func() bool {
		leader, _, _ := c.node("n1").leaders.Get(shard)
		return leader != "n2" && leader != ""
	})
	a, err := cl.Lookup(ctx, topic, true)
	if err != nil || a.Owner != "n1" {
		t.Fatalf("lookup after re-election: %+v %v", a, err)
	}
	t.Logf("shard %d served again %v after its leader stopped", shard, time.Since(start).Round(time.Millisecond))
}

// lookupsServed counts the lookups n answered (forwarded ones included).
func lookupsServed(n *Node) uint64 {
	var sum uint64
	for _, r := range n.Latencies().Requests {
		if r.Op == "lookup" {
			sum += r.Hist.Count
		}
	}
	return sum
}

func TestFollowingClientFindsMovedTopicsInItsCache(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := clientOf(t, c.node("n1"))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a1, _, _ := c.node("n1").Addrs()
	a2, _, _ := c.node("n2").Addrs()
	fc, err := client.New(client.Config{Servers: []string{a1, a2}, ClusterID: 42, RequestTimeout: 3 * time.Second, MaxRetries: 20,
		FollowRoutes: true, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer fc.Close()
	const topics = 20
	before := map[string]uint64{}
	for i := range topics {
		topic := fmt.Sprintf("followed-%02d", i)
		a, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: "n3"})
		if err != nil || a.Owner != "n3" {
			t.Fatalf("assign %s to n3: %+v, %v", topic, a, err)
		}
		before[topic] = a.Epoch
	}
	n3 := c.node("n3")
	waitUntil(t, 10*time.Second, "n3 holds its topics", func() bool { return n3.Status().TopicsOwned == topics })
	waitUntil(t, 10*time.Second, "the route watch is established", func() bool { return fc.FollowStats().Following })
	// The following client caches every route with a produce.
	for topic := range before {
		if _, err := fc.Produce(ctx, topic, [][]byte{[]byte("before")}); err != nil {
			t.Fatalf("produce %s at n3: %v", topic, err)
		}
	}
	if err := n3.Close(); err != nil {
		t.Fatalf("close n3: %v", err)
	}
	// The watch moves every cached route off n3, with no request made.
	waitUntil(t, 30*time.Second, "the watch moved every cached route", func() bool {
		for topic, epoch := range before {
			r, ok := fc.Route(topic)
			if !ok || r.Owner == "n3" || r.Epoch <= epoch {
				return false
			}
		}
		return true
	})
	if s := fc.FollowStats(); s.Refreshed < topics {
		t.Fatalf("follow stats %+v: fewer routes refreshed than the %d topics moved", s, topics)
	}
	// Each new owner serves its topics (its lease wait and record pull
	// over) before the count starts: a request that finds its owner not
	// yet serving trusts the watch only for a while, then looks up, and
	// on a loaded machine the wait can outlast that.
	for topic := range before {
		r, _ := fc.Route(topic)
		waitUntil(t, 20*time.Second, topic+" writable at its new owner", func() bool {
			res, err := cl.Produce(ctx, topic, [][]byte{[]byte("probe")})
			return err == nil && res.Epoch == r.Epoch
		})
	}
	lookups := lookupsServed(c.node("n1")) + lookupsServed(c.node("n2"))
	for topic, epoch := range before {
		r, _ := fc.Route(topic)
		res, err := fc.Produce(ctx, topic, [][]byte{[]byte("after")})
		if err != nil || res.Epoch != r.Epoch || res.Epoch <= epoch {
			t.Fatalf("produce %s after the move: %+v, %v (route %+v, epoch before %d)", topic, res, err, r, epoch)
		}
	}
	if n := lookupsServed(c.node("n1")) + lookupsServed(c.node("n2")) - lookups; n != 0 {
		t.Fatalf("%d lookups for produces whose routes the watch had moved, want 0", n)
	}
}
