package meta

import (
	"encoding/binary"
	"errors"
)

// Low-level decoding problems. The command and snapshot decoders wrap them
// under ErrBadCommand or ErrBadSnapshot.
var (
	errTruncated = errors.New("truncated")
	errTrailing  = errors.New("trailing bytes")
	errOverflow  = errors.New("varint overflows 64 bits")
	errTooLarge  = errors.New("length or count over its limit")
	errNotSorted = errors.New("topics not in strictly ascending order")
	errDomain    = errors.New("value out of its domain")
)

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

func appendBytes(b, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendString(b []byte, v string) []byte {
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

// reader decodes fields with a sticky error: after the first failure every
// read returns a zero value, so a decoder is a straight line of reads and
// one check at the end. It never trusts a length.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) u8() uint8 {
	if r.err != nil {
		return 0
	}
	if r.off >= len(r.b) {
		r.fail(errTruncated)
		return 0
	}
	v := r.b[r.off]
	r.off++
	return v
}

func (r *reader) fixed(n int) []byte {
	if r.err != nil {
		return nil
	}
	if r.remaining() < n {
		r.fail(errTruncated)
		return nil
	}
	v := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		if n == 0 {
			r.fail(errTruncated)
		} else {
			r.fail(errOverflow)
		}
		return 0
	}
	// A non-minimal varint would give one value two encodings; the
	// formats here are canonical so that decode→encode is the identity.
	if n > 1 && r.b[r.off+n-1] == 0 {
		r.fail(errDomain)
		return 0
	}
	r.off += n
	return v
}

// count reads an element count of at most max whose elements take at least
// minSize bytes each, so a count the rest of the input cannot hold fails
// before anyone sizes a slice by it.
func (r *reader) count(max, minSize int) int {
	v := r.uvarint()
	if r.err != nil {
		return 0
	}
	if v > uint64(max) {
		r.fail(errTooLarge)
		return 0
	}
	if v > uint64(r.remaining()/minSize) {
		r.fail(errTruncated)
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string of at most max bytes, aliasing
// the input.
func (r *reader) bytes(max int) []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(max) {
		r.fail(errTooLarge)
		return nil
	}
	return r.fixed(int(n))
}

func (r *reader) end() error {
	if r.err != nil {
		return r.err
	}
	if r.off != len(r.b) {
		return errTrailing
	}
	return nil
}
