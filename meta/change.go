package meta

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/internal/enum"
)

// ChangeKind says how an applied command changed a topic's assignment, as
// a watcher sees it. Values are part of the stored change log: never
// renumber (they equal wire's ChangeKind values).
type ChangeKind uint8

const (
	// ChangeAssigned: a topic with no active record got an owner.
	ChangeAssigned ChangeKind = 1
	// ChangeMoved: an active topic went to another owner at the next epoch.
	ChangeMoved ChangeKind = 2
	// ChangeUpdated: an active topic's partition count grew.
	ChangeUpdated ChangeKind = 3
	// ChangeRevoked: an active topic was revoked; Epoch is its tombstone's.
	ChangeRevoked ChangeKind = 4
)

var changeKindNames = enum.New("ChangeKind", map[ChangeKind]string{
	ChangeAssigned: "assigned", ChangeMoved: "moved", ChangeUpdated: "updated",
	ChangeRevoked: "revoked",
})

func (k ChangeKind) String() string { return changeKindNames.Name(k) }

// Change is one topic's assignment after a command changed it: what a
// watcher is told. Owner is empty and Partitions 0 for ChangeRevoked.
type Change struct {
	Kind       ChangeKind
	Topic      string
	Owner      string
	Epoch      uint64
	Partitions uint32
}

// ErrBadChange: a stored change that cannot be decoded.
var ErrBadChange = errors.New("meta: bad change")

// AppendChange appends the encoding of c to b:
//
//	u8 kind · topic · owner · uvarint epoch · uvarint partitions
//
// (strings as uvarint length + bytes).
func AppendChange(b []byte, c *Change) []byte {
	b = append(b, byte(c.Kind))
	b = appendString(b, c.Topic)
	b = appendString(b, c.Owner)
	b = appendUvarint(b, c.Epoch)
	return appendUvarint(b, uint64(c.Partitions))
}

// DecodeChange decodes a change that AppendChange wrote. Any other input is
// an error wrapping ErrBadChange; no input panics. The strings are copies.
func DecodeChange(b []byte) (Change, error) {
	r := newReader(b)
	var c Change
	c.Kind = ChangeKind(r.U8())
	topic := r.Bytes(MaxTopicLen)
	owner := r.Bytes(MaxNodeIDLen)
	c.Epoch = r.Uvarint()
	c.Partitions = r.partitions()
	if err := r.End(); err != nil {
		return Change{}, fmt.Errorf("%w: %w", ErrBadChange, err)
	}
	c.Topic, c.Owner = string(topic), string(owner)
	revoked := c.Kind == ChangeRevoked
	switch {
	case c.Kind < ChangeAssigned || c.Kind > ChangeRevoked:
		return Change{}, fmt.Errorf("%w: kind %d", ErrBadChange, c.Kind)
	case len(topic) == 0:
		return Change{}, fmt.Errorf("%w: %w", ErrBadChange, ErrEmptyTopic)
	case c.Epoch == 0:
		return Change{}, fmt.Errorf("%w: epoch 0", ErrBadChange)
	case revoked != (len(owner) == 0), revoked != (c.Partitions == 0):
		return Change{}, fmt.Errorf("%w: %v with owner %q and %d partitions", ErrBadChange, c.Kind, owner, c.Partitions)
	}
	return c, nil
}
