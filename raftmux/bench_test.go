package raftmux_test

import (
	"context"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
)

// cpuTime is the process's user+system CPU time: under a loaded machine it
// tracks the work done better than wall time does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchConfig uses the default tick: the tests' fast clock would let a
// loaded machine's scheduling delays cost leaderships mid-run.
func benchConfig(cfg *raftmux.Config) { cfg.TickInterval = 100 * time.Millisecond }

// BenchmarkPropose measures one proposal through three in-process hosts
// (no fsync), sequentially: the per-commit cost of the whole round trip.
func BenchmarkPropose(b *testing.B) {
	c := newCluster(b, 3, benchConfig)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	h := c.hosts[lead]
	for _, kv := range c.kvs {
		kv.Record = false
	}
	cmd := []byte("0123456789abcdef")
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := h.Propose(ctx, 0, cmd); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
}

// BenchmarkProposeManyShards is the many-groups shape: 256 shards, each
// with one proposal in flight at a time from one of 64 concurrent callers
// (no fsync). cpu-us/op is the CPU of all three hosts per commit.
func BenchmarkProposeManyShards(b *testing.B) {
	const shards = 256
	c := newCluster(b, 3, benchConfig)
	c.bootstrap(shards, []uint64{1, 2, 3})
	leads := c.waitLeaders(shardList(shards), 10*time.Second)
	for _, kv := range c.kvs {
		kv.Record = false
	}
	cmd := []byte("0123456789abcdef")
	var next atomic.Uint64
	b.SetParallelism(32) // 64 callers on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, f0, t0, m0 := cpuTime(), c.net.Frames(), c.net.HeartbeatTuples(), messages(c)
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			s := next.Add(1) % shards
			if _, err := c.hosts[leads[s]].Propose(ctx, s, cmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(c.net.Frames()-f0)/float64(b.N), "frames/op")
	b.ReportMetric(float64(messages(c)-m0)/float64(b.N), "msgs/op")
	b.ReportMetric(float64(c.net.HeartbeatTuples()-t0)/float64(b.N), "hbtuples/op")
}

// messages counts the raft messages (not heartbeat tuples) sent.
func messages(c *cluster) int64 {
	var n int64
	for t := range raftpb.MessageType_name {
		n += c.net.Messages(raftpb.MessageType(t))
	}
	return n
}

// BenchmarkProposeDurable: one group, 64 concurrent callers, every synced
// commit fsynced to a file.
func BenchmarkProposeDurable(b *testing.B) {
	c := newClusterLogged(b, 3, b.TempDir(), benchConfig)
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 5*time.Second)[0]
	h := c.hosts[lead]
	for _, kv := range c.kvs {
		kv.Record = false
	}
	fsyncs := func() (n int64) {
		for _, st := range c.stores {
			n += st.Fsyncs()
		}
		return n
	}
	cmd := []byte("0123456789abcdef")
	b.SetParallelism(32) // 64 callers on 2 cores
	b.ReportAllocs()
	b.ResetTimer()
	cpu0, fs0 := cpuTime(), fsyncs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, err := h.Propose(ctx, 0, cmd); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
	b.ReportMetric(float64(fsyncs()-fs0)/float64(b.N), "fsyncs/op")
}
