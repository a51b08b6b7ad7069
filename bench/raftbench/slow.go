package main

import (
	"fmt"
	"sync/atomic"
	"time"
)

// slowSpread counts, per shard, the proposals measured and those slower
// than a threshold, to tell a tail spread over every leader and worker
// (stalls of the whole process: GC, a full CPU) from one that some groups
// of shards cause (a busy worker, one host's disk).
type slowSpread struct {
	over    time.Duration
	total   []atomic.Int64
	slow    []atomic.Int64
	leader  []atomic.Uint64 // the host the shard's last measured proposal went to
	workers int
}

func newSlowSpread(over time.Duration, shards, workers int) *slowSpread {
	return &slowSpread{
		over: over, total: make([]atomic.Int64, shards), slow: make([]atomic.Int64, shards),
		leader: make([]atomic.Uint64, shards), workers: workers,
	}
}

func (s *slowSpread) record(shard, leader uint64, d time.Duration) {
	s.total[shard].Add(1)
	if d > s.over {
		s.slow[shard].Add(1)
	}
	s.leader[shard].Store(leader)
}

// report returns the share of slow proposals, in percent, overall and per
// group "h<leader host>/w<worker>": raftmux gives shard s to worker s mod W.
func (s *slowSpread) report() (all float64, groups map[string]float64) {
	type acc struct{ total, slow int64 }
	by := make(map[string]*acc)
	var t, sl int64
	for i := range s.total {
		n, k := s.total[i].Load(), s.slow[i].Load()
		if n == 0 {
			continue
		}
		key := fmt.Sprintf("h%d/w%d", s.leader[i].Load(), i%s.workers)
		a := by[key]
		if a == nil {
			a = &acc{}
			by[key] = a
		}
		a.total += n
		a.slow += k
		t += n
		sl += k
	}
	groups = make(map[string]float64, len(by))
	for key, a := range by {
		groups[key] = pct100(a.slow, a.total)
	}
	return pct100(sl, t), groups
}

func pct100(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}
