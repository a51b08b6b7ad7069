package raftmux

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"go.etcd.io/raft/v3/confchange"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
)

// Everything a peer sends is checked here before raft's Step sees it. raft
// trusts its input: a RawNode stepped with a crafted message panics (a
// commit index past its log, a message type outside its tables, an append
// whose entries conflict with committed ones, a read request without its
// context entry, a snapshot whose configuration does not restore), or
// treats it as local (a term of 0 skips every term check). raftio knows
// only which connection a frame came from; the worker that owns a replica
// knows its log, its term and its configuration, so the checks that need
// them run there, and those that need nothing but the message run in
// Deliver, before the message takes a place in a worker's inbox.

// peerSent lists the message types a RawNode hands its application for
// another replica, as raftmux configures raft (go.etcd.io/raft/v3 v3.6.0,
// raft.go: every r.send to a peer):
//
//   - a leader: MsgApp (sendAppend), MsgHeartbeat (bcastHeartbeat, with a
//     read-index context; those without one travel as coalesced tuples),
//     MsgTimeoutNow (leadership transfer), MsgReadIndexResp (a follower's
//     forwarded read);
//   - a follower: MsgAppResp, MsgHeartbeatResp, MsgReadIndex (a read
//     forwarded to the leader);
//   - an election: MsgVote, MsgPreVote and their responses.
//
// MsgSnap is sent by leaders too, but raftmux streams it as snapshot
// chunks; one arriving in a RaftBatch would install a snapshot without its
// data. MsgProp is forwarded by followers only without
// DisableProposalForwarding (raftmux sets it): a proposal from the network
// would let any peer append entries of its choosing. MsgTransferLeader is
// forwarded by a follower whose application asked it to transfer, which
// raftmux does only on a leader. Everything else is local to one RawNode:
// MsgHup, MsgBeat, MsgUnreachable, MsgSnapStatus, MsgCheckQuorum,
// MsgForgetLeader, MsgStorageAppend, MsgStorageApply and their responses.
var peerSent = [...]bool{
	raftpb.MsgApp:           true,
	raftpb.MsgAppResp:       true,
	raftpb.MsgVote:          true,
	raftpb.MsgVoteResp:      true,
	raftpb.MsgPreVote:       true,
	raftpb.MsgPreVoteResp:   true,
	raftpb.MsgHeartbeat:     true,
	raftpb.MsgHeartbeatResp: true,
	raftpb.MsgTimeoutNow:    true,
	raftpb.MsgReadIndex:     true,
	raftpb.MsgReadIndexResp: true,
}

// isPeerSent reports whether a peer may send a message of type t in a
// RaftBatch. A negative type (the wire carries an int32) is none of them:
// raft indexes its type tables with it and panics.
func isPeerSent(t raftpb.MessageType) bool {
	return t >= 0 && int(t) < len(peerSent) && peerSent[t]
}

// leaderTraffic: the messages only a leader sends. They may come from a
// replica this one does not count as a member yet: a leader it has not
// heard of, elected after configuration changes this replica has not
// applied, or the leader filling a replica that was just created empty.
func leaderTraffic(t raftpb.MessageType) bool {
	return t == raftpb.MsgApp || t == raftpb.MsgHeartbeat || t == raftpb.MsgSnap
}

// maxRaftIndex bounds every term and index a peer may name. raft adds to
// them (prev index + entries, term + 1 at a campaign) without overflow
// checks; 2^62 is past any real log (a million entries a second for
// 146,000 years).
const maxRaftIndex = 1 << 62

// Refusal reasons, counted in Stats.
const (
	refuseType      = iota // a type no peer may send
	refuseAddress          // From is not the sending node, or To is not this node
	refuseMalformed        // terms, indexes or entries no raft leader produces
	refuseNonMember        // the sender is not in the shard's group as this replica knows it
	refuseUnplaced         // AcceptReplica said this node holds no replica of the shard
	refuseBeyondLog        // an ack or hint past this replica's log
	refuseHalted           // the replica is halted
	refuseSnapshot         // a snapshot stream or its data was refused
	refuseNonVoter         // a vote request to a replica out of its group's voters
	nRefuse
)

// Stats counts what the host refused from its peers, by reason. Refusals
// are logged at debug level only: a hostile or confused peer must not be
// able to flood the log.
type Stats struct {
	RefusedType      uint64 // message types no peer may send (MsgSnap outside a snapshot stream, local types, unknown types)
	RefusedAddress   uint64 // From other than the sending node, or To other than this node
	RefusedMalformed uint64 // terms, indexes, entries or snapshot metadata no raft leader produces
	RefusedNonMember uint64 // senders outside the shard's group as the replica knows it
	RefusedUnplaced  uint64 // replicas not created because AcceptReplica refused them
	RefusedBeyondLog uint64 // acks or hints past the replica's log
	RefusedHalted    uint64 // messages for halted replicas
	RefusedSnapshots uint64 // snapshot chunks or streams refused (budget, size, data, order)
	RefusedNonVoter  uint64 // vote requests to replicas out of their group's voters
	ClampedCommits   uint64 // heartbeats whose commit index was lowered to the replica's log
	HaltedReplicas   int    // replicas halted by an apply failure or a snapshot without its data
	SnapshotBytes    int64  // bytes buffered for incoming snapshots, host-wide
}

type counters struct {
	refused [nRefuse]atomic.Uint64
	clamped atomic.Uint64
}

// Stats returns the host's refusal counters.
func (h *Host) Stats() Stats {
	c := &h.counters
	h.haltMu.Lock()
	halted := len(h.halted)
	h.haltMu.Unlock()
	return Stats{
		RefusedType:      c.refused[refuseType].Load(),
		RefusedAddress:   c.refused[refuseAddress].Load(),
		RefusedMalformed: c.refused[refuseMalformed].Load(),
		RefusedNonMember: c.refused[refuseNonMember].Load(),
		RefusedUnplaced:  c.refused[refuseUnplaced].Load(),
		RefusedBeyondLog: c.refused[refuseBeyondLog].Load(),
		RefusedHalted:    c.refused[refuseHalted].Load(),
		RefusedSnapshots: c.refused[refuseSnapshot].Load(),
		RefusedNonVoter:  c.refused[refuseNonVoter].Load(),
		ClampedCommits:   c.clamped.Load(),
		HaltedReplicas:   halted,
		SnapshotBytes:    h.snapBuffered.Load(),
	}
}

var refuseNames = [nRefuse]string{"type", "address", "malformed", "non-member", "unplaced", "beyond log", "halted", "snapshot", "non-voter"}

// refuse counts one refused input and logs it at debug level.
func (h *Host) refuse(reason int, shard, from uint64, t raftpb.MessageType) {
	h.counters.refused[reason].Add(1)
	if h.debug {
		h.cfg.Logger.Debug("raftmux: refused peer input", "reason", refuseNames[reason], "shard", shard, "from", from, "type", t)
	}
}

// checkPeerMessage runs the checks that need nothing but the message: the
// type, the addressing, and terms, indexes and entries that no raft leader
// produces. It returns a refusal reason, or -1 to accept.
func checkPeerMessage(from, self uint64, m *raftpb.Message) int {
	if m == nil || !isPeerSent(m.Type) {
		return refuseType
	}
	if from == 0 || from == self || m.From != from || m.To != self {
		return refuseAddress
	}
	if !wellFormed(m) {
		return refuseMalformed
	}
	return -1
}

// checkHeartbeat checks a coalesced heartbeat tuple (or response), which
// is stepped as a MsgHeartbeat (MsgHeartbeatResp) from its sender: it needs
// a term (0 would make raft step it as a local message) and indexes within
// maxRaftIndex.
func checkHeartbeat(from, self uint64, hb *Heartbeat) int {
	if from == 0 || from == self {
		return refuseAddress
	}
	if hb.Term == 0 || hb.Term > maxRaftIndex || hb.Commit > maxRaftIndex {
		return refuseMalformed
	}
	return -1
}

// wellFormed checks the fields of a peer message of an accepted type.
func wellFormed(m *raftpb.Message) bool {
	if m.Index > maxRaftIndex || m.LogTerm > maxRaftIndex || m.Commit > maxRaftIndex ||
		m.RejectHint > maxRaftIndex || m.Term > maxRaftIndex {
		return false
	}
	// raft's storage-thread messages carry Responses; a peer's never do.
	if len(m.Responses) > 0 || (m.Snapshot != nil && m.Type != raftpb.MsgSnap) {
		return false
	}
	switch m.Type {
	case raftpb.MsgReadIndex:
		// Forwarded without a term (raft steps it as a local message) and
		// with the reader's context as its one entry: raft's read-only
		// queue indexes Entries[0].
		return m.Term == 0 && len(m.Entries) == 1
	case raftpb.MsgReadIndexResp:
		if len(m.Entries) != 1 {
			return false
		}
	case raftpb.MsgApp:
		if !validAppend(m) {
			return false
		}
	default:
		if len(m.Entries) > 0 {
			return false
		}
	}
	// A term of 0 marks a local message: raft would skip its term checks.
	return m.Term != 0
}

// validAppend checks a MsgApp's entries as raft's log assumes them: they
// follow the previous entry (Index, LogTerm) one index at a time, with
// terms that never fall and never pass the leader's term, and each entry
// is of a known type whose configuration change decodes. raft panics on
// an append whose entries conflict with its committed ones, which only
// out-of-sequence indexes can make it believe.
func validAppend(m *raftpb.Message) bool {
	prevTerm := m.LogTerm
	if prevTerm > m.Term || (m.Index == 0 && prevTerm != 0) {
		return false
	}
	for i := range m.Entries {
		e := &m.Entries[i]
		if e.Index != m.Index+1+uint64(i) || e.Index > maxRaftIndex || e.Term < max(prevTerm, 1) || e.Term > m.Term {
			return false
		}
		prevTerm = e.Term
		switch e.Type {
		case raftpb.EntryNormal:
		case raftpb.EntryConfChange:
			var cc raftpb.ConfChange
			if cc.Unmarshal(e.Data) != nil {
				return false
			}
		case raftpb.EntryConfChangeV2:
			var cc raftpb.ConfChangeV2
			if cc.Unmarshal(e.Data) != nil {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// errBadSnapshotMeta: a snapshot message raft could not restore, or would
// ignore.
var errBadSnapshotMeta = errors.New("raftmux: snapshot metadata refused")

// checkSnapMessage checks the MsgSnap of a snapshot stream: addressed from
// the sender to this node, a term, metadata at a real index and term no
// later than the message's, and a configuration that raft restores (it
// panics on one that does not) and that counts this node (it ignores one
// that does not, after the data was buffered for nothing).
func checkSnapMessage(from, self uint64, m *raftpb.Message) error {
	switch {
	case m == nil || m.Type != raftpb.MsgSnap || m.Snapshot == nil:
		return fmt.Errorf("%w: not a snapshot message", errBadSnapshotMeta)
	case from == 0 || from == self || m.From != from || m.To != self:
		return fmt.Errorf("%w: misaddressed", errBadSnapshotMeta)
	case m.Term == 0 || m.Term > maxRaftIndex || len(m.Entries) > 0 || len(m.Responses) > 0:
		return fmt.Errorf("%w: term %d", errBadSnapshotMeta, m.Term)
	}
	md := &m.Snapshot.Metadata
	if md.Index == 0 || md.Index > maxRaftIndex || md.Term == 0 || md.Term > m.Term {
		return fmt.Errorf("%w: index %d term %d", errBadSnapshotMeta, md.Index, md.Term)
	}
	return validConfState(&md.ConfState, self, md.Index)
}

// validConfState reports whether raft restores cs without panicking and
// counts self in it: it runs raft's own restore on a scratch tracker and
// compares the outcome, as raft's restore asserts.
func validConfState(cs *raftpb.ConfState, self, lastIndex uint64) error {
	if len(cs.Voters) == 0 {
		return fmt.Errorf("%w: no voters", errBadSnapshotMeta)
	}
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		if slices.Contains(ids, 0) {
			return fmt.Errorf("%w: node id 0", errBadSnapshotMeta)
		}
	}
	if !slices.Contains(cs.Voters, self) && !slices.Contains(cs.Learners, self) && !slices.Contains(cs.VotersOutgoing, self) {
		return fmt.Errorf("%w: configuration leaves this node out", errBadSnapshotMeta)
	}
	trk := tracker.MakeProgressTracker(1, 0)
	cfg, prs, err := confchange.Restore(confchange.Changer{Tracker: trk, LastIndex: lastIndex}, *cs)
	if err != nil {
		return fmt.Errorf("%w: %w", errBadSnapshotMeta, err)
	}
	trk.Config, trk.Progress = cfg, prs
	if err := cs.Equivalent(trk.ConfState()); err != nil {
		return fmt.Errorf("%w: %w", errBadSnapshotMeta, err)
	}
	return nil
}
