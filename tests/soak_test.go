package tests

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/wire"
)

var (
	soakFor  = flag.Duration("soak", 20*time.Second, "how long TestProcessSoak churns the cluster (make soak runs it for minutes)")
	soakSeed = flag.Uint64("soak-seed", 0, "seed of TestProcessSoak's choices; 0 picks one and logs it")
)

// soakNodes is the soak cluster's size: one node down at a time still
// leaves every 3-replica shard a quorum, and most topics an owner.
const soakNodes = 5

// soakTopics is how many topics the writers churn.
const soakTopics = 120

// soakWriters each own the topics i with i % soakWriters == w, so every
// topic sees one request at a time and its acknowledged history is a line.
const soakWriters = 4

// topicLog is what one writer knows of one topic: the last acknowledged
// outcome, and whether a request after it ended without a clear answer (it
// may or may not have been applied).
type topicLog struct {
	acked     bool
	active    bool
	owner     string
	epoch     uint64
	parts     uint32
	uncertain bool
	lastLost  time.Time // when the last unanswered request was sent
	ops       int
}

// inFlightFor bounds how long an unanswered request may still wait in
// some node's queue before it is proposed or dropped: a node gives up on a
// request after its request timeout, well below this.
const inFlightFor = 15 * time.Second

// TestProcessSoak churns a 5-node cluster of real processes while writers
// assign, update and revoke topics through the native client: every few
// seconds one node is killed with SIGKILL and restarted, or paused with
// SIGSTOP and resumed. Then it checks what a user relies on:
//   - the epochs a topic's acknowledged answers carry never go back;
//   - nothing acknowledged is lost: a topic whose last acknowledged request
//     was not followed by an unanswered one reads back as acknowledged (or,
//     if its owner was killed meanwhile, moved to a live node at a higher
//     epoch), and a revoked one reads back as not found;
//   - every node answers the same, and every owner is alive.
func TestProcessSoak(t *testing.T) {
	seed := *soakSeed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("soak for %v, seed %d (rerun with -soak-seed %d)", *soakFor, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	c := startCluster(t, soakNodes)
	cl, err := client.New(client.Config{Servers: c.servers()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	logs := make([]topicLog, soakTopics)
	everDown := map[string]bool{} // nodes killed or paused at some point
	var downMu sync.Mutex
	wasDown := func(id string) bool {
		downMu.Lock()
		defer downMu.Unlock()
		return everDown[id]
	}

	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var violations sync.Map // topic index → description
	for w := range soakWriters {
		wg.Add(1)
		wrng := rand.New(rand.NewPCG(seed, uint64(w)+1))
		go func() {
			defer wg.Done()
			soakWriter(ctx, cl, w, wrng, logs, &violations)
		}()
	}

	// Churn from this goroutine, which may fail the test.
	deadline := time.Now().Add(*soakFor)
	actions := 0
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(1500+rng.IntN(2000)) * time.Millisecond)
		p := c.nodes[rng.IntN(len(c.nodes))]
		downMu.Lock()
		everDown[p.id] = true
		downMu.Unlock()
		if rng.IntN(3) == 0 {
			t.Logf("churn: pause %s", p.id)
			c.signal(p, syscall.SIGSTOP)
			time.Sleep(time.Duration(1000+rng.IntN(1500)) * time.Millisecond)
			c.signal(p, syscall.SIGCONT)
		} else {
			t.Logf("churn: kill -9 %s", p.id)
			c.signal(p, syscall.SIGKILL)
			time.Sleep(time.Duration(1000+rng.IntN(3000)) * time.Millisecond)
			c.start(p)
		}
		// One node impaired at a time: wait until it serves again.
		c.waitReady(p, soakNodes)
		actions++
	}
	stop()
	wg.Wait()
	violations.Range(func(k, v any) bool {
		t.Errorf("topic soak-%d: %v", k, v)
		return true
	})
	if t.Failed() {
		c.fatalf("acknowledged answers went back in epoch")
	}
	var ops, acked, uncertain int
	for i := range logs {
		ops += logs[i].ops
		if logs[i].acked {
			acked++
		}
		if logs[i].uncertain {
			uncertain++
		}
	}
	t.Logf("soak: %d churn actions, %d requests; %d topics acknowledged, %d ending with an unanswered request",
		actions, ops, acked, uncertain)
	if actions == 0 || acked == 0 {
		c.fatalf("the soak did nothing: %d churn actions, %d topics acknowledged", actions, acked)
	}

	c.waitSettled(3)
	for _, p := range c.nodes {
		one, err := client.New(client.Config{Servers: []string{p.client}})
		if err != nil {
			t.Fatal(err)
		}
		for i := range logs {
			checkSoakTopic(c, one, p.id, i, &logs[i], wasDown)
		}
		one.Close()
	}
}

// soakWriter sends one request at a time for each of its topics until ctx
// ends, and records every outcome in logs.
func soakWriter(ctx context.Context, cl *client.Client, w int, rng *rand.Rand, logs []topicLog, violations *sync.Map) {
	var mine []int
	for i := w; i < len(logs); i += soakWriters {
		mine = append(mine, i)
	}
	nodes := make([]string, soakNodes)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("n%d", i+1)
	}
	for ctx.Err() == nil {
		i := mine[rng.IntN(len(mine))]
		l := &logs[i]
		topic := fmt.Sprintf("soak-%d", i)
		sent := time.Now()
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var (
			a      client.Assignment
			active = true
			err    error
		)
		switch r := rng.IntN(10); {
		case r < 6:
			opts := client.AssignOptions{Partitions: uint32(1 + rng.IntN(8))}
			if rng.IntN(2) == 0 {
				opts.Owner = nodes[rng.IntN(len(nodes))]
			}
			a, err = cl.Assign(rctx, topic, opts)
		case r < 8:
			a, err = cl.UpdatePartitions(rctx, topic, uint32(1+rng.IntN(8)))
		default:
			var rv client.Revoked
			rv, err = cl.Revoke(rctx, topic)
			a, active = client.Assignment{Epoch: rv.Epoch}, false
		}
		cancel()
		l.ops++
		switch {
		case err == nil:
			if l.acked && a.Epoch < l.epoch {
				violations.Store(i, fmt.Sprintf("acknowledged epoch %d after acknowledged epoch %d", a.Epoch, l.epoch))
			}
			// An unanswered request sent shortly before may still be
			// applied after this one.
			uncertain := l.uncertain && sent.Sub(l.lastLost) < inFlightFor
			*l = topicLog{acked: true, active: active, owner: a.Owner, epoch: a.Epoch, parts: a.Partitions,
				uncertain: uncertain, lastLost: l.lastLost, ops: l.ops}
		case errors.Is(err, wire.ErrNotFound), errors.Is(err, wire.ErrBadRequest):
			// Refused by the state machine (update or revoke of a topic
			// that is not active): nothing was applied.
		default:
			// Timeouts, unavailable, a node killed mid-request: the request
			// may still be applied later.
			l.uncertain, l.lastLost = true, sent
		}
	}
}

// checkSoakTopic checks what node id answers for topic i against what was
// acknowledged.
func checkSoakTopic(c *cluster, cl *client.Client, id string, i int, l *topicLog, wasDown func(string) bool) {
	c.t.Helper()
	topic := fmt.Sprintf("soak-%d", i)
	var (
		a   client.Assignment
		err error
	)
	c.eventually(30*time.Second, topic+" read back through "+id, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		a, err = cl.Lookup(ctx, topic, true)
		if err != nil && !errors.Is(err, wire.ErrNotFound) {
			return false, err.Error()
		}
		return true, ""
	})
	notFound := errors.Is(err, wire.ErrNotFound)
	if !l.acked || l.uncertain {
		// Only the epoch fence can be checked.
		if !notFound && l.acked && a.Epoch < l.epoch {
			c.fatalf("%s via %s: epoch %d below acknowledged %d", topic, id, a.Epoch, l.epoch)
		}
		return
	}
	switch {
	case !l.active && !notFound:
		c.fatalf("%s via %s: revoked at epoch %d, reads back %+v", topic, id, l.epoch, a)
	case l.active && notFound:
		c.fatalf("%s via %s: acknowledged %s@%d, reads back not found", topic, id, l.owner, l.epoch)
	case !l.active:
		return
	case a.Epoch < l.epoch:
		c.fatalf("%s via %s: epoch %d below acknowledged %d", topic, id, a.Epoch, l.epoch)
	case a.Partitions != l.parts:
		c.fatalf("%s via %s: %d partitions, acknowledged %d", topic, id, a.Partitions, l.parts)
	case a.Epoch == l.epoch && a.Owner != l.owner:
		c.fatalf("%s via %s: owner %s at the acknowledged epoch %d, acknowledged %s", topic, id, a.Owner, l.epoch, l.owner)
	case a.Epoch > l.epoch && !wasDown(l.owner):
		c.fatalf("%s via %s: moved to %s@%d though its owner %s was never down", topic, id, a.Owner, a.Epoch, l.owner)
	}
	if p := c.node(a.Owner); !p.running() {
		c.fatalf("%s via %s: owner %s is not running", topic, id, a.Owner)
	}
}
