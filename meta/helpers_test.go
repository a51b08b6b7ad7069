package meta

import (
	"bytes"
	"testing"
)

// Command and effect constructors that keep the scenario tables readable.

func assign(topic, owner string, partitions uint32) Command {
	return Command{Op: OpAssign, Topic: []byte(topic), Owner: owner, Partitions: partitions}
}

func revoke(topic string) Command { return Command{Op: OpRevoke, Topic: []byte(topic)} }

func update(topic string, partitions uint32) Command {
	return Command{Op: OpUpdatePartition, Topic: []byte(topic), Partitions: partitions}
}

// reassign takes moves as topic, owner pairs.
func reassign(dead string, moves ...string) Command {
	c := Command{Op: OpReassignNode, Node: dead}
	for i := 0; i+1 < len(moves); i += 2 {
		c.Moves = append(c.Moves, Move{Topic: []byte(moves[i]), Owner: moves[i+1]})
	}
	return c
}

// reassignAt is a ReassignNode of one topic planned at epoch.
func reassignAt(dead, topic, owner string, epoch uint64) Command {
	return Command{Op: OpReassignNode, Node: dead, Moves: []Move{{Topic: []byte(topic), Owner: owner, Epoch: epoch}}}
}

func marker(seq uint64) Command { return Command{Op: OpMarker, Seq: seq} }

func compactCmd() Command { return Command{Op: OpCompact} }

// open is the Open effect of topic at epoch; at epoch 1 (a shard with no
// compacted tombstones) it is Fresh.
func open(node, topic string, epoch uint64, partitions uint32) Effect {
	return Effect{Kind: EffectOpen, Node: node, Topic: topic, Epoch: epoch, Partitions: partitions, Fresh: epoch == 1}
}

func closeFx(node, topic string, epoch uint64, partitions uint32) Effect {
	return Effect{Kind: EffectClose, Node: node, Topic: topic, Epoch: epoch, Partitions: partitions}
}

// revokeFx is the Close of a revoke.
func revokeFx(node, topic string, epoch uint64) Effect {
	return Effect{Kind: EffectClose, Node: node, Topic: topic, Epoch: epoch, Revoked: true}
}

// movedFrom sets the owner an Open's records come from.
func (e Effect) movedFrom(prev string) Effect {
	e.Prev = prev
	return e
}

func active(topic, owner string, epoch uint64, partitions uint32) Assignment {
	return Assignment{Topic: topic, Owner: owner, Epoch: epoch, Partitions: partitions, State: Active}
}

// revoked is a tombstone revoked from owner from.
func revoked(topic, from string, epoch uint64) Assignment {
	return Assignment{Topic: topic, Previous: from, Epoch: epoch, State: Revoked}
}

// from sets the owner the topic had before its last ownership change.
func (a Assignment) from(prev string) Assignment {
	a.Previous = prev
	return a
}

// mustApply applies c through its encoding, as a follower would, and fails
// the test on error.
func mustApply(t testing.TB, s *State, c Command) Result {
	t.Helper()
	var res Result
	if err := applyEncoded(s, &c, &res); err != nil {
		t.Fatalf("apply %s: %v", c.Op, err)
	}
	return res
}

// applyEncoded encodes c, decodes it into a fresh command and applies that,
// so every scenario also exercises the log format.
func applyEncoded(s *State, c *Command, res *Result) error {
	b, err := AppendCommand(nil, c)
	if err != nil {
		// Commands that cannot be encoded must still be refused by Apply.
		return s.Apply(c, res)
	}
	var d Command
	if err := DecodeCommand(b, &d); err != nil {
		return err
	}
	return s.Apply(&d, res)
}

func snapshot(s *State) []byte { return s.AppendSnapshot(nil) }

func sameSnapshot(t testing.TB, a, b *State) {
	t.Helper()
	if sa, sb := snapshot(a), snapshot(b); !bytes.Equal(sa, sb) {
		t.Fatalf("snapshots differ:\n%x\n%x", sa, sb)
	}
}

// setEpoch puts topic's record at epoch, as no command can, keeping the
// owner's digest in step.
func setEpoch(s *State, topic string, epoch uint64) {
	r := s.topics[topic]
	if r.state == Active {
		s.release(r)
		r.epoch = epoch
		s.acquire(r.owner, r)
		return
	}
	r.epoch = epoch
}
