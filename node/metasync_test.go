package node

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/node/metasync"
	"github.com/shoalmq/shoal/wire"
)

// A node that was born but has not synced its cluster metadata answers
// client requests Unavailable with a retry hint; it still answers status.
func TestUnsyncedNodeAnswersUnavailable(t *testing.T) {
	cfg := nodeConfig("n1", t.TempDir(), nil, 1)
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	n.birth.MarkBorn()
	for _, req := range []struct {
		kind    wire.Kind
		payload []byte
	}{
		{wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}})},
		{wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte("t")})},
	} {
		kind, out := handleNow(n, req.kind, req.payload)
		var e wire.Error
		if kind != wire.KindError || wire.DecodeError(out, &e) != nil || e.Code != wire.CodeUnavailable || e.RetryAfter <= 0 {
			t.Fatalf("%v before sync: %v %+v", req.kind, kind, e)
		}
	}
	n.birth.MarkReady()
	kind, _ := handleNow(n, wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}}))
	var e wire.Error
	if kind != wire.KindError {
		t.Fatalf("produce after sync: %v", kind)
	}
	_, out := handleNow(n, wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte("t"), Epoch: 1, Records: [][]byte{{1}}}))
	if wire.DecodeError(out, &e) != nil || e.Code != wire.CodeNotLeaderForTopic {
		t.Fatalf("produce after sync: %+v, want NotLeaderForTopic", e)
	}
}

// Nodes born together converge on the same membership, ring and
// shard-leader versions, and converge again after a node joins.
func TestMetadataVersionsConverge(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	agree := func(size int) metasync.Versions {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			vs := make([]metasync.Versions, len(c.nodes))
			same := true
			for i, n := range c.nodes {
				vs[i] = n.MetadataVersions()
				same = same && vs[i] == vs[0] && len(n.view.Load().Live) == size
			}
			if same && vs[0].Membership > 0 && vs[0].Ring > 0 && vs[0].ShardLeaders > 0 {
				return vs[0]
			}
			if time.Now().After(deadline) {
				t.Fatalf("versions never agreed: %+v", vs)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	before := agree(3)
	for _, n := range c.nodes {
		if n.Stats().MetadataSyncs == 0 {
			t.Fatalf("%s never merged a push", n.ID())
		}
	}
	c.add("n4")
	after := agree(4)
	if after.Membership <= before.Membership || after.Ring <= before.Ring {
		t.Fatalf("versions did not rise with a join: %+v then %+v", before, after)
	}
}
