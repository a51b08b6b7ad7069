package meta

import (
	"fmt"
	"runtime"
	"testing"
)

func BenchmarkApplyAssign(b *testing.B) {
	b.Run("new-topic", func(b *testing.B) {
		names := make([][]byte, 1<<16)
		for i := range names {
			names[i] = fmt.Appendf(nil, "orders.region-%06d", i)
		}
		s := New()
		var res Result
		c := Command{Op: OpAssign, Owner: "n1"}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if i%len(names) == 0 {
				s = New() // keep every assign a creation
			}
			c.Topic = names[i%len(names)]
			if err := s.Apply(&c, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("idempotent", func(b *testing.B) {
		s := New()
		var res Result
		c := assign("orders", "n1", 0)
		_ = s.Apply(&c, &res)
		b.ReportAllocs()
		for b.Loop() {
			if err := s.Apply(&c, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("move", func(b *testing.B) {
		s := New()
		var res Result
		c := assign("orders", "n1", 0)
		_ = s.Apply(&c, &res)
		owners := [2]string{"n1", "n2"}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			c.Owner = owners[i&1]
			if err := s.Apply(&c, &res); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkEncodeCommand(b *testing.B) {
	c := assign("orders.region-000001", "n1", 12)
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendCommand(buf[:0], &c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeCommand(b *testing.B) {
	for _, c := range []Command{assign("orders.region-000001", "n1", 12), revoke("orders.region-000001")} {
		enc, _ := AppendCommand(nil, &c)
		b.Run(c.Op.String(), func(b *testing.B) {
			var d Command
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if err := DecodeCommand(enc, &d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkChooseOwner(b *testing.B) {
	live := nodes(10, 3)
	topic := []byte("orders.region-000001")
	b.ReportAllocs()
	for b.Loop() {
		if ChooseOwner(topic, live) == "" {
			b.Fatal("no owner")
		}
	}
}

func BenchmarkSnapshot(b *testing.B) {
	s := New()
	for i := range 10000 {
		c := assign(fmt.Sprintf("orders.region-%06d", i), fmt.Sprintf("n%d", i%10), 4)
		if err := s.Apply(&c, nil); err != nil {
			b.Fatal(err)
		}
	}
	snap := s.AppendSnapshot(nil)
	b.Run("encode-10k", func(b *testing.B) {
		buf := make([]byte, 0, len(snap))
		b.ReportAllocs()
		b.SetBytes(int64(len(snap)))
		for b.Loop() {
			buf = s.AppendSnapshot(buf[:0])
		}
	})
	b.Run("decode-10k", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(snap)))
		for b.Loop() {
			if _, err := DecodeSnapshot(snap); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The whole apply path of a follower: decode the entry, apply it.
func BenchmarkApplyEntry(b *testing.B) {
	c := assign("orders.region-000001", "n2", 0)
	moveTo2, _ := AppendCommand(nil, &c)
	c.Owner = "n1"
	moveTo1, _ := AppendCommand(nil, &c)
	s := New()
	var res Result
	_ = s.ApplyEntry(moveTo1, &res)
	entries := [2][]byte{moveTo2, moveTo1}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := s.ApplyEntry(entries[i&1], &res); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSessions compares an assign with and without a session in one
// run, and reports what the sessions of 10,000 clients cost a shard that
// each of them wrote to once (bytes/session, heap and snapshot).
func BenchmarkSessions(b *testing.B) {
	names := make([][]byte, 1<<12)
	for i := range names {
		names[i] = fmt.Appendf(nil, "orders.region-%06d", i)
	}
	for _, withSession := range []bool{false, true} {
		b.Run(fmt.Sprintf("assign/session=%v", withSession), func(b *testing.B) {
			s := New()
			var res Result
			c := Command{Op: OpAssign, Owner: "n1"}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				c.Topic = names[i%len(names)]
				if withSession {
					// 64 clients writing in turn, each with its floor just
					// below its write: one answer kept per client.
					seq := uint64(i/64 + 1)
					c.Session = SessionRef{ID: uint64(i%64 + 1), Seq: seq, Floor: seq - 1}
					c.Clock = uint64(i)
				}
				if err := s.Apply(&c, &res); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("memory/10000-clients", func(b *testing.B) {
		const clients = 10000
		for b.Loop() {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s := New()
			var res Result
			for id := uint64(1); id <= clients; id++ {
				c := Command{Op: OpAssign, Owner: "n1", Topic: names[id%uint64(len(names))], Session: SessionRef{ID: id, Seq: 1}, Clock: id}
				if err := s.Apply(&c, &res); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			withTopics := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			snap := len(s.AppendSnapshot(nil))
			s.sessions = make(map[uint64]*session)
			runtime.GC()
			runtime.ReadMemStats(&after)
			topicsOnly := float64(after.HeapAlloc) - float64(before.HeapAlloc)
			b.ReportMetric((withTopics-topicsOnly)/clients, "heap-B/session")
			b.ReportMetric(float64(snap-len(s.AppendSnapshot(nil)))/clients, "snapshot-B/session")
			runtime.KeepAlive(s)
		}
	})
}

// BenchmarkLoad is a shard's load from its records, as a node's first use
// of each shard after a restart does: 20,000 topics (a shard's share of
// 5,000,000 over 256 shards), three owners. ns/op is one whole load.
func BenchmarkLoad(b *testing.B) {
	const n = 20_000
	src := New()
	var res Result
	for i := range n {
		c := Command{Op: OpAssign, Topic: fmt.Appendf(nil, "orders.region-%07d", i), Owner: fmt.Sprintf("n%d", i%3+1)}
		if err := src.Apply(&c, &res); err != nil {
			b.Fatal(err)
		}
	}
	var keys []string
	for _, r := range src.sortedRecords() {
		keys = append(keys, r.topic)
	}
	vals := make([][]byte, len(keys))
	for i, k := range keys {
		vals[i], _ = src.AppendRecord(nil, k)
	}
	topics := make([][]byte, len(keys))
	for i, k := range keys {
		topics[i] = []byte(k)
	}
	b.ReportAllocs()
	for b.Loop() {
		l := NewLoader()
		for i := range topics {
			if err := l.Add(topics[i], vals[i]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := l.State(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilledShard is a shard of 20,000 topics (a shard's share of
// 5,000,000 over 256 shards) filled by assigns among other garbage, as a
// node's fill leaves it: heap-B/topic is what the state holds per topic
// once collected, and list is one pass over its topics in order, as a
// listing's pages read them (ns/op for all 20,000).
func BenchmarkFilledShard(b *testing.B) {
	const n = 20000
	fill := func() *State {
		s := New()
		var res Result
		var garbage [][]byte
		for i := range n {
			c := Command{Op: OpAssign, Topic: fmt.Appendf(nil, "orders.region-%07d", (i*7919)%n), Owner: fmt.Sprintf("n%d", i%3+1)}
			if err := s.Apply(&c, &res); err != nil {
				b.Fatal(err)
			}
			garbage = append(garbage, make([]byte, 80), make([]byte, 64)) // an assign's other allocations
			if len(garbage) > 256 {
				garbage = garbage[:0]
			}
		}
		return s
	}
	b.Run("memory", func(b *testing.B) {
		for b.Loop() {
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			s := fill()
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric((float64(after.HeapAlloc)-float64(before.HeapAlloc))/n, "heap-B/topic")
			runtime.KeepAlive(s)
		}
	})
	b.Run("list", func(b *testing.B) {
		s := fill()
		for range s.TopicsFrom(nil) { // sorted once, as a listing's first page does
		}
		b.ResetTimer()
		for b.Loop() {
			k := 0
			for a := range s.TopicsFrom([]byte("orders.region-0010000")) {
				k += len(a.Topic)
			}
			if k == 0 {
				b.Fatal("listed nothing")
			}
		}
	})
}
