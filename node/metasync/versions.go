package metasync

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/internal/enum"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/swim"
	"github.com/shoalmq/shoal/wire"
)

// Malformed MetadataPush payloads.
var (
	errBadLeaderTable = errors.New("metasync: malformed shard-leader table")
	errBadMembers     = errors.New("metasync: malformed member list")
)

// kind indexes the versioned metadata kinds: wire.MetaKind - 1.
type kind int

const (
	kMembers kind = iota
	kRing
	kLeaders
	numKinds
)

var wireKinds = [numKinds]wire.MetaKind{wire.MetaMembership, wire.MetaRing, wire.MetaShardLeaders}

// kindOf is the index of a wire kind; ok is false for an unknown one.
func kindOf(k uint64) (_ kind, ok bool) {
	if k < uint64(wire.MetaMembership) || k > uint64(wire.MetaShardLeaders) {
		return 0, false
	}
	return kind(k - 1), true
}

var kindNames = enum.New("kind", map[kind]string{kMembers: "members", kRing: "ring", kLeaders: "leaders"})

func (k kind) String() string { return kindNames.Name(k) }

// Versions are the versions of the cluster metadata a node holds (the
// package documentation says what each counts).
type Versions struct {
	Membership, Ring, ShardLeaders uint64
}

func (v Versions) get(k kind) uint64 {
	switch k {
	case kMembers:
		return v.Membership
	case kRing:
		return v.Ring
	}
	return v.ShardLeaders
}

// digestVersion is a Lamport version over a digest of this node's view:
// the membership's or the ring's.
type digestVersion struct {
	version, digest uint64
}

// observe takes the digest of this node's own view: the version rises by
// one when it changed.
func (d *digestVersion) observe(digest uint64) {
	if digest != d.digest {
		d.digest = digest
		d.version++
	}
}

// merge takes a peer's version and digest after its list was merged and
// found to hold nothing newer than this node knows: the peer's version if
// the digests match, or one above it if this node knows more, so that the
// peer pulls in turn.
func (d *digestVersion) merge(peerVersion, peerDigest uint64) {
	switch {
	case d.digest == peerDigest:
		d.version = max(d.version, peerVersion)
	case d.version <= peerVersion:
		d.version = peerVersion + 1
	}
}

func live(s swim.State) bool { return s == swim.StateAlive || s == swim.StateSuspect }

// recordsOf is a member list as wire's records.
func recordsOf(ms []swim.Member) []wire.MemberRecord {
	out := make([]wire.MemberRecord, len(ms))
	for i, m := range ms {
		out[i] = wire.MemberRecord{ID: []byte(m.ID), Rack: []byte(m.Rack), SwimAddr: []byte(m.SwimAddr),
			Generation: m.Generation, Incarnation: m.Incarnation, State: wire.MemberState(m.State)}
	}
	return out
}

// newerMember reports whether a member list pushed by from holds a member
// that self's SWIM view mine does not know, alive, or knows older (by
// SWIM's own order, swim.Supersedes); self's own record is not compared.
// fromAddr is from's SWIM address as its list says it ("" if it does not).
func newerMember(self, from string, mine []swim.Member, rs []wire.MemberRecord) (newer bool, fromAddr string) {
	byID := make(map[string]*swim.Member, len(mine))
	for i := range mine {
		byID[mine[i].ID] = &mine[i]
	}
	for i := range rs {
		r := &rs[i]
		st := swim.State(r.State)
		if string(r.ID) == from {
			fromAddr = string(r.SwimAddr)
		}
		if string(r.ID) == self {
			continue
		}
		m := byID[string(r.ID)]
		if (m == nil && live(st)) || (m != nil && swim.Supersedes(r.Generation, r.Incarnation, st, m.Generation, m.Incarnation, m.State)) {
			newer = true
		}
	}
	return newer, fromAddr
}

// leaderRows is a shard-leader table as wire's rows.
func leaderRows(rows []router.ShardLeader) []wire.LeaderRow {
	out := make([]wire.LeaderRow, len(rows))
	for i, r := range rows {
		out[i] = wire.LeaderRow{Shard: uint64(r.Shard), Term: r.Term, Leader: []byte(r.Leader)}
	}
	return out
}

// mergeLeaderTable applies an encoded table to t, term-checked row by row;
// a row of a shard t's map does not hold yet (a split's child) splits the
// map down to it. A table that does not decode, or names a shard outside
// t's shard space, changes nothing.
func mergeLeaderTable(t *router.LeaderTable, b []byte) error {
	rows, err := wire.DecodeLeaderTable(b, uint64(t.Space().Capacity()), nil)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadLeaderTable, err)
	}
	for _, r := range rows {
		_, _ = t.Update(uint32(r.Shard), string(r.Leader), r.Term)
	}
	return nil
}
