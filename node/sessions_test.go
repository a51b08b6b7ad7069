package node

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// sessionWrite runs one write through n's request path and decodes its
// answer: the assignment's (or revoke's) epoch and owner, or the error.
func sessionWrite(t *testing.T, n *Node, kind wire.Kind, payload []byte) (epoch uint64, owner string, e *wire.Error) {
	t.Helper()
	k, out := handleNow(n, kind, payload)
	switch k {
	case wire.KindAssignment:
		var a wire.Assignment
		if err := wire.DecodeAssignment(out, &a); err != nil {
			t.Fatal(err)
		}
		return a.Epoch, string(a.Owner), nil
	case wire.KindRevoked:
		var r wire.Revoked
		if err := wire.DecodeRevoked(out, &r); err != nil {
			t.Fatal(err)
		}
		return r.Epoch, "", nil
	case wire.KindError:
		e = new(wire.Error)
		if err := wire.DecodeError(out, e); err != nil {
			t.Fatal(err)
		}
		return 0, "", e
	}
	t.Fatalf("answer of kind %v", k)
	return 0, "", nil
}

// mustWrite is sessionWrite that fails the test on an error answer. A
// node without a leader for the shard yet, or one that lost it, answers
// Unavailable or NotLeader: the same request is sent again, as a client
// would, which its session makes safe.
func mustWrite(t *testing.T, n *Node, kind wire.Kind, payload []byte) (uint64, string) {
	t.Helper()
	for try := 0; ; try++ {
		epoch, owner, e := sessionWrite(t, n, kind, payload)
		if e == nil {
			return epoch, owner
		}
		if (e.Code != wire.CodeUnavailable && e.Code != wire.CodeNotLeader) || try == 50 {
			t.Fatalf("%v: %s: %s", kind, e.Code, e.Message)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A revoke sent again with its session and sequence (its first answer
// lost), after the topic was assigned anew, answers the first revoke's
// epoch and leaves the new assignment alone; sent through another node,
// which forwards it, the same.
func TestRetriedRevokeAppliesOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	n1, n2 := c.nodes[0], c.nodes[1]
	topic := []byte("retried-revoke")
	alice := wire.Session{ID: 0xa11ce, Seq: 1}
	mustWrite(t, n1, wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: topic, Owner: []byte("n1"), Partitions: 4, Session: alice}))
	revoke := wire.AppendRevoke(nil, &wire.Revoke{Topic: topic, Session: wire.Session{ID: 0xa11ce, Seq: 2, Floor: 1}})
	first, _ := mustWrite(t, n1, wire.KindRevoke, revoke)
	bob := wire.Session{ID: 0xb0b, Seq: 1}
	reassigned, owner := mustWrite(t, n2, wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: topic, Owner: []byte("n3"), Partitions: 2, Session: bob}))
	if reassigned <= first || owner != "n3" {
		t.Fatalf("assigned again at %d to %s after the revoke at %d", reassigned, owner, first)
	}
	for _, n := range c.nodes {
		if again, _ := mustWrite(t, n, wire.KindRevoke, revoke); again != first {
			t.Fatalf("retried revoke through %s answered epoch %d, the first %d", n.ID(), again, first)
		}
	}
	epoch, owner := mustWrite(t, n1, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: topic, Linearizable: true}))
	if epoch != reassigned || owner != "n3" {
		t.Fatalf("after the retries the topic is at %d with %s, want %d with n3", epoch, owner, reassigned)
	}
}

// An assign that names no owner, sent again after the topic was revoked,
// answers its first assignment instead of assigning the topic again.
func TestRetriedAssignWithoutOwnerAppliesOnce(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	n1, n3 := c.nodes[0], c.nodes[2]
	topic := []byte("retried-assign")
	assign := wire.AppendAssign(nil, &wire.Assign{Topic: topic, Session: wire.Session{ID: 0xa11ce, Seq: 7, Floor: 6}})
	epoch, owner := mustWrite(t, n1, wire.KindAssign, assign)
	mustWrite(t, n3, wire.KindRevoke, wire.AppendRevoke(nil, &wire.Revoke{Topic: topic, Session: wire.Session{ID: 0xb0b, Seq: 1}}))
	again, againOwner := mustWrite(t, n3, wire.KindAssign, assign)
	if again != epoch || againOwner != owner {
		t.Fatalf("retry answered %s@%d, the first %s@%d", againOwner, again, owner, epoch)
	}
	if _, _, e := sessionWrite(t, n1, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: topic, Linearizable: true})); e == nil || e.Code != wire.CodeNotFound {
		t.Fatalf("the retry assigned the revoked topic again: %+v", e)
	}
	// Once the client's floor passes it, a copy is refused, not applied.
	stale := wire.AppendAssign(nil, &wire.Assign{Topic: topic, Session: wire.Session{ID: 0xa11ce, Seq: 7, Floor: 6}})
	next := wire.AppendUpdatePartition(nil, &wire.UpdatePartition{Topic: topic, Partitions: 2, Session: wire.Session{ID: 0xa11ce, Seq: 9, Floor: 8}})
	if _, _, e := sessionWrite(t, n1, wire.KindUpdatePartition, next); e == nil || e.Code != wire.CodeNotFound {
		t.Fatalf("update of a revoked topic: %+v", e)
	}
	if _, _, e := sessionWrite(t, n1, wire.KindAssign, stale); e == nil || e.Code != wire.CodeSessionExpired {
		t.Fatalf("a write below its session's floor: %+v", e)
	}
}
