package shardstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"

	"go.etcd.io/raft/v3/raftpb"
)

// valueVersion is the first byte of every value this package writes.
const valueVersion byte = 1

// Entry flags record which protobuf fields an entry carries. Type, term and
// index are always present (raftpb encodes them even when zero); the data
// flag keeps a nil Data apart from an empty one, so an entry read back from
// disk has the same encoded size raft computed for it. Values written
// before every entry carried all three fields may lack their flags: an
// absent field decodes as zero.
const (
	entryHasType byte = 1 << iota
	entryHasTerm
	entryHasIndex
	entryHasData
	entryFlagsMask = entryHasType | entryHasTerm | entryHasIndex | entryHasData
)

// maxConfStateIDs bounds the ids in one ConfState list.
const maxConfStateIDs = 1 << 16

// decoder is a sticky-error reader over one value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(reason string) {
	if d.err == nil {
		d.err = errors.New(reason)
	}
}

func (d *decoder) u8() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != sov(v) {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) version() {
	if v := d.u8(); d.err == nil && v != valueVersion {
		d.err = fmt.Errorf("unknown value version %d", v)
	}
}

func (d *decoder) end() {
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
}

// corrupt wraps a decode failure with the key it was read from.
func corrupt(key []byte, err error) error {
	return fmt.Errorf("shardstore: %s: %w: %v", keyString(key), ErrCorrupt, err)
}

func sov(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// entrySize is the protobuf encoding size of e, the measure raft's maxSize
// arguments are in (it equals e.Size()).
func entrySize(e *raftpb.Entry) uint64 {
	n := 3 + sov(uint64(e.Type)) + sov(e.Term) + sov(e.Index)
	if e.Data != nil {
		n += 1 + sov(uint64(len(e.Data))) + len(e.Data)
	}
	return uint64(n)
}

func appendEntryValue(dst []byte, e *raftpb.Entry) []byte {
	flags := entryHasType | entryHasTerm | entryHasIndex
	if e.Data != nil {
		flags |= entryHasData
	}
	dst = append(dst, valueVersion, flags)
	dst = binary.AppendUvarint(dst, uint64(e.Type))
	dst = binary.AppendUvarint(dst, e.Term)
	return append(dst, e.Data...)
}

// decodeEntry decodes the entry at index stored in v (copying its data).
func decodeEntry(key, v []byte, index uint64) (raftpb.Entry, error) {
	d := decoder{b: v}
	d.version()
	flags := d.u8()
	typ := d.uvarint()
	term := d.uvarint()
	if d.err == nil && flags&^entryFlagsMask != 0 {
		d.fail("unknown entry flags")
	}
	if d.err == nil && typ > uint64(raftpb.EntryConfChangeV2) {
		d.fail("unknown entry type")
	}
	if d.err == nil && (flags&entryHasData == 0 && len(d.b) > 0 ||
		flags&entryHasTerm == 0 && term != 0 || flags&entryHasType == 0 && typ != 0) {
		d.fail("value present for an absent field")
	}
	if d.err != nil {
		return raftpb.Entry{}, corrupt(key, d.err)
	}
	e := raftpb.Entry{Term: term, Index: index, Type: raftpb.EntryType(typ)}
	if flags&entryHasData != 0 {
		e.Data = append(make([]byte, 0, len(d.b)), d.b...)
	}
	return e, nil
}

// decodeEntryTerm reads only the term of a stored entry.
func decodeEntryTerm(key, v []byte) (uint64, error) {
	d := decoder{b: v}
	d.version()
	d.u8()
	d.uvarint()
	term := d.uvarint()
	if d.err != nil {
		return 0, corrupt(key, d.err)
	}
	return term, nil
}

func appendHardState(dst []byte, hs *raftpb.HardState) []byte {
	dst = append(dst, valueVersion)
	dst = binary.AppendUvarint(dst, hs.Term)
	dst = binary.AppendUvarint(dst, hs.Vote)
	return binary.AppendUvarint(dst, hs.Commit)
}

// hardState is the decoded form of a HardState.
type hardState struct{ term, vote, commit uint64 }

func (h hardState) proto() raftpb.HardState {
	return raftpb.HardState{Term: h.term, Vote: h.vote, Commit: h.commit}
}

func decodeHardState(key, v []byte) (hardState, error) {
	d := decoder{b: v}
	d.version()
	h := hardState{term: d.uvarint(), vote: d.uvarint(), commit: d.uvarint()}
	d.end()
	if d.err != nil {
		return hardState{}, corrupt(key, d.err)
	}
	return h, nil
}

func appendUint64Value(dst []byte, v uint64) []byte {
	return binary.AppendUvarint(append(dst, valueVersion), v)
}

func decodeUint64Value(key, v []byte) (uint64, error) {
	d := decoder{b: v}
	d.version()
	x := d.uvarint()
	d.end()
	if d.err != nil {
		return 0, corrupt(key, d.err)
	}
	return x, nil
}

func appendTruncated(dst []byte, index, term uint64) []byte {
	dst = append(dst, valueVersion)
	dst = binary.AppendUvarint(dst, index)
	return binary.AppendUvarint(dst, term)
}

func decodeTruncated(key, v []byte) (index, term uint64, err error) {
	d := decoder{b: v}
	d.version()
	index, term = d.uvarint(), d.uvarint()
	d.end()
	if d.err != nil {
		return 0, 0, corrupt(key, d.err)
	}
	return index, term, nil
}

func appendConfState(dst []byte, cs *raftpb.ConfState) []byte {
	dst = append(dst, valueVersion)
	// The auto-leave byte is 0 (unset), 1 (false) or 2 (true); false is
	// written as unset, and both read back as false.
	var auto byte
	if cs.AutoLeave {
		auto = 2
	}
	dst = append(dst, auto)
	for _, ids := range [][]uint64{cs.Voters, cs.Learners, cs.VotersOutgoing, cs.LearnersNext} {
		dst = binary.AppendUvarint(dst, uint64(len(ids)))
		for _, id := range ids {
			dst = binary.AppendUvarint(dst, id)
		}
	}
	return dst
}

func decodeConfStateFrom(d *decoder) raftpb.ConfState {
	var cs raftpb.ConfState
	switch d.u8() {
	case 0, 1:
	case 2:
		cs.AutoLeave = true
	default:
		d.fail("bad auto-leave flag")
	}
	for _, dst := range []*[]uint64{&cs.Voters, &cs.Learners, &cs.VotersOutgoing, &cs.LearnersNext} {
		n := d.uvarint()
		if d.err != nil {
			break
		}
		if n > maxConfStateIDs || n > uint64(len(d.b)) {
			d.fail("conf state list too long")
			break
		}
		if n == 0 {
			continue
		}
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = d.uvarint()
		}
		*dst = ids
	}
	return cs
}

func decodeConfState(key, v []byte) (raftpb.ConfState, error) {
	d := decoder{b: v}
	d.version()
	cs := decodeConfStateFrom(&d)
	d.end()
	if d.err != nil {
		return raftpb.ConfState{}, corrupt(key, d.err)
	}
	return cs, nil
}
