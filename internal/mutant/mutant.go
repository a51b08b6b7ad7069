// Package mutant switches on deliberate bugs, one at a time, to prove that
// the simulator (package sim) finds them. The bugs exist only in builds
// with the mutants tag; in every other build On is a constant false and
// the compiler drops the mutated branches.
package mutant

// Name names one mutant.
type Name string

// The mutants. Each names the safeguard it removes.
const (
	// LeaseWait: a topic's new owner is opened at once, without waiting
	// for its old owners to close or for their leases to run out.
	LeaseWait Name = "lease-wait-skipped"
	// LeaseExpiry: an owner serves a topic after its lease ran out.
	LeaseExpiry Name = "lease-expiry-ignored"
	// ApplyError: a command the state machine refuses at apply is
	// acknowledged as if it had been applied.
	ApplyError Name = "apply-error-swallowed"
	// DeadFinal: a member declared dead comes back alive in the same
	// generation when it refutes with a higher incarnation.
	DeadFinal Name = "dead-not-final"
	// Settle: a move or revoke is acknowledged before its old owner is
	// fenced.
	Settle Name = "settle-skipped"
	// GrantUnchecked: a lease grant takes an owner's recent opens out of
	// its digest without checking that the state still gives it them,
	// so it may cover a topic that has moved on.
	GrantUnchecked Name = "grant-unchecked"
	// EpochFloor: an owner takes an Open at or below an epoch it already
	// closed (a late or duplicated Open reopens a topic it gave up).
	EpochFloor Name = "epoch-floor-ignored"
	// ReadUnconfirmed: a shard leader answers a linearizable read at its
	// commit index without a quorum confirming that it still leads.
	ReadUnconfirmed Name = "read-unconfirmed"
	// SessionDedup: a shard applies a session's write it applied before
	// again, instead of answering it with its first answer.
	SessionDedup Name = "session-dedup-skipped"
	// HandoffShort: a new owner's record pull stores each chunk but its
	// last record, and counts itself complete.
	HandoffShort Name = "handoff-copies-short"
	// OffsetsReused: every epoch's records take offsets from 0 on, after
	// what the new owner's own log holds, instead of from the epoch's
	// own range.
	OffsetsReused Name = "offsets-reused"
	// LeaseRecheck: an owner acknowledges a produce without checking,
	// after the append, that its lease still covers it.
	LeaseRecheck Name = "lease-recheck-skipped"
	// AckBeforeSync: a follower acknowledges appended entries before
	// its fsync of them ends, so a power loss can take back an entry its
	// leader counted as stored.
	AckBeforeSync Name = "ack-before-sync"
	// SplitUnfenced: a shard that split goes on applying commands, which
	// its halves never see.
	SplitUnfenced Name = "split-unfenced"
	// SplitStaleChild: a split's halves are given the parent's records as
	// the store last held them, without the changes of the commands
	// applied in the same run before the split.
	SplitStaleChild Name = "split-stale-child"
	// SplitStaleRoute: a node's shard map does not take the splits it
	// learns of: it keeps routing a split shard's topics to that shard.
	SplitStaleRoute Name = "split-stale-route"
)

// Caught lists the mutants the simulator must catch (sim's TestMutants
// fails if one survives its seeds).
var Caught = []Name{LeaseWait, EpochFloor, LeaseExpiry, ApplyError, DeadFinal, Settle, GrantUnchecked, ReadUnconfirmed, SessionDedup, HandoffShort, OffsetsReused, LeaseRecheck, AckBeforeSync,
	SplitUnfenced, SplitStaleChild, SplitStaleRoute}

// Hunted lists the mutants the simulator does not yet catch within its
// seeds: its faults do not yet make them matter often enough. TestMutants
// reports on them without failing.
var Hunted []Name
