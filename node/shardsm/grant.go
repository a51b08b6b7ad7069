package shardsm

import (
	"bytes"
	"slices"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// Grant computes a lease grant on shard for owner, whose topics there
// digest to digest, under the shard's lock so that it is ordered against
// every apply: may is asked, at the time the grant is computed, whether
// and at which term this node may grant. The grant covers all the owner
// holds if its digest is the state's, or the state's with some of the
// owner's newest opens still on their way to it; else it lists what this
// replica's state says the owner owns. exact reports that the digest is
// the state's itself: the owner holds exactly what the state gives it. ok
// is false when no grant may be given. The owner's LastAsk is set either
// way, its LastGrant when a grant is given.
//
// A shard whose state is not loaded yet is refused without loading it
// (ok false, LastAsk not set): the caller answers lease rounds, which a
// load of thousands of topics must not hold up (a node that just started
// and leads many shards would answer no one, and send no round of its
// own, until all of them loaded). Nothing is lost: a leader grants only
// once current in its term, which it becomes by applying, and applying
// loads the shard.
func (m *Machine) Grant(shard uint64, owner string, digest uint64, clock func() time.Time, may func(now time.Time) (uint64, bool)) (g wire.LeaseGrant, exact, ok bool) {
	s := m.loaded(shard)
	if s == nil {
		return wire.LeaseGrant{}, false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := clock()
	if s.LastAsk == nil {
		s.LastAsk = make(map[string]time.Time)
	}
	s.LastAsk[owner] = now
	if s.State.Split() {
		// Its topics are its children's to grant.
		return wire.LeaseGrant{}, false, false
	}
	term, allowed := may(now)
	if !allowed {
		return wire.LeaseGrant{}, false, false
	}
	g = wire.LeaseGrant{Shard: shard, Term: term}
	d := s.State.OwnerDigest(owner)
	if d != digest && !s.holdsAllBut(owner, d, digest) {
		g.Listed = true
		s.State.EachOwnedBy(owner, func(topic string, epoch uint64) {
			g.Topics = append(g.Topics, wire.TopicEpoch{Topic: []byte(topic), Epoch: epoch})
		})
		// In a stable order, so that a run is replayed byte for byte.
		slices.SortFunc(g.Topics, func(a, b wire.TopicEpoch) int { return bytes.Compare(a.Topic, b.Topic) })
	}
	if s.LastGrant == nil {
		s.LastGrant = make(map[string]time.Time)
	}
	s.LastGrant[owner] = now
	return g, d == digest, true
}

// StateVersion returns the count of state changes so far: the applies
// that changed a state, restores and removals.
func (m *Machine) StateVersion() uint64 {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	return m.version
}

// GrantIfUnchanged records a grant to owner at now, made from a summary
// without reading each shard, and reports true if no state changed since
// StateVersion returned version; else it records nothing. An apply that
// closes a topic of owner later takes this grant as the owner's last if
// it is later than the shard's LastGrant.
func (m *Machine) GrantIfUnchanged(owner string, version uint64, now time.Time) bool {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	if m.version != version {
		return false
	}
	if m.summaryGrant == nil {
		m.summaryGrant = make(map[string]time.Time)
	}
	m.summaryGrant[owner] = now
	return true
}

// changed counts a state change; closes lists the owners an apply closed
// topics of, whose last grants it fills in lastGrant (may be nil).
func (m *Machine) changed(closes []meta.Effect, lastGrant map[string]time.Time) map[string]time.Time {
	m.grantMu.Lock()
	defer m.grantMu.Unlock()
	m.version++
	for _, e := range closes {
		if e.Kind != meta.EffectClose {
			continue
		}
		if g, ok := m.summaryGrant[e.Node]; ok && g.After(lastGrant[e.Node]) {
			if lastGrant == nil {
				lastGrant = make(map[string]time.Time)
			}
			lastGrant[e.Node] = g
		}
	}
	return lastGrant
}
