package meta

import (
	"bytes"
	"fmt"

	"github.com/shoalmq/shoal/internal/enum"
)

// Limits. Each is the largest value accepted by the encoders, the decoders
// and Apply. They match the limits of the client protocol.
const (
	// MaxTopicLen bounds a topic name: 255 bytes.
	MaxTopicLen = 255
	// MaxNodeIDLen bounds a node id: 64 bytes.
	MaxNodeIDLen = 64
	// MaxPartitions bounds a topic's partition count: 65,536.
	MaxPartitions = 1 << 16
	// DefaultPartitions is the partition count of a topic assigned without
	// one.
	DefaultPartitions = 1
	// MaxMoves bounds the moves in one ReassignNode: 4,096, which keeps the
	// largest such log entry near 1.3 MiB. A dead node that owned more
	// topics in a shard is drained by several commands.
	MaxMoves = 4096
)

// commandVersion is the first byte of every encoded command. Log entries
// outlive the binary that wrote them, so a new layout gets a new version
// and the old one stays decodable: version 1 is version 2 without the
// epochs of a ReassignNode's moves, version 2 is version 3 without the
// session of a client's write.
const (
	commandVersion   = 3
	commandVersionV2 = 2
	commandVersionV1 = 1
)

// Op names a command.
type Op uint8

// The commands. Values are part of the log format: never renumber.
const (
	// OpAssign assigns a topic to an owner (see the package doc).
	OpAssign Op = 1
	// OpRevoke revokes a topic, leaving a tombstone at epoch+1.
	OpRevoke Op = 2
	// OpUpdatePartition grows a topic's partition count.
	OpUpdatePartition Op = 3
	// OpReassignNode moves the topics of a dead node to live owners.
	OpReassignNode Op = 4
	// OpMarker changes nothing; it carries a sequence number so that its
	// proposer can recognise it when it applies.
	OpMarker Op = 5
	// OpCompact drops tombstones and raises the shard's epoch floor.
	OpCompact Op = 6
	// OpSplit ends the shard: its topics go on in the two shards it splits
	// into, and it applies nothing more (ErrShardSplit).
	OpSplit Op = 7
)

var opNames = enum.New("Op", map[Op]string{
	OpAssign: "AssignTopic", OpRevoke: "RevokeTopic", OpUpdatePartition: "UpdatePartition",
	OpReassignNode: "ReassignNode", OpMarker: "Marker", OpCompact: "Compact", OpSplit: "Split",
})

func (o Op) String() string { return opNames.Name(o) }

// Move is one topic of a ReassignNode and the owner it moves to. Epoch is
// the epoch the leader saw the topic at when it planned the move: the move
// applies only if the topic is still at it (0, in entries written before
// moves carried epochs, skips that check).
type Move struct {
	Topic []byte
	Owner string
	Epoch uint64
}

// Command is one state change, the payload of a raft log entry. Each op
// reads only its own fields and ignores the others:
//
//	OpAssign          Topic, Owner (may be empty for an active topic), Partitions (0: not given), Session, Clock
//	OpRevoke          Topic, Session, Clock
//	OpUpdatePartition Topic, Partitions, Session, Clock
//	OpReassignNode    Node (the dead node), Moves (strictly ascending by topic, each with the epoch it was planned at)
//	OpMarker          Seq
//	OpCompact         -
//	OpSplit           Shard (the shard that splits: a replica of another refuses it)
//
// A decoded command's Topic and Moves[i].Topic alias the decoded buffer.
type Command struct {
	Op         Op
	Topic      []byte
	Owner      string
	Partitions uint32
	Node       string
	Moves      []Move
	Seq        uint64
	Shard      uint64
	// Session names the client write an Assign, Revoke or UpdatePartition
	// is (zero: none); Clock is the leader's stamp on it (see SessionTTL).
	Session SessionRef
	Clock   uint64
	// Refusal, on a session's Assign, is a refusal the leader decided from
	// what is not in the state (the owner named is not a live member, or is
	// drained): the command changes nothing and keeps the refusal as the
	// write's answer, so no copy of the write applies after it.
	Refusal Refusal
}

// Refusal is why a leader refused a session's write outside the state.
type Refusal uint8

// Values are part of the log format: never renumber.
const (
	RefuseNone         Refusal = 0
	RefuseOwnerNotLive Refusal = 1
	RefuseOwnerDrained Refusal = 2
	refusalEnd         Refusal = 3
)

// takesSession reports whether commands of op may carry a session.
func (o Op) takesSession() bool { return o == OpAssign || o == OpRevoke || o == OpUpdatePartition }

// Validate checks the fields the op uses, without looking at any state.
func (c *Command) Validate() error {
	switch c.Op {
	case OpAssign:
		if err := checkTopic(c.Topic); err != nil {
			return c.fail(err)
		}
		if len(c.Owner) > MaxNodeIDLen {
			return c.fail(ErrBadNodeID)
		}
		if c.Partitions > MaxPartitions {
			return c.fail(ErrBadPartitions)
		}
	case OpRevoke:
		if err := checkTopic(c.Topic); err != nil {
			return c.fail(err)
		}
	case OpUpdatePartition:
		if err := checkTopic(c.Topic); err != nil {
			return c.fail(err)
		}
		if c.Partitions == 0 || c.Partitions > MaxPartitions {
			return c.fail(ErrBadPartitions)
		}
	case OpReassignNode:
		if err := checkNodeID(c.Node); err != nil {
			return c.fail(err)
		}
		if len(c.Moves) > MaxMoves {
			return c.fail(ErrTooManyMoves)
		}
		for i := range c.Moves {
			m := &c.Moves[i]
			if err := checkTopic(m.Topic); err != nil {
				return c.fail(err)
			}
			if err := checkNodeID(m.Owner); err != nil {
				return c.fail(err)
			}
			if m.Owner == c.Node {
				return c.fail(fmt.Errorf("%w: move %q to the dead node itself", ErrBadCommand, m.Topic))
			}
			if i > 0 && bytes.Compare(c.Moves[i-1].Topic, m.Topic) >= 0 {
				return c.fail(fmt.Errorf("%w: moves %w", ErrBadCommand, errNotSorted))
			}
		}
	case OpMarker, OpCompact, OpSplit:
	default:
		return fmt.Errorf("%w: unknown op %d", ErrBadCommand, c.Op)
	}
	if c.Refusal >= refusalEnd || (c.Refusal != RefuseNone && (c.Session.ID == 0 || c.Op != OpAssign)) {
		return c.fail(fmt.Errorf("%w: refusal %d", ErrBadCommand, c.Refusal))
	}
	if s := c.Session; s.ID != 0 && (s.Seq == 0 || s.Floor >= s.Seq) {
		return c.fail(fmt.Errorf("%w: session sequence %d with floor %d", ErrBadCommand, s.Seq, s.Floor))
	}
	return nil
}

func (c *Command) fail(err error) error {
	return fmt.Errorf("meta: %s: %w", c.Op, err)
}

func checkTopic(t []byte) error {
	switch {
	case len(t) == 0:
		return ErrEmptyTopic
	case len(t) > MaxTopicLen:
		return ErrTopicTooLong
	}
	return nil
}

func checkNodeID(id string) error {
	if len(id) == 0 || len(id) > MaxNodeIDLen {
		return ErrBadNodeID
	}
	return nil
}

// AppendCommand validates c and appends its encoding to b.
//
//	u8 version (3) · u8 op · fields of the op, in the order of the table on
//	Command: byte strings as uvarint length + bytes, integers as uvarints,
//	Moves as a uvarint count then (topic, owner, epoch) triples (version 1:
//	(topic, owner) pairs), a Session as its ID, Seq, Floor, Clock and a
//	u8 Refusal.
//	A command without a session is written as version 2, which has none.
func AppendCommand(b []byte, c *Command) ([]byte, error) {
	if err := c.Validate(); err != nil {
		return b, err
	}
	version := byte(commandVersionV2)
	if c.Session.ID != 0 && c.Op.takesSession() {
		version = commandVersion
	}
	b = append(b, version, byte(c.Op))
	switch c.Op {
	case OpAssign:
		b = appendBytes(b, c.Topic)
		b = appendString(b, c.Owner)
		b = appendUvarint(b, uint64(c.Partitions))
		b = appendSessionRef(b, c)
	case OpRevoke:
		b = appendBytes(b, c.Topic)
		b = appendSessionRef(b, c)
	case OpUpdatePartition:
		b = appendBytes(b, c.Topic)
		b = appendUvarint(b, uint64(c.Partitions))
		b = appendSessionRef(b, c)
	case OpReassignNode:
		b = appendString(b, c.Node)
		b = appendUvarint(b, uint64(len(c.Moves)))
		for i := range c.Moves {
			b = appendBytes(b, c.Moves[i].Topic)
			b = appendString(b, c.Moves[i].Owner)
			b = appendUvarint(b, c.Moves[i].Epoch)
		}
	case OpMarker:
		b = appendUvarint(b, c.Seq)
	case OpCompact:
	case OpSplit:
		b = appendUvarint(b, c.Shard)
	}
	return b, nil
}

func appendSessionRef(b []byte, c *Command) []byte {
	if c.Session.ID == 0 {
		return b
	}
	b = appendUvarint(b, c.Session.ID)
	b = appendUvarint(b, c.Session.Seq)
	b = appendUvarint(b, c.Session.Floor)
	b = appendUvarint(b, c.Clock)
	return append(b, byte(c.Refusal))
}

func (r *reader) sessionRef(c *Command, version uint8) {
	if version < commandVersion {
		return
	}
	c.Session.ID = r.Uvarint()
	c.Session.Seq = r.Uvarint()
	c.Session.Floor = r.Uvarint()
	c.Clock = r.Uvarint()
	c.Refusal = Refusal(r.U8())
	if r.Err() == nil && c.Session.ID == 0 {
		r.Fail(fmt.Errorf("version %d without a session: %w", version, errDomain))
	}
}

// minMoveSize is the smallest encoded Move: a one-byte topic and a one-byte
// owner, each behind a one-byte length.
const minMoveSize = 4

// DecodeCommand decodes b into c, reusing c.Moves' backing array. Topics
// alias b; node ids are copied. Any input that AppendCommand would not
// produce is an error wrapping ErrBadCommand (or the field's own sentinel);
// no input panics.
func DecodeCommand(b []byte, c *Command) error { return decodeCommand(b, c, nil) }

// decodeCommand is DecodeCommand taking node ids that ids already knows
// from it instead of copying them, so that the apply path allocates
// nothing in the steady state. ids may be nil.
func decodeCommand(b []byte, c *Command, ids *State) error {
	moves := c.Moves[:0]
	*c = Command{}
	r := newReader(b)
	version := r.U8()
	if r.Err() == nil && version != commandVersion && version != commandVersionV2 && version != commandVersionV1 {
		return fmt.Errorf("%w: version %d", ErrBadCommand, version)
	}
	c.Op = Op(r.U8())
	switch c.Op {
	case OpAssign:
		c.Topic = r.Bytes(MaxTopicLen)
		c.Owner = ids.nodeID(r.Bytes(MaxNodeIDLen))
		c.Partitions = r.partitions()
		r.sessionRef(c, version)
	case OpRevoke:
		c.Topic = r.Bytes(MaxTopicLen)
		r.sessionRef(c, version)
	case OpUpdatePartition:
		c.Topic = r.Bytes(MaxTopicLen)
		c.Partitions = r.partitions()
		r.sessionRef(c, version)
	case OpReassignNode:
		c.Node = ids.nodeID(r.Bytes(MaxNodeIDLen))
		n := r.Count(MaxMoves, minMoveSize)
		for range n {
			t := r.Bytes(MaxTopicLen)
			o := r.Bytes(MaxNodeIDLen)
			var epoch uint64
			if version >= commandVersionV2 {
				epoch = r.Uvarint()
			}
			if r.Err() != nil {
				break
			}
			moves = append(moves, Move{Topic: t, Owner: ids.nodeID(o), Epoch: epoch})
		}
		if n > 0 {
			c.Moves = moves
		}
	case OpMarker:
		c.Seq = r.Uvarint()
	case OpCompact:
	case OpSplit:
		c.Shard = r.Uvarint()
	default:
		if r.Err() == nil {
			return fmt.Errorf("%w: unknown op %d", ErrBadCommand, c.Op)
		}
	}
	if err := r.End(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrBadCommand, c.Op, err)
	}
	if version == commandVersion && !c.Op.takesSession() {
		// AppendCommand writes version 3 only for a write with a session.
		return fmt.Errorf("%w: %s in version %d, which is for a session's writes", ErrBadCommand, c.Op, version)
	}
	return c.Validate()
}

func (r *reader) partitions() uint32 { return uint32(r.UvarintMax(MaxPartitions)) }
