package raftmuxtest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/raftmux"
)

// Hosts is what a multi-host test sees of its cluster, whatever carries its
// traffic and stores its logs: the running hosts and their KV state
// machines. The stand-in tests (raftmux) and the real-parts tests (raftio)
// both observe their clusters through it.
type Hosts struct {
	TB testing.TB
	// IDs lists the running hosts in ascending order.
	IDs func() []uint64
	// Host returns a running host, or nil.
	Host func(id uint64) *raftmux.Host
	// KV returns the state machine of a host (running or not).
	KV func(id uint64) *KV
}

// Infos returns every running host's view of every shard it hosts.
func (c Hosts) Infos() map[uint64]map[uint64]raftmux.Info {
	c.TB.Helper()
	out := make(map[uint64]map[uint64]raftmux.Info)
	for _, id := range c.IDs() {
		h := c.Host(id)
		if h == nil {
			continue
		}
		inf, err := h.Shards(context.Background())
		if err != nil {
			c.TB.Fatal(err)
		}
		m := make(map[uint64]raftmux.Info, len(inf))
		for _, i := range inf {
			m[i.Shard] = i
		}
		out[id] = m
	}
	return out
}

// Leaders returns, for each shard in shards, the running host that claims
// to lead it and whose claim every running replica agrees with; ok is false
// while some shard has none.
func (c Hosts) Leaders(shards []uint64) (map[uint64]uint64, bool) {
	inf := c.Infos()
	out := make(map[uint64]uint64)
	for _, s := range shards {
		var lead uint64
		for id, m := range inf {
			if i, ok := m[s]; ok && i.Leader == id {
				lead = id
			}
		}
		if lead == 0 {
			return out, false
		}
		for _, m := range inf {
			if i, ok := m[s]; ok && i.Leader != lead {
				return out, false
			}
		}
		out[s] = lead
	}
	return out, true
}

// WaitLeaders waits until every shard in shards has an agreed leader.
func (c Hosts) WaitLeaders(shards []uint64, timeout time.Duration) map[uint64]uint64 {
	c.TB.Helper()
	deadline := time.Now().Add(timeout)
	for {
		l, ok := c.Leaders(shards)
		if ok {
			return l
		}
		if time.Now().After(deadline) {
			c.TB.Fatalf("only %d of %d shards have an agreed leader after %v", len(l), len(shards), timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitFor polls cond until it holds, failing tb after timeout.
func WaitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Propose sends cmd to shard's leader, following NotLeader hints and
// trying the others in turn, until it commits, fails for good or timeout
// passes. It returns the index the KV state machine applied it at, or the
// error it refused it with.
func (c Hosts) Propose(shard uint64, cmd []byte, timeout time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	target := uint64(0)
	for i := 0; ; i++ {
		ids := c.IDs()
		if len(ids) == 0 {
			return 0, errors.New("propose: no host running")
		}
		h := c.Host(target)
		if h == nil {
			target = ids[i%len(ids)]
			continue
		}
		res, err := h.Propose(ctx, shard, cmd)
		if err == nil {
			if e, ok := res.(error); ok {
				return 0, e // the state machine refused it
			}
			return res.(uint64), nil
		}
		var nl *raftmux.NotLeaderError
		switch {
		case errors.As(err, &nl) && nl.Leader != 0 && c.Host(nl.Leader) != nil && !errors.Is(err, raftmux.ErrOutcomeUnknown):
			target = nl.Leader
		case errors.Is(err, raftmux.ErrNotLeader), errors.Is(err, raftmux.ErrDropped), errors.Is(err, raftmux.ErrUnknownShard), errors.Is(err, raftmux.ErrBusy):
			target = ids[i%len(ids)]
			time.Sleep(5 * time.Millisecond)
		default:
			return 0, err
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("propose shard %d: %w", shard, ctx.Err())
		}
	}
}

// CheckSameLogs verifies that every running replica of each shard applied
// the same commands at the same indexes (over the indexes both applied),
// each in increasing index order after its snapshot base.
func (c Hosts) CheckSameLogs(shards []uint64) {
	c.TB.Helper()
	for _, s := range shards {
		var ref map[uint64]string
		var refID uint64
		for _, id := range c.IDs() {
			base, log := c.KV(id).Log(s)
			m := make(map[uint64]string, len(log))
			prev := base
			for _, a := range log {
				if a.Index <= prev {
					c.TB.Fatalf("shard %d host %d: index %d applied after %d", s, id, a.Index, prev)
				}
				prev = a.Index
				m[a.Index] = a.Data
			}
			if ref == nil {
				ref, refID = m, id
				continue
			}
			for idx, d := range m {
				if rd, ok := ref[idx]; ok && rd != d {
					c.TB.Fatalf("shard %d index %d: host %d applied %q, host %d applied %q", s, idx, refID, rd, id, d)
				}
			}
		}
	}
}

// Quiesced reports whether every running replica of shard sleeps.
func (c Hosts) Quiesced(shard uint64) bool {
	for _, m := range c.Infos() {
		if i, ok := m[shard]; !ok || !i.Quiesced {
			return false
		}
	}
	return true
}

// ShardList returns shards 0..n-1.
func ShardList(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i)
	}
	return out
}
