package shardstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
)

// modelShard is what one shard's state must be after a sequence of batches,
// computed without the store.
type modelShard struct {
	trunc, truncTerm uint64
	ents             []raftpb.Entry // trunc+1 .. last
	hs               hardState      // as raft last gave it
	hsWritten        hardState      // as the store last wrote it: on a change of term or vote
	applied          uint64
	data             map[string]string
}

func (m *modelShard) last() uint64 { return m.trunc + uint64(len(m.ents)) }

func (m *modelShard) termAt(i uint64) uint64 {
	if i == m.trunc {
		return m.truncTerm
	}
	return m.ents[i-m.trunc-1].Term
}

func newEntry(index, term uint64, data []byte) raftpb.Entry {
	return raftpb.Entry{Index: index, Term: term, Type: raftpb.EntryNormal, Data: data}
}

// workload drives raft-shaped batches against a store and a model.
type workload struct {
	rng    *rand.Rand
	shards []uint64
	model  map[uint64]*modelShard
	seq    int
}

func newWorkload(seed uint64, shards []uint64) *workload {
	w := &workload{rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), shards: shards, model: map[uint64]*modelShard{}}
	for _, sh := range shards {
		w.model[sh] = &modelShard{data: map[string]string{}}
	}
	return w
}

// step adds one round to b for a random subset of shards and applies it to
// the model; the model is only correct once b commits.
func (w *workload) step(b *Batch) {
	for _, sh := range w.shards {
		if w.rng.IntN(3) == 0 {
			continue
		}
		m := w.model[sh]
		w.seq++
		term := max(m.hs.term, 1)
		first := m.last() + 1
		// Now and then a new leader overwrites the uncommitted tail.
		if w.rng.IntN(6) == 0 && m.last() > max(m.hs.commit, m.trunc) {
			lo := max(m.hs.commit, m.trunc) + 1
			first = lo + w.rng.Uint64N(m.last()-lo+1)
			term++
		}
		n := 1 + w.rng.IntN(3)
		ents := make([]raftpb.Entry, n)
		for i := range ents {
			data := fmt.Appendf(nil, "s%d-e%d-%d", sh, first+uint64(i), w.seq)
			if w.rng.IntN(10) == 0 {
				data = nil
			}
			ents[i] = newEntry(first+uint64(i), term, data)
		}
		m.ents = append(m.ents[:first-m.trunc-1:first-m.trunc-1], ents...)
		m.hs.term = term
		m.hs.vote = 1 + sh%3
		m.hs.commit = max(m.hs.commit, m.hs.commit+w.rng.Uint64N(m.last()-m.hs.commit+1))
		if m.hs.term != m.hsWritten.term || m.hs.vote != m.hsWritten.vote {
			m.hsWritten = m.hs
		}
		b.Append(sh, new(m.hs.proto()), ents)
		if m.applied < m.hs.commit && w.rng.IntN(2) == 0 {
			m.applied = m.hs.commit
			k, v := fmt.Sprintf("k%d", w.rng.IntN(8)), fmt.Sprintf("v%d", w.seq)
			m.data[k] = v
			b.Put(sh, []byte(k), []byte(v))
			if w.rng.IntN(4) == 0 {
				k := fmt.Sprintf("k%d", w.rng.IntN(8))
				delete(m.data, k)
				b.Delete(sh, []byte(k))
			}
			b.SetApplied(sh, m.applied)
		}
		if m.applied > m.trunc && w.rng.IntN(5) == 0 {
			to := m.trunc + 1 + w.rng.Uint64N(m.applied-m.trunc)
			m.truncTerm = m.termAt(to)
			m.ents = m.ents[to-m.trunc:]
			m.trunc = to
			b.Compact(sh, to)
		}
	}
}

// digest is a canonical text of the model.
func (w *workload) digest() string {
	var sb strings.Builder
	for _, sh := range w.shards {
		m := w.model[sh]
		// What InitialState reports: the commit index as last written, or
		// the applied index if higher.
		hs := m.hsWritten
		hs.commit = max(hs.commit, m.applied)
		fmt.Fprintf(&sb, "shard %d hs=%v applied=%d trunc=%d/%d last=%d\n", sh, hs, m.applied, m.trunc, m.truncTerm, m.last())
		for _, e := range m.ents {
			fmt.Fprintf(&sb, " %d/%d %q\n", e.Index, e.Term, e.Data)
		}
		keys := make([]string, 0, len(m.data))
		for k := range m.data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(&sb, " %s=%s\n", k, m.data[k])
		}
	}
	return sb.String()
}

// storeDigest is the same text read back from a store, checking on the way
// that each shard's HardState and log agree.
func storeDigest(t *testing.T, s *Store, shards []uint64) string {
	t.Helper()
	var sb strings.Builder
	for _, sh := range shards {
		r, err := s.Storage(sh)
		if err != nil {
			t.Fatalf("shard %d: %v", sh, err)
		}
		hsp, _, err := r.InitialState()
		if err != nil {
			t.Fatalf("shard %d: initial state: %v", sh, err)
		}
		first, _ := r.FirstIndex()
		last, _ := r.LastIndex()
		truncTerm, err := r.Term(first - 1)
		if err != nil {
			t.Fatalf("shard %d: term(%d): %v", sh, first-1, err)
		}
		hs := hardState{term: hsp.Term, vote: hsp.Vote, commit: hsp.Commit}
		if hs.commit > last {
			t.Fatalf("shard %d: HardState commit %d beyond last index %d", sh, hs.commit, last)
		}
		applied, err := s.Applied(sh)
		if err != nil {
			t.Fatal(err)
		}
		if applied > hs.commit {
			t.Fatalf("shard %d: applied %d beyond commit %d", sh, applied, hs.commit)
		}
		fmt.Fprintf(&sb, "shard %d hs=%v applied=%d trunc=%d/%d last=%d\n", sh, hs, applied, first-1, truncTerm, last)
		if last >= first {
			ents, err := r.Entries(first, last+1, ^uint64(0))
			if err != nil {
				t.Fatalf("shard %d: entries [%d, %d]: %v", sh, first, last, err)
			}
			for _, e := range ents {
				fmt.Fprintf(&sb, " %d/%d %q\n", e.Index, e.Term, e.Data)
			}
		}
		if err := s.Iterate(sh, nil, func(k, v []byte) bool {
			fmt.Fprintf(&sb, " %s=%s\n", k, v)
			return true
		}); err != nil {
			t.Fatal(err)
		}
	}
	return sb.String()
}
