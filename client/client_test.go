package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/client/clienttest"
	"github.com/shoalmq/shoal/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startCluster starts n fake nodes n1..nN and stops them when the test ends.
func startCluster(t *testing.T, n int) (*clienttest.Cluster, []*clienttest.Node) {
	t.Helper()
	c := &clienttest.Cluster{ClusterID: 7}
	nodes := make([]*clienttest.Node, n)
	for i := range nodes {
		node, err := c.Start(fmt.Sprintf("n%d", i+1))
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = node
	}
	t.Cleanup(c.Close)
	return c, nodes
}

func addrs(nodes ...*clienttest.Node) []string {
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.Addr()
	}
	return out
}

// newClient returns a client with fast retries, closed when the test ends
// (before the cluster, as cleanups run last-registered first).
func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.ClusterID == 0 {
		cfg.ClusterID = 7
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = time.Millisecond
		cfg.BackoffMax = 10 * time.Millisecond
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestConfigValidation(t *testing.T) {
	ok := []string{"127.0.0.1:7101"}
	tests := []struct {
		name string
		cfg  client.Config
	}{
		{"no servers", client.Config{}},
		{"address without port", client.Config{Servers: []string{"127.0.0.1"}}},
		{"port zero", client.Config{Servers: []string{"127.0.0.1:0"}}},
		{"port out of range", client.Config{Servers: []string{"127.0.0.1:70000"}}},
		{"empty host", client.Config{Servers: []string{":7101"}}},
		{"address too long", client.Config{Servers: []string{string(make([]byte, wire.MaxAddrLen+1))}}},
		{"negative dial timeout", client.Config{Servers: ok, DialTimeout: -1}},
		{"negative request timeout", client.Config{Servers: ok, RequestTimeout: -1}},
		{"backoff max below base", client.Config{Servers: ok, BackoffBase: time.Second, BackoffMax: time.Millisecond}},
		{"too many retries", client.Config{Servers: ok, MaxRetries: client.MaxRetriesLimit + 1}},
		{"too many conns", client.Config{Servers: ok, ConnsPerServer: client.MaxConnsPerServer + 1}},
		{"negative in flight", client.Config{Servers: ok, MaxInFlight: -3}},
		{"in flight too large", client.Config{Servers: ok, MaxInFlight: client.MaxInFlightLimit + 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(tc.cfg)
			if !errors.Is(err, client.ErrConfig) {
				if c != nil {
					_ = c.Close()
				}
				t.Fatalf("New = %v, want ErrConfig", err)
			}
		})
	}
	c, err := client.New(client.Config{Servers: ok, MaxRetries: -1})
	if err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	_ = c.Close()
}

func TestAssignLookupProduceFetchGoToTheOwner(t *testing.T) {
	_, nodes := startCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx := ctxT(t)

	a, err := c.Assign(ctx, "topic-blue", client.AssignOptions{Owner: "n2", Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	want := client.Assignment{Topic: "topic-blue", Owner: "n2", OwnerAddr: nodes[1].Addr(), Epoch: 1, Partitions: 4, Shard: a.Shard}
	if a != want {
		t.Fatalf("Assign = %+v, want %+v", a, want)
	}
	l, err := c.Lookup(ctx, "topic-blue", true)
	if err != nil || l != want {
		t.Fatalf("Lookup = %+v, %v; want %+v", l, err, want)
	}
	for i, msg := range []string{"hello", "world"} {
		p, err := c.Produce(ctx, "topic-blue", [][]byte{[]byte(msg)})
		if err != nil {
			t.Fatal(err)
		}
		if p != (client.ProduceResult{Topic: "topic-blue", Epoch: 1, Offset: uint64(i)}) {
			t.Fatalf("Produce %d = %+v", i, p)
		}
	}
	f, err := c.Fetch(ctx, "topic-blue", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if f.Epoch != 1 || f.Next != 2 || f.HighWatermark != 2 || len(f.Records) != 2 ||
		string(f.Records[0].Value) != "hello" || f.Records[1].Offset != 1 || string(f.Records[1].Value) != "world" {
		t.Fatalf("Fetch = %+v", f)
	}
	// Data requests went to the owner only, and the route came from the
	// cache filled by Assign: no lookup was needed for them.
	if nodes[1].Requests(wire.KindProduce) != 2 || nodes[1].Requests(wire.KindFetch) != 1 {
		t.Fatalf("owner saw %d produces, %d fetches", nodes[1].Requests(wire.KindProduce), nodes[1].Requests(wire.KindFetch))
	}
	for _, n := range []*clienttest.Node{nodes[0], nodes[2]} {
		if n.Requests(wire.KindProduce)+n.Requests(wire.KindFetch) != 0 {
			t.Fatalf("%s, not the owner, got data requests", n.ID)
		}
	}
	if got := nodes[0].Requests(wire.KindLookup) + nodes[1].Requests(wire.KindLookup) + nodes[2].Requests(wire.KindLookup); got != 1 {
		t.Fatalf("%d lookups, want the one explicit Lookup", got)
	}

	ap, err := c.UpdatePartitions(ctx, "topic-blue", 8)
	if err != nil || ap.Partitions != 8 {
		t.Fatalf("UpdatePartitions = %+v, %v", ap, err)
	}
	r, err := c.Revoke(ctx, "topic-blue")
	if err != nil || r != (client.Revoked{Topic: "topic-blue", Epoch: 2}) {
		t.Fatalf("Revoke = %+v, %v", r, err)
	}
	if _, ok := c.Route("topic-blue"); ok {
		t.Fatal("route still cached after Revoke")
	}
	if _, err := c.Produce(ctx, "topic-blue", [][]byte{[]byte("x")}); !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("Produce to a revoked topic = %v, want ErrNotFound", err)
	}
}

func TestLookupNeverReturnsAnOlderEpochThanItReturnedBefore(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx := ctxT(t)
	cl.SetOwner("orders", "n2")
	cl.SetOwner("orders", "n1")
	a, err := c.Lookup(ctx, "orders", false)
	if err != nil || a.Epoch != 2 {
		t.Fatalf("Lookup = %+v, %v", a, err)
	}
	// A node whose view lags answers the next plain lookup with an older
	// epoch; the client asks again, linearizably, and gets the truth.
	stale := wire.Assignment{Topic: []byte("orders"), Owner: []byte("n2"), OwnerAddr: []byte("127.0.0.1:9"), Epoch: 1, Partitions: 1}
	nodes[0].Inject(wire.KindLookup, clienttest.Fault{Stale: &stale})
	got, err := c.Lookup(ctx, "orders", false)
	if err != nil || got.Epoch != a.Epoch || got.Owner != "n1" {
		t.Fatalf("Lookup after a stale answer = %+v, %v; want epoch %d at n1", got, err, a.Epoch)
	}
	if n := nodes[0].Requests(wire.KindLookup); n < 3 {
		t.Fatalf("%d lookups: the stale answer was not asked again", n)
	}
}

func TestProduceOnACacheMissLooksTheTopicUp(t *testing.T) {
	cl, nodes := startCluster(t, 3)
	cl.SetOwner("orders", "n3")
	c := newClient(t, client.Config{Servers: addrs(nodes[0])})
	p, err := c.Produce(ctxT(t), "orders", [][]byte{[]byte("a"), []byte("b")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Epoch != 1 || p.Offset != 0 || nodes[0].Requests(wire.KindLookup) != 1 || nodes[2].Requests(wire.KindProduce) != 1 {
		t.Fatalf("Produce = %+v; lookups at seed %d, produces at owner %d", p, nodes[0].Requests(wire.KindLookup), nodes[2].Requests(wire.KindProduce))
	}
	if got := cl.Records("orders"); len(got) != 2 || string(got[1]) != "b" {
		t.Fatalf("owner holds %q", got)
	}
}

func TestStaleRouteIsInvalidatedAndRetriedAtTheNewOwner(t *testing.T) {
	for _, omitHints := range []bool{false, true} {
		t.Run(fmt.Sprintf("omitHints=%v", omitHints), func(t *testing.T) {
			cl, nodes := startCluster(t, 3)
			cl.OmitHints = omitHints
			c := newClient(t, client.Config{Servers: addrs(nodes...)})
			ctx := ctxT(t)
			if _, err := c.Assign(ctx, "t", client.AssignOptions{Owner: "n1"}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Produce(ctx, "t", [][]byte{[]byte("at epoch 1")}); err != nil {
				t.Fatal(err)
			}
			// The topic moves behind the client's back: its cache still
			// says n1 at epoch 1.
			if e := cl.SetOwner("t", "n2"); e != 2 {
				t.Fatalf("epoch %d", e)
			}
			lookupsBefore := nodes[0].Requests(wire.KindLookup) + nodes[1].Requests(wire.KindLookup) + nodes[2].Requests(wire.KindLookup)
			p, err := c.Produce(ctx, "t", [][]byte{[]byte("at epoch 2")})
			if err != nil {
				t.Fatal(err)
			}
			if p.Epoch != 2 || p.Offset != 1 {
				t.Fatalf("Produce = %+v, want epoch 2 offset 1", p)
			}
			if nodes[0].Requests(wire.KindProduce) != 2 || nodes[1].Requests(wire.KindProduce) != 1 {
				t.Fatalf("produces: old owner %d (want 2: one refused), new owner %d (want 1)",
					nodes[0].Requests(wire.KindProduce), nodes[1].Requests(wire.KindProduce))
			}
			lookups := nodes[0].Requests(wire.KindLookup) + nodes[1].Requests(wire.KindLookup) + nodes[2].Requests(wire.KindLookup) - lookupsBefore
			wantLookups := 1
			if !omitHints {
				wantLookups = 0 // the answer's owner hint is used directly
			}
			if lookups != wantLookups {
				t.Fatalf("%d lookups after the refusal, want %d", lookups, wantLookups)
			}
			if r, ok := c.Route("t"); !ok || r.Owner != "n2" || r.Epoch != 2 || r.Addr != nodes[1].Addr() {
				t.Fatalf("cached route %+v, %v", r, ok)
			}
		})
	}
}

func TestDeadOwnerIsLookedUpAgain(t *testing.T) {
	cl, nodes := startCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes[0], nodes[2])})
	ctx := ctxT(t)
	if _, err := c.Assign(ctx, "t", client.AssignOptions{Owner: "n2"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Fetch(ctx, "t", 0, 0); err != nil {
		t.Fatal(err)
	}
	nodes[1].Close()
	cl.SetOwner("t", "n3")
	p, err := c.Produce(ctx, "t", [][]byte{[]byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	if p.Epoch != 2 || nodes[2].Requests(wire.KindProduce) != 1 {
		t.Fatalf("Produce = %+v, n3 produces %d", p, nodes[2].Requests(wire.KindProduce))
	}
}

func TestDownSeedIsSkipped(t *testing.T) {
	_, nodes := startCluster(t, 2)
	down := nodes[0].Addr()
	nodes[0].Close()
	c := newClient(t, client.Config{Servers: []string{down, nodes[1].Addr()}})
	ctx := ctxT(t)
	for range 3 {
		ms, err := c.Members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(ms) != 2 || ms[0].ID != "n1" || ms[0].State != wire.MemberDead || ms[1].State != wire.MemberAlive {
			t.Fatalf("Members = %+v", ms)
		}
	}
	// The seed that answered is remembered: one connection, three requests.
	if nodes[1].Requests(wire.KindMembers) != 3 || nodes[1].Accepted() != 1 {
		t.Fatalf("live seed: %d requests, %d connections", nodes[1].Requests(wire.KindMembers), nodes[1].Accepted())
	}
}

func TestAllServersDownIsUnreachable(t *testing.T) {
	_, nodes := startCluster(t, 2)
	a := addrs(nodes...)
	nodes[0].Close()
	nodes[1].Close()
	c := newClient(t, client.Config{Servers: a, MaxRetries: 3})
	_, err := c.Lookup(ctxT(t), "t", false)
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Lookup = %v, want ErrUnreachable", err)
	}
}

func TestRetriesOnUnavailableThenSucceeds(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	busy := clienttest.Fault{Err: &wire.ErrorResponse{Code: wire.CodeUnavailable, Message: "starting", RetryAfter: time.Millisecond}}
	nodes[0].Inject(wire.KindLookup, busy, busy)
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	a, err := c.Lookup(ctxT(t), "t", false)
	if err != nil || a.Owner != "n1" {
		t.Fatalf("Lookup = %+v, %v", a, err)
	}
	if got := nodes[0].Requests(wire.KindLookup); got != 3 {
		t.Fatalf("%d lookups, want 3", got)
	}
}

func TestRetriesAreBounded(t *testing.T) {
	cl, nodes := startCluster(t, 2)
	cl.SetOwner("t", "n1")
	for _, n := range nodes {
		for range 10 {
			n.Inject(wire.KindLookup, clienttest.Fault{Err: wire.NewErrorResponse(wire.CodeUnavailable, "no quorum")})
		}
	}
	c := newClient(t, client.Config{Servers: addrs(nodes...), MaxRetries: 3})
	_, err := c.Lookup(ctxT(t), "t", false)
	if !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("Lookup = %v, want ErrUnavailable", err)
	}
	var er *wire.ErrorResponse
	if !errors.As(err, &er) || er.Message != "no quorum" {
		t.Fatalf("error %v does not carry the node's answer", err)
	}
	if got := nodes[0].Requests(wire.KindLookup) + nodes[1].Requests(wire.KindLookup); got != 4 {
		t.Fatalf("%d attempts, want 1 + MaxRetries = 4", got)
	}
}

func TestNotLeaderForTopicIsReturnedOnceRetriesAreSpent(t *testing.T) {
	cl, nodes := startCluster(t, 2)
	cl.SetOwner("t", "n1")
	refuse := clienttest.Fault{Err: &wire.ErrorResponse{Code: wire.CodeNotLeaderForTopic, Epoch: 1}}
	for range 10 {
		nodes[0].Inject(wire.KindProduce, refuse)
	}
	c := newClient(t, client.Config{Servers: addrs(nodes...), MaxRetries: 2})
	_, err := c.Produce(ctxT(t), "t", [][]byte{[]byte("x")})
	if !errors.Is(err, wire.ErrNotLeaderForTopic) {
		t.Fatalf("Produce = %v, want ErrNotLeaderForTopic", err)
	}
	if got := nodes[0].Requests(wire.KindProduce); got != 3 {
		t.Fatalf("%d produce attempts, want 3", got)
	}
}

func TestFatalErrorsAreNotRetried(t *testing.T) {
	_, nodes := startCluster(t, 2)
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	_, err := c.Lookup(ctxT(t), "never-assigned", false)
	if !errors.Is(err, wire.ErrNotFound) {
		t.Fatalf("Lookup = %v, want ErrNotFound", err)
	}
	if got := nodes[0].Requests(wire.KindLookup) + nodes[1].Requests(wire.KindLookup); got != 1 {
		t.Fatalf("%d attempts, want 1", got)
	}
	_, err = c.Assign(ctxT(t), "t", client.AssignOptions{Owner: "n9"})
	if !errors.Is(err, wire.ErrBadRequest) {
		t.Fatalf("Assign to an unknown node = %v, want ErrBadRequest", err)
	}
}

func TestNotLeaderHintIsFollowed(t *testing.T) {
	cl, nodes := startCluster(t, 3)
	cl.SetOwner("t", "n1")
	nodes[0].Inject(wire.KindLookup, clienttest.Fault{Err: &wire.ErrorResponse{
		Code: wire.CodeNotLeader, Shard: 3, NodeID: "n3", Addr: nodes[2].Addr()}})
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	if _, err := c.Lookup(ctxT(t), "t", true); err != nil {
		t.Fatal(err)
	}
	if nodes[1].Requests(wire.KindLookup) != 0 || nodes[2].Requests(wire.KindLookup) != 1 {
		t.Fatalf("lookups at n2 %d, n3 %d: the leader hint was not followed",
			nodes[1].Requests(wire.KindLookup), nodes[2].Requests(wire.KindLookup))
	}
}

func TestContextDeadlineIsHonoured(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	nodes[0].Inject(wire.KindLookup, clienttest.Fault{Stall: true})
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Lookup(ctx, "t", false)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lookup = %v, want DeadlineExceeded", err)
	}
	// The connection outlives the abandoned request.
	if _, err := c.Lookup(ctxT(t), "t", false); err != nil {
		t.Fatal(err)
	}
	if nodes[0].Accepted() != 1 {
		t.Fatalf("%d connections, want 1", nodes[0].Accepted())
	}
}

func TestStalledAttemptIsRetriedAfterRequestTimeout(t *testing.T) {
	cl, nodes := startCluster(t, 2)
	cl.SetOwner("t", "n1")
	nodes[0].Inject(wire.KindLookup, clienttest.Fault{Stall: true})
	c := newClient(t, client.Config{Servers: addrs(nodes...), RequestTimeout: 50 * time.Millisecond})
	if _, err := c.Lookup(ctxT(t), "t", false); err != nil {
		t.Fatal(err)
	}
	if nodes[1].Requests(wire.KindLookup) != 1 {
		t.Fatal("the stalled attempt was not retried on the other seed")
	}
}

func TestDroppedConnectionIsRedialled(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	nodes[0].Inject(wire.KindProduce, clienttest.Fault{Drop: true})
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx := ctxT(t)
	if _, err := c.Produce(ctx, "t", [][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
	if nodes[0].Accepted() != 2 || nodes[0].Requests(wire.KindProduce) != 2 {
		t.Fatalf("%d connections, %d produces; want 2 and 2", nodes[0].Accepted(), nodes[0].Requests(wire.KindProduce))
	}
	nodes[0].DropConns()
	if _, err := c.Fetch(ctx, "t", 0, 0); err != nil {
		t.Fatal(err)
	}
}

func TestARetriedProduceIsAppendedOnce(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx := ctxT(t)
	if p, err := c.Produce(ctx, "t", [][]byte{[]byte("a")}); err != nil || p.Offset != 0 {
		t.Fatalf("first produce: %+v, %v", p, err)
	}
	// The owner appends the next one, and its answer is lost twice: the
	// retries carry the same session and number, and get the first answer.
	nodes[0].Inject(wire.KindProduce, clienttest.Fault{Lose: true}, clienttest.Fault{Lose: true})
	if p, err := c.Produce(ctx, "t", [][]byte{[]byte("b")}); err != nil || p.Offset != 1 {
		t.Fatalf("retried produce: %+v, %v", p, err)
	}
	if got := cl.Records("t"); len(got) != 2 || string(got[1]) != "b" || nodes[0].Requests(wire.KindProduce) != 4 {
		t.Fatalf("records %q after %d produce requests", got, nodes[0].Requests(wire.KindProduce))
	}
	// An owner that no longer keeps the first answer says so, and the
	// client does not retry.
	nodes[0].Inject(wire.KindProduce, clienttest.Fault{Err: wire.NewErrorResponse(wire.CodeSessionExpired, "producer session expired")})
	if _, err := c.Produce(ctx, "t", [][]byte{[]byte("c")}); !errors.Is(err, wire.ErrSessionExpired) || nodes[0].Requests(wire.KindProduce) != 5 {
		t.Fatalf("an expired session: %v after %d requests", err, nodes[0].Requests(wire.KindProduce))
	}
}

func TestPipelinedCallersGetTheirOwnAnswers(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	const callers, perCaller = 64, 8
	for i := range callers {
		cl.SetOwner(fmt.Sprintf("topic-%d", i), "n1")
	}
	// Early requests answer late, so answers come back out of order.
	for i := range 32 {
		nodes[0].Inject(wire.KindLookup, clienttest.Fault{Delay: time.Duration(32-i) * time.Millisecond})
	}
	// No retries: a lost or garbled frame must fail the test, not be
	// papered over by a second attempt.
	c := newClient(t, client.Config{Servers: addrs(nodes...), MaxInFlight: 16, MaxRetries: -1})
	ctx := ctxT(t)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Go(func() {
			topic := fmt.Sprintf("topic-%d", i)
			for range perCaller {
				a, err := c.Lookup(ctx, topic, false)
				if err != nil {
					errs <- err
					return
				}
				if a.Topic != topic {
					errs <- fmt.Errorf("caller %s got the answer for %s", topic, a.Topic)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if nodes[0].Accepted() != 1 || nodes[0].Requests(wire.KindLookup) != callers*perCaller {
		t.Fatalf("%d connections, %d lookups", nodes[0].Accepted(), nodes[0].Requests(wire.KindLookup))
	}
	// Requests overlapped on the one connection, never more than the bound.
	if m := nodes[0].MaxInFlight(); m < 2 || m > 16 {
		t.Fatalf("%d requests in flight at once, want 2..16", m)
	}
}

func TestConcurrentProducersGetDistinctOffsets(t *testing.T) {
	cl, nodes := startCluster(t, 2)
	cl.SetOwner("t", "n2")
	c := newClient(t, client.Config{Servers: addrs(nodes[0]), ConnsPerServer: 3, MaxRetries: -1})
	ctx := ctxT(t)
	const producers = 40
	offsets := make(chan uint64, producers)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			p, err := c.Produce(ctx, "t", [][]byte{fmt.Appendf(nil, "r%d", i)})
			if err != nil {
				t.Error(err)
				return
			}
			offsets <- p.Offset
		})
	}
	wg.Wait()
	close(offsets)
	seen := make(map[uint64]bool)
	for o := range offsets {
		if seen[o] || o >= producers {
			t.Fatalf("offset %d repeated or out of range", o)
		}
		seen[o] = true
	}
	if len(seen) != producers || nodes[1].Accepted() > 3 {
		t.Fatalf("%d offsets, %d connections to the owner", len(seen), nodes[1].Accepted())
	}
}

func TestInvalidArgumentsAreRefusedLocally(t *testing.T) {
	_, nodes := startCluster(t, 1)
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx := ctxT(t)
	huge := string(bytes.Repeat([]byte("x"), 10<<20))
	calls := map[string]func() error{
		"empty topic":      func() error { _, err := c.Lookup(ctx, "", false); return err },
		"10 MB topic":      func() error { _, err := c.Assign(ctx, huge, client.AssignOptions{}); return err },
		"topic of 256":     func() error { _, err := c.Produce(ctx, huge[:256], [][]byte{nil}); return err },
		"no records":       func() error { _, err := c.Produce(ctx, "t", nil); return err },
		"record too large": func() error { _, err := c.Produce(ctx, "t", [][]byte{[]byte(huge[:wire.MaxRecordLen+1])}); return err },
		"frame too large": func() error {
			recs := make([][]byte, 20)
			for i := range recs {
				recs[i] = []byte(huge[:wire.MaxRecordLen])
			}
			_, err := c.Produce(ctx, "t", recs)
			return err
		},
		"zero partitions":   func() error { _, err := c.UpdatePartitions(ctx, "t", 0); return err },
		"owner too long":    func() error { _, err := c.Assign(ctx, "t", client.AssignOptions{Owner: huge[:65]}); return err },
		"status bad server": func() error { _, err := c.Status(ctx, "nowhere"); return err },
		"drain no node":     func() error { _, err := c.Drain(ctx, "", nil); return err },
		"undrain long node": func() error { _, err := c.Undrain(ctx, huge[:65]); return err },
		"transfer no node":  func() error { _, err := c.TransferLeader(ctx, 3, ""); return err },
		"remove no node":    func() error { _, err := c.RemoveNode(ctx, "", client.RemoveOptions{Force: true}); return err },
	}
	for name, f := range calls {
		if err := f(); !errors.Is(err, client.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if nodes[0].Accepted() != 0 {
		t.Fatal("an invalid request reached the node")
	}
}

func TestHandshake(t *testing.T) {
	secret := []byte("s3cret")
	cl := &clienttest.Cluster{ClusterID: 9, Secret: secret}
	n, err := cl.Start("n1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	cl.SetOwner("t", "n1")
	tests := []struct {
		name    string
		cluster uint64
		secret  []byte
		want    error
	}{
		{"right secret", 9, secret, nil},
		{"wrong secret", 9, []byte("guess"), client.ErrHandshake},
		{"another cluster", 8, secret, client.ErrHandshake},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, client.Config{Servers: []string{n.Addr()}, ClusterID: tc.cluster, Secret: tc.secret, MaxRetries: -1})
			_, err := c.Lookup(ctxT(t), "t", false)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("Lookup = %v, want %v", err, tc.want)
			}
		})
	}
	// A client without the secret completes Hello but cannot prove
	// itself: the node answers Unauthorized and closes the connection.
	c := newClient(t, client.Config{Servers: []string{n.Addr()}, ClusterID: 9, MaxRetries: -1})
	if _, err := c.Lookup(ctxT(t), "t", false); !errors.Is(err, wire.ErrUnauthorized) {
		t.Fatalf("Lookup without the secret = %v, want ErrUnauthorized", err)
	}
}

func TestCloseUnblocksCallers(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	nodes[0].Inject(wire.KindFetch, clienttest.Fault{Stall: true})
	c, err := client.New(client.Config{Servers: addrs(nodes...), ClusterID: 7})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Fetch(context.Background(), "t", 0, 0)
		done <- err
	}()
	for nodes[0].Requests(wire.KindFetch) == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Fetch during Close = %v, want ErrClosed", err)
	}
	if _, err := c.Members(context.Background()); !errors.Is(err, client.ErrClosed) {
		t.Fatalf("Members after Close = %v, want ErrClosed", err)
	}
	_ = c.Close()
}

func TestStatusOfASpecificNode(t *testing.T) {
	cl, nodes := startCluster(t, 3)
	cl.SetOwner("t", "n3")
	c := newClient(t, client.Config{Servers: addrs(nodes[0])})
	s, err := c.Status(ctxT(t), nodes[2].Addr())
	if err != nil {
		t.Fatal(err)
	}
	if s != (client.Status{Node: "n3", Generation: 1, MembersAlive: 3, ShardsHosted: 2, TopicsOwned: 1, Ready: true}) {
		t.Fatalf("Status = %+v", s)
	}
	if s, err = c.Status(ctxT(t), ""); err != nil || s.Node != "n1" {
		t.Fatalf("Status of any seed = %+v, %v", s, err)
	}
	shards, err := c.Shards(ctxT(t))
	if err != nil || len(shards) != 2 || len(shards[0].Replicas) != 3 || shards[1].Leader != "n2" {
		t.Fatalf("Shards = %+v, %v", shards, err)
	}
	down := nodes[1].Addr()
	nodes[1].Close()
	c2 := newClient(t, client.Config{Servers: addrs(nodes[0]), MaxRetries: 1})
	if _, err := c2.Status(ctxT(t), down); !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Status of a stopped node = %v, want ErrUnreachable", err)
	}
}

func TestKeepalivesAreIgnored(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	c := newClient(t, client.Config{Servers: addrs(nodes...)})
	ctx := ctxT(t)
	for range 3 {
		if _, err := c.Lookup(ctx, "t", false); err != nil {
			t.Fatal(err)
		}
		nodes[0].Keepalive()
	}
	if nodes[0].Accepted() != 1 {
		t.Fatalf("%d connections: a keepalive broke the connection", nodes[0].Accepted())
	}
}

func TestDataRequestWithAllServersDownFailsAfterOneLookup(t *testing.T) {
	_, nodes := startCluster(t, 2)
	a := addrs(nodes...)
	nodes[0].Close()
	nodes[1].Close()
	c := newClient(t, client.Config{Servers: a, MaxRetries: 3})
	_, err := c.Produce(ctxT(t), "t", [][]byte{[]byte("x")})
	if !errors.Is(err, client.ErrUnreachable) {
		t.Fatalf("Produce = %v, want ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), "4 attempts failed") {
		t.Fatalf("Produce = %v: want the lookup's 4 attempts, once", err)
	}
}

// TestPipelinedFramesSurviveWriteBatching drives many small requests
// through one connection, so that callers keep queueing frames while the
// writer is sending the previous batch; one garbled or lost frame fails a
// request (no retries).
func TestPipelinedFramesSurviveWriteBatching(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n1")
	c := newClient(t, client.Config{Servers: addrs(nodes...), MaxRetries: -1, RequestTimeout: 5 * time.Second})
	ctx := ctxT(t)
	const callers, perCaller = 32, 100
	var wg sync.WaitGroup
	var failed sync.Once
	for range callers {
		wg.Go(func() {
			for range perCaller {
				if _, err := c.Lookup(ctx, "t", false); err != nil {
					failed.Do(func() { t.Error(err) })
					return
				}
			}
		})
	}
	wg.Wait()
	if nodes[0].Accepted() != 1 {
		t.Fatalf("%d connections, want 1", nodes[0].Accepted())
	}
}

func TestTopicWithoutAnOwnerAddressIsUnavailable(t *testing.T) {
	cl, nodes := startCluster(t, 1)
	cl.SetOwner("t", "n9") // an owner no node knows the address of
	c := newClient(t, client.Config{Servers: addrs(nodes...), MaxRetries: 2})
	_, err := c.Produce(ctxT(t), "t", [][]byte{[]byte("x")})
	if !errors.Is(err, wire.ErrUnavailable) {
		t.Fatalf("Produce = %v, want ErrUnavailable", err)
	}
	if got := nodes[0].Requests(wire.KindLookup); got != 3 {
		t.Fatalf("%d lookups, want one per attempt (3)", got)
	}
	cl.SetOwner("t", "n1")
	if _, err := c.Produce(ctxT(t), "t", [][]byte{[]byte("x")}); err != nil {
		t.Fatal(err)
	}
}

// TestOwnerThatFailedADialIsLookedUpBeforeDiallingAgain: once a dial to a
// topic's cached owner failed, the other topics cached at that owner are
// looked up again before any dial there, and without a wait: a dead
// node's topics move, and each dial to it could take a whole timeout.
func TestOwnerThatFailedADialIsLookedUpBeforeDiallingAgain(t *testing.T) {
	cl, nodes := startCluster(t, 3)
	// A backoff waited would outlast the test's context (ctxT).
	c := newClient(t, client.Config{Servers: addrs(nodes[0], nodes[2]), BackoffBase: time.Minute, BackoffMax: time.Minute})
	ctx := ctxT(t)
	topics := []string{"a", "b", "c", "d"}
	for _, tp := range topics {
		if _, err := c.Assign(ctx, tp, client.AssignOptions{Owner: "n2"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Fetch(ctx, tp, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	// n2 dies; in its place, a listener that takes connections and drops
	// them, counting the dials.
	dead := nodes[1].Addr()
	nodes[1].Close()
	ln, err := net.Listen("tcp", dead)
	if err != nil {
		t.Fatal(err)
	}
	var dials atomic.Int64
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = conn.Close()
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	for _, tp := range topics {
		cl.SetOwner(tp, "n3")
	}
	for _, tp := range topics {
		p, err := c.Produce(ctx, tp, [][]byte{[]byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		if p.Epoch != 2 {
			t.Fatalf("Produce(%s) = %+v, want epoch 2 at n3", tp, p)
		}
	}
	if d := dials.Load(); d != 1 {
		t.Fatalf("%d dials to the dead owner, want 1", d)
	}
	if n := nodes[2].Requests(wire.KindProduce); n != len(topics) {
		t.Fatalf("n3 took %d produces, want %d", n, len(topics))
	}
}

// TestAnUnreachableOwnersTopicIsLookedUpAtAnyNodeFirst: the topic of an
// owner that cannot be reached is looked up again with a plain lookup,
// which any node answers from its replica (a failover moves every topic
// of a dead owner, and a linearizable lookup costs its shard leader a
// round); only when that still names the unreachable owner does the
// client ask the shard's leader.
func TestAnUnreachableOwnersTopicIsLookedUpAtAnyNodeFirst(t *testing.T) {
	cl, nodes := startCluster(t, 3)
	c := newClient(t, client.Config{Servers: addrs(nodes[0], nodes[2])})
	ctx := ctxT(t)
	for _, tp := range []string{"a", "b"} {
		if _, err := c.Assign(ctx, tp, client.AssignOptions{Owner: "n2"}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Fetch(ctx, tp, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	nodes[1].Close()
	linear := func() int { return nodes[0].LinearLookups() + nodes[2].LinearLookups() }

	// The replicas know the move: no linearizable lookup.
	cl.SetOwner("a", "n3")
	if p, err := c.Produce(ctx, "a", [][]byte{[]byte("x")}); err != nil || p.Epoch != 2 {
		t.Fatalf("Produce(a) = %+v, %v; want epoch 2 at n3", p, err)
	}
	if n := linear(); n != 0 {
		t.Fatalf("%d linearizable lookups, want 0: a plain one named the new owner", n)
	}

	// The node that answers the plain lookup lags (it still names n2):
	// the client then asks the shard's leader.
	cl.SetOwner("b", "n3")
	stale := &wire.Assignment{Topic: []byte("b"), Owner: []byte("n2"), OwnerAddr: []byte(nodes[1].Addr()), Epoch: 1, Partitions: 1}
	for _, n := range []*clienttest.Node{nodes[0], nodes[2]} {
		n.Inject(wire.KindLookup, clienttest.Fault{Stale: stale})
	}
	if p, err := c.Produce(ctx, "b", [][]byte{[]byte("x")}); err != nil || p.Epoch != 2 {
		t.Fatalf("Produce(b) = %+v, %v; want epoch 2 at n3", p, err)
	}
	if n := linear(); n != 1 {
		t.Fatalf("%d linearizable lookups, want 1 after a stale plain one", n)
	}
	if n := nodes[2].Requests(wire.KindProduce); n != 2 {
		t.Fatalf("n3 took %d produces, want 2", n)
	}
}
