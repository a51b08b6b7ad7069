package raftio_test

import (
	"context"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

// childShard is the shard the split scenarios seed; no host creates it
// from a message (a host that holds the parent seeds it itself).
const childShard = 100

func refuseChild(cfg *raftmux.Config) {
	cfg.AcceptReplica = func(shard, _ uint64) bool { return shard != childShard }
}

// A split entry seeds the child on every replica at the entry's index, with
// the parent's voters and the keys the split gives it; the child elects a
// leader (the parent's, at once), takes proposals, and is found again
// after a restart. A replica cut off during the split seeds the child when
// it applies the entry later, and catches up from the child's leader.
func TestRealPartsSplitSeedsChildOnEveryReplica(t *testing.T) {
	c := newCluster(t, 3, refuseChild)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.waitLeaders([]uint64{0}, 10*time.Second)
	var odd, even int
	for i := range uint64(40) {
		tag := byte('a' + i%4) // a and c are odd
		if tag&1 == 1 {
			odd++
		} else {
			even++
		}
		if _, err := c.propose(0, cmd(tag, i)); err != nil {
			t.Fatal(err)
		}
	}
	// Host 3 misses the split entry.
	c.partition([]uint64{3}, []uint64{1, 2})
	idx, err := c.propose(0, raftmuxtest.SplitCommand(childShard))
	if err != nil {
		t.Fatal(err)
	}
	lead := c.waitLeaders([]uint64{childShard}, 10*time.Second)[childShard]
	if lead == 3 {
		t.Fatalf("the cut-off host leads the child")
	}
	for _, id := range []uint64{1, 2} {
		if n := c.keys(id, childShard); n != odd {
			t.Fatalf("host %d: child holds %d keys, want the %d odd ones", id, n, odd)
		}
		inf := infoOf(t, c.raftHost(id), childShard)
		if inf.Applied < idx {
			t.Fatalf("host %d: child applied %d, below the split entry %d", id, inf.Applied, idx)
		}
	}
	if _, err := c.propose(childShard, cmd('e', 1)); err != nil {
		t.Fatalf("proposal to the child: %v", err)
	}
	c.heal()
	c.waitFor("host 3 holds the child with its keys and the new one", 15*time.Second, func() bool {
		return c.keys(3, childShard) == odd+1
	})
	// Replicas that applied the split confirm no read of the parent's
	// leader: it can no longer show that it leads.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err = c.raftHost(lead0(t, c)).ReadIndex(ctx, 0)
	cancel()
	if err == nil {
		t.Fatal("the parent's leader confirmed a read after its followers applied the split")
	}
	// The parent keeps its keys: the split copies, and the parent stops
	// taking writes where its user says so.
	for _, id := range []uint64{1, 2, 3} {
		if n := c.keys(id, 0); n != odd+even {
			t.Fatalf("host %d: parent holds %d keys, want %d", id, n, odd+even)
		}
	}
	c.stop(2)
	c.start(2)
	c.waitFor("host 2 hosts the child again after a restart", 10*time.Second, func() bool {
		_, ok := tryInfo(c.raftHost(2), childShard)
		return ok
	})
	if _, err := c.propose(childShard, cmd('e', 2)); err != nil {
		t.Fatalf("proposal to the child after a restart: %v", err)
	}
	defer func() {
		if t.Failed() {
			for _, id := range []uint64{1, 2, 3} {
				inf, ok := tryInfo(c.raftHost(id), childShard)
				t.Logf("host %d: %d keys, %+v %v", id, c.keys(id, childShard), inf, ok)
			}
		}
	}()
	c.waitFor("every host applied the child's writes", 15*time.Second, func() bool {
		for _, id := range []uint64{1, 2, 3} {
			if c.keys(id, childShard) != odd+2 || c.value(id, childShard, string(cmd('e', 2))) == "" {
				return false
			}
		}
		return true
	})
}

// A split applied while the parent's configuration is joint is refused by
// every replica alike; one applied twice seeds nothing the second time.
func TestRealPartsSplitRefusals(t *testing.T) {
	c := newCluster(t, 3, refuseChild)
	c.bootstrap(1, []uint64{1, 2, 3})
	c.waitLeaders([]uint64{0}, 10*time.Second)
	if _, err := c.propose(0, raftmuxtest.SplitCommand(0)); err == nil {
		t.Fatal("a split into itself was not refused")
	}
	if _, err := c.propose(0, raftmuxtest.SplitCommand(childShard)); err != nil {
		t.Fatal(err)
	}
	c.waitLeaders([]uint64{childShard}, 10*time.Second)
	if _, err := c.propose(0, raftmuxtest.SplitCommand(childShard)); err != nil {
		t.Fatalf("a second split into a child already here: %v", err)
	}
	if _, err := c.propose(childShard, cmd('a', 1)); err != nil {
		t.Fatal(err)
	}
}

// lead0 returns the host leading shard 0.
func lead0(t *testing.T, c *cluster) uint64 {
	t.Helper()
	for _, id := range c.ids() {
		if inf, ok := tryInfo(c.raftHost(id), 0); ok && inf.Leader == id {
			return id
		}
	}
	t.Fatal("shard 0 has no leader")
	return 0
}

func infoOf(t *testing.T, h *raftmux.Host, shard uint64) raftmux.Info {
	t.Helper()
	inf, ok := tryInfo(h, shard)
	if !ok {
		t.Fatalf("shard %d not hosted", shard)
	}
	return inf
}

func tryInfo(h *raftmux.Host, shard uint64) (raftmux.Info, bool) {
	if h == nil {
		return raftmux.Info{}, false
	}
	infos, err := h.Shards(context.Background())
	if err != nil {
		return raftmux.Info{}, false
	}
	for _, inf := range infos {
		if inf.Shard == shard {
			return inf, true
		}
	}
	return raftmux.Info{}, false
}

// BenchmarkSplitCutover is a split's cut-over on three hosts on Pebble and
// loopback: from proposing the split entry until the child, born of it on
// every replica, has applied a first proposal of its own. Each iteration
// splits the child the last one made.
func BenchmarkSplitCutover(b *testing.B) {
	c := newCluster(b, 3, func(cfg *raftmux.Config) {
		cfg.AcceptReplica = func(shard, _ uint64) bool { return shard == 0 }
	})
	c.bootstrap(1, []uint64{1, 2, 3})
	c.waitLeaders([]uint64{0}, 10*time.Second)
	for i := range uint64(200) {
		if _, err := c.propose(0, cmd(byte('a'+i%4), i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for i := range uint64(b.N) {
		if _, err := c.propose(i, raftmuxtest.SplitCommand(i+1)); err != nil {
			b.Fatal(err)
		}
		if _, err := c.propose(i+1, cmd('z', i)); err != nil {
			b.Fatal(err)
		}
	}
}
