package raftmux

import (
	"fmt"
	"log/slog"
	"runtime"
	"time"

	"go.etcd.io/raft/v3/raftpb"
)

// Config of a Host. Zero fields take the documented defaults.
type Config struct {
	// NodeID is this host's id, also the raft replica id of every replica it
	// hosts. Required, non-zero.
	NodeID uint64
	// Storage, Transport and StateMachine are required.
	Storage      Storage
	Transport    Transport
	StateMachine StateMachine

	// OnLeaderChange, if set, is called from a worker goroutine on every
	// change of a hosted shard's leader. It must not block.
	OnLeaderChange func(LeaderChange)
	// OnConfState, if set, is called from a worker goroutine with a hosted
	// replica's configuration whenever it is loaded or changes (an applied
	// conf change, an installed snapshot), and with an empty one when the
	// replica is dropped. It must not block.
	OnConfState func(shard uint64, cs raftpb.ConfState)

	// Workers is the number of round loops. Default GOMAXPROCS (1 when
	// Manual).
	Workers int
	// Manual makes the caller drive the host, as a simulation does: no
	// goroutine runs; Tick advances the raft clock by one tick and Step
	// runs the rounds that are due, on the caller's goroutine; requests
	// are made with Submit, whose callbacks run during Step. The blocking
	// methods (Propose, ReadIndex, ...) must not be used. Clock is then
	// the caller's (AckWait holds a round back on it; see NextDue); a
	// Manual host without a Clock holds no round back.
	Manual bool
	// Clock is the host's clock for AckWait. Default time.Now.
	Clock func() time.Time
	// SyncLag, on a Manual host with a Clock, is how long each fsync of
	// the raft log takes on Clock, drawn once per round that must sync:
	// the round's batch is written at once, and made durable, with the
	// rest of the round (the messages that wait for it, applying,
	// Advance), only once that time has passed. Meanwhile the worker runs
	// no round, as a started host's worker blocked in its fsync does, and
	// a crash of the caller's disk may lose the batch. A Manual host so
	// has the gap between a round's writes and their fsync that Pebble's
	// WAL sync gives a started one. Nil, or 0 drawn: no gap. Only for
	// Manual hosts.
	SyncLag func() time.Duration
	// Seed starts the proposal ids (they must not repeat those of an
	// earlier life of the host, whose entries may still be in the logs).
	// Default: the clock in nanoseconds.
	Seed uint64
	// TickInterval is the raft logical clock period. Default 100 ms.
	TickInterval time.Duration
	// ElectionTicks: a follower that hears nothing from its leader for this
	// many ticks campaigns (raft randomizes it within [E, 2E)). Default 10.
	ElectionTicks int
	// HeartbeatTicks between leader heartbeats. Default 1.
	HeartbeatTicks int
	// DisablePreVote and DisableCheckQuorum turn off the two protections,
	// which are on by default.
	DisablePreVote     bool
	DisableCheckQuorum bool
	// MaxSizePerMsg bounds the entry bytes of one append message. Default
	// 256 KiB.
	MaxSizePerMsg uint64
	// MaxInflightMsgs bounds appends in flight per follower. Default 64.
	MaxInflightMsgs int
	// MaxInflightBytes bounds the bytes in flight per follower. Default 4 MiB.
	MaxInflightBytes uint64
	// MaxUncommittedEntriesSize bounds a leader's uncommitted log bytes;
	// proposals beyond it fail with ErrDropped. Default 4 MiB.
	MaxUncommittedEntriesSize uint64
	// MaxInboxEvents bounds each worker's inbox; beyond it inbound messages
	// are dropped (raft retransmits) and requests fail with ErrBusy.
	// Default 65536.
	MaxInboxEvents int
	// MaxConcurrentSnapshots bounds snapshot streams this host sends at once;
	// further MsgSnaps are reported as failed and retried by raft. Default 4.
	MaxConcurrentSnapshots int
	// SnapshotChunkSize is the data bytes per SnapshotChunk. Default 256 KiB.
	SnapshotChunkSize int
	// MaxSnapshotBytes bounds what a receiver buffers for one incoming
	// snapshot. Default 256 MiB.
	MaxSnapshotBytes int
	// MaxSnapshotBufferBytes bounds what the host buffers for all its
	// incoming snapshots together, streams being received and snapshots
	// waiting to be installed; a chunk past it is refused and its stream
	// dropped (the leader sends the snapshot again later). Default
	// MaxSnapshotBytes: one snapshot of the largest size at a time, or
	// many small ones.
	MaxSnapshotBufferBytes int
	// SnapshotIdleTicks: an incoming snapshot stream that received no
	// chunk for this many ticks is dropped and its buffer freed. Default
	// 4×ElectionTicks.
	SnapshotIdleTicks int
	// AcceptReplica, if set, is asked before a leader's message or
	// snapshot creates a replica of shard on this host on behalf of node
	// from; false refuses it (counted in Stats.RefusedUnplaced), and the
	// leader retries. The node answers from its placement: a replica is
	// created only for a shard the ring places here. Called from worker
	// goroutines; it must not block. Nil accepts every one.
	AcceptReplica func(shard, from uint64) bool
	// CompactionOverhead: once a shard has this many applied entries in its
	// log, it is compacted down to CompactionKeep entries. Defaults 1024, 128.
	CompactionOverhead uint64
	CompactionKeep     uint64
	// AckWait: after a round in which leaders here sent appends before
	// their own fsync, the worker holds its next round back until a
	// follower's ack is in, for at most this long after the round ended, so
	// that the round steps the ack and answers the proposals instead of
	// leaving the ack waiting through another fsync. Events arriving
	// meanwhile join that round. Default 500 µs; negative turns it off.
	AckWait time.Duration
	// DisableQuiesce keeps every group ticking (for comparison runs).
	DisableQuiesce bool
	// PromoteMaxLag: Promote refuses (ErrLearnerBehind) a learner whose
	// replicated log is more than this many entries behind the leader's
	// commit index. Default 0: it must hold every committed entry.
	PromoteMaxLag uint64
	// ReadRetryTicks: a ReadIndex request without an answer after this many
	// ticks is re-issued with a fresh request id. Default 2×ElectionTicks.
	ReadRetryTicks int
	// Logger; default slog.Default().
	Logger *slog.Logger
}

func (c *Config) withDefaults() (Config, error) {
	o := *c
	if o.NodeID == 0 {
		return o, fmt.Errorf("%w: NodeID must be non-zero", ErrInvalid)
	}
	if o.Storage == nil || o.Transport == nil || o.StateMachine == nil {
		return o, fmt.Errorf("%w: Storage, Transport and StateMachine are required", ErrInvalid)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def64 := func(v *uint64, d uint64) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Manual {
		def(&o.Workers, 1)
		if o.Clock == nil {
			o.AckWait = -1 // no round is held back: there is no clock to wait on
			o.SyncLag = nil
		}
	} else if o.SyncLag != nil {
		return o, fmt.Errorf("%w: SyncLag is for Manual hosts", ErrInvalid)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	def(&o.Workers, runtime.GOMAXPROCS(0))
	if o.AckWait == 0 {
		o.AckWait = 500 * time.Microsecond
	}
	if o.TickInterval == 0 {
		o.TickInterval = 100 * time.Millisecond
	}
	def(&o.ElectionTicks, 10)
	def(&o.HeartbeatTicks, 1)
	def64(&o.MaxSizePerMsg, 256<<10)
	def(&o.MaxInflightMsgs, 64)
	def64(&o.MaxInflightBytes, 4<<20)
	def64(&o.MaxUncommittedEntriesSize, 4<<20)
	def(&o.MaxInboxEvents, 65536)
	def(&o.MaxConcurrentSnapshots, 4)
	def(&o.SnapshotChunkSize, 256<<10)
	def(&o.MaxSnapshotBytes, 256<<20)
	def(&o.MaxSnapshotBufferBytes, o.MaxSnapshotBytes)
	def64(&o.CompactionOverhead, 1024)
	def64(&o.CompactionKeep, 128)
	def(&o.ReadRetryTicks, 2*o.ElectionTicks)
	def(&o.SnapshotIdleTicks, 4*o.ElectionTicks)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.Workers < 0, o.TickInterval < 0, o.ElectionTicks < 0, o.HeartbeatTicks < 0,
		o.MaxInflightMsgs < 0, o.MaxInboxEvents < 0, o.MaxConcurrentSnapshots < 0,
		o.SnapshotChunkSize < 0, o.MaxSnapshotBytes < 0, o.ReadRetryTicks < 0,
		o.MaxSnapshotBufferBytes < 0, o.SnapshotIdleTicks < 0:
		return o, fmt.Errorf("%w: negative limit in Config", ErrInvalid)
	case o.HeartbeatTicks >= o.ElectionTicks:
		return o, fmt.Errorf("%w: HeartbeatTicks (%d) must be below ElectionTicks (%d)", ErrInvalid, o.HeartbeatTicks, o.ElectionTicks)
	case o.CompactionKeep >= o.CompactionOverhead:
		return o, fmt.Errorf("%w: CompactionKeep must be below CompactionOverhead", ErrInvalid)
	}
	return o, nil
}
