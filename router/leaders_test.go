package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
)

func TestLeaderTableTermRules(t *testing.T) {
	lt := NewLeaderTable(8)
	if _, _, ok := lt.Get(3); ok {
		t.Fatal("unknown leader reported")
	}
	steps := []struct {
		leader  string
		term    uint64
		applied bool
		want    string
		wantT   uint64
	}{
		{"n1", 5, true, "n1", 5},
		{"n2", 4, false, "n1", 5}, // deposed leader's claim
		{"n1", 5, false, "n1", 5}, // repeat changes nothing
		{"n2", 5, true, "n2", 5},  // same term, corrected hint
		{"n3", 7, true, "n3", 7},
		{"n1", 6, false, "n3", 7},
	}
	for i, s := range steps {
		v := lt.Version()
		applied, err := lt.Update(3, s.leader, s.term)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if applied != s.applied {
			t.Fatalf("step %d: applied = %v, want %v", i, applied, s.applied)
		}
		if changed := lt.Version() != v; changed != s.applied {
			t.Fatalf("step %d: version changed = %v, applied = %v", i, changed, s.applied)
		}
		got, term, ok := lt.Get(3)
		if !ok || got != s.want || term != s.wantT {
			t.Fatalf("step %d: Get = %q %d %v, want %q %d", i, got, term, ok, s.want, s.wantT)
		}
	}
	if _, err := lt.Update(lt.Space().Capacity(), "n1", 1); !errors.Is(err, ErrShardRange) {
		t.Fatalf("out of range update: %v", err)
	}
	if _, err := lt.Update(1, "", 1); !errors.Is(err, ErrEmptyLeader) {
		t.Fatalf("empty leader update: %v", err)
	}
	if _, _, ok := lt.Get(8); ok {
		t.Fatal("out of range Get reported a leader")
	}
	rows, _ := lt.Snapshot(nil)
	if len(rows) != 1 || rows[0] != (ShardLeader{Shard: 3, Leader: "n3", Term: 7}) {
		t.Fatalf("snapshot = %+v", rows)
	}
	if n := testing.AllocsPerRun(100, func() { lt.Get(3) }); n != 0 {
		t.Fatalf("Get allocates %v", n)
	}
}

// A leader learned for a shard the map does not hold yet (a split's child)
// splits the table's map down to it and grows the table; a leader of a
// shard the map split below is recorded and changes no map.
func TestLeaderTableLearnsSplits(t *testing.T) {
	lt := NewLeaderTable(8)
	sp := lt.Space()
	low, high, _ := sp.Children(3)
	grand, _, _ := sp.Children(high)
	v := lt.Version()
	if ok, err := lt.Update(grand, "n2", 1); !ok || err != nil {
		t.Fatalf("update of a grandchild: %v %v", ok, err)
	}
	m := lt.Map()
	if !m.Live(grand) || !m.Live(low) || m.Live(3) || m.Live(high) || m.Len() != 10 || lt.Version() == v {
		t.Fatalf("map after a grandchild's leader: %v", slices.Collect(m.Shards()))
	}
	if lt.Shards() != m.IDLimit() {
		t.Fatalf("table covers %d ids, the map %d", lt.Shards(), m.IDLimit())
	}
	if l, term, ok := lt.Get(grand); !ok || l != "n2" || term != 1 {
		t.Fatalf("grandchild's row: %q %d %v", l, term, ok)
	}
	if ok, _ := lt.Update(3, "n1", 4); !ok || lt.Map() != m {
		t.Fatal("a split shard's leader changed the map or was not recorded")
	}
	if got := lt.Map().OfHash(0); got != sp.ID(0, 0) {
		t.Fatalf("hash 0 in shard %d", got)
	}
}

// Concurrent updates with interleaved terms end at the highest term, and a
// reader never sees a shard's term go down.
func TestLeaderTableConcurrent(t *testing.T) {
	const shards, writers, terms = 16, 4, 200
	lt := NewLeaderTable(shards)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		last := make([]uint64, shards)
		for {
			select {
			case <-stop:
				readerErr <- nil
				return
			default:
			}
			for s := range uint32(shards) {
				_, term, _ := lt.Get(s)
				if term < last[s] {
					readerErr <- fmt.Errorf("shard %d: term went from %d to %d", s, last[s], term)
					return
				}
				last[s] = term
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("n%d", w)
			for term := uint64(1); term <= terms; term++ {
				for s := range uint32(shards) {
					if _, err := lt.Update(s, id, term+uint64(w)%3); err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	for s := range uint32(shards) {
		if _, term, _ := lt.Get(s); term != terms+2 {
			t.Fatalf("shard %d ended at term %d, want %d", s, term, terms+2)
		}
	}
}

// TermSum is the sum of the rows' terms after any sequence of updates,
// applied or refused.
func TestLeaderTableTermSum(t *testing.T) {
	tb := NewLeaderTable(16)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		_, _ = tb.Update(uint32(rng.IntN(16)), fmt.Sprintf("n%d", rng.IntN(3)), uint64(rng.IntN(50)))
		rows, _ := tb.Snapshot(nil)
		var sum uint64
		for _, r := range rows {
			sum += r.Term
		}
		if got := tb.TermSum(); got != sum {
			t.Fatalf("TermSum %d, rows sum to %d", got, sum)
		}
	}
}
