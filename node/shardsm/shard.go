package shardsm

import (
	"sync"
	"time"

	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/shardstore"
)

// Shard is one hosted shard's state and the lease bookkeeping kept beside
// it. Its fields are read and written only under its lock: inside
// Machine.WithShard, or by the Machine.
type Shard struct {
	mu sync.Mutex
	// State is the shard's applied state. A caller reads it; only the
	// Machine changes it.
	State *meta.State
	// Log is the shard's change log, for watchers (node/watch). A caller
	// reads it; only the Machine changes it.
	Log *watch.Log
	// LastGrant: when this node last computed a lease grant on the shard
	// for each owner (see Machine.Grant). Under the lock, so that a grant
	// computed before an apply is always seen by that apply. Callers may
	// fill it (nil until then).
	LastGrant map[string]time.Time
	// LastAsk: when each owner last asked for a lease on the shard here,
	// granted or not. Callers may fill it (nil until then).
	LastAsk map[string]time.Time
	// Applied counts the commands applied here since the shard was
	// loaded: a shard leader's automatic splits read its rate.
	Applied uint64

	// legacy: loaded from shardstore.LegacyMetaKey; the next apply writes
	// every record and deletes it.
	legacy bool
	// key and val are Apply's encoding buffers (raftmux worker only).
	key, val []byte
	// opened holds each owner's newest opens applied here (see Grant).
	opened map[string]*recentOpens
}

// recentOpensLen is how many of an owner's newest opens a shard keeps.
const recentOpensLen = 16

// recentOpens is one owner's newest opens in a shard, in apply order: the
// OpenTopics an owner has not received yet when it builds a lease round
// are, while topics stream in, the newest ones.
type recentOpens struct {
	n    int // opens noted so far; the next goes to ents[n%recentOpensLen]
	ents [recentOpensLen]struct {
		topic string
		epoch uint64
	}
}

func (s *Shard) noteOpen(owner, topic string, epoch uint64) {
	if s.opened == nil {
		s.opened = make(map[string]*recentOpens)
	}
	r := s.opened[owner]
	if r == nil {
		r = &recentOpens{}
		s.opened[owner] = r
	}
	e := &r.ents[r.n%recentOpensLen]
	e.topic, e.epoch = topic, epoch
	r.n++
}

// holdsAllBut reports whether digest, an owner's digest of what it holds,
// is the digest d of what the state gives it here with some of its newest
// opens taken out: walking back from the newest, each open the state still
// gives the owner at its epoch is taken out of d, and each step is a
// candidate. Every candidate is a subset of what the state gives the owner
// (an open met twice is taken out and put back), so a match grants only
// topics the state gives it at those epochs. The same collision
// assumption as the digests themselves, over up to recentOpensLen
// candidates instead of one.
func (s *Shard) holdsAllBut(owner string, d, digest uint64) bool {
	r := s.opened[owner]
	if r == nil {
		return false
	}
	for i := 1; i <= min(r.n, recentOpensLen); i++ {
		e := &r.ents[(r.n-i)%recentOpensLen]
		if !s.State.OwnsAt(owner, e.topic, e.epoch) && !mutant.On(mutant.GrantUnchecked) {
			continue
		}
		if d ^= meta.TopicDigest(e.topic, e.epoch); d == digest {
			return true
		}
	}
	return false
}

// persist writes the records the applied commands changed into b (the
// round's batch, committed with the applied index). Under s.mu.
func (s *Shard) persist(shard uint64, b raftmux.Batch) {
	s.Log.Persist(b)
	if s.legacy {
		s.legacy = false
		for a := range s.State.All() {
			s.putRecord(shard, a.Topic, b)
		}
		s.putFloor(shard, b)
		b.Delete(shard, shardstore.LegacyMetaKey)
		s.State.DrainChanges(func(string) {})
		s.State.DrainSessions(func(id uint64) { s.putSession(shard, id, b) })
		return
	}
	if s.State.DrainChanges(func(topic string) { s.putRecord(shard, topic, b) }) {
		s.putFloor(shard, b)
	}
	s.State.DrainSessions(func(id uint64) { s.putSession(shard, id, b) })
	if s.State.DrainSplit() {
		s.val = shardstore.AppendSplitMark(s.val[:0], s.Log.Ended())
		b.Put(shard, shardstore.SplitMarkKey, s.val)
	}
}

func (s *Shard) putSession(shard, id uint64, b raftmux.Batch) {
	s.key = shardstore.SessionKey(s.key[:0], id)
	var ok bool
	if s.val, ok = s.State.AppendSession(s.val[:0], id); ok {
		b.Put(shard, s.key, s.val)
	} else {
		b.Delete(shard, s.key)
	}
}

func (s *Shard) putRecord(shard uint64, topic string, b raftmux.Batch) {
	s.key = shardstore.TopicRecordKey(s.key[:0], topic)
	var ok bool
	if s.val, ok = s.State.AppendRecord(s.val[:0], topic); ok {
		b.Put(shard, s.key, s.val)
	} else {
		b.Delete(shard, s.key)
	}
}

func (s *Shard) putFloor(shard uint64, b raftmux.Batch) {
	s.val = shardstore.AppendEpochFloor(s.val[:0], s.State.Floor())
	b.Put(shard, shardstore.EpochFloorKey, s.val)
}
