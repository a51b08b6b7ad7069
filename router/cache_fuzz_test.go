package router

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzCacheOps drives two caches with the same operations decoded from the
// input, three bytes each (op and key, epoch, owner and partition count):
// one large enough to never evict, checked against a model of the epoch
// rules, and one far too small, checked for its bound and for whole routes.
// A Put may repeat the cached route, or change only its partition count.
func FuzzCacheOps(f *testing.F) {
	f.Add([]byte{0, 5, 1, 2, 5, 0, 1, 5, 0, 0, 4, 1, 3, 6, 2})
	f.Add([]byte{0x10, 1, 1, 0x11, 2, 2, 0x12, 3, 3, 0x22, 0, 0, 0x32, 9, 1})
	f.Add([]byte{0x14, 7, 2, 0x17, 0, 0, 0x14, 7, 2, 0x14, 7, 0x42, 0x17, 0, 0, 0x14, 6, 2, 0x16, 7, 0, 0x14, 7, 0x42, 0x17, 0, 0})
	f.Fuzz(func(t *testing.T, ops []byte) {
		big := mustCache(t, CacheConfig{Capacity: 256, Shards: 1})
		small := mustCache(t, CacheConfig{Capacity: 4, Shards: 1})
		type state struct {
			owner string
			epoch uint64
			parts uint32
			live  bool
		}
		model := map[string]*state{}
		for len(ops) >= 3 {
			// Keys of 2 to 31 bytes, on both sides of what an entry holds
			// inline.
			id := int(ops[0] >> 2)
			op, key, epoch := ops[0]&3, "t"+strconv.Itoa(id)+strings.Repeat("-", id%5*7), uint64(ops[1])
			owner := "n" + strconv.Itoa(int(ops[2]&0x3f)) + "@" + strconv.Itoa(int(epoch))
			parts := uint32(ops[2]>>6) + 1
			ops = ops[3:]
			k := []byte(key)
			m := model[key]
			switch op {
			case 0, 1:
				want := m == nil || epoch >= m.epoch
				if got := big.Put(k, owner, owner+"/addr", epoch, parts); got != want {
					t.Fatalf("Put(%s, %d) = %v, model %v", key, epoch, got, want)
				}
				if want {
					model[key] = &state{owner: owner, epoch: epoch, parts: parts, live: true}
				}
				small.Put(k, owner, owner+"/addr", epoch, parts)
			case 2:
				want := m != nil && m.epoch <= epoch && !(m.epoch == epoch && !m.live)
				if got := big.Invalidate(k, epoch); got != want {
					t.Fatalf("Invalidate(%s, %d) = %v, model %v", key, epoch, got, want)
				}
				if want {
					m.epoch, m.live = epoch, false
				}
				small.Invalidate(k, epoch)
			case 3:
				r, ok := big.Get(k)
				if ok != (m != nil && m.live) || ok && (r.Owner != m.owner || r.Epoch != m.epoch || r.Partitions != m.parts || r.Addr != m.owner+"/addr") {
					t.Fatalf("Get(%s) = %+v %v, model %+v", key, r, ok, m)
				}
				if r, ok := small.Get(k); ok && (r.Addr != r.Owner+"/addr" || r.Owner[len(r.Owner)-len(strconv.Itoa(int(r.Epoch))):] != strconv.Itoa(int(r.Epoch))) {
					t.Fatalf("small Get(%s) = %+v: not one Put's route", key, r)
				}
			}
			if small.Len() > small.Capacity() {
				t.Fatalf("Len %d > capacity %d", small.Len(), small.Capacity())
			}
		}
	})
}
