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

type benchImpl uint8

const (
	implCache benchImpl = iota
	implSyncMap
	implRWMap
)

var benchImplNames = [...]string{"cache", "syncmap", "rwmap"}

// workload is one implementation filled with one working set. Its get and
// put pick the implementation by a branch every benchmark pays alike, so
// the loops are written once.
type workload struct {
	impl  benchImpl
	cache *Cache
	sm    *syncMapCache
	rw    *rwMapCache
	t     *benchTopics
	mask  int
}

func newWorkload(b *testing.B, impl benchImpl, t *benchTopics) *workload {
	w := &workload{impl: impl, t: t, mask: len(t.fillB) - 1}
	switch impl {
	case implCache:
		c, err := NewCache(CacheConfig{Capacity: 2 * len(t.fillB)})
		if err != nil {
			b.Fatal(err)
		}
		w.cache = c
	case implSyncMap:
		w.sm = &syncMapCache{}
	case implRWMap:
		w.rw = &rwMapCache{m: make(map[string]Route, len(t.fillB))}
	}
	for i := range t.fillB {
		owner := "n" + strconv.Itoa(i%7)
		w.put(i, owner, "127.0.0.1:710"+strconv.Itoa(i%7), 1, true)
	}
	return w
}

func (w *workload) get(i int) (Route, bool) {
	switch w.impl {
	case implCache:
		return w.cache.Get(w.t.readB[i&w.mask])
	case implSyncMap:
		return w.sm.get(w.t.readS[i&w.mask])
	default:
		return w.rw.get(w.t.readB[i&w.mask])
	}
}

func (w *workload) put(i int, owner, addr string, epoch uint64, fill bool) {
	kb, ks := w.t.readB, w.t.readS
	if fill {
		kb, ks = w.t.fillB, w.t.fillS
	}
	switch w.impl {
	case implCache:
		w.cache.Put(kb[i&w.mask], owner, addr, epoch, 1)
	case implSyncMap:
		w.sm.put(ks[i&w.mask], Route{Owner: owner, Addr: addr, Epoch: epoch, Partitions: 1})
	default:
		w.rw.put(kb[i&w.mask], Route{Owner: owner, Addr: addr, Epoch: epoch, Partitions: 1})
	}
}

// benchWorkloads runs body as sub-benchmarks topics=N/impl=X for every
// working set and implementation, each freshly filled, with allocations
// and CPU time per operation reported.
func benchWorkloads(b *testing.B, body func(b *testing.B, w *workload)) {
	for _, n := range benchSizes {
		t := topicsOf(n)
		for impl, name := range benchImplNames {
			b.Run("topics="+strconv.Itoa(n)+"/impl="+name, func(b *testing.B) {
				w := newWorkload(b, benchImpl(impl), t)
				b.ReportAllocs()
				clk := startCPU()
				defer clk.report(b)
				body(b, w)
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
		for i := 0; b.Loop(); i++ {
			r, _ = w.get(i)
		}
		sinkRoute = r
	})
}

func BenchmarkGetHitParallel(b *testing.B) {
	benchWorkloads(b, func(b *testing.B, w *workload) {
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				w.get(i)
				i++
			}
		})
	})
}

func BenchmarkPutExisting(b *testing.B) {
	benchWorkloads(b, func(b *testing.B, w *workload) {
		for i := 0; b.Loop(); i++ {
			w.put(i, "n3", "127.0.0.1:7103", 2+uint64(i), false)
		}
	})
}

// BenchmarkMix95 is 95% Get hits and 5% Puts of present topics with rising
// epochs, from every P at once.
func BenchmarkMix95(b *testing.B) {
	benchWorkloads(b, func(b *testing.B, w *workload) {
		b.RunParallel(func(pb *testing.PB) {
			i := int(seed.Add(7919))
			for pb.Next() {
				if i%20 == 0 {
					w.put(i, "n3", "127.0.0.1:7103", uint64(i), false)
				} else {
					w.get(i)
				}
				i++
			}
		})
	})
}
