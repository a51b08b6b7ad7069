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

// benchPrefixes give topics of 8 to 34 bytes, a quarter of them longer than
// the 24 bytes an entry holds inline.
var benchPrefixes = []string{"orders.eu-west.", "clicks.", "payments.settled.ap-south-1.", "logs.k8s.prod."}

// benchSizes are the working sets: one that fits in a core's L2 cache
// with every structure, the default one, and one far larger than the L3.
var benchSizes = []int{1 << 10, 1 << 13, 1 << 18}

// benchTopics holds a working set's topics as bytes and as strings in
// topic-number order, in which every implementation is filled, and the same
// topics in a fixed random order, in which they are read: reading in
// insertion order would let structures laid out in allocation order ride
// the hardware prefetcher, which real lookups do not.
type benchTopics struct {
	fillB, readB [][]byte
	fillS, readS []string
}

var benchTopicSets sync.Map // size -> *benchTopics

func topicsOf(n int) *benchTopics {
	if t, ok := benchTopicSets.Load(n); ok {
		return t.(*benchTopics)
	}
	t := &benchTopics{fillB: make([][]byte, n), fillS: make([]string, n)}
	for i := range n {
		t.fillS[i] = benchPrefixes[i%len(benchPrefixes)] + strconv.Itoa(i)
		t.fillB[i] = []byte(t.fillS[i])
	}
	t.readB = append([][]byte(nil), t.fillB...)
	t.readS = append([]string(nil), t.fillS...)
	rng := rand.New(rand.NewPCG(1, 1))
	rng.Shuffle(n, func(i, j int) {
		t.readB[i], t.readB[j] = t.readB[j], t.readB[i]
		t.readS[i], t.readS[j] = t.readS[j], t.readS[i]
	})
	benchTopicSets.Store(n, t)
	return t
}

// workload is one implementation, filled with one working set. Each
// measured loop switches on the implementation once, outside the loop, so
// that every implementation's call in it is direct: a wrapper or an
// indirect call per operation would cost each a few nanoseconds the same,
// which the absolute figures should not carry.
type workload struct {
	cache *Cache
	sm    *syncMapCache
	rw    *rwMapCache
	b     [][]byte // topics in read order
	s     []string
	mask  int
	gets  atomic.Uint64 // Gets made by a parallel loop on the cache
}

var benchImplNames = []string{"cache", "syncmap", "rwmap"}

// newWorkload fills implementation impl with ts in topic-number order,
// owners n0..n6.
func newWorkload(b *testing.B, impl string, ts *benchTopics) *workload {
	w := &workload{b: ts.readB, s: ts.readS, mask: len(ts.readB) - 1}
	switch impl {
	case "cache":
		c, err := NewCache(CacheConfig{Capacity: 2 * len(ts.fillB)})
		if err != nil {
			b.Fatal(err)
		}
		w.cache = c
	case "syncmap":
		w.sm = &syncMapCache{}
	default:
		w.rw = &rwMapCache{m: make(map[string]Route, len(ts.fillB))}
	}
	for i, k := range ts.fillB {
		owner, addr := "n"+strconv.Itoa(i%7), "127.0.0.1:710"+strconv.Itoa(i%7)
		switch {
		case w.cache != nil:
			w.cache.Put(k, owner, addr, 1, 1)
		case w.sm != nil:
			w.sm.put(ts.fillS[i], Route{Owner: owner, Addr: addr, Epoch: 1, Partitions: 1})
		default:
			w.rw.put(k, Route{Owner: owner, Addr: addr, Epoch: 1, Partitions: 1})
		}
	}
	return w
}

// benchWorkloads runs body as sub-benchmarks topics=N/impl=X for every
// working set and implementation, each freshly filled, with allocations
// and CPU time per operation reported.
func benchWorkloads(b *testing.B, body func(b *testing.B, w *workload)) {
	for _, n := range benchSizes {
		ts := topicsOf(n)
		for _, name := range benchImplNames {
			b.Run("topics="+strconv.Itoa(n)+"/impl="+name, func(b *testing.B) {
				w := newWorkload(b, name, ts)
				b.ReportAllocs()
				b.ResetTimer()
				clk := startCPU()
				defer clk.report(b)
				before := uint64(0)
				if w.cache != nil {
					st := w.cache.Stats()
					before = st.Hits + st.Misses
				}
				body(b, w)
				if n := w.gets.Load(); n > 0 {
					// Hits and misses the cache's Stats did not count,
					// per million Gets: 0, as they are exact.
					st := w.cache.Stats()
					b.ReportMetric(float64(n-(st.Hits+st.Misses-before))/float64(n)*1e6, "lost-counts/Mget")
				}
			})
		}
	}
}

var sinkRoute Route

// seed gives each RunParallel goroutine its own walk through the keys.
var seed atomic.Uint64

func BenchmarkGetHit(b *testing.B) {
	benchWorkloads(b, func(b *testing.B, w *workload) {
		var r Route
		switch {
		case w.cache != nil:
			for i := 0; b.Loop(); i++ {
				r, _ = w.cache.Get(w.b[i&w.mask])
			}
		case w.sm != nil:
			for i := 0; b.Loop(); i++ {
				r, _ = w.sm.get(w.s[i&w.mask])
			}
		default:
			for i := 0; b.Loop(); i++ {
				r, _ = w.rw.get(w.b[i&w.mask])
			}
		}
		sinkRoute = r
	})
}

func BenchmarkGetHitParallel(b *testing.B) {
	benchWorkloads(b, func(b *testing.B, w *workload) {
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			switch {
			case w.cache != nil:
				for ; pb.Next(); i++ {
					w.cache.Get(w.b[i&w.mask])
				}
			case w.sm != nil:
				for ; pb.Next(); i++ {
					w.sm.get(w.s[i&w.mask])
				}
			default:
				for ; pb.Next(); i++ {
					w.rw.get(w.b[i&w.mask])
				}
			}
		})
	})
}

// BenchmarkPutExisting puts present topics with rising epochs.
func BenchmarkPutExisting(b *testing.B) {
	const owner, addr = "n3", "127.0.0.1:7103"
	benchWorkloads(b, func(b *testing.B, w *workload) {
		switch {
		case w.cache != nil:
			for i := 0; b.Loop(); i++ {
				w.cache.Put(w.b[i&w.mask], owner, addr, 2+uint64(i), 1)
			}
		case w.sm != nil:
			for i := 0; b.Loop(); i++ {
				w.sm.put(w.s[i&w.mask], Route{Owner: owner, Addr: addr, Epoch: 2 + uint64(i), Partitions: 1})
			}
		default:
			for i := 0; b.Loop(); i++ {
				w.rw.put(w.b[i&w.mask], Route{Owner: owner, Addr: addr, Epoch: 2 + uint64(i), Partitions: 1})
			}
		}
	})
}

// BenchmarkMix95 is 95% Get hits and 5% Puts of present topics with rising
// epochs, from every P at once.
func BenchmarkMix95(b *testing.B) {
	const owner, addr = "n3", "127.0.0.1:7103"
	benchWorkloads(b, func(b *testing.B, w *workload) {
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			switch {
			case w.cache != nil:
				gets := uint64(0)
				for ; pb.Next(); i++ {
					if k := w.b[i&w.mask]; i%20 == 0 {
						w.cache.Put(k, owner, addr, uint64(i), 1)
					} else {
						w.cache.Get(k)
						gets++
					}
				}
				w.gets.Add(gets)
			case w.sm != nil:
				for ; pb.Next(); i++ {
					if k := w.s[i&w.mask]; i%20 == 0 {
						w.sm.put(k, Route{Owner: owner, Addr: addr, Epoch: uint64(i), Partitions: 1})
					} else {
						w.sm.get(k)
					}
				}
			default:
				for ; pb.Next(); i++ {
					if k := w.b[i&w.mask]; i%20 == 0 {
						w.rw.put(k, Route{Owner: owner, Addr: addr, Epoch: uint64(i), Partitions: 1})
					} else {
						w.rw.get(k)
					}
				}
			}
		})
	})
}
