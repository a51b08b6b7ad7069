package node

import (
	"fmt"
	"sync"
	"testing"
	"time"

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
	n.takeOwnershipMsgs(ownershipMsg{open: open, closeMsg: closeMsg, done: func(ack wire.TopicAck, ok bool) { res <- result{ack, ok} }})
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
	n.leadMu.Lock()
	term = n.replicaLead[shard].term
	n.leadMu.Unlock()
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
	n.takeOwnershipMsgs(
		// The close of epoch 3 overtakes the open of epoch 2, in one batch.
		ownershipMsg{closeMsg: &wire.CloseTopic{Topic: []byte("batched-a"), Epoch: 3, Shard: shard, Term: term}, done: collect("batched-a", 3, 0)},
		ownershipMsg{open: &wire.OpenTopic{Topic: []byte("batched-a"), Epoch: 2, Partitions: 1, Shard: shard, Term: term}, done: collect("batched-a", 3, 0)},
		ownershipMsg{open: &wire.OpenTopic{Topic: []byte("batched-b"), Epoch: 1, Partitions: 2, Shard: shard, Term: term}, done: collect("batched-b", 0, 1)},
		ownershipMsg{open: &wire.OpenTopic{Topic: []byte("batched-a"), Epoch: 4, Partitions: 1, Shard: shard, Term: term}, done: collect("batched-a", 3, 4)},
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

// The ownership loop writes one batch at most and hands the messages
// waiting after it to a goroutine of its own, which writes them all.
func TestOwnershipLoopHandsTheQueueOn(t *testing.T) {
	n, shard, term := ownerOfShard9(t)
	const total = maxOwnershipBatch + 45
	var mu sync.Mutex
	acked := 0
	var bad []string
	msg := func(i int) ownershipMsg {
		topic := fmt.Sprintf("handed-%d", i)
		return ownershipMsg{open: &wire.OpenTopic{Topic: []byte(topic), Epoch: 1, Partitions: 1, Shard: shard, Term: term},
			done: func(a wire.TopicAck, ok bool) {
				mu.Lock()
				defer mu.Unlock()
				acked++
				if !ok || a.Status != wire.TopicDone {
					bad = append(bad, topic)
				}
			}}
	}
	// Messages already waiting, as if left by goroutines that found a
	// batch under way, and the loop's own.
	n.ownQ.mu.Lock()
	for i := range total - 1 {
		n.ownQ.waiting = append(n.ownQ.waiting, msg(i))
	}
	n.ownQ.mu.Unlock()
	n.queueOwnership(false, []ownershipMsg{msg(total - 1)})
	mu.Lock()
	first := acked
	mu.Unlock()
	if first < maxOwnershipBatch {
		t.Fatalf("%d acked when the loop returned, want its batch of %d", first, maxOwnershipBatch)
	}
	waitUntil(t, 20*time.Second, "every message acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return acked == total
	})
	if len(bad) > 0 {
		t.Fatalf("not taken: %v", bad)
	}
}

// A copy of an ownership message still waiting to be written (a leader's
// resend while this node is behind) is dropped without an ack; the first
// copy's ack answers for both. Once it is written, a later copy (its ack
// lost) is taken again.
func TestCopyOfAWaitingOwnershipMessageIsDropped(t *testing.T) {
	n, shard, term := ownerOfShard9(t)
	q := &n.ownQ
	q.mu.Lock()
	q.busy = true // a batch under way: what comes now waits
	q.mu.Unlock()
	var got []string
	open := &wire.OpenTopic{Topic: []byte("copied"), Epoch: 1, Partitions: 1, Shard: shard, Term: term}
	msg := func(name string) ownershipMsg {
		return ownershipMsg{open: open, from: "n1", reqID: 5, done: func(a wire.TopicAck, ok bool) {
			got = append(got, fmt.Sprintf("%s %v %v", name, ok, a.Status))
		}}
	}
	dups := n.counters.ownershipDups.Load()
	n.takeOwnershipMsgs(msg("first"))
	n.takeOwnershipMsgs(msg("copy"))
	if len(got) != 1 || got[0] != "copy false 0" {
		t.Fatalf("while the first waits: %q, want the copy dropped unacknowledged", got)
	}
	if d := n.counters.ownershipDups.Load() - dups; d != 1 {
		t.Fatalf("%d copies counted, want 1", d)
	}
	q.mu.Lock()
	n.writeOwnershipQueue(true) // the batch under way ends; this writes the queue
	want := fmt.Sprintf("first true %v", wire.TopicDone)
	if len(got) != 2 || got[1] != want {
		t.Fatalf("after the queue was written: %q, want the first acknowledged (%s)", got, want)
	}
	n.takeOwnershipMsgs(msg("again"))
	if len(got) != 3 || got[2] != fmt.Sprintf("again true %v", wire.TopicDone) {
		t.Fatalf("a copy after the first was written: %q, want it taken", got)
	}
}
