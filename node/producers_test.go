package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/serve"
	"github.com/shoalmq/shoal/wire"
)

// produceAt sends m to n's client address until n answers it with
// something other than Unavailable (a handoff in progress, no lease yet),
// and returns the ack, or the error n answered.
func produceAt(t *testing.T, n *Node, m *wire.Produce) (wire.ProduceAck, *wire.Error) {
	t.Helper()
	addr, _, _ := n.Addrs()
	payload := wire.AppendProduce(nil, m)
	deadline := time.Now().Add(20 * time.Second)
	for {
		kind, out := rawRequest(t, addr, wire.KindProduce, payload)
		if kind == wire.KindProduceAck {
			var a wire.ProduceAck
			if err := wire.DecodeProduceAck(out, &a); err != nil {
				t.Fatalf("ack: %v", err)
			}
			return a, nil
		}
		e := new(wire.Error)
		if kind != wire.KindError || wire.DecodeError(out, e) != nil {
			t.Fatalf("produce answered %v %x", kind, out)
		}
		// Unavailable, or refused by the owner at the produce's own epoch
		// (its lease lapsed for a moment on a loaded machine: nothing was
		// appended), is asked again.
		lapsed := e.Code == wire.CodeNotLeaderForTopic && e.Epoch == m.Epoch
		if (e.Code != wire.CodeUnavailable && !lapsed) || time.Now().After(deadline) {
			return wire.ProduceAck{}, e
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// mustAck is produceAt that must be acknowledged at epoch and offset.
func mustAck(t *testing.T, n *Node, m *wire.Produce, epoch, offset uint64) {
	t.Helper()
	a, e := produceAt(t, n, m)
	if e != nil || a.Epoch != epoch || a.Offset != offset {
		t.Fatalf("produce %d of session %x at %s: %+v, %+v; want epoch %d offset %d", m.Session.Seq, m.Session.ID, n.ID(), a, e, epoch, offset)
	}
}

// values returns the values of topic's records in n's store.
func values(t *testing.T, n *Node, topic string) string {
	t.Helper()
	var out []string
	if _, err := n.store.ReadRecords([]byte(topic), 0, 1<<20, func(_, _ uint64, v []byte) bool {
		out = append(out, string(v))
		return true
	}); err != nil {
		t.Fatalf("read %s at %s: %v", topic, n.ID(), err)
	}
	return fmt.Sprint(out)
}

// A produce whose first answer was lost is retried with its session and
// sequence number: the owner answers the retry with the first answer and
// appends nothing, and so it does after a restart of every node and at a
// new owner after a move.
func TestARetriedProduceIsAppendedOnceAcrossARestartAndAMove(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	const topic = "once"
	a1 := assignTo(t, cl, topic, "n2")
	waitUntil(t, 10*time.Second, "n2 serves "+topic, func() bool { return c.node("n2").Guard(topic, a1.Epoch).Check() == nil })
	base1, _ := records.OffsetBase(a1.Epoch)
	const id = 0x5e55
	p1 := &wire.Produce{Topic: []byte(topic), Epoch: a1.Epoch, Records: [][]byte{[]byte("a")}, Session: wire.Session{ID: id, Seq: 1}}
	p2 := &wire.Produce{Topic: []byte(topic), Epoch: a1.Epoch, Records: [][]byte{[]byte("b"), []byte("c")}, Session: wire.Session{ID: id, Seq: 2}}
	mustAck(t, c.node("n2"), p1, a1.Epoch, base1)
	mustAck(t, c.node("n2"), p2, a1.Epoch, base1+1)
	mustAck(t, c.node("n2"), p1, a1.Epoch, base1)
	mustAck(t, c.node("n2"), p2, a1.Epoch, base1+1)
	// Without a session a produce is appended at every attempt.
	plain := &wire.Produce{Topic: []byte(topic), Epoch: a1.Epoch, Records: [][]byte{[]byte("p")}}
	mustAck(t, c.node("n2"), plain, a1.Epoch, base1+3)
	if got := values(t, c.node("n2"), topic); got != "[a b c p]" {
		t.Fatalf("n2 holds %s", got)
	}

	// Every node restarts from its directory: the owner keeps the
	// answers with the records.
	c.restartAll(t, ctx)
	n2 := c.node("n2")
	waitUntil(t, 30*time.Second, "restarted n2 serves "+topic, func() bool { return n2.Guard(topic, a1.Epoch).Check() == nil })
	mustAck(t, n2, p2, a1.Epoch, base1+1)
	// Produce 3 says, with its floor, that produce 1 is done: a copy of
	// produce 1 that still comes is refused, not appended.
	p3 := &wire.Produce{Topic: []byte(topic), Epoch: a1.Epoch, Records: [][]byte{[]byte("d")}, Session: wire.Session{ID: id, Seq: 3, Floor: 1}}
	mustAck(t, n2, p3, a1.Epoch, base1+4)
	if _, e := produceAt(t, n2, p1); e == nil || e.Code != wire.CodeSessionExpired {
		t.Fatalf("a produce below its session's floor: %+v", e)
	}

	// The topic moves to n1, which pulls n2's records and sessions: the
	// retries that follow the move are answered as n2 answered them.
	cl = clientOf(t, c.node("n1"))
	a2 := assignTo(t, cl, topic, "n1")
	n1 := c.node("n1")
	waitUntil(t, 10*time.Second, "n1 serves "+topic, func() bool { return n1.Guard(topic, a2.Epoch).Check() == nil })
	for _, p := range []*wire.Produce{p2, p3} {
		p.Epoch = a2.Epoch
	}
	mustAck(t, n1, p3, a1.Epoch, base1+4)
	mustAck(t, n1, p2, a1.Epoch, base1+1)
	base2, _ := records.OffsetBase(a2.Epoch)
	p4 := &wire.Produce{Topic: []byte(topic), Epoch: a2.Epoch, Records: [][]byte{[]byte("e")}, Session: wire.Session{ID: id, Seq: 4, Floor: 3}}
	mustAck(t, n1, p4, a2.Epoch, base2)
	mustAck(t, n1, p4, a2.Epoch, base2)
	if got := values(t, n1, topic); got != "[a b c p d e]" {
		t.Fatalf("n1 holds %s", got)
	}
}

// Copies of one produce arriving at once are appended once: every copy
// gets the same answer.
func TestCopiesOfOneProduceRacingAreAppendedOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := clientOf(t, c.node("n1"))
	a := assignTo(t, cl, "racing", "n3")
	n3 := c.node("n3")
	waitUntil(t, 10*time.Second, "n3 serves racing", func() bool { return n3.Guard("racing", a.Epoch).Check() == nil })
	payload := wire.AppendProduce(nil, &wire.Produce{Topic: []byte("racing"), Epoch: a.Epoch, Records: [][]byte{[]byte("v")},
		Session: wire.Session{ID: 99, Seq: 1}})
	const copies = 16
	acks := make([]string, copies)
	var wg sync.WaitGroup
	for i := range copies {
		wg.Go(func() {
			kind, out := handleNow(n3, wire.KindProduce, payload)
			acks[i] = fmt.Sprintf("%v %x", kind, out)
		})
	}
	wg.Wait()
	for i := range acks {
		if acks[i] != acks[0] || !strings.HasPrefix(acks[0], wire.KindProduceAck.String()) {
			t.Fatalf("copy %d answered %s, copy 0 %s", i, acks[i], acks[0])
		}
	}
	if got := values(t, n3, "racing"); got != "[v]" {
		t.Fatalf("n3 holds %s", got)
	}
}

// BenchmarkProduceSession is the owner's share of a produce of one 100-byte
// record, with no producer session (at least once) and with one (appended
// once): the lease checks, the synced append to the store and, with a
// session, the check of its answers and the write of its state in the
// append's batch. Each goroutine produces as its own session, with one
// produce in flight, to a topic of its own.
func BenchmarkProduceSession(b *testing.B) {
	c := startCluster(b, 3)
	cl := benchClients(b, c)[0]
	n := c.node("n1")
	const topics = 64
	epochs := make([]uint64, topics)
	for i := range topics {
		topic := fmt.Sprintf("bench-once-%d", i)
		a, err := cl.Assign(context.Background(), topic, client.AssignOptions{Owner: "n1"})
		if err != nil {
			b.Fatal(err)
		}
		epochs[i] = a.Epoch
		waitUntil(b, 10*time.Second, "n1 serves "+topic, func() bool { return n.Guard(topic, a.Epoch).Check() == nil })
	}
	value := make([]byte, 100)
	var ids atomic.Uint64
	for _, mode := range []string{"without", "with"} {
		b.Run(mode, func(b *testing.B) {
			var refused atomic.Int64
			b.ReportAllocs()
			defer func() { b.ReportMetric(float64(refused.Load())/float64(b.N), "refused/op") }()
			b.RunParallel(func(pb *testing.PB) {
				id := ids.Add(1)
				i := int(id % topics)
				m := wire.Produce{Topic: fmt.Appendf(nil, "bench-once-%d", i), Epoch: epochs[i], Records: [][]byte{value}}
				var buf []byte
				for seq := uint64(1); pb.Next(); seq++ {
					if mode == "with" {
						m.Session = wire.Session{ID: id, Seq: seq, Floor: seq - 1}
					}
					buf = wire.AppendProduce(buf[:0], &m)
					// A lease renewal late on a loaded machine refuses a
					// produce now and then: it is retried, as a client would.
					for try := 0; ; try++ {
						a := produceNow(n, buf)
						if a.Kind == wire.KindProduceAck {
							break
						}
						if try == 100 {
							b.Errorf("produce: %v %x", a.Kind, a.Payload)
							return
						}
						refused.Add(1)
						time.Sleep(10 * time.Millisecond)
					}
				}
			})
		})
	}
}

// produceNow serves a produce on n and returns its answer.
func produceNow(n *Node, payload []byte) serve.Answer {
	ch := make(chan serve.Answer, 1)
	n.disp.Produce(payload, func(a serve.Answer) { ch <- a })
	return <-ch
}
