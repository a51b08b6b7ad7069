package shardstore

import (
	"encoding/binary"
	"fmt"
)

// The values of two marks in a shard's state-machine data (metakeys.go).
// Both are a bare uvarint, without the version byte of other values: they
// were written so before values had one, and are read so. An empty value
// reads as 0, as it always has.

// AppendEpochFloor appends the value of EpochFloorKey: the shard's epoch
// floor.
func AppendEpochFloor(dst []byte, floor uint64) []byte {
	return binary.AppendUvarint(dst, floor)
}

// DecodeEpochFloor decodes a value of EpochFloorKey. Anything but one
// uvarint is an error wrapping ErrCorrupt.
func DecodeEpochFloor(b []byte) (uint64, error) {
	return decodeMark(b, "epoch floor")
}

// AppendSplitMark appends the value of SplitMarkKey: the raft index of
// the entry at which the shard split.
func AppendSplitMark(dst []byte, index uint64) []byte {
	return binary.AppendUvarint(dst, index)
}

// DecodeSplitMark decodes a value of SplitMarkKey. Anything but one
// uvarint is an error wrapping ErrCorrupt.
func DecodeSplitMark(b []byte) (uint64, error) {
	return decodeMark(b, "split mark")
}

// AppendChangeTrim appends the value of ChangeTrimKey: the change log's
// trim mark, the raft index up to which changes may be gone.
func AppendChangeTrim(dst []byte, trimmed uint64) []byte {
	return binary.AppendUvarint(dst, trimmed)
}

// DecodeChangeTrim decodes a value of ChangeTrimKey. Anything but one
// uvarint is an error wrapping ErrCorrupt.
func DecodeChangeTrim(b []byte) (uint64, error) {
	return decodeMark(b, "change trim mark")
}

func decodeMark(b []byte, what string) (uint64, error) {
	v, k := binary.Uvarint(b)
	if k != len(b) {
		return 0, fmt.Errorf("shardstore: %w: %s %x", ErrCorrupt, what, b)
	}
	return v, nil
}
