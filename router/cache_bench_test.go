package router

import (
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// The comparison implementations: what a routing cache is usually written
// as. They get string keys prepared up front (their best case: no
// conversion), while Cache takes the topic as bytes.

type syncMapCache struct{ m sync.Map }

func (c *syncMapCache) get(k string) (Route, bool) {
	v, ok := c.m.Load(k)
	if !ok {
		return Route{}, false
	}
	return *v.(*Route), true
}

func (c *syncMapCache) put(k string, r Route) { c.m.Store(k, &r) }

type rwMapCache struct {
	mu sync.RWMutex
	m  map[string]Route
}

func (c *rwMapCache) get(k []byte) (Route, bool) {
	c.mu.RLock()
	r, ok := c.m[string(k)]
	c.mu.RUnlock()
	return r, ok
}

func (c *rwMapCache) put(k []byte, r Route) {
	c.mu.Lock()
	if cur, ok := c.m[string(k)]; !ok || cur.Epoch <= r.Epoch {
		c.m[string(k)] = r
	}
	c.mu.Unlock()
}

const benchTopics = 8192 // power of two

// benchKeys returns the topics as bytes and as strings in topic-number
// order, in which every implementation is filled, and the same topics in a
// fixed random order, in which they are read: reading in insertion order
// would let structures laid out in allocation order ride the hardware
// prefetcher, which real lookups do not.
func benchKeys() (fillB [][]byte, fillS []string, readB [][]byte, readS []string) {
	fillB = make([][]byte, benchTopics)
	fillS = make([]string, benchTopics)
	for i := range fillB {
		fillS[i] = "orders.eu-west." + strconv.Itoa(i)
		fillB[i] = []byte(fillS[i])
	}
	readB = append([][]byte(nil), fillB...)
	readS = append([]string(nil), fillS...)
	rng := rand.New(rand.NewPCG(1, 1))
	rng.Shuffle(benchTopics, func(i, j int) {
		readB[i], readB[j] = readB[j], readB[i]
		readS[i], readS[j] = readS[j], readS[i]
	})
	return fillB, fillS, readB, readS
}

func benchCache(b *testing.B, bs [][]byte) *Cache {
	c, err := NewCache(CacheConfig{Capacity: 2 * benchTopics})
	if err != nil {
		b.Fatal(err)
	}
	for i, k := range bs {
		c.Put(k, "n"+strconv.Itoa(i%7), "127.0.0.1:710"+strconv.Itoa(i%7), 1, 1)
	}
	return c
}

func benchSyncMap(ss []string) *syncMapCache {
	c := &syncMapCache{}
	for i, k := range ss {
		c.put(k, Route{Owner: "n" + strconv.Itoa(i%7), Addr: "127.0.0.1:7101", Epoch: 1})
	}
	return c
}

func benchRWMap(bs [][]byte) *rwMapCache {
	c := &rwMapCache{m: make(map[string]Route, len(bs))}
	for i, k := range bs {
		c.put(k, Route{Owner: "n" + strconv.Itoa(i%7), Addr: "127.0.0.1:7101", Epoch: 1})
	}
	return c
}

var sinkRoute Route

func BenchmarkGetHit(b *testing.B) {
	fb, fs, bs, ss := benchKeys()
	b.Run("impl=cache", func(b *testing.B) {
		c := benchCache(b, fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		var r Route
		for i := 0; b.Loop(); i++ {
			r, _ = c.Get(bs[i&(benchTopics-1)])
		}
		sinkRoute = r
	})
	b.Run("impl=syncmap", func(b *testing.B) {
		c := benchSyncMap(fs)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		var r Route
		for i := 0; b.Loop(); i++ {
			r, _ = c.get(ss[i&(benchTopics-1)])
		}
		sinkRoute = r
	})
	b.Run("impl=rwmap", func(b *testing.B) {
		c := benchRWMap(fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		var r Route
		for i := 0; b.Loop(); i++ {
			r, _ = c.get(bs[i&(benchTopics-1)])
		}
		sinkRoute = r
	})
}

// seed gives each RunParallel goroutine its own walk through the keys.
var seed atomic.Uint64

func BenchmarkGetHitParallel(b *testing.B) {
	fb, fs, bs, ss := benchKeys()
	b.Run("impl=cache", func(b *testing.B) {
		c := benchCache(b, fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				c.Get(bs[i&(benchTopics-1)])
				i++
			}
		})
	})
	b.Run("impl=syncmap", func(b *testing.B) {
		c := benchSyncMap(fs)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				c.get(ss[i&(benchTopics-1)])
				i++
			}
		})
	})
	b.Run("impl=rwmap", func(b *testing.B) {
		c := benchRWMap(fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				c.get(bs[i&(benchTopics-1)])
				i++
			}
		})
	})
}

func BenchmarkPutExisting(b *testing.B) {
	fb, fs, bs, ss := benchKeys()
	b.Run("impl=cache", func(b *testing.B) {
		c := benchCache(b, fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		for i := 0; b.Loop(); i++ {
			c.Put(bs[i&(benchTopics-1)], "n3", "127.0.0.1:7103", 2, 1)
		}
	})
	b.Run("impl=syncmap", func(b *testing.B) {
		c := benchSyncMap(fs)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		for i := 0; b.Loop(); i++ {
			c.put(ss[i&(benchTopics-1)], Route{Owner: "n3", Addr: "127.0.0.1:7103", Epoch: 2})
		}
	})
	b.Run("impl=rwmap", func(b *testing.B) {
		c := benchRWMap(fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		for i := 0; b.Loop(); i++ {
			c.put(bs[i&(benchTopics-1)], Route{Owner: "n3", Addr: "127.0.0.1:7103", Epoch: 2})
		}
	})
}

// BenchmarkMix95 is 95% Get hits and 5% Puts of present topics with rising
// epochs, from every P at once.
func BenchmarkMix95(b *testing.B) {
	fb, fs, bs, ss := benchKeys()
	b.Run("impl=cache", func(b *testing.B) {
		c := benchCache(b, fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				k := bs[i&(benchTopics-1)]
				if i%20 == 0 {
					c.Put(k, "n3", "127.0.0.1:7103", uint64(i), 1)
				} else {
					c.Get(k)
				}
				i++
			}
		})
	})
	b.Run("impl=syncmap", func(b *testing.B) {
		c := benchSyncMap(fs)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				k := ss[i&(benchTopics-1)]
				if i%20 == 0 {
					c.put(k, Route{Owner: "n3", Addr: "127.0.0.1:7103", Epoch: uint64(i)})
				} else {
					c.get(k)
				}
				i++
			}
		})
	})
	b.Run("impl=rwmap", func(b *testing.B) {
		c := benchRWMap(fb)
		b.ReportAllocs()
		clk := startCPU()
		defer clk.report(b)
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				k := bs[i&(benchTopics-1)]
				if i%20 == 0 {
					c.put(k, Route{Owner: "n3", Addr: "127.0.0.1:7103", Epoch: uint64(i)})
				} else {
					c.get(k)
				}
				i++
			}
		})
	})
}
