package meta

import (
	"bytes"
	"fmt"

	"github.com/shoalmq/shoal/internal/invariants"
)

// The state's invariants. Builds with invariants (the invariants tag, or
// -race) check them on every Apply and panic with an invariants.Violation
// when one breaks; other builds compile none of it.
//
// After each Apply:
//   - the epoch floor and the clock never go back;
//   - no topic the command names goes back in epoch (a topic with no record
//     stands at the floor), and no record the command names disappears;
//   - a command that failed, was replayed, or reports no change left every
//     topic it names as it was, and the counts with them;
//   - Changed is set exactly when there are Changes or compacted tombstones,
//     and each Change describes the record of a topic the command names as
//     it is now;
//   - each Open effect names the topic's owner at its epoch and partition
//     count, and each Close the topic's previous owner at its epoch (a
//     revoke's on a tombstone);
//   - the active count moves by the assigns minus the revokes;
//   - the session the command wrote keeps its bounds.
//
// And every so often, amortized over the applies (invariants.Amortized), the
// whole state is recomputed from its records (checkInvariants): keys,
// counts, owner index and digests, sessions.

// applyCheck is what Apply's checks compare against.
type applyCheck struct {
	full   invariants.Amortized
	floor  uint64
	clock  uint64
	active int
	named  []namedTopic
}

// namedTopic is a topic a command names, as it was before the command.
type namedTopic struct {
	topic      []byte
	exists     bool
	epoch      uint64 // the record's, or the floor when there is none
	owner      string
	partitions uint32
	state      TopicState
}

// before records what after compares against.
func (ck *applyCheck) before(s *State, c *Command) {
	ck.floor, ck.clock, ck.active = s.floor, s.clock, s.active
	clear(ck.named)
	ck.named = ck.named[:0]
	name := func(topic []byte) {
		n := namedTopic{topic: topic, epoch: s.floor}
		if r := s.topics[string(topic)]; r != nil {
			n = namedTopic{topic: topic, exists: true, epoch: r.epoch, owner: r.owner, partitions: r.partitions, state: r.state}
		}
		ck.named = append(ck.named, n)
	}
	switch c.Op {
	case OpAssign, OpRevoke, OpUpdatePartition:
		name(c.Topic)
	case OpReassignNode:
		for i := range c.Moves {
			name(c.Moves[i].Topic)
		}
	}
}

// after checks the state and res once c applied with err, and panics on a
// violation.
func (ck *applyCheck) after(s *State, c *Command, res *Result, err error) {
	if ierr := ck.check(s, c, res, err); ierr != nil {
		invariants.Failf("meta: after %s: %w", c.Op, ierr)
	}
	if ck.full.Due(len(s.topics) + len(s.owners) + len(s.sessions)) {
		if ierr := s.checkInvariants(); ierr != nil {
			invariants.Failf("meta: after %s: %w", c.Op, ierr)
		}
	}
	clear(ck.named)
	ck.named = ck.named[:0]
}

func (ck *applyCheck) check(s *State, c *Command, res *Result, err error) error {
	switch {
	case s.floor < ck.floor:
		return fmt.Errorf("epoch floor went back from %d to %d", ck.floor, s.floor)
	case s.clock < ck.clock:
		return fmt.Errorf("clock went back from %d to %d", ck.clock, s.clock)
	}
	unchanged := err != nil || res.Replayed || !res.Changed
	if unchanged && (res.Changed || len(res.Changes) > 0 || len(res.Effects) > 0 || res.Compacted > 0 || res.Moved > 0) {
		return fmt.Errorf("a command that failed (%v) or was replayed (%v) reports changes: changed %v, %d changes, %d effects, %d compacted, %d moved",
			err, res.Replayed, res.Changed, len(res.Changes), len(res.Effects), res.Compacted, res.Moved)
	}
	if err == nil && res.Changed != (len(res.Changes) > 0 || res.Compacted > 0 || res.Split) {
		return fmt.Errorf("changed is %v with %d changes, %d compacted, split %v", res.Changed, len(res.Changes), res.Compacted, res.Split)
	}
	if res.Split != (err == nil && c.Op == OpSplit) || (res.Split && !s.split) {
		return fmt.Errorf("split %v by %s (err %v), state split %v", res.Split, c.Op, err, s.split)
	}
	if unchanged && (s.active != ck.active || s.floor != ck.floor) {
		return fmt.Errorf("unchanged, yet active %d→%d, floor %d→%d", ck.active, s.active, ck.floor, s.floor)
	}
	for i := range ck.named {
		n := &ck.named[i]
		r := s.topics[string(n.topic)]
		epoch := s.floor
		if r != nil {
			epoch = r.epoch
		}
		switch {
		case n.exists && r == nil:
			return fmt.Errorf("%q lost its record", n.topic)
		case epoch < n.epoch:
			return fmt.Errorf("%q went back from epoch %d to %d", n.topic, n.epoch, epoch)
		case unchanged && (n.exists != (r != nil) || (r != nil && (r.epoch != n.epoch || r.owner != n.owner || r.partitions != n.partitions || r.state != n.state))):
			return fmt.Errorf("%q changed by a command that changed nothing", n.topic)
		}
		if r != nil {
			if err := r.check(); err != nil {
				return err
			}
		}
	}
	delta := 0
	for i := range res.Changes {
		ch := &res.Changes[i]
		if !ck.names(ch.Topic) {
			return fmt.Errorf("change of %q, which the command does not name", ch.Topic)
		}
		r := s.topics[ch.Topic]
		if r == nil || r.epoch != ch.Epoch || r.owner != ch.Owner || r.partitions != ch.Partitions || (r.state == Revoked) != (ch.Kind == ChangeRevoked) {
			return fmt.Errorf("change %+v does not describe its record %+v", *ch, r)
		}
		switch ch.Kind {
		case ChangeAssigned:
			delta++
		case ChangeRevoked:
			delta--
		}
	}
	if s.active != ck.active+delta {
		return fmt.Errorf("active count %d→%d, the changes give %+d", ck.active, s.active, delta)
	}
	for i := range res.Effects {
		e := &res.Effects[i]
		r := s.topics[e.Topic]
		switch {
		case r == nil:
			return fmt.Errorf("effect %+v on a topic with no record", *e)
		case e.Kind == EffectOpen && !(r.state == Active && r.owner == e.Node && r.epoch == e.Epoch && r.partitions == e.Partitions):
			return fmt.Errorf("open %+v, but the record is %+v", *e, r.assignment())
		case e.Kind == EffectClose && !(r.owner != e.Node && r.prev == e.Node && r.epoch == e.Epoch && e.Revoked == (r.state == Revoked)):
			return fmt.Errorf("close %+v, but the record is %+v", *e, r.assignment())
		case e.Kind != EffectOpen && e.Kind != EffectClose:
			return fmt.Errorf("effect of kind %v", e.Kind)
		}
	}
	if c.Session.ID != 0 && c.Op.takesSession() {
		if ss := s.sessions[c.Session.ID]; ss != nil {
			if err := s.checkSession(c.Session.ID, ss); err != nil {
				return err
			}
		} else if err == nil {
			return fmt.Errorf("session %x applied a write and is gone", c.Session.ID)
		}
	}
	return nil
}

// names reports whether the command checked names topic.
func (ck *applyCheck) names(topic string) bool {
	for i := range ck.named {
		if bytes.Equal(ck.named[i].topic, []byte(topic)) {
			return true
		}
	}
	return false
}

// check reports a record that breaks the bounds of its state.
func (r *record) check() error {
	switch {
	case r.epoch == 0:
		return fmt.Errorf("meta: %q at epoch 0", r.topic)
	case r.state == Active:
		if r.owner == "" || r.partitions == 0 || r.partitions > MaxPartitions || r.prev == r.owner {
			return fmt.Errorf("meta: active %q has owner %q (previous %q), %d partitions", r.topic, r.owner, r.prev, r.partitions)
		}
	case r.state == Revoked:
		if r.owner != "" || r.partitions != 0 {
			return fmt.Errorf("meta: revoked %q keeps owner %q, %d partitions", r.topic, r.owner, r.partitions)
		}
	default:
		return fmt.Errorf("meta: %q in state %d", r.topic, r.state)
	}
	return nil
}

// checkInvariants recomputes every derived count from the records and
// reports the first disagreement. Apply runs it every so often in builds
// with invariants; tests call it after every step.
func (s *State) checkInvariants() error {
	if len(s.order) != len(s.topics) {
		return fmt.Errorf("meta: %d keys for %d records", len(s.order), len(s.topics))
	}
	active, names := 0, 0
	owned := make(map[string]int)
	for _, o := range s.order {
		k := o.topic
		names += len(k)
		r := s.topics[k]
		switch {
		case r == nil:
			return fmt.Errorf("meta: key %q has no record", k)
		case r != o:
			return fmt.Errorf("meta: key %q holds another record than its map's", k)
		}
		if err := r.check(); err != nil {
			return err
		}
		if r.state == Active {
			active++
			owned[r.owner]++
		}
	}
	if active != s.active {
		return fmt.Errorf("meta: %d active records, count says %d", active, s.active)
	}
	if names != s.names {
		return fmt.Errorf("meta: records' names sum to %d bytes, count says %d", names, s.names)
	}
	for id, n := range owned {
		if st := s.owners[id]; st == nil || st.topics != n || st.id != id {
			return fmt.Errorf("meta: owner %q has %d topics, index disagrees", id, n)
		}
	}
	digests := make(map[string]uint64)
	for _, r := range s.topics {
		if r.state == Active {
			digests[r.owner] ^= TopicDigest(r.topic, r.epoch)
		}
	}
	for id, st := range s.owners {
		if st.digest != digests[id] {
			return fmt.Errorf("meta: digest of %q is %x, its topics give %x", id, st.digest, digests[id])
		}
	}
	for id, st := range s.owners {
		if st.topics != owned[id] {
			return fmt.Errorf("meta: index gives %q %d topics, it owns %d", id, st.topics, owned[id])
		}
	}
	return s.checkSessions()
}

// checkSessions reports the first session that breaks its bounds.
func (s *State) checkSessions() error {
	if len(s.sessions) > MaxSessions {
		return fmt.Errorf("meta: %d sessions, at most %d", len(s.sessions), MaxSessions)
	}
	for id, ss := range s.sessions {
		if err := s.checkSession(id, ss); err != nil {
			return err
		}
	}
	return nil
}

// checkSession reports how session ss, kept under id, breaks its bounds.
func (s *State) checkSession(id uint64, ss *session) error {
	switch {
	case id == 0 || ss.id != id:
		return fmt.Errorf("meta: session %x holds %x", id, ss.id)
	case len(ss.answers) > MaxSessionAnswers:
		return fmt.Errorf("meta: session %x keeps %d answers", id, len(ss.answers))
	case ss.last > s.clock:
		return fmt.Errorf("meta: session %x last wrote at %d, after the clock %d", id, ss.last, s.clock)
	}
	for i, a := range ss.answers {
		if a.seq <= ss.floor || a.seq <= ss.dropped || (i > 0 && a.seq <= ss.answers[i-1].seq) {
			return fmt.Errorf("meta: session %x keeps answer %d (floor %d, dropped %d) out of order", id, a.seq, ss.floor, ss.dropped)
		}
		if a.code >= errCodeEnd || (a.code == errNone && a.state != Active && a.state != Revoked) {
			return fmt.Errorf("meta: session %x keeps answer %d with code %d, state %d", id, a.seq, a.code, a.state)
		}
	}
	return nil
}
