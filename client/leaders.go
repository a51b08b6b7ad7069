package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// Routing by shard leader. Any node serves a metadata request, forwarding
// it to the shard's leader when it is not the leader itself: one more hop,
// and CPU on two nodes, for most requests in a cluster of many nodes. The
// client therefore pulls a node's shard-leader table (ShardLeaders) and
// sends Assign, Revoke, UpdatePartition and Lookup straight to the leader
// it names; the seeds stay the fallback. The table is a hint, kept in step
// three ways: pulled again every Config.LeaderTableRefresh while requests
// use it, an entry replaced by the leader a NotLeader answer names, and
// pulled again (at most every minLeaderPullGap) when the node it names
// fails to serve.

// minLeaderPullGap bounds how often a failure makes the client pull the
// table again: a leader that moved is learnt within it, and a cluster in
// trouble is not asked for its table at every failed request.
const minLeaderPullGap = 500 * time.Millisecond

// leaderPullTimeout bounds one pull of the table.
const leaderPullTimeout = 5 * time.Second

// maxAvoided bounds the leaders the client avoids at once; beyond it the
// oldest is forgotten.
const maxAvoided = 64

// leaderTable is the client's copy of a node's shard-leader table.
type leaderTable struct {
	// shards bounds the ids of the live shards; smap places keys (the
	// shards split since the cluster's birth are learnt from the shards
	// that have leaders: a shard exists only once its parent split).
	shards uint32
	smap   *router.ShardMap
	// addrs[s] is the client address of shard s's leader; nil or "" when
	// not known. An entry is replaced on its own by a NotLeader hint.
	addrs []atomic.Pointer[string]
}

// leaderTableOf builds the client's table from a node's answer.
func leaderTableOf(m *wire.LeaderTable) *leaderTable {
	t := &leaderTable{shards: uint32(m.Shards), addrs: make([]atomic.Pointer[string], m.Shards)}
	if m.Base > 0 {
		t.smap, _ = router.NewShardMap(uint32(m.Base))
	}
	addrs := make([]*string, len(m.Nodes))
	for i := range m.Nodes {
		if a := string(m.Nodes[i].Addr); ValidateAddr(a) == nil {
			addrs[i] = &a
		}
	}
	for s, l := range m.Leaders {
		if l > 0 {
			t.addrs[s].Store(addrs[l-1])
			if t.smap != nil {
				t.smap, _ = t.smap.Including(uint32(s))
			}
		}
	}
	if t.smap == nil {
		t.shards = 0 // no shard: every request goes to the seeds
	}
	return t
}

// leaderAddr returns the address of topic's shard leader in the table, ""
// when the client has no table or the table no leader for the shard. It
// starts a pull when the table is due one.
// The shard is -1 when there is no table.
func (c *Client) leaderAddr(topic []byte) (addr string, shard int64) {
	if c.cfg.LeaderTableRefresh < 0 {
		return "", -1
	}
	c.maybePullLeaders(c.cfg.LeaderTableRefresh)
	t := c.leaders.Load()
	if t == nil || t.shards == 0 {
		return "", -1
	}
	s := t.smap.Of(topic)
	if s >= t.shards {
		return "", int64(s)
	}
	if p := t.addrs[s].Load(); p != nil && !c.avoided(*p) {
		return *p, int64(s)
	}
	return "", int64(s)
}

// avoidLeader makes leaderAddr skip addr for Config.LeaderTableRefresh: a
// leader that could not be reached (down, or cut off) would otherwise cost
// every request routed to it a failed attempt, a dial timeout when cut
// off, until a table without it arrives.
func (c *Client) avoidLeader(addr string) {
	until := time.Now().Add(c.cfg.LeaderTableRefresh).UnixNano()
	c.avoidMu.Lock()
	defer c.avoidMu.Unlock()
	if c.avoid == nil {
		c.avoid = make(map[string]int64)
	}
	if _, ok := c.avoid[addr]; !ok && len(c.avoid) >= maxAvoided {
		var oldest string
		for a, u := range c.avoid {
			if oldest == "" || u < c.avoid[oldest] {
				oldest = a
			}
		}
		delete(c.avoid, oldest)
	}
	c.avoid[addr] = until
	c.avoidN.Store(int32(len(c.avoid)))
}

// avoided reports whether leaderAddr skips addr now.
func (c *Client) avoided(addr string) bool {
	if c.avoidN.Load() == 0 {
		return false
	}
	c.avoidMu.Lock()
	defer c.avoidMu.Unlock()
	until, ok := c.avoid[addr]
	if ok && time.Now().UnixNano() >= until {
		delete(c.avoid, addr)
		c.avoidN.Store(int32(len(c.avoid)))
		return false
	}
	return ok
}

// shardOf returns the shard of topic: by the shard map of the leader
// table (pulled if the client has none), or as a cluster that never split
// places it among shards.
func (c *Client) shardOf(ctx context.Context, topic []byte, shards uint32) uint64 {
	if c.leaders.Load() == nil {
		_ = c.pullLeaders(ctx)
	}
	if t := c.leaders.Load(); t != nil && t.smap != nil {
		return uint64(t.smap.Of(topic))
	}
	return uint64(router.ShardOf(topic, shards))
}

// shardSpace returns the shard space of the cluster, by the leader table
// (pulled if the client has none); 0 when no node told it.
func (c *Client) shardSpace(ctx context.Context) router.ShardSpace {
	if c.leaders.Load() == nil {
		_ = c.pullLeaders(ctx)
	}
	if t := c.leaders.Load(); t != nil && t.smap != nil {
		return t.smap.Space()
	}
	return 0
}

// learnLeader replaces shard's entry with the leader a NotLeader answer
// named.
func (c *Client) learnLeader(shard uint64, addr string) {
	if t := c.leaders.Load(); t != nil && shard < uint64(t.shards) {
		t.addrs[shard].Store(&addr)
	}
}

// maybePullLeaders starts a pull of the table in the background unless
// one runs or one started less than gap ago.
func (c *Client) maybePullLeaders(gap time.Duration) {
	now := time.Now().UnixNano()
	last := c.leadersPulledAt.Load()
	if last != 0 && now-last < int64(gap) {
		return
	}
	if !c.leadersPulling.CompareAndSwap(false, true) {
		return
	}
	c.leadersPulledAt.Store(now)
	c.pool.mu.Lock()
	closed := c.pool.closed
	if !closed {
		c.pool.readers.Add(1)
	}
	c.pool.mu.Unlock()
	if closed {
		c.leadersPulling.Store(false)
		return
	}
	go func() {
		defer c.pool.readers.Done()
		defer c.leadersPulling.Store(false)
		ctx, cancel := context.WithTimeout(c.pool.closing, leaderPullTimeout)
		defer cancel()
		if err := c.pullLeaders(ctx); err != nil {
			c.log.Debug("client: shard-leader table not pulled; metadata requests go to the seeds", "err", err)
		}
	}()
}

// pullLeaders asks a seed for its shard-leader table and installs it.
func (c *Client) pullLeaders(ctx context.Context) error {
	var m wire.LeaderTable
	req := &request{kind: wire.KindShardLeaders, expect: wire.KindLeaderTable, decode: func(b []byte) error {
		return wire.DecodeLeaderTableAnswer(b, &m)
	}}
	n := len(c.cfg.Servers)
	seed := int(c.seed.Load())
	var last error
	// Each seed once, without waiting: a pull is a hint's refresh, and the
	// next one is never far.
	for i := range n {
		last = c.attempt(ctx, c.cfg.Servers[(seed+i)%n], req)
		if last == nil {
			if m.Shards > wire.MaxLeaderTableShards {
				return fmt.Errorf("client: a table of %d shards: %w", m.Shards, ErrProtocol)
			}
			c.leaders.Store(leaderTableOf(&m))
			return nil
		}
		if classify(last) == fatal || ctx.Err() != nil {
			break
		}
	}
	return last
}
