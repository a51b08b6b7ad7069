package node

import (
	"fmt"
	"sync"
	"testing"

	"github.com/shoalmq/shoal/node/lease"
	"github.com/shoalmq/shoal/shardstore"
	"github.com/shoalmq/shoal/wire"
)

// takeOwnership takes one OpenTopic or CloseTopic as if from a shard
// leader and returns its ack (ok false: none would be sent), once the
// batch it was written in is durable.
func (n *Node) takeOwnership(open *wire.OpenTopic, closeMsg *wire.CloseTopic) (wire.TopicAck, bool) {
	type result struct {
		ack wire.TopicAck
		ok  bool
	}
	res := make(chan result, 1)
	n.lease.Take(lease.Message{Open: open, Close: closeMsg, Done: func(ack wire.TopicAck, ok bool) { res <- result{ack, ok} }})
	r := <-res
	return r.ack, r.ok
}

// ownedInStore reads topic's owned record from n's store.
func ownedInStore(t *testing.T, n *Node, topic string) (shardstore.OwnedTopic, bool) {
	t.Helper()
	var got shardstore.OwnedTopic
	var found bool
	if err := n.store.OwnedTopics(func(tp string, o shardstore.OwnedTopic) bool {
		if tp == topic {
			got, found = o, true
			return false
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return got, found
}

// ownerOfShard9 starts a 3-node cluster and returns n2, which the tests
// hand ownership messages for shard 9, and the term of that shard's leader
// as n2's replica knows it.
func ownerOfShard9(t *testing.T) (n *Node, shard, term uint64) {
	c := startCluster(t, 3)
	n, shard = c.node("n2"), 9
	_, term = n.lease.ReplicaLead(shard)
	return n, shard, term
}

// Ownership messages taken together are applied in their order, a close
// setting the floor an open after it in the same batch finds, and each is
// acknowledged only once the batch is written.
func TestOwnershipBatchKeepsOrderAndFloors(t *testing.T) {
	n, shard, term := ownerOfShard9(t)
	var acks []wire.TopicAck
	var oks []bool
	var written []bool
	// collect records an ack and whether, when it came, the store held
	// what its message did: topic's floor at least floor, or topic owned
	// at least at epoch.
	collect := func(topic string, floor, epoch uint64) func(wire.TopicAck, bool) {
		return func(a wire.TopicAck, ok bool) {
			acks = append(acks, a)
			oks = append(oks, ok)
			f, err := n.store.TopicFloor(topic)
			if err != nil {
				t.Error(err)
			}
			o, found := ownedInStore(t, n, topic)
			// (A lease grant may have closed the topic since, raising
			// its floor to the epoch held.)
			written = append(written, f >= floor && (epoch == 0 || found && o.Epoch >= epoch || f >= epoch))
		}
	}
	n.lease.Take(
		// The close of epoch 3 overtakes the open of epoch 2, in one batch.
		lease.Message{Close: &wire.CloseTopic{Topic: []byte("batched-a"), Epoch: 3, Shard: shard, Term: term}, Done: collect("batched-a", 3, 0)},
		lease.Message{Open: &wire.OpenTopic{Topic: []byte("batched-a"), Epoch: 2, Partitions: 1, Shard: shard, Term: term}, Done: collect("batched-a", 3, 0)},
		lease.Message{Open: &wire.OpenTopic{Topic: []byte("batched-b"), Epoch: 1, Partitions: 2, Shard: shard, Term: term}, Done: collect("batched-b", 0, 1)},
		lease.Message{Open: &wire.OpenTopic{Topic: []byte("batched-a"), Epoch: 4, Partitions: 1, Shard: shard, Term: term}, Done: collect("batched-a", 3, 4)},
	)
	// Nothing else was taking messages: this call wrote the batch.
	want := []struct {
		st    wire.TopicStatus
		epoch uint64
	}{{wire.TopicDone, 3}, {wire.TopicBelowFloor, 0}, {wire.TopicDone, 1}, {wire.TopicDone, 4}}
	if len(acks) != len(want) {
		t.Fatalf("%d acks, want %d", len(acks), len(want))
	}
	for i, w := range want {
		if !oks[i] || acks[i].Status != w.st || (w.epoch != 0 && acks[i].Epoch != w.epoch) {
			t.Errorf("message %d: ack %+v ok %v, want status %v epoch %d", i, acks[i], oks[i], w.st, w.epoch)
		}
		if !written[i] {
			t.Errorf("message %d acknowledged before what it did was written", i)
		}
	}
}

// Opens arriving together from many goroutines are all taken, each
// acknowledged with its topic written. (What is held afterwards is not
// checked: the shard's state knows none of these topics, and the next
// lease grant that lists the owner's topics closes them.)
func TestConcurrentOpensAllTaken(t *testing.T) {
	n, shard, term := ownerOfShard9(t)
	const opens = 64
	var wg sync.WaitGroup
	errs := make(chan error, opens)
	for i := range opens {
		wg.Go(func() {
			topic := fmt.Sprintf("together-%d", i)
			ack, ok := n.takeOwnership(&wire.OpenTopic{Topic: []byte(topic), Epoch: 1, Partitions: 1, Shard: shard, Term: term}, nil)
			if !ok || ack.Status != wire.TopicDone || ack.Epoch != 1 {
				errs <- fmt.Errorf("%s: ack %+v ok %v", topic, ack, ok)
				return
			}
			// Owned in the store, or closed since by a lease grant,
			// which raised its floor to the epoch held.
			_, found := ownedInStore(t, n, topic)
			if f, err := n.store.TopicFloor(topic); err != nil || !found && f < 1 {
				errs <- fmt.Errorf("%s acknowledged before it was written (floor %d, %v)", topic, f, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
