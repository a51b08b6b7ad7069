package raftmux_test

import (
	"fmt"
	"log/slog"
	"reflect"
	"testing"

	"github.com/shoalmq/shoal/raftmux"
	"github.com/shoalmq/shoal/raftmux/raftmuxtest"
)

// manualRun drives three Manual hosts from this goroutine alone: it
// bootstraps two shards, elects host 1, proposes commands to it, and
// returns what happened, in order, for comparing runs.
func manualRun(t *testing.T) []string {
	t.Helper()
	net := raftmuxtest.NewNetwork()
	var log []string
	hosts := map[uint64]*raftmux.Host{}
	kvs := map[uint64]*raftmuxtest.KV{}
	for id := uint64(1); id <= 3; id++ {
		st, err := raftmuxtest.NewMemStore("")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		kvs[id] = raftmuxtest.NewKV(st, true)
		h, err := raftmux.NewHost(raftmux.Config{
			NodeID: id, Storage: st, Transport: net.Endpoint(id), StateMachine: kvs[id],
			Manual: true, Seed: id << 40, Logger: slog.New(slog.DiscardHandler),
			OnLeaderChange: func(c raftmux.LeaderChange) {
				log = append(log, fmt.Sprintf("host %d: shard %d leader %d term %d", id, c.Shard, c.Leader, c.Term))
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(h.Stop)
		net.Register(id, h)
		hosts[id] = h
	}
	settle := func() {
		for moved := true; moved; {
			moved = false
			for id := uint64(1); id <= 3; id++ {
				moved = hosts[id].Step() || moved
			}
		}
	}
	// until ticks the clock (settling between ticks) until cond holds.
	until := func(what string, cond func() bool) {
		for range 1000 {
			settle()
			if cond() {
				return
			}
			for id := uint64(1); id <= 3; id++ {
				hosts[id].Tick()
			}
		}
		t.Fatalf("never: %s", what)
	}
	for id := uint64(1); id <= 3; id++ {
		for shard := uint64(0); shard < 2; shard++ {
			hosts[id].Submit(raftmux.Op{Kind: raftmux.OpBootstrap, Shard: shard, Voters: []uint64{1, 2, 3}}, func(r raftmux.Result) {
				if r.Err != nil {
					t.Errorf("bootstrap: %v", r.Err)
				}
			})
		}
	}
	settle()
	campaigned := false
	hosts[1].Submit(raftmux.Op{Kind: raftmux.OpCampaign, Shard: 0}, func(r raftmux.Result) { campaigned = r.Err == nil })
	leads := func() bool {
		var st []raftmux.Info
		hosts[1].Submit(raftmux.Op{Kind: raftmux.OpShards}, func(r raftmux.Result) { st, _ = r.Value.([]raftmux.Info) })
		settle()
		for _, in := range st {
			if in.Shard == 0 {
				return in.Leader == 1
			}
		}
		return false
	}
	until("host 1 leads shard 0", func() bool { return campaigned && leads() })
	done := 0
	for i := range 10 {
		hosts[1].Submit(raftmux.Op{Kind: raftmux.OpPropose, Shard: 0, Data: fmt.Appendf(nil, "cmd-%02d", i)}, func(r raftmux.Result) {
			if r.Err != nil {
				t.Errorf("propose %d: %v", i, r.Err)
			}
			log = append(log, fmt.Sprintf("proposal %d applied at %v", i, r.Value))
			done++
		})
	}
	until("every proposal applied", func() bool { return done == 10 })
	until("every replica applied them", func() bool {
		for _, kv := range kvs {
			if _, l := kv.Log(0); len(l) < 10 {
				return false
			}
		}
		return true
	})
	_, want := kvs[1].Log(0)
	for id, kv := range kvs {
		if _, got := kv.Log(0); !reflect.DeepEqual(got, want) {
			t.Fatalf("host %d applied %v, host 1 %v", id, got, want)
		}
	}
	return log
}

func TestManualHostsRunOnTheCallersGoroutineAndRepeat(t *testing.T) {
	first := manualRun(t)
	if len(first) < 10 {
		t.Fatalf("too little happened: %v", first)
	}
	if second := manualRun(t); !reflect.DeepEqual(first, second) {
		t.Fatalf("two runs differ:\n%v\n%v", first, second)
	}
}
