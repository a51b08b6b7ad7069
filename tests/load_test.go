package tests

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/wire"
)

// A produce load whose every request is recorded, for history.Check.

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

var errNotReachable = errors.New("not reachable from this client's side")

// onlyTo dials addr alone, through dial (nil: a plain dialer): a client
// beside one node, which reaches no other.
func onlyTo(addr string, dial dialFunc) dialFunc {
	if dial == nil {
		var d net.Dialer
		dial = d.DialContext
	}
	return func(ctx context.Context, network, a string) (net.Conn, error) {
		if a != addr {
			return nil, fmt.Errorf("dial %s: %w", a, errNotReachable)
		}
		return dial(ctx, network, a)
	}
}

// loadClient is a client of servers, dialling with dial (nil: a plain
// dialer), with short timeouts so that a stuck request does not hide the
// next ones.
func loadClient(t *testing.T, servers []string, dial dialFunc) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{Servers: servers, RequestTimeout: time.Second, MaxRetries: 3,
		BackoffBase: 20 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Dial: dial})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	return cl
}

// load runs producers until stop; every request is recorded in rec.
type load struct {
	rec    *history.Recorder
	wg     sync.WaitGroup
	cancel context.CancelFunc
	ctx    context.Context
}

func newLoad() *load {
	ctx, cancel := context.WithCancel(context.Background())
	return &load{rec: &history.Recorder{}, ctx: ctx, cancel: cancel}
}

// produce starts, for each topic, a producer named name that writes to it
// through cl, one request at a time, pausing pause between requests: a
// topic that cannot be written does not hold up the others.
func (l *load) produce(name string, cl *client.Client, topics []string, pause time.Duration) {
	for _, topic := range topics {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; l.ctx.Err() == nil; i++ {
				rctx, cancel := context.WithTimeout(l.ctx, 2*time.Second)
				start := time.Now()
				res, err := cl.Produce(rctx, topic, [][]byte{fmt.Appendf(nil, "%s-%d", name, i)})
				end := time.Now()
				cancel()
				op := history.Op{Client: name, Kind: history.Produce, Topic: topic, Start: start, End: end}
				if err == nil {
					op.OK, op.Epoch, op.Offset = true, res.Epoch, res.Offset
					if r, ok := cl.Route(topic); ok {
						op.Node = r.Owner
					}
				} else {
					op.Err = err.Error()
				}
				if err == nil || l.ctx.Err() == nil {
					l.rec.Add(op)
				}
				if err != nil || pause > 0 {
					time.Sleep(max(pause, 5*time.Millisecond))
				}
			}
		}()
	}
}

func (l *load) stop() {
	l.cancel()
	l.wg.Wait()
}

// assignAll assigns each topic to its owner through cl, recording the
// assigns, and returns their epochs.
func (l *load) assignAll(t *testing.T, cl *client.Client, owners map[string]string) map[string]uint64 {
	t.Helper()
	epochs := make(map[string]uint64)
	for topic, owner := range owners {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			start := time.Now()
			a, err := cl.Assign(ctx, topic, client.AssignOptions{Owner: owner})
			cancel()
			if err == nil && a.Owner == owner {
				l.rec.Add(history.Op{Client: "admin", Kind: history.Assign, Topic: topic, Start: start, End: time.Now(), OK: true, Epoch: a.Epoch, Node: a.Owner})
				epochs[topic] = a.Epoch
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("assign %s to %s: %+v %v", topic, owner, a, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return epochs
}

// finalState reads every topic's state with a linearizable lookup.
func finalState(t *testing.T, cl *client.Client, topics []string) map[string]history.Final {
	t.Helper()
	out := make(map[string]history.Final)
	for _, topic := range topics {
		deadline := time.Now().Add(30 * time.Second)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			a, err := cl.Lookup(ctx, topic, true)
			cancel()
			if err == nil {
				out[topic] = history.Final{Epoch: a.Epoch}
				break
			}
			if errors.Is(err, wire.ErrNotFound) {
				out[topic] = history.Final{Gone: true}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("final lookup of %s: %v", topic, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return out
}

// checkLoad checks the load's history (and final state when given) and
// fails the test on a broken promise.
func checkLoad(t *testing.T, l *load, final map[string]history.Final) []history.Op {
	t.Helper()
	ops := l.rec.Ops()
	t.Logf("history: %s", history.Summary(ops))
	if vs := history.Check(ops, final); len(vs) > 0 {
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
