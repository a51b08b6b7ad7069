package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/node/ownership"
)

// Once nothing changes, lease rounds and vouch rounds ask by summary alone:
// a round costs the same bytes whatever the number of shards and topics
// involved, and the topics stay served.
func TestSteadyLeaseRoundsAskBySummaryAlone(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	cl := clientOf(t, c.nodes[0])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topics = 60
	owners := map[string]string{}
	for i := range topics {
		owner := c.nodes[i%3].ID()
		a := assignTo(t, cl, fmt.Sprintf("summary-%d", i), owner)
		owners[fmt.Sprintf("summary-%d", i)] = owner
		waitServes(t, c.node(owner), fmt.Sprintf("summary-%d", i), a.Epoch)
	}
	// 60 topics over most of the 64 shards: a listed round to one leader
	// names some 13 shards at 9 bytes or more each (67 bytes a message on
	// average with the rounds always listing). A summary round is about
	// 46 bytes with its header, its reply 28.
	const summaryBytes = 48
	type sample struct{ msgs, bytes uint64 }
	read := func() sample {
		var s sample
		for _, n := range c.nodes {
			ls := n.lease.Stats()
			s.msgs += ls.MessagesSent
			s.bytes += ls.BytesSent
		}
		return s
	}
	from := read()
	var perMsg float64
	waitUntil(t, 20*time.Second, "lease rounds by summary alone", func() bool {
		s := read()
		if s.msgs-from.msgs < 12 {
			return false
		}
		perMsg = float64(s.bytes-from.bytes) / float64(s.msgs-from.msgs)
		from = s
		return perMsg < summaryBytes
	})
	t.Logf("steady lease traffic: %.1f bytes per message", perMsg)
	// Every topic is still served under a lease, renewed by summaries
	// (checked until it is: on a starved machine a renewal may come after
	// the lease ran out, and the next one covers the topic again).
	time.Sleep(2 * c.nodes[0].cfg.LeaseDuration)
	for topic, owner := range owners {
		h, ok := held(c.node(owner), topic)
		if !ok {
			t.Fatalf("%s no longer held by %s", topic, owner)
		}
		waitUntil(t, 10*time.Second, topic+" served under summaries", func() bool {
			_, r := c.node(owner).lease.Serve([]byte(topic), h.Epoch)
			return r == ownership.Servable
		})
	}
	if _, err := cl.Produce(ctx, "summary-0", [][]byte{[]byte("x")}); err != nil {
		t.Fatalf("produce: %v", err)
	}
}
