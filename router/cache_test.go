package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func mustCache(t testing.TB, cfg CacheConfig) *Cache {
	t.Helper()
	c, err := NewCache(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCacheConfig(t *testing.T) {
	for _, cfg := range []CacheConfig{{Capacity: -1}, {Shards: -2}, {Capacity: MaxCacheCapacity + 1}, {Shards: MaxCacheShards + 1}} {
		if _, err := NewCache(cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", cfg, err)
		}
	}
	c := mustCache(t, CacheConfig{})
	if c.Capacity() < DefaultCacheCapacity {
		t.Fatalf("default capacity %d", c.Capacity())
	}
	c = mustCache(t, CacheConfig{Capacity: 5})
	if c.Capacity() < 5 || c.Capacity() > 5+minEntriesPerShard {
		t.Fatalf("capacity 5 became %d", c.Capacity())
	}
}

func TestCacheEpochsOnlyGoForward(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 64})
	topic := []byte("topic-blue")
	if _, ok := c.Get(topic); ok {
		t.Fatal("hit on an empty cache")
	}
	steps := []struct {
		op      string // put or inv
		owner   string
		epoch   uint64
		applied bool
		want    Route // zero: expect a miss
	}{
		{"put", "n2", 5, true, Route{"n2", "addr-n2", 5, 5}},
		{"put", "n1", 3, false, Route{"n2", "addr-n2", 5, 5}},
		{"put", "n3", 5, true, Route{"n3", "addr-n3", 5, 5}},
		{"inv", "", 4, false, Route{"n3", "addr-n3", 5, 5}}, // cached epoch is newer
		{"inv", "", 5, true, Route{}},
		{"inv", "", 5, false, Route{}},
		{"put", "n1", 4, false, Route{}}, // below the fence
		{"put", "n3", 5, true, Route{"n3", "addr-n3", 5, 5}},
		{"inv", "", 9, true, Route{}},
		{"put", "n4", 8, false, Route{}},
		{"put", "n4", 9, true, Route{"n4", "addr-n4", 9, 9}},
		{"put", "n5", 12, true, Route{"n5", "addr-n5", 12, 12}},
	}
	for i, s := range steps {
		var applied bool
		if s.op == "put" {
			applied = c.Put(topic, s.owner, "addr-"+s.owner, s.epoch, uint32(s.epoch))
		} else {
			applied = c.Invalidate(topic, s.epoch)
		}
		if applied != s.applied {
			t.Fatalf("step %d %s %s@%d: applied = %v", i, s.op, s.owner, s.epoch, applied)
		}
		got, ok := c.Get(topic)
		if ok != (s.want != Route{}) || got != s.want {
			t.Fatalf("step %d: Get = %+v %v, want %+v", i, got, ok, s.want)
		}
	}
	if c.Invalidate([]byte("unknown"), 1) {
		t.Fatal("invalidated an unknown topic")
	}
	st := c.Stats()
	if st.Hits == 0 || st.Misses == 0 || st.Len != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestCacheHitsAndPutsAllocateNothing(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 1024})
	topics := make([][]byte, 100)
	for i := range topics {
		topics[i] = []byte("orders." + strconv.Itoa(i))
		c.Put(topics[i], "n1", "127.0.0.1:7101", 1, 1)
	}
	i := 0
	if n := testing.AllocsPerRun(500, func() {
		i++
		if _, ok := c.Get(topics[i%100]); !ok {
			t.Fatal("miss")
		}
	}); n != 0 {
		t.Fatalf("Get hit allocates %v", n)
	}
	epoch := uint64(1)
	if n := testing.AllocsPerRun(500, func() {
		i++
		epoch++
		c.Put(topics[i%100], "n2", "127.0.0.1:7102", epoch, 1)
	}); n != 0 {
		t.Fatalf("Put of a present topic allocates %v", n)
	}
}

func TestCacheStaysWithinCapacity(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 256, Shards: 4})
	const n = 5000
	for i := range n {
		c.Put([]byte("t"+strconv.Itoa(i)), "n1", "a", 1, 1)
		if l := c.Len(); l > c.Capacity() {
			t.Fatalf("after %d puts Len %d > capacity %d", i+1, l, c.Capacity())
		}
	}
	st := c.Stats()
	if st.Len != c.Capacity() || st.Evictions != uint64(n-c.Capacity()) {
		t.Fatalf("stats %+v, capacity %d", st, c.Capacity())
	}
	// What is resident is exactly what Get finds.
	found := 0
	for i := range n {
		if _, ok := c.Get([]byte("t" + strconv.Itoa(i))); ok {
			found++
		}
	}
	if found != st.Len {
		t.Fatalf("Get finds %d topics, Len %d", found, st.Len)
	}
}

// Topics read between insertions survive a scan of one-off topics far larger
// than the cache.
func TestCacheKeepsHotTopics(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 1024, Shards: 8})
	hot := make([][]byte, 64)
	for i := range hot {
		hot[i] = []byte("hot." + strconv.Itoa(i))
		c.Put(hot[i], "n1", "a", 1, 1)
	}
	for i := range 20000 {
		c.Put([]byte("cold."+strconv.Itoa(i)), "n2", "b", 1, 1)
		c.Get(hot[i%len(hot)])
	}
	for _, h := range hot {
		if _, ok := c.Get(h); !ok {
			t.Fatalf("hot topic %s evicted", h)
		}
	}
	if c.Stats().Evictions == 0 {
		t.Fatal("no evictions")
	}
}

// The cache agrees with a model of its rules under random operations while
// nothing is evicted: it never returns an epoch older than one it accepted,
// nor a route it was told is stale.
func TestCacheMatchesModel(t *testing.T) {
	type state struct {
		owner string
		epoch uint64
		live  bool
	}
	rng := rand.New(rand.NewPCG(7, 11))
	for round := range 20 {
		c := mustCache(t, CacheConfig{Capacity: 512, Shards: 4})
		model := map[string]*state{}
		for op := range 2000 {
			k := "t" + strconv.Itoa(rng.IntN(64))
			e := uint64(rng.IntN(20))
			if rng.IntN(200) == 0 {
				// Clear forgets everything, fences too.
				c.Clear()
				clear(model)
				if n := c.Len(); n != 0 {
					t.Fatalf("round %d op %d: Len %d after Clear", round, op, n)
				}
				continue
			}
			switch rng.IntN(3) {
			case 0:
				owner := "n" + strconv.Itoa(rng.IntN(5))
				m := model[k]
				want := m == nil || e >= m.epoch
				if got := c.Put([]byte(k), owner, owner+":addr", e, 1); got != want {
					t.Fatalf("round %d op %d: Put(%s, %d) = %v, model %v", round, op, k, e, got, want)
				}
				if want {
					model[k] = &state{owner: owner, epoch: e, live: true}
				}
			case 1:
				m := model[k]
				want := m != nil && m.epoch <= e && !(m.epoch == e && !m.live)
				if got := c.Invalidate([]byte(k), e); got != want {
					t.Fatalf("round %d op %d: Invalidate(%s, %d) = %v, model %v", round, op, k, e, got, want)
				}
				if want {
					m.epoch, m.live = e, false
				}
			default:
				m := model[k]
				r, ok := c.Get([]byte(k))
				wantOK := m != nil && m.live
				if ok != wantOK || ok && (r.Owner != m.owner || r.Epoch != m.epoch || r.Addr != m.owner+":addr") {
					t.Fatalf("round %d op %d: Get(%s) = %+v %v, model %+v", round, op, k, r, ok, m)
				}
			}
		}
	}
}

// Concurrent writers raise epochs per topic while readers check that what
// they read is whole (owner, address and epoch from one Put) and that a
// topic's epoch never goes back. A small cache keeps eviction and index
// shifting busy in the checks that allow it.
func TestCacheConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity int
		topics   int
		evicting bool
		clearing bool
	}{{"resident", 4096, 256, false, false}, {"evicting", 64, 512, true, false}, {"clearing", 4096, 256, false, true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustCache(t, CacheConfig{Capacity: tc.capacity, Shards: 4})
			topics := make([][]byte, tc.topics)
			for i := range topics {
				topics[i] = []byte("topic." + strconv.Itoa(i))
			}
			const writers, readers, rounds = 3, 3, 60
			routes := make([][]Route, writers)
			for w := range routes {
				for e := range rounds {
					owner := fmt.Sprintf("w%d-e%d", w, e)
					routes[w] = append(routes[w], Route{Owner: owner, Addr: owner + "-addr", Epoch: uint64(e*writers + w)})
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers+readers)
			stop := make(chan struct{})
			for w := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for _, r := range routes[w] {
						for i, tp := range topics {
							if i%writers == w || i%5 == 0 {
								c.Put(tp, r.Owner, r.Addr, r.Epoch, r.Partitions)
							}
							if i%7 == 0 {
								c.Invalidate(tp, r.Epoch-1)
							}
						}
					}
				}()
			}
			if tc.clearing {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for range rounds {
						c.Clear()
						runtime.Gosched()
					}
				}()
			}
			var rg sync.WaitGroup
			for range readers {
				rg.Add(1)
				go func() {
					defer rg.Done()
					last := make([]uint64, len(topics))
					for {
						select {
						case <-stop:
							return
						default:
						}
						for i, tp := range topics {
							r, ok := c.Get(tp)
							if !ok {
								continue
							}
							var w, e int
							if _, err := fmt.Sscanf(r.Owner, "w%d-e%d", &w, &e); err != nil || r.Addr != r.Owner+"-addr" || r.Epoch != uint64(e*writers+w) {
								errs <- fmt.Errorf("torn route %+v", r)
								return
							}
							if !tc.evicting && !tc.clearing && i%7 != 0 && r.Epoch < last[i] {
								errs <- fmt.Errorf("topic %d: epoch went from %d to %d", i, last[i], r.Epoch)
								return
							}
							last[i] = r.Epoch
						}
					}
				}()
			}
			wg.Wait()
			close(stop)
			rg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			if l := c.Len(); l > c.Capacity() {
				t.Fatalf("Len %d > capacity %d", l, c.Capacity())
			}
			if !tc.evicting && !tc.clearing {
				for i, tp := range topics {
					r, ok := c.Get(tp)
					if i%7 != 0 && (!ok || r.Epoch < uint64((rounds-1)*writers)) {
						t.Fatalf("topic %d ended at %+v %v", i, r, ok)
					}
				}
			}
		})
	}
}

func TestCacheEntryIsOneCacheLine(t *testing.T) {
	if n := unsafe.Sizeof(cacheEntry{}); n != 64 {
		t.Fatalf("cacheEntry is %d bytes, want 64", n)
	}
}

func TestCachePartIsTwoCacheLines(t *testing.T) {
	if n := unsafe.Sizeof(cachePart{}); n != 128 {
		t.Fatalf("cachePart is %d bytes, want 128", n)
	}
}

// Topics of every length around the 24 bytes an entry holds inline, and
// topics that differ from each other in a single byte at any position, are
// told apart: the words an entry compares determine the topic.
func TestCacheTopicsOfEveryLength(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 4096, Shards: 4})
	var topics [][]byte
	for n := range 41 {
		base := make([]byte, n)
		for i := range base {
			base[i] = byte('a' + i%26)
		}
		topics = append(topics, base)
		for i := range n {
			v := slices.Clone(base)
			v[i] ^= 0x20
			topics = append(topics, v)
		}
	}
	for i, tp := range topics {
		if !c.Put(tp, "n"+strconv.Itoa(i), "a"+strconv.Itoa(i), uint64(i), uint32(len(tp))) {
			t.Fatalf("Put(%q) ignored", tp)
		}
	}
	for i, tp := range topics {
		r, ok := c.Get(tp)
		if !ok || r.Owner != "n"+strconv.Itoa(i) || r.Epoch != uint64(i) || r.Partitions != uint32(len(tp)) {
			t.Fatalf("Get(%q) = %+v %v, want owner n%d", tp, r, ok, i)
		}
	}
	if st := c.Stats(); st.Len != len(topics) || st.Evictions != 0 {
		t.Fatalf("stats %+v, want %d entries", st, len(topics))
	}
}

func TestCacheIgnoresOverlongTopics(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 64})
	long := make([]byte, MaxCacheTopicLen+1)
	if c.Put(long, "n1", "a", 1, 1) {
		t.Fatal("Put of an overlong topic applied")
	}
	if _, ok := c.Get(long); ok {
		t.Fatal("Get of an overlong topic hit")
	}
	if c.Invalidate(long, 1) {
		t.Fatal("Invalidate of an overlong topic applied")
	}
	longest := long[:MaxCacheTopicLen]
	if !c.Put(longest, "n1", "a", 1, 1) {
		t.Fatal("Put of the longest topic ignored")
	}
	if r, ok := c.Get(longest); !ok || r.Owner != "n1" {
		t.Fatalf("Get of the longest topic = %+v %v", r, ok)
	}
}

// A Put that would change nothing (older than the cached epoch, or the
// cached route itself) is settled without the part's lock and writes
// nothing; a Put that changes any field of the route, or revives an
// invalidated entry at its epoch, is applied.
func TestCachePutOfUnchangedRoute(t *testing.T) {
	for _, long := range []bool{false, true} {
		topic := []byte("orders.eu-west.17")
		if long {
			topic = []byte("payments.settled.ap-south-1.17")
		}
		c := mustCache(t, CacheConfig{Capacity: 64, Shards: 1})
		c.Put(topic, "n1", "a1", 5, 3)
		k := makeKey(topic)
		e := &c.parts[0].slots[c.parts[0].find(&k)]
		// Under the part's lock only the lock-free path can answer.
		c.parts[0].mu.Lock()
		done := make(chan [2]bool)
		seq := e.seq.Load()
		go func() {
			done <- [2]bool{c.Put(topic, "n1", "a1", 5, 3), c.Put(topic, "n9", "a9", 4, 3)}
		}()
		select {
		case got := <-done:
			if got != [2]bool{true, false} {
				t.Fatalf("long %v: Put of the cached route, of an older one = %v, want true, false", long, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("long %v: Put of an unchanged route waits for the part's lock", long)
		}
		c.parts[0].mu.Unlock()
		if e.seq.Load() != seq || e.epoch.Load() != 5 {
			t.Fatalf("long %v: an unchanged Put wrote the entry", long)
		}
		for i, s := range []struct {
			op          string
			owner, addr string
			epoch       uint64
			parts       uint32
			applied     bool
			want        Route
		}{
			{"put", "n1", "a1", 5, 4, true, Route{"n1", "a1", 5, 4}},
			{"put", "n1", "a2", 5, 4, true, Route{"n1", "a2", 5, 4}},
			{"put", "n2", "a2", 5, 4, true, Route{"n2", "a2", 5, 4}},
			{"put", "n2", "a2", 5, 4, true, Route{"n2", "a2", 5, 4}},
			{"inv", "", "", 5, 0, true, Route{}},
			{"put", "n2", "a2", 4, 4, false, Route{}},
			{"put", "n2", "a2", 5, 4, true, Route{"n2", "a2", 5, 4}},
			{"put", "n2", "a2", 6, 4, true, Route{"n2", "a2", 6, 4}},
		} {
			var applied bool
			if s.op == "put" {
				applied = c.Put(topic, s.owner, s.addr, s.epoch, s.parts)
			} else {
				applied = c.Invalidate(topic, s.epoch)
			}
			got, ok := c.Get(topic)
			if applied != s.applied || ok != (s.want != Route{}) || got != s.want {
				t.Fatalf("long %v step %d: applied %v, Get = %+v %v; want %v, %+v", long, i, applied, got, ok, s.applied, s.want)
			}
		}
	}
}

// The locked path of a Put trusts the slot the lock-free look found only
// while the slot's sequence number is unchanged: when the topic was evicted
// meanwhile and another took its slot, the Put inserts its topic afresh
// and leaves the other's route alone.
func TestCachePutRechecksTheSlotItWasHanded(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 16, Shards: 1})
	p := &c.parts[0]
	a := []byte("orders.eu-west.1")
	ka := makeKey(a)
	// Another topic with the same home slot.
	var b []byte
	for i := 0; b == nil; i++ {
		cand := []byte("clicks." + strconv.Itoa(i))
		if kb := makeKey(cand); p.home(kb.tag()) == p.home(ka.tag()) && string(cand) != string(a) {
			b = cand
		}
	}
	c.Put(a, "n1", "a1", 1, 1)
	applied, settled, slot, seq := p.putUnchanged(&ka, "n2", "a2", 2, 1)
	if applied || settled || slot != int(p.home(ka.tag())) {
		t.Fatalf("look at a newer route = %v %v slot %d, want unsettled at the home slot %d", applied, settled, slot, p.home(ka.tag()))
	}
	// Between the look and the lock, a is evicted and b takes its slot.
	p.mu.Lock()
	p.remove(uint64(slot))
	p.mu.Unlock()
	c.Put(b, "n3", "a3", 7, 1)
	if !p.putLocked(&ka, "n2", "a2", 2, 1, slot, seq) {
		t.Fatal("Put of an evicted topic ignored")
	}
	if r, ok := c.Get(b); !ok || r != (Route{"n3", "a3", 7, 1}) {
		t.Fatalf("the other topic's route became %+v %v", r, ok)
	}
	if r, ok := c.Get(a); !ok || r != (Route{"n2", "a2", 2, 1}) {
		t.Fatalf("Get(a) = %+v %v after the Put", r, ok)
	}
}

// Of a Put's changes to a present topic, only one of the epoch alone is
// made without a sequence bump. A reader loads the owner before the epoch:
// had an owner-only change not bumped, the owner before it and an epoch
// raised after it could be read together, a route never put.
func TestCacheOnlyAnEpochAloneChangesWithoutSequenceBump(t *testing.T) {
	topic := []byte("orders.eu-west.3")
	k := makeKey(topic)
	for _, tc := range []struct {
		name        string
		owner, addr string
		epoch       uint64
		parts       uint32
		invalidate  bool
		bumped      bool
	}{
		{"epoch", "n1", "a1", 6, 1, false, false},
		{"nothing", "n1", "a1", 5, 1, false, false},
		{"owner", "n2", "a2", 5, 1, false, true},
		{"address", "n1", "a9", 5, 1, false, true},
		{"partitions", "n1", "a1", 5, 4, false, true},
		{"revival", "n1", "a1", 5, 1, true, true},
		{"owner and epoch", "n2", "a2", 6, 1, false, true},
	} {
		c := mustCache(t, CacheConfig{Capacity: 64, Shards: 1})
		c.Put(topic, "n1", "a1", 5, 1)
		if tc.invalidate {
			c.Invalidate(topic, 5)
		}
		e := &c.parts[0].slots[c.parts[0].find(&k)]
		seq := e.seq.Load()
		if !c.Put(topic, tc.owner, tc.addr, tc.epoch, tc.parts) {
			t.Fatalf("%s: Put ignored", tc.name)
		}
		if bumped := e.seq.Load() != seq; bumped != tc.bumped {
			t.Errorf("%s: sequence bumped %v, want %v", tc.name, bumped, tc.bumped)
		}
		if r, ok := c.Get(topic); !ok || r != (Route{tc.owner, tc.addr, tc.epoch, tc.parts}) {
			t.Errorf("%s: Get = %+v %v", tc.name, r, ok)
		}
	}
}

// Clear forgets every route, fenced ones too, keeps the hit, miss and
// eviction counts, allocates nothing, and leaves the cache as usable as a
// new one: routes put after it, at any epoch, are served.
func TestCacheClear(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 64, Shards: 4})
	long := strings.Repeat("x", inlineKeyLen+5)
	topics := [][]byte{[]byte("orders"), []byte("payments"), []byte(long)}
	for i := range 200 {
		topics = append(topics, []byte("t."+strconv.Itoa(i)))
	}
	for _, tp := range topics {
		c.Put(tp, "n1", "a1", 9, 2)
	}
	c.Invalidate([]byte("orders"), 10)
	c.Get([]byte("payments"))
	c.Get([]byte("absent"))
	before := c.Stats()
	if before.Evictions == 0 {
		t.Fatal("the test means to fill the cache past its capacity")
	}
	if n := testing.AllocsPerRun(10, c.Clear); n != 0 {
		t.Fatalf("Clear allocates %v", n)
	}
	after := c.Stats()
	if after.Len != 0 || after.Hits != before.Hits || after.Misses != before.Misses || after.Evictions != before.Evictions {
		t.Fatalf("stats %+v after Clear, %+v before", after, before)
	}
	for _, tp := range topics {
		if r, ok := c.Get(tp); ok {
			t.Fatalf("%s still cached after Clear: %+v", tp, r)
		}
	}
	// The fence on orders went with the rest: an older epoch is taken.
	for _, tp := range topics[:3] {
		if !c.Put(tp, "n2", "a2", 1, 3) {
			t.Fatalf("Put of %s refused after Clear", tp)
		}
		if r, ok := c.Get(tp); !ok || r != (Route{Owner: "n2", Addr: "a2", Epoch: 1, Partitions: 3}) {
			t.Fatalf("%s after Clear and Put: %+v %v", tp, r, ok)
		}
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("Len %d, want 3", n)
	}
	// Every slot is free again: new topics fill it as they fill a new
	// cache, evicting the same number.
	c.Clear()
	ref := mustCache(t, CacheConfig{Capacity: 64, Shards: 4})
	var fresh [][]byte
	for i := range c.Capacity() {
		tp := []byte("fresh." + strconv.Itoa(i))
		fresh = append(fresh, tp)
		c.Put(tp, "n3", "a3", 1, 1)
		ref.Put(tp, "n3", "a3", 1, 1)
	}
	st, want := c.Stats(), ref.Stats()
	if st.Len != want.Len || st.Evictions-before.Evictions != want.Evictions {
		t.Fatalf("refilled after Clear: %+v (%d evictions before); a new cache: %+v", st, before.Evictions, want)
	}
	for _, tp := range fresh {
		_, ok := c.Get(tp)
		if _, want := ref.Get(tp); ok != want {
			t.Fatalf("%s cached %v after the refill, %v in a new cache", tp, ok, want)
		}
	}
}

func TestCacheRefreshUpdatesOnlyCachedTopicsAndNewerEpochs(t *testing.T) {
	c := mustCache(t, CacheConfig{Capacity: 64})
	topic := []byte("topic-green")
	if c.Refresh(topic, "n1", "addr-n1", 3, 1) {
		t.Fatal("refresh added a topic the cache did not hold")
	}
	if _, ok := c.Get(topic); ok {
		t.Fatal("a refresh of an absent topic made a route")
	}
	c.Put(topic, "n1", "addr-n1", 3, 1)
	steps := []struct {
		owner   string
		epoch   uint64
		parts   uint32
		applied bool
		want    Route // zero: expect a miss
	}{
		{"n2", 2, 1, false, Route{"n1", "addr-n1", 3, 1}}, // older
		{"n2", 4, 1, true, Route{"n2", "addr-n2", 4, 1}},  // a move
		{"n2", 4, 6, true, Route{"n2", "addr-n2", 4, 6}},  // the same epoch, more partitions
	}
	for i, s := range steps {
		if got := c.Refresh(topic, s.owner, "addr-"+s.owner, s.epoch, s.parts); got != s.applied {
			t.Fatalf("step %d: applied %v, want %v", i, got, s.applied)
		}
		if r, _ := c.Get(topic); r != s.want {
			t.Fatalf("step %d: route %+v, want %+v", i, r, s.want)
		}
	}
	// A route fenced at an epoch stays hidden for a refresh at that epoch,
	// and comes back at a newer one.
	c.Invalidate(topic, 4)
	if c.Refresh(topic, "n2", "addr-n2", 4, 6) {
		t.Fatal("a refresh at the fenced epoch brought the route back")
	}
	if !c.Refresh(topic, "n3", "addr-n3", 5, 6) {
		t.Fatal("a refresh past the fence was refused")
	}
	if r, ok := c.Get(topic); !ok || r != (Route{"n3", "addr-n3", 5, 6}) {
		t.Fatalf("route %+v %v after the refresh past the fence", r, ok)
	}
}
