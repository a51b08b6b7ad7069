package raftmux_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// A leader's reads are confirmed in the coalesced heartbeat tuples: no raft
// heartbeat message with a read context goes on the wire, and each read is
// answered at or past every write acknowledged before it.
func TestLeaderReadsGoInHeartbeatTuples(t *testing.T) {
	const n = 8
	c := newCluster(t, 3, nil)
	shards := shardList(n)
	c.bootstrap(n, []uint64{1, 2, 3})
	c.waitLeaders(shards, 10*time.Second)
	acked := make(map[uint64]uint64)
	for _, s := range shards {
		idx, err := c.propose(s, fmt.Appendf(nil, "v-%d", s))
		if err != nil {
			t.Fatal(err)
		}
		acked[s] = idx
	}
	before := c.net.Messages(raftpb.MsgHeartbeat)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for round := 0; round < 5; round++ {
		leaders := c.waitLeaders(shards, 10*time.Second)
		for _, s := range shards {
			ri, err := c.hosts[leaders[s]].ReadIndex(ctx, s)
			if err != nil {
				t.Fatalf("shard %d: read on leader %d: %v", s, leaders[s], err)
			}
			if ri < acked[s] {
				t.Fatalf("shard %d: read index %d below the acknowledged write at %d", s, ri, acked[s])
			}
		}
	}
	if d := c.net.Messages(raftpb.MsgHeartbeat) - before; d != 0 {
		t.Fatalf("%d raft heartbeat messages for reads on leaders; want them all as tuples", d)
	}
}

// A leader cut off from its followers answers no read while a new leader
// commits writes on the other side; once the cut heals, its read is
// answered at or past those writes (through raft's ReadIndex, forwarded to
// the new leader) or fails.
func TestCutOffLeaderAnswersNoRead(t *testing.T) {
	a := readAcrossCut(t)
	if a.err == nil && a.at.Before(a.healed) {
		t.Fatalf("the cut-off leader answered a read at %d while cut off (writes up to %d acknowledged on the other side)", a.index, a.written)
	}
	if a.err == nil && a.index < a.written {
		t.Fatalf("read index %d after the heal is below the write acknowledged at %d", a.index, a.written)
	}
	if a.err != nil {
		t.Logf("read failed after the heal: %v", a.err)
	}
}

// cutRead is what readAcrossCut saw: the read's answer and when it came,
// the last write acknowledged on the majority's side, and when the cut
// healed.
type cutRead struct {
	index, written uint64
	err            error
	at, healed     time.Time
}

// readAcrossCut cuts a shard's leader off from its two followers, reads
// on it, has the followers elect a leader and commit three writes, waits
// 300 ms, heals the cut, and returns the read's outcome.
func readAcrossCut(t *testing.T) cutRead {
	c := newCluster(t, 3, nil)
	c.bootstrap(1, []uint64{1, 2, 3})
	old := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	if _, err := c.propose(0, []byte("before")); err != nil {
		t.Fatal(err)
	}
	var others []uint64
	for _, id := range c.ids() {
		if id != old {
			others = append(others, id)
		}
	}
	c.net.Partition([]uint64{old}, others)

	got := make(chan cutRead, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		ri, err := c.hosts[old].ReadIndex(ctx, 0)
		got <- cutRead{index: ri, err: err, at: time.Now()}
	}()

	for _, id := range others {
		c.hosts[id].NodeDead(old)
	}
	c.waitFor("a leader among the others", 10*time.Second, func() bool {
		infos := c.infos()
		for _, id := range others {
			if in, ok := infos[id][0]; ok && in.Leader == id {
				return true
			}
		}
		return false
	})
	var written uint64
	for i := 0; i < 3; i++ {
		idx, err := c.propose(0, fmt.Appendf(nil, "during-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		written = idx
	}
	// Give a wrong answer time to show.
	time.Sleep(300 * time.Millisecond)
	healed := time.Now()
	c.net.Heal()
	for _, id := range others {
		c.hosts[id].NodeAlive(old)
	}
	a := <-got
	a.written, a.healed = written, healed
	return a
}
