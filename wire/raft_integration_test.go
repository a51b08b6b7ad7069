package wire

import (
	"fmt"
	"strings"
	"testing"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
)

// TestRaftGroupOverRaftBatch runs a real three-node raft group whose every
// message crosses AppendRaftBatch/DecodeRaftBatch, each receiver decoding
// every round into the same RaftBatch and stepping raft with the decoded
// messages in place. All proposals must commit, in order, on every node:
// this is what breaks if a decode overwrote entries raft still holds.
func TestRaftGroupOverRaftBatch(t *testing.T) {
	const nodes = 3
	const proposals = 60
	type node struct {
		rn        *raft.RawNode
		st        *raft.MemoryStorage
		recv      RaftBatch
		committed []string
		reads     []string
	}
	var ns [nodes + 1]*node
	peers := []raft.Peer{{ID: 1}, {ID: 2}, {ID: 3}}
	for id := uint64(1); id <= nodes; id++ {
		st := raft.NewMemoryStorage()
		rn, err := raft.NewRawNode(&raft.Config{ID: id, ElectionTick: 10, HeartbeatTick: 1, Storage: st,
			MaxSizePerMsg: 4096, MaxInflightMsgs: 64, Logger: discardLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		if err := rn.Bootstrap(peers); err != nil {
			t.Fatal(err)
		}
		ns[id] = &node{rn: rn, st: st}
	}
	if err := ns[1].rn.Campaign(); err != nil {
		t.Fatal(err)
	}
	proposed := 0
	for round := 0; round < 2000; round++ {
		outbox := map[uint64]*RaftBatch{}
		for id := uint64(1); id <= nodes; id++ {
			n := ns[id]
			n.rn.Tick()
			if n.rn.Status().RaftState == raft.StateLeader && proposed < proposals {
				if err := n.rn.Propose([]byte(fmt.Sprintf("v%03d", proposed))); err == nil {
					proposed++
				}
			}
			// Follower reads go to the leader as MsgReadIndex, which raft
			// keeps pending until a heartbeat round confirms its lead.
			if id == 2 && round%10 == 5 {
				n.rn.ReadIndex([]byte(fmt.Sprintf("read%d", round)))
			}
			if !n.rn.HasReady() {
				continue
			}
			rd := n.rn.Ready()
			if !raft.IsEmptyHardState(rd.HardState) {
				if err := n.st.SetHardState(rd.HardState); err != nil {
					t.Fatal(err)
				}
			}
			for _, rs := range rd.ReadStates {
				n.reads = append(n.reads, string(rs.RequestCtx))
			}
			if err := n.st.Append(rd.Entries); err != nil {
				t.Fatal(err)
			}
			for _, e := range rd.CommittedEntries {
				switch e.Type {
				case raftpb.EntryNormal:
					if len(e.Data) > 0 {
						n.committed = append(n.committed, string(e.Data))
					}
				case raftpb.EntryConfChange:
					var cc raftpb.ConfChange
					if err := cc.Unmarshal(e.Data); err != nil {
						t.Fatal(err)
					}
					n.rn.ApplyConfChange(cc)
				}
			}
			for _, m := range rd.Messages {
				b := outbox[m.To]
				if b == nil {
					b = &RaftBatch{}
					outbox[m.To] = b
				}
				b.Messages = append(b.Messages, ShardMessage{Shard: 1, Msg: m})
			}
			n.rn.Advance(rd)
		}
		for to, b := range outbox {
			// A fresh frame buffer per round: decoded entry data aliases it
			// and raft keeps it until the entries are persisted.
			frame := AppendRaftBatch(nil, b)
			n := ns[to]
			if err := DecodeRaftBatch(frame, &n.recv); err != nil {
				t.Fatal(err)
			}
			// Raft takes messages by value but keeps their Entries slice
			// (its unstable log) and a MsgReadIndex whole (pending reads).
			for i := range n.recv.Messages {
				_ = n.rn.Step(n.recv.Messages[i].Msg)
			}
		}
		done := len(ns[2].reads) >= 3
		for id := uint64(1); id <= nodes; id++ {
			done = done && len(ns[id].committed) == proposals
		}
		if done {
			break
		}
	}
	if len(ns[2].reads) < 3 {
		t.Fatalf("follower reads served: %v", ns[2].reads)
	}
	for _, r := range ns[2].reads {
		if !strings.HasPrefix(r, "read") {
			t.Fatalf("read index context came back as %q", r)
		}
	}
	for id := uint64(1); id <= nodes; id++ {
		got := ns[id].committed
		if len(got) != proposals {
			t.Fatalf("node %d committed %d of %d proposals", id, len(got), proposals)
		}
		for i, v := range got {
			if v != fmt.Sprintf("v%03d", i) {
				t.Fatalf("node %d: entry %d is %q", id, i, v)
			}
		}
	}
}

// discardLogger keeps raft quiet in tests.
type discardLogger struct{}

func (discardLogger) Debug(...any)            {}
func (discardLogger) Debugf(string, ...any)   {}
func (discardLogger) Error(...any)            {}
func (discardLogger) Errorf(string, ...any)   {}
func (discardLogger) Info(...any)             {}
func (discardLogger) Infof(string, ...any)    {}
func (discardLogger) Warning(...any)          {}
func (discardLogger) Warningf(string, ...any) {}
func (discardLogger) Fatal(v ...any)          { panic(fmt.Sprint(v...)) }
func (discardLogger) Fatalf(f string, v ...any) {
	panic(fmt.Sprintf(f, v...))
}
func (discardLogger) Panic(v ...any)            { panic(fmt.Sprint(v...)) }
func (discardLogger) Panicf(f string, v ...any) { panic(fmt.Sprintf(f, v...)) }
