package serve

import (
	"testing"

	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// A shard that split answers nothing from its state, which no longer
// changes: a lookup at its leader is Unavailable with a short retry hint,
// and a plain lookup is not answered from its replica. Once the node's
// table knows a child's leader, the topic's requests go to the child.
func TestASplitShardAnswersNothing(t *testing.T) {
	s, env := newTestServer(t)
	topic := []byte("orders")
	shard := s.leaders.Map().Of(topic)
	st := meta.New()
	var res meta.Result
	if err := st.Apply(&meta.Command{Op: meta.OpAssign, Topic: topic, Owner: "n2"}, &res); err != nil {
		t.Fatal(err)
	}
	env.states[uint64(shard)] = st
	env.led[shard] = true
	env.alive["n2"] = true
	lookup := wire.AppendLookup(nil, &wire.Lookup{Topic: topic})
	var got []Answer
	done := func(a Answer) { got = append(got, a) }
	s.Meta(wire.KindLookup, lookup, 0, done)
	if len(got) != 1 || got[0].Kind != wire.KindAssignment {
		t.Fatalf("before the split: %+v", got)
	}
	s.routes.Invalidate(topic, 99)
	if err := st.Apply(&meta.Command{Op: meta.OpSplit, Shard: uint64(shard)}, &res); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.LocalLookup(topic); ok {
		t.Fatal("a plain lookup answered from a split shard's replica")
	}
	s.Meta(wire.KindLookup, lookup, 0, done)
	if len(got) != 2 || !got[1].Is(wire.CodeUnavailable) || got[1].Err.RetryAfter != splitRetry {
		t.Fatalf("at the split shard's leader: %+v", got[1])
	}
	low, high, _ := router.ShardSpace(8).Children(shard)
	child := low
	if router.ShardSpace(8).Holds(high, router.KeyHash(topic)) {
		child = high
	}
	env.addrs["n3"] = "10.0.0.3:7000"
	if _, err := s.leaders.Update(child, "n3", 1); err != nil {
		t.Fatal(err)
	}
	s.Meta(wire.KindLookup, lookup, 0, done)
	if len(env.sent) != 1 || env.sent[0].to != "n3" {
		t.Fatalf("after the child's leader is known: sent %+v", env.sent)
	}
}
