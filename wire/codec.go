package wire

import (
	"encoding/binary"
	"math/bits"
)

// Encoding primitives shared by every message. Encoders append; the reader
// decodes with a sticky error so a message decoder is a straight line of
// field reads followed by one error check.

func appendU16(b []byte, v uint16) []byte { return binary.LittleEndian.AppendUint16(b, v) }
func appendU32(b []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(b, v) }
func appendU64(b []byte, v uint64) []byte { return binary.LittleEndian.AppendUint64(b, v) }
func appendUvarint(b []byte, v uint64) []byte {
	return binary.AppendUvarint(b, v)
}

// appendBytes appends a uvarint length then the bytes.
func appendBytes(b []byte, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// appendString is appendBytes for a string, without converting it.
func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// uvarintLen is the encoded size of v as a uvarint.
func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// reader decodes little-endian fields from b. After the first failure every
// read returns a zero value and err holds the first error.
type reader struct {
	b   []byte
	off int
	err error
}

// fail records the first error and consumes the input, so that the fast
// paths (which test only the remaining length) read nothing more.
func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.off = len(r.b)
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) u8() uint8 {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(ErrTruncated)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) bool() bool {
	switch r.u8() {
	case 0:
		return false
	case 1:
		return true
	default:
		r.fail(ErrMalformed)
		return false
	}
}

func (r *reader) u16() uint16 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 2 {
		r.fail(ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.fail(ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) u64() uint64 {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 8 {
		r.fail(ErrTruncated)
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) uvarint() uint64 {
	// Fast path, small enough to inline: most varints here are one byte.
	// After a failure nothing remains (see fail), so it needs no error test.
	if i := r.off; i < len(r.b) && r.b[i] < 0x80 {
		r.off = i + 1
		return uint64(r.b[i])
	}
	return r.uvarintSlow()
}

func (r *reader) uvarintSlow() uint64 {
	if r.err != nil {
		return 0
	}
	var v uint64
	for i, shift := r.off, uint(0); i < len(r.b); i, shift = i+1, shift+7 {
		c := r.b[i]
		if shift == 63 && c > 1 {
			r.fail(ErrMalformed) // overflows 64 bits
			return 0
		}
		if c < 0x80 {
			r.off = i + 1
			return v | uint64(c)<<shift
		}
		v |= uint64(c&0x7f) << shift
	}
	r.fail(ErrTruncated)
	return 0
}

// count reads a uvarint element count no larger than max. Each element
// takes at least minSize bytes, so a count the remaining input cannot hold
// is rejected before any caller sizes a slice by it.
func (r *reader) count(max, minSize int) int {
	v := r.uvarint()
	if r.err != nil {
		return 0
	}
	if v > uint64(max) {
		r.fail(ErrTooLarge)
		return 0
	}
	if minSize > 0 && v > uint64(r.remaining()/minSize) {
		r.fail(ErrTruncated)
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string of at most max bytes. The
// result aliases the input; an empty string is nil.
func (r *reader) bytes(max int) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) {
		r.fail(ErrTooLarge)
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(ErrTruncated)
		return nil
	}
	if n == 0 {
		return nil
	}
	v := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return v
}

// fixed reads exactly n bytes, aliasing the input.
func (r *reader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if len(r.b)-r.off < n {
		r.fail(ErrTruncated)
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

// end reports the sticky error, or ErrTrailing if input remains.
func (r *reader) end() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return ErrTrailing
	}
	return nil
}

// u32v reads a uvarint that must fit in 32 bits.
func (r *reader) u32v() uint32 {
	v := r.uvarint()
	if v > 1<<32-1 {
		r.fail(ErrMalformed)
		return 0
	}
	return uint32(v)
}

// uvarintMax reads a uvarint no larger than max (ErrTooLarge otherwise).
func (r *reader) uvarintMax(max uint64) uint64 {
	v := r.uvarint()
	if v > max {
		r.fail(ErrTooLarge)
		return 0
	}
	return v
}

// grow returns s with length n, keeping s's elements (and so the capacity
// of any slices inside them, which decoders reuse) when s has room.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	s = s[:cap(s)]
	return append(s, make([]T, n-len(s))...)
}
