//go:build invariants || race

package ownership

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/internal/invariants/invariantstest"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// holding returns a Holder of a@2 and b@1 in shard 3, granted at t0.
func holding(t *testing.T) *Holder {
	t.Helper()
	h := newHolder(t)
	open(h, "a", 3, 1, 2, 0)
	open(h, "b", 3, 1, 1, 0)
	agreed(h, t0, "L", 1)
	return h
}

// The whole-Holder checks, which every call runs every so often (on every
// call of a Holder this small), catch a Holder broken behind its back.
func TestHolderChecksItsWholeState(t *testing.T) {
	for _, tt := range []struct {
		name, want string
		breakIt    func(h *Holder)
	}{
		{"digest", "shard 3: digest", func(h *Holder) { h.shards[3].digest ^= 1 }},
		{"held in two shards", `shard 4 lists "a", held in shard 3`, func(h *Holder) {
			h.shard(4).topics["a"] = struct{}{}
		}},
		{"held in no shard", "3 topics held, the shards list 2", func(h *Holder) {
			delete(h.shards[3].topics, "b")
			h.shards[3].digest = digestOf(h, 3)
		}},
		{"listed, not held", `shard 3 lists "c", which is not held`, func(h *Holder) { h.shards[3].topics["c"] = struct{}{} }},
		{"epoch 0", `"a" held as`, func(h *Holder) { h.topics["a"].Epoch = 0; h.shards[3].digest = digestOf(h, 3) }},
		{"empty not marked", "shard 5 holds nothing and is not marked empty", func(h *Holder) {
			h.shard(5)
			delete(h.empty, 5)
		}},
		{"lease back", "shard 3: lease went back", func(h *Holder) {
			h.checkInvariants() // remember the leases
			h.shards[3].lease = lease{}
			h.shards[3].group = nil
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := holding(t)
			tt.breakIt(h)
			invariantstest.MustViolate(t, tt.want, func() { open(h, "z", 9, 1, 1, 0) })
		})
	}
}

// digestOf recomputes the digest of what shard holds.
func digestOf(h *Holder, shard uint64) uint64 {
	var d uint64
	for topic := range h.shards[shard].topics {
		d ^= meta.TopicDigest(topic, h.topics[topic].Epoch)
	}
	return d
}

// A faulty Open or Close: each case runs the message, breaks the Holder as
// a faulty handler would have, then runs the checks of that message.
func TestHolderChecksEachMessage(t *testing.T) {
	openMsg := func(topic string, epoch uint64) *wire.OpenTopic {
		return &wire.OpenTopic{Topic: []byte(topic), Shard: 3, Term: 1, Epoch: epoch, Partitions: 1}
	}
	t.Run("open lowers the epoch", func(t *testing.T) {
		h := holding(t)
		m := openMsg("a", 1) // older than the epoch held: changes nothing
		pre := h.heldNow(m.Topic)
		st, _, ch := h.Open(m, 0)
		h.hold("a", Topic{Epoch: 1, Partitions: 1, Shard: 3})
		invariantstest.MustViolate(t, "lowered the held epoch from 2 to 1", func() { h.afterOpen(pre, m, 0, st, ch) })
	})
	t.Run("open lowers the partitions", func(t *testing.T) {
		h := holding(t)
		m := openMsg("a", 2)
		pre := h.heldNow(m.Topic)
		h.topics["a"].Partitions = 4
		pre.Partitions = 4
		st, _, ch := h.Open(m, 0)
		h.topics["a"].Partitions = 1
		invariantstest.MustViolate(t, "lowered the partitions at epoch 2 from 4 to 1", func() { h.afterOpen(pre, m, 0, st, ch) })
	})
	t.Run("refused open changes the holding", func(t *testing.T) {
		h := holding(t)
		m := openMsg("c", 3)
		m.Term = 0 // a deposed leader's
		pre := h.heldNow(m.Topic)
		st, _, ch := h.Open(m, 0)
		h.hold("c", Topic{Epoch: 3, Partitions: 1, Shard: 3})
		invariantstest.MustViolate(t, "refused (status 1), yet changed", func() { h.afterOpen(pre, m, 0, st, ch) })
	})
	t.Run("open at the floor", func(t *testing.T) {
		h := holding(t)
		m := openMsg("c", 3)
		pre := h.heldNow(m.Topic)
		st, _, ch := h.Open(m, 0) // taken above floor 0; checked against floor 3
		invariantstest.MustViolate(t, "held at epoch 3, at or below the floor", func() { h.afterOpen(pre, m, 3, st, ch) })
	})
	t.Run("close leaves the topic held", func(t *testing.T) {
		h := holding(t)
		m := &wire.CloseTopic{Topic: []byte("a"), Shard: 3, Term: 1, Epoch: 2}
		pre := h.heldNow(m.Topic)
		st, f, ch := h.Close(m, 0)
		h.hold("a", Topic{Epoch: 2, Partitions: 1, Shard: 3})
		invariantstest.MustViolate(t, "still held at epoch 2", func() { h.afterClose(pre, m, st, f, ch) })
	})
	t.Run("close answers a low floor", func(t *testing.T) {
		h := holding(t)
		m := &wire.CloseTopic{Topic: []byte("a"), Shard: 3, Term: 1, Epoch: 2}
		pre := h.heldNow(m.Topic)
		st, _, ch := h.Close(m, 0)
		invariantstest.MustViolate(t, "answers floor 1", func() { h.afterClose(pre, m, st, 1, ch) })
	})
}

// A lease is never replaced by an older or shorter one, and rounds are
// built in time order (which keeps the leases from shortening).
func TestLeasesNeverGoBack(t *testing.T) {
	invariantstest.MustViolate(t, "replaced by that of older round 3", func() {
		checkRenewal(&lease{seq: 4, expires: t0}, &lease{seq: 3, expires: t0.Add(time.Second)})
	})
	invariantstest.MustViolate(t, "which runs out sooner", func() {
		checkRenewal(&lease{seq: 4, expires: t0.Add(time.Second)}, &lease{seq: 5, expires: t0})
	})
	h := holding(t)
	h.Round(t0.Add(time.Second), leaderIs("L"), 0)
	invariantstest.MustViolate(t, "before the last one", func() { h.Round(t0, leaderIs("L"), 0) })
}
