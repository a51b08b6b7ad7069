package duty

import (
	"cmp"
	"maps"
	"math/bits"
	"slices"
	"time"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// Vouch rounds: a leader asks its shards' voters to confirm, in one
// question per voter, that it still leads them (docs/leases.md).

// VouchAsk is a vouch round's question to one voter.
type VouchAsk struct {
	// Led sums every shard this node leads of which the voter is a voter:
	// meta.ShardSummary(shard, term, 0).
	Led wire.Summary
	// Vouch lists the shards to vouch for (those someone asked a lease
	// of) at their terms, unless the voter said, answering an earlier
	// round with the same Led, that it follows this node in exactly those
	// shards: then the summary alone asks.
	Vouch []wire.ShardTerm
}

// VouchRound starts vouch round seq (the caller's round number, which the
// answers echo; it must rise) at now, for the led shards someone asked a
// lease of within the last lease: what to ask each other voter. Nothing is
// asked when no lease was.
//
// When every voter shared its summary in the last round, and nothing led
// changed since, the round asks each voter by its summary alone, for
// every led shard at once, and costs O(voters); a shared answer from every
// voter then confirms every led shard (allAt). Otherwise it lists the
// shards (every led shard while leases of all of them are asked at once,
// else those asked one by one) to the voters that did not share their
// summary, and counts vouches shard by shard.
func (l *Leader) VouchRound(now time.Time, seq uint64) map[uint64]*VouchAsk {
	for s, r := range l.vrounds {
		if now.Sub(r.at) > l.cfg.ConfirmFresh {
			delete(l.vrounds, s)
		}
	}
	if l.lastDemand.IsZero() || now.Sub(l.lastDemand) > l.cfg.Lease {
		clear(l.demanded)
		return nil
	}
	sums := l.ledSums()
	if last := l.lastVround; last != nil && last.version == l.ledVersion && len(sums) > 0 && len(last.shared) == len(sums) {
		rd := l.newVouchRound(now, seq)
		asks := make(map[uint64]*VouchAsk, len(sums))
		for v, sum := range sums {
			asks[v] = &VouchAsk{Led: sum}
			rd.led[v] = sum
		}
		return asks
	}
	var rd *vouchRound
	add := func(shard uint64, s *led) {
		vs, ok := l.voters[shard]
		if !ok {
			return
		}
		if rd == nil {
			rd = l.newVouchRound(now, seq)
		}
		v := vshard{shard: shard, term: s.term, vs: vs}
		v.ack(l.cfg.Self)
		rd.shards = append(rd.shards, v)
	}
	if !l.demandAll.IsZero() && now.Sub(l.demandAll) <= l.cfg.Lease {
		for _, shard := range slices.Sorted(maps.Keys(l.led)) {
			add(shard, l.led[shard])
		}
	} else {
		for _, shard := range slices.Sorted(maps.Keys(l.demanded)) {
			s := l.led[shard]
			if s == nil || s.demand.IsZero() || now.Sub(s.demand) > l.cfg.Lease {
				delete(l.demanded, shard)
				continue
			}
			add(shard, s)
		}
	}
	if rd == nil {
		return nil
	}
	asks := make(map[uint64]*VouchAsk)
	for i := range rd.shards {
		l.eachVoter(rd.shards[i].vs, func(v uint64) {
			a := asks[v]
			if a == nil {
				a = &VouchAsk{Led: sums[v]}
				asks[v] = a
				rd.led[v] = a.Led
				m, ok := l.vouchMatched[v]
				rd.listed[v] = !ok || m != a.Led
			}
			if rd.listed[v] {
				a.Vouch = append(a.Vouch, wire.ShardTerm{Shard: rd.shards[i].shard, Term: rd.shards[i].term})
			}
		})
	}
	return asks
}

// newVouchRound records vouch round seq, built at now, as the last one.
func (l *Leader) newVouchRound(now time.Time, seq uint64) *vouchRound {
	rd := &vouchRound{at: now, led: make(map[uint64]wire.Summary), listed: make(map[uint64]bool),
		version: l.ledVersion, shared: make(map[uint64]bool)}
	l.vrounds[seq], l.lastVround = rd, rd
	return rd
}

// ledSums returns, for every voter of a shard this node leads, the
// summary of those shards at their terms (VouchAsk.Led), computed again
// only when a leadership or a configuration changed.
func (l *Leader) ledSums() map[uint64]wire.Summary {
	if l.sums != nil && l.sumsAt == l.ledVersion {
		return l.sums
	}
	sums := make(map[uint64]wire.Summary)
	l.sumsCover = 0
	for shard, s := range l.led {
		vs, ok := l.voters[shard]
		if !ok || !l.hasOtherVoter(vs) {
			continue
		}
		l.sumsCover++
		share := meta.ShardSummary(shard, s.term, 0)
		l.eachVoter(vs, func(v uint64) {
			sum := sums[v]
			sum.Count++
			sum.Digest ^= share
			sums[v] = sum
		})
	}
	l.sums, l.sumsAt = sums, l.ledVersion
	return sums
}

// eachVoter calls fn once for every voter of vs but this node.
func (l *Leader) eachVoter(vs voters, fn func(v uint64)) {
	for _, v := range vs.in {
		if v != l.cfg.Self {
			fn(v)
		}
	}
	for _, v := range vs.out {
		if v != l.cfg.Self && !slices.Contains(vs.in, v) {
			fn(v)
		}
	}
}

// Vouched takes node from's (a raft id) answer to vouch round seq: the
// shards it follows this node in, at the terms asked. all: it follows this
// node in every shard the round's summary stood for, so it vouches for
// every shard the round asked it about. again reports that the round
// asked by its summary alone and the voter's state sums otherwise: it
// vouched for nothing, and the next round lists the shards.
func (l *Leader) Vouched(from, seq uint64, shards []uint64, all bool) (again bool) {
	rd := l.vrounds[seq]
	if rd == nil {
		return false
	}
	led, asked := rd.led[from]
	if !asked {
		return false
	}
	if all {
		l.vouchMatched[from] = led
		rd.shared[from] = true
		for i := range rd.shards {
			if v := &rd.shards[i]; v.vs.has(from) {
				l.vouch(rd, v, from)
			}
		}
		if rd.version == l.ledVersion && len(rd.shared) == len(l.ledSums()) && rd.at.After(l.allAt) {
			l.allAt, l.allVersion = rd.at, rd.version
		}
		return false
	}
	delete(l.vouchMatched, from)
	if !rd.listed[from] {
		return true // asked by the summary alone, which the voter does not share
	}
	for _, shard := range shards {
		i, found := slices.BinarySearchFunc(rd.shards, shard, func(v vshard, s uint64) int { return cmp.Compare(v.shard, s) })
		if found && rd.shards[i].vs.has(from) {
			l.vouch(rd, &rd.shards[i], from)
		}
	}
	return false
}

// vouch counts from's vouch for v in round rd.
func (l *Leader) vouch(rd *vouchRound, v *vshard, from uint64) {
	v.ack(from)
	if v.quorum() {
		l.Confirm(v.shard, v.term, rd.at)
	}
}

// vshard is one shard of a vouch round: its voters when the round began
// and which of them vouched (bit i: vs.in[i]; bit 32+i: vs.out[i]).
type vshard struct {
	shard, term uint64
	vs          voters
	acked       uint64
}

func (v *vshard) ack(voter uint64) {
	for i, x := range v.vs.in {
		if x == voter && i < 32 {
			v.acked |= 1 << i
		}
	}
	for i, x := range v.vs.out {
		if x == voter && i < 32 {
			v.acked |= 1 << (32 + i)
		}
	}
}

// quorum reports whether a majority of the voters vouched (of both sets
// of a joint configuration).
func (v *vshard) quorum() bool {
	in := bits.OnesCount32(uint32(v.acked)) > len(v.vs.in)/2
	return in && (len(v.vs.out) == 0 || bits.OnesCount32(uint32(v.acked>>32)) > len(v.vs.out)/2)
}

func (vs voters) has(id uint64) bool {
	return slices.Contains(vs.in, id) || slices.Contains(vs.out, id)
}
