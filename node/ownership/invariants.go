package ownership

import (
	"fmt"
	"slices"
	"time"

	"github.com/shoalmq/shoal/internal/invariants"
	"github.com/shoalmq/shoal/internal/mutant"
	"github.com/shoalmq/shoal/meta"
	"github.com/shoalmq/shoal/wire"
)

// The Holder's invariants. Builds with invariants (the invariants tag, or
// -race) check them as the Holder runs and panic with an
// invariants.Violation when one breaks; other builds compile none of it.
//
// On each message:
//   - an Open never lowers the epoch a topic is held at, nor its partition
//     count at that epoch; one it takes leaves the topic held at the open's
//     epoch, above the floor; one it refuses changes nothing;
//   - a Close leaves the topic held at no epoch at or below the close's,
//     and answers a floor at or above it;
//   - a grant never replaces a shard's lease by an older one, nor by one
//     that runs out sooner; rounds are built in time order.
//
// And every so often, amortized over the calls (invariants.Amortized), the
// whole Holder (checkInvariants): every held topic is held in exactly one
// shard, at one epoch, with a positive epoch and partition count; each
// shard's digest is the digest of what it holds; a shard holding nothing
// is marked empty; no shard's lease went back since the last such check.

// holderCheck is what the checks compare against.
type holderCheck struct {
	full      invariants.Amortized
	lastRound time.Time
	// leases: each shard's lease when the whole Holder was last checked.
	leases map[uint64]lease
}

// heldNow returns how topic is held (nil: not held), as a copy.
func (h *Holder) heldNow(topic []byte) *Topic {
	if t := h.topics[string(topic)]; t != nil {
		c := t.Topic
		return &c
	}
	return nil
}

func (h *Holder) afterOpen(pre *Topic, m *wire.OpenTopic, floor uint64, st wire.TopicStatus, changes []Change) {
	if err := h.checkOpen(pre, m, floor, st, changes); err != nil {
		invariants.Failf("ownership: open of %q at epoch %d (term %d, floor %d): %w", m.Topic, m.Epoch, m.Term, floor, err)
	}
	h.inv.after(h, "open")
}

func (h *Holder) checkOpen(pre *Topic, m *wire.OpenTopic, floor uint64, st wire.TopicStatus, changes []Change) error {
	post := h.heldNow(m.Topic)
	switch {
	case pre != nil && post == nil:
		return fmt.Errorf("dropped the topic held at epoch %d", pre.Epoch)
	case pre != nil && post.Epoch < pre.Epoch:
		return fmt.Errorf("lowered the held epoch from %d to %d", pre.Epoch, post.Epoch)
	case pre != nil && post.Epoch == pre.Epoch && post.Partitions < pre.Partitions:
		return fmt.Errorf("lowered the partitions at epoch %d from %d to %d", pre.Epoch, pre.Partitions, post.Partitions)
	case st != wire.TopicDone && (len(changes) > 0 || !sameHeld(pre, post)):
		return fmt.Errorf("refused (status %d), yet changed the holding from %+v to %+v", st, pre, post)
	case len(changes) > 1:
		return fmt.Errorf("%d changes", len(changes))
	}
	if len(changes) == 1 {
		c := changes[0]
		switch {
		case post == nil || post.Epoch != m.Epoch || c.Held != *post || !c.Put || c.Drop:
			return fmt.Errorf("change %+v, topic now held as %+v", c, post)
		case post.Epoch <= floor && !mutant.On(mutant.EpochFloor):
			return fmt.Errorf("held at epoch %d, at or below the floor", post.Epoch)
		case c.Floor != 0 && (pre == nil || c.Floor != pre.Epoch || c.Floor >= post.Epoch):
			return fmt.Errorf("raises the floor to %d, held before as %+v", c.Floor, pre)
		}
	}
	return nil
}

func (h *Holder) afterClose(pre *Topic, m *wire.CloseTopic, st wire.TopicStatus, floor uint64, changes []Change) {
	if err := h.checkClose(pre, m, st, floor, changes); err != nil {
		invariants.Failf("ownership: close of %q at epoch %d (term %d): %w", m.Topic, m.Epoch, m.Term, err)
	}
	h.inv.after(h, "close")
}

func (h *Holder) checkClose(pre *Topic, m *wire.CloseTopic, st wire.TopicStatus, floor uint64, changes []Change) error {
	post := h.heldNow(m.Topic)
	if st != wire.TopicDone {
		if len(changes) > 0 || !sameHeld(pre, post) {
			return fmt.Errorf("refused (status %d), yet changed the holding from %+v to %+v", st, pre, post)
		}
		return nil
	}
	switch {
	case post != nil && post.Epoch <= m.Epoch:
		return fmt.Errorf("still held at epoch %d", post.Epoch)
	case floor < m.Epoch:
		return fmt.Errorf("answers floor %d", floor)
	case !sameHeld(post, pre) && post != nil:
		return fmt.Errorf("changed the holding from %+v to %+v", pre, post)
	}
	dropped := pre != nil && post == nil
	if dropped != (len(changes) == 1 && changes[0].Drop) {
		return fmt.Errorf("dropped %v, changes %+v", dropped, changes)
	}
	return nil
}

func sameHeld(a, b *Topic) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// checkRenewal checks that lease next may replace prev, a shard's current
// lease: it is not older, and does not run out sooner.
func checkRenewal(prev, next *lease) {
	switch {
	case next.seq < prev.seq:
		invariants.Failf("ownership: the lease of round %d replaced by that of older round %d", prev.seq, next.seq)
	case next.expires.Before(prev.expires):
		invariants.Failf("ownership: the lease of round %d, to %v, replaced by that of round %d, to %v, which runs out sooner",
			prev.seq, prev.expires, next.seq, next.expires)
	}
}

// roundAt checks that a round built at now is not built before the last.
func (ck *holderCheck) roundAt(now time.Time) {
	if now.Before(ck.lastRound) {
		invariants.Failf("ownership: a round built at %v, before the last one, at %v", now, ck.lastRound)
	}
	ck.lastRound = now
}

// after runs the whole check when it is due.
func (ck *holderCheck) after(h *Holder, what string) {
	if !ck.full.Due(len(h.topics) + len(h.shards)) {
		return
	}
	if err := h.checkInvariants(); err != nil {
		invariants.Failf("ownership: after %s: %w", what, err)
	}
}

// checkInvariants checks the whole Holder and reports the first
// violation.
func (h *Holder) checkInvariants() error {
	n := 0
	for s, st := range h.shards {
		var digest uint64
		for topic := range st.topics {
			t := h.topics[topic]
			if t == nil {
				return fmt.Errorf("shard %d lists %q, which is not held", s, topic)
			}
			if t.Shard != s {
				return fmt.Errorf("shard %d lists %q, held in shard %d", s, topic, t.Shard)
			}
			digest ^= meta.TopicDigest(topic, t.Epoch)
		}
		n += len(st.topics)
		if digest != st.digest {
			return fmt.Errorf("shard %d: digest %x, its topics give %x", s, st.digest, digest)
		}
		if _, empty := h.empty[s]; len(st.topics) == 0 && !empty {
			return fmt.Errorf("shard %d holds nothing and is not marked empty", s)
		}
		if g := st.group; g != nil {
			if !slices.ContainsFunc(g.shards, func(e askedShard) bool { return e.shard == s }) {
				return fmt.Errorf("shard %d is in a group that does not list it", s)
			}
		}
	}
	if n != len(h.topics) {
		return fmt.Errorf("%d topics held, the shards list %d", len(h.topics), n)
	}
	for topic, t := range h.topics {
		switch {
		case t.Epoch == 0 || t.Partitions == 0:
			return fmt.Errorf("%q held as %+v", topic, t.Topic)
		case t.since > h.seq:
			return fmt.Errorf("%q held since round %d, after the last round %d", topic, t.since, h.seq)
		}
	}
	for s := range h.empty {
		if h.shards[s] == nil {
			return fmt.Errorf("shard %d marked empty, and gone", s)
		}
	}
	if h.order != nil && !slices.Equal(h.order, sortedShards(h)) {
		return fmt.Errorf("shard order %v is stale", h.order)
	}
	for seq := range h.pending {
		if seq > h.seq {
			return fmt.Errorf("round %d pending, after the last round %d", seq, h.seq)
		}
	}
	if h.inv.leases == nil {
		h.inv.leases = make(map[uint64]lease)
	}
	for s, st := range h.shards {
		cur := st.current()
		if prev, ok := h.inv.leases[s]; ok && (cur.seq < prev.seq || cur.expires.Before(prev.expires)) {
			return fmt.Errorf("shard %d: lease went back from round %d to %v, to round %d to %v", s, prev.seq, prev.expires, cur.seq, cur.expires)
		}
	}
	clear(h.inv.leases)
	for s, st := range h.shards {
		h.inv.leases[s] = lease{seq: st.current().seq, expires: st.current().expires}
	}
	return nil
}

func sortedShards(h *Holder) []uint64 {
	out := make([]uint64, 0, len(h.shards))
	for s := range h.shards {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
