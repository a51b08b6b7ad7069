package raftmux_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
	"github.com/shoalmq/shoal/shardstore"
)

// hostileSetup is a three-host cluster with shard 0 elected, and the
// parties a crafted input plays with: the leader, a follower, the term.
type hostileSetup struct {
	c                *cluster
	leader, follower uint64
	term, commit     uint64
}

func newHostileSetup(t *testing.T, tune func(*raftmux.Config)) *hostileSetup {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	c := newCluster(t, 3, func(cfg *raftmux.Config) {
		cfg.Logger = quiet
		if tune != nil {
			tune(cfg)
		}
	})
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 10*time.Second)[0]
	if _, err := c.propose(0, []byte("before")); err != nil {
		t.Fatal(err)
	}
	s := &hostileSetup{c: c, leader: lead, follower: lead%3 + 1}
	inf := c.infos()[lead][0]
	s.term, s.commit = inf.Term, inf.Applied
	return s
}

// survives checks that every host is running, nothing halted, and the
// shard still commits the same log everywhere.
func (s *hostileSetup) survives(t *testing.T) {
	t.Helper()
	for id, h := range s.c.hosts {
		if err := h.Err(); err != nil {
			t.Fatalf("host %d halted: %v", id, err)
		}
		if hs := h.Halted(); len(hs) > 0 {
			t.Fatalf("host %d halted replicas: %v", id, hs)
		}
	}
	if _, err := s.c.propose(0, []byte("after")); err != nil {
		t.Fatalf("shard no longer commits: %v", err)
	}
	s.c.checkSameLogs([]uint64{0})
}

func msgBatch(shard uint64, m *raftpb.Message) *raftmux.RaftBatch {
	return &raftmux.RaftBatch{Messages: []raftmux.ShardMessage{{Shard: shard, Msg: m}}}
}

func confChangeEntry(index, term uint64, data []byte) raftpb.Entry {
	return raftpb.Entry{Index: index, Term: term, Type: raftpb.EntryConfChangeV2, Data: data}
}

// TestCraftedPeerMessagesAreRefusedBeforeRaft sends, as a connected peer
// would, each kind of message that made raft panic, diverge or accept
// what no peer may send: every one is refused (and counted) or made
// harmless before raft's Step, and the group goes on committing.
func TestCraftedPeerMessagesAreRefusedBeforeRaft(t *testing.T) {
	type crafted struct {
		to, from uint64
		batch    *raftmux.RaftBatch
	}
	for _, tc := range []struct {
		name    string
		craft   func(s *hostileSetup) crafted
		counter func(raftmux.Stats) uint64
	}{
		{"heartbeat commit past the log is clamped", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 0, Term: s.term, Commit: 1 << 40}}}}
		}, func(st raftmux.Stats) uint64 { return st.ClampedCommits }},
		{"heartbeat message with a read context past the log is clamped", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgHeartbeat, From: s.leader, To: s.follower, Term: s.term, Commit: 1 << 40, Context: []byte("rd")})}
		}, func(st raftmux.Stats) uint64 { return st.ClampedCommits }},
		{"message type -1", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: -1, From: s.leader, To: s.follower, Term: s.term})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"message type past raft's tables", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: 1000, From: s.leader, To: s.follower, Term: s.term})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"local MsgHup from the network", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgHup, From: s.leader, To: s.follower})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"local MsgStorageAppendResp from the network", func(s *hostileSetup) crafted {
			return crafted{s.leader, s.follower, msgBatch(0, &raftpb.Message{Type: raftpb.MsgStorageAppendResp, From: s.follower, To: s.leader, Term: s.term, Index: 1 << 30})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"proposal forwarded by a peer", func(s *hostileSetup) crafted {
			return crafted{s.leader, s.follower, msgBatch(0, &raftpb.Message{Type: raftpb.MsgProp, From: s.follower, To: s.leader,
				Entries: []raftpb.Entry{{Type: raftpb.EntryConfChangeV2, Data: []byte{0xff, 0xff}}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"raw MsgSnap without data", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgSnap, From: s.leader, To: s.follower, Term: s.term,
				Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: s.commit + 100, Term: s.term, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"leadership transfer asked by a peer", func(s *hostileSetup) crafted {
			return crafted{s.leader, s.follower, msgBatch(0, &raftpb.Message{Type: raftpb.MsgTransferLeader, From: s.follower, To: s.leader, Term: s.term})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedType }},
		{"From other than the sending node", func(s *hostileSetup) crafted {
			return crafted{s.follower, 6 - s.leader - s.follower, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Term: s.term, Index: s.commit, LogTerm: s.term})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedAddress }},
		{"To another node", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: 99, Term: s.term})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedAddress }},
		{"append at term 0 (a local message to raft)", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Index: s.commit, LogTerm: s.term,
				Entries: []raftpb.Entry{{Index: s.commit + 1, Term: s.term}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"append whose entries conflict with committed ones", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Term: s.term, Index: s.commit, LogTerm: s.term,
				Entries: []raftpb.Entry{{Index: 1, Term: s.term, Data: []byte("rewrite history")}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"append whose entry terms fall", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Term: s.term + 1, Index: s.commit, LogTerm: s.term,
				Entries: []raftpb.Entry{{Index: s.commit + 1, Term: s.term + 1}, {Index: s.commit + 2, Term: s.term}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"append with an undecodable configuration change", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Term: s.term, Index: s.commit, LogTerm: s.term, Commit: s.commit + 1,
				Entries: []raftpb.Entry{confChangeEntry(s.commit+1, s.term, []byte{0xff, 0xff, 0xff})}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"append at an index that overflows", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Term: s.term, Index: 1<<64 - 1, LogTerm: s.term,
				Entries: []raftpb.Entry{{Index: 0, Term: s.term}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"forwarded read without its context entry", func(s *hostileSetup) crafted {
			return crafted{s.leader, s.follower, msgBatch(0, &raftpb.Message{Type: raftpb.MsgReadIndex, From: s.follower, To: s.leader})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"storage responses inside a peer message", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(0, &raftpb.Message{Type: raftpb.MsgHeartbeat, From: s.leader, To: s.follower, Term: s.term,
				Responses: []raftpb.Message{{Type: raftpb.MsgStorageApplyResp, Entries: []raftpb.Entry{{Index: 1 << 30}}}}})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"coalesced heartbeat at term 0", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 0, Commit: s.commit}}}}
		}, func(st raftmux.Stats) uint64 { return st.RefusedMalformed }},
		{"ack of entries never sent", func(s *hostileSetup) crafted {
			return crafted{s.leader, s.follower, msgBatch(0, &raftpb.Message{Type: raftpb.MsgAppResp, From: s.follower, To: s.leader, Term: s.term, Index: 1 << 40})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedBeyondLog }},
		{"vote request from outside the group", func(s *hostileSetup) crafted {
			return crafted{s.follower, 42, msgBatch(0, &raftpb.Message{Type: raftpb.MsgVote, From: 42, To: s.follower, Term: s.term + 5, Index: 1 << 30, LogTerm: s.term + 5})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedNonMember }},
		{"heartbeat response from outside the group", func(s *hostileSetup) crafted {
			return crafted{s.leader, 42, &raftmux.RaftBatch{HeartbeatResponses: []raftmux.Heartbeat{{Shard: 0, Term: s.term, Flags: raftmux.FlagWake}}}}
		}, func(st raftmux.Stats) uint64 { return st.RefusedNonMember }},
		{"old leader's append from outside the group", func(s *hostileSetup) crafted {
			return crafted{s.follower, 42, msgBatch(0, &raftpb.Message{Type: raftpb.MsgApp, From: 42, To: s.follower, Term: s.term - 1, Index: s.commit, LogTerm: s.term - 1})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedNonMember }},
		{"leader's heartbeat from outside the group at a term that has a leader", func(s *hostileSetup) crafted {
			return crafted{s.follower, 42, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 0, Term: s.term, Commit: s.commit}}}}
		}, func(st raftmux.Stats) uint64 { return st.RefusedNonMember }},
		{"append for a shard not placed here", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, msgBatch(7, &raftpb.Message{Type: raftpb.MsgApp, From: s.leader, To: s.follower, Term: 3})}
		}, func(st raftmux.Stats) uint64 { return st.RefusedUnplaced }},
		{"heartbeat for a shard not placed here", func(s *hostileSetup) crafted {
			return crafted{s.follower, s.leader, &raftmux.RaftBatch{Heartbeats: []raftmux.Heartbeat{{Shard: 7, Term: 3, Commit: 1 << 40}}}}
		}, func(st raftmux.Stats) uint64 { return st.RefusedUnplaced }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHostileSetup(t, func(cfg *raftmux.Config) {
				cfg.AcceptReplica = func(shard, _ uint64) bool { return shard == 0 }
			})
			cr := tc.craft(s)
			h := s.c.hosts[cr.to]
			before := tc.counter(h.Stats())
			h.Deliver(cr.from, cr.batch)
			s.c.waitFor("the refusal to be counted", 10*time.Second, func() bool { return tc.counter(h.Stats()) > before })
			s.survives(t)
			if inf := s.c.infos()[cr.to]; len(inf) != 1 {
				t.Fatalf("host %d hosts %d replicas after the crafted input, want 1", cr.to, len(inf))
			}
		})
	}
}

// TestSnapshotInputIsBoundedAndChecked streams crafted snapshots to a
// follower: a stream for a shard it would not host, one whose data does
// not decode, one whose configuration leaves it out; none is buffered for
// long, none reaches raft, and the follower keeps its state.
func TestSnapshotInputIsBoundedAndChecked(t *testing.T) {
	snapMsg := func(s *hostileSetup, cs raftpb.ConfState) *raftpb.Message {
		return &raftpb.Message{Type: raftpb.MsgSnap, From: s.leader, To: s.follower, Term: s.term,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: s.commit + 1000, Term: s.term, ConfState: cs}}}
	}
	for _, tc := range []struct {
		name    string
		chunk   func(s *hostileSetup) *raftmux.SnapshotChunk
		counter func(raftmux.Stats) uint64
	}{
		{"stream for a shard not placed here", func(s *hostileSetup) *raftmux.SnapshotChunk {
			m := snapMsg(s, raftpb.ConfState{Voters: []uint64{1, 2, 3}})
			return &raftmux.SnapshotChunk{Shard: 9, ID: 1, Msg: m, Data: make([]byte, 1<<10)}
		}, func(st raftmux.Stats) uint64 { return st.RefusedUnplaced }},
		{"continuation chunk of no stream", func(s *hostileSetup) *raftmux.SnapshotChunk {
			return &raftmux.SnapshotChunk{Shard: 11, ID: 1, Seq: 3, Data: make([]byte, 1<<10)}
		}, func(st raftmux.Stats) uint64 { return st.RefusedUnplaced }},
		{"data that does not decode", func(s *hostileSetup) *raftmux.SnapshotChunk {
			m := snapMsg(s, raftpb.ConfState{Voters: []uint64{1, 2, 3}})
			return &raftmux.SnapshotChunk{Shard: 0, ID: 1, Last: true, Msg: m, Data: []byte("\xffnot a snapshot")}
		}, func(st raftmux.Stats) uint64 { return st.RefusedSnapshots }},
		{"configuration that leaves the receiver out", func(s *hostileSetup) *raftmux.SnapshotChunk {
			m := snapMsg(s, raftpb.ConfState{Voters: []uint64{s.leader}})
			return &raftmux.SnapshotChunk{Shard: 0, ID: 1, Last: true, Msg: m}
		}, func(st raftmux.Stats) uint64 { return st.RefusedSnapshots }},
		{"configuration raft cannot restore", func(s *hostileSetup) *raftmux.SnapshotChunk {
			m := snapMsg(s, raftpb.ConfState{Voters: []uint64{1, 2, 3}, Learners: []uint64{1}})
			return &raftmux.SnapshotChunk{Shard: 0, ID: 1, Last: true, Msg: m}
		}, func(st raftmux.Stats) uint64 { return st.RefusedSnapshots }},
		{"metadata term past the message's", func(s *hostileSetup) *raftmux.SnapshotChunk {
			m := snapMsg(s, raftpb.ConfState{Voters: []uint64{1, 2, 3}})
			m.Snapshot.Metadata.Term = s.term + 1
			return &raftmux.SnapshotChunk{Shard: 0, ID: 1, Last: true, Msg: m}
		}, func(st raftmux.Stats) uint64 { return st.RefusedSnapshots }},
		{"chunk larger than two chunk sizes", func(s *hostileSetup) *raftmux.SnapshotChunk {
			m := snapMsg(s, raftpb.ConfState{Voters: []uint64{1, 2, 3}})
			return &raftmux.SnapshotChunk{Shard: 0, ID: 1, Msg: m, Data: make([]byte, 1<<20)}
		}, func(st raftmux.Stats) uint64 { return st.RefusedSnapshots }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newHostileSetup(t, func(cfg *raftmux.Config) {
				cfg.AcceptReplica = func(shard, _ uint64) bool { return shard == 0 }
				cfg.SnapshotChunkSize = 64 << 10
			})
			h := s.c.hosts[s.follower]
			kvBase, kvLog := s.c.kvs[s.follower].Log(0)
			before := tc.counter(h.Stats())
			h.DeliverSnapshotChunk(s.leader, tc.chunk(s))
			s.c.waitFor("the refusal to be counted", 10*time.Second, func() bool { return tc.counter(h.Stats()) > before })
			if b := h.Stats().SnapshotBytes; b != 0 {
				t.Fatalf("%d bytes still buffered for a refused stream", b)
			}
			s.survives(t)
			base, log := s.c.kvs[s.follower].Log(0)
			if base != kvBase || len(log) < len(kvLog) {
				t.Fatalf("follower state replaced: base %d→%d, %d→%d commands", kvBase, base, len(kvLog), len(log))
			}
			if inf := s.c.infos()[s.follower]; len(inf) != 1 {
				t.Fatalf("follower hosts %d replicas, want 1", len(inf))
			}
		})
	}
}

// TestIncomingSnapshotsShareOneBudget opens streams for many shards at
// once: what they buffer together stays within MaxSnapshotBufferBytes,
// the rest is refused, and streams that stop sending are dropped after
// SnapshotIdleTicks, freeing their share.
func TestIncomingSnapshotsShareOneBudget(t *testing.T) {
	const budget = 1 << 20
	const chunk = 200 << 10
	s := newHostileSetup(t, func(cfg *raftmux.Config) {
		cfg.MaxSnapshotBufferBytes = budget
		cfg.SnapshotChunkSize = chunk
		// Long enough (0.5 s) that no stream is dropped as idle while
		// the 20 are still being delivered on a loaded machine: a drop
		// then frees budget for a later stream, and the sum below never
		// reaches 20 chunks.
		cfg.SnapshotIdleTicks = 50
	})
	h := s.c.hosts[s.follower]
	for shard := uint64(100); shard < 120; shard++ {
		m := &raftpb.Message{Type: raftpb.MsgSnap, From: s.leader, To: s.follower, Term: s.term,
			Snapshot: &raftpb.Snapshot{Metadata: raftpb.SnapshotMetadata{Index: 50, Term: s.term, ConfState: raftpb.ConfState{Voters: []uint64{1, 2, 3}}}}}
		h.DeliverSnapshotChunk(s.leader, &raftmux.SnapshotChunk{Shard: shard, ID: shard, Msg: m, Data: make([]byte, chunk)})
	}
	s.c.waitFor("every stream to be taken or refused", 10*time.Second, func() bool {
		st := h.Stats()
		return st.SnapshotBytes+int64(st.RefusedSnapshots)*chunk >= 20*chunk
	})
	if st := h.Stats(); st.SnapshotBytes > budget || st.RefusedSnapshots == 0 {
		t.Fatalf("%d bytes buffered (budget %d), %d streams refused", st.SnapshotBytes, budget, st.RefusedSnapshots)
	}
	s.c.waitFor("idle streams to be dropped", 10*time.Second, func() bool { return h.Stats().SnapshotBytes == 0 })
	s.survives(t)
}

// poisonSM is the test KV, except that a command starting with "poison"
// fails to apply, after writing to the batch; halted hears the shards
// whose replica halted (raftmux.HaltObserver).
type poisonSM struct {
	*raftmuxtest.KV
	halted chan uint64
}

func (p poisonSM) Halted(shard uint64) {
	if p.halted != nil {
		p.halted <- shard
	}
}

var errPoison = errors.New("poisoned command")

func (p poisonSM) Apply(shard uint64, cmds []raftmux.Command, b raftmux.Batch) error {
	for i := range cmds {
		b.Put(shard, []byte("seen"), cmds[i].Data)
		if bytes.HasPrefix(cmds[i].Data, []byte("poison")) {
			return errPoison
		}
	}
	return p.KV.Apply(shard, cmds, b)
}

// TestApplyFailureHaltsTheReplicaBelowTheEntry makes the state machine
// fail on one committed entry: the replica halts with one error, its
// proposer gets the failure, later requests get ErrHalted, the host's
// other shards go on, and the applied index on disk stays below the entry
// with none of its writes (the store is reopened to check), on each
// storage path.
func TestApplyFailureHaltsTheReplicaBelowTheEntry(t *testing.T) {
	for _, mode := range []struct {
		name string
		tune func(*raftmux.Config)
	}{
		{"sync", func(*raftmux.Config) {}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			quiet := slog.New(slog.DiscardHandler)
			st, err := shardstore.Open(dir, shardstore.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			haltedSeen := make(chan uint64, 4)
			cfg := raftmux.Config{
				NodeID:       1,
				Storage:      pebbleStorage{st},
				Transport:    raftmuxtest.NewNetwork().Endpoint(1),
				StateMachine: poisonSM{raftmuxtest.NewKV(nil, false), haltedSeen},
				Workers:      2,
				TickInterval: testTick,
				Logger:       quiet,
			}
			mode.tune(&cfg)
			h, err := raftmux.NewHost(cfg)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			for _, shard := range []uint64{0, 1} {
				if err := h.Bootstrap(ctx, shard, []uint64{1}); err != nil {
					t.Fatal(err)
				}
				if err := h.Campaign(ctx, shard); err != nil {
					t.Fatal(err)
				}
			}
			propose := func(shard uint64, cmd string) (uint64, error) {
				for {
					res, err := h.Propose(ctx, shard, []byte(cmd))
					if errors.Is(err, raftmux.ErrNotLeader) {
						time.Sleep(5 * time.Millisecond)
						continue
					}
					if err != nil {
						return 0, err
					}
					return res.(uint64), nil
				}
			}
			good, err := propose(0, "good")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := propose(0, "poison"); !errors.Is(err, errPoison) {
				t.Fatalf("poisoned proposal: err = %v, want the apply failure", err)
			}
			halted := h.Halted()
			if len(halted) != 1 || halted[0].Shard != 0 || halted[0].Index <= good || !errors.Is(&halted[0], errPoison) {
				t.Fatalf("Halted() = %v, want shard 0 past index %d", halted, good)
			}
			select {
			case shard := <-haltedSeen:
				if shard != 0 {
					t.Fatalf("the state machine heard shard %d halt, want 0", shard)
				}
			default:
				t.Fatal("the state machine was not told that the replica halted")
			}
			if _, err := h.Propose(ctx, 0, []byte("later")); !errors.Is(err, raftmux.ErrHalted) {
				t.Fatalf("proposal to a halted replica: err = %v, want ErrHalted", err)
			}
			if _, err := propose(1, "other shard"); err != nil {
				t.Fatalf("the host's other shard stopped: %v", err)
			}
			infos, err := h.Shards(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range infos {
				if in.Halted != (in.Shard == 0) {
					t.Fatalf("Info %+v: halted shards should be exactly shard 0", in)
				}
				if in.Shard == 0 && in.Applied >= halted[0].Index {
					t.Fatalf("halted replica applied %d, at or past the failed entry %d", in.Applied, halted[0].Index)
				}
			}
			if n := h.Stats().HaltedReplicas; n != 1 {
				t.Fatalf("Stats.HaltedReplicas = %d, want 1", n)
			}
			h.Stop()
			if err := h.Err(); err != nil {
				t.Fatalf("the host itself halted: %v", err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}

			st, err = shardstore.Open(dir, shardstore.Config{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			applied, err := st.Applied(0)
			if err != nil {
				t.Fatal(err)
			}
			if applied < good || applied >= halted[0].Index {
				t.Fatalf("durable applied index %d, want in [%d, %d)", applied, good, halted[0].Index)
			}
			v, err := st.Get(0, []byte("seen"))
			if err != nil || string(v) != "good" {
				t.Fatalf("stored write of the last applied command = %q (%v), want %q: the failed apply's writes were kept", v, err, "good")
			}
		})
	}
}

// TestAReplicaOutOfItsVotersDoesNotVote asks a learner to vote, from a
// member of its group, at a later term and with a log ahead of everyone's:
// it refuses, and its term stays. A replica out of its group's voters (a
// learner, or a removed replica not yet destroyed) that voted could make
// leader a candidate going by an older configuration than the group's,
// for a term the group's voters gave another leader.
func TestAReplicaOutOfItsVotersDoesNotVote(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	c := newCluster(t, 4, func(cfg *raftmux.Config) { cfg.Logger = quiet })
	c.bootstrap(1, []uint64{1, 2, 3})
	lead := c.waitLeaders([]uint64{0}, 10*time.Second)[0]
	if _, err := c.propose(0, []byte("before")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.hosts[lead].AddLearner(ctx, 0, 4); err != nil {
		t.Fatal(err)
	}
	c.waitFor("the learner to be filled", 10*time.Second, func() bool { return c.stores[4].Len(0) >= 1 })
	voter := lead%3 + 1
	term := c.infos()[4][0].Term
	h := c.hosts[4]
	before := h.Stats().RefusedNonVoter
	for _, typ := range []raftpb.MessageType{raftpb.MsgPreVote, raftpb.MsgVote} {
		h.Deliver(voter, msgBatch(0, &raftpb.Message{Type: typ, From: voter, To: 4, Term: term + 5, Index: 1 << 30, LogTerm: term + 5}))
	}
	c.waitFor("both requests refused", 10*time.Second, func() bool { return h.Stats().RefusedNonVoter >= before+2 })
	if got := c.infos()[4][0].Term; got != term {
		t.Fatalf("the learner's term went from %d to %d on a vote request", term, got)
	}
}
