package wire

// Reader decodes the primitives wire's messages are made of — bytes,
// uvarints, length-prefixed strings, counts — with a sticky error, for
// packages whose own formats share them (meta's commands and snapshots).
// After the first failure every read returns a zero value and Err holds the
// first error (ErrTruncated, ErrMalformed, ErrTooLarge, or the caller's,
// given to Fail). It never trusts a length and never panics.
//
// It wraps the reader every wire decoder uses, which it leaves untouched.
type Reader struct {
	r reader
	// canonical refuses a uvarint longer than needed, so that one value has
	// one encoding.
	canonical bool
}

// NewReader reads b.
func NewReader(b []byte) Reader { return Reader{r: reader{b: b}} }

// NewCanonicalReader reads b and refuses, with ErrMalformed, any uvarint
// (lengths and counts included) that is not in its shortest form: a
// format read with it has exactly one encoding per value.
func NewCanonicalReader(b []byte) Reader { return Reader{r: reader{b: b}, canonical: true} }

// checkVarint fails the read when the next uvarint is not minimal: its
// last byte is a zero continuation.
func (r *Reader) checkVarint() {
	if !r.canonical || r.r.err != nil {
		return
	}
	b := r.r.b[r.r.off:]
	for i := 0; i < len(b) && i < 10; i++ {
		if b[i] < 0x80 {
			if i > 0 && b[i] == 0 {
				r.r.fail(ErrMalformed)
			}
			return
		}
	}
}

// U8 reads one byte.
func (r *Reader) U8() uint8 { return r.r.u8() }

// Uvarint reads a uvarint.
func (r *Reader) Uvarint() uint64 {
	r.checkVarint()
	return r.r.uvarint()
}

// UvarintMax reads a uvarint no larger than max (ErrTooLarge otherwise).
func (r *Reader) UvarintMax(max uint64) uint64 {
	r.checkVarint()
	return r.r.uvarintMax(max)
}

// Bytes reads a uvarint length of at most max, then that many bytes,
// aliasing the input; an empty string is nil.
func (r *Reader) Bytes(max int) []byte {
	r.checkVarint()
	return r.r.bytes(max)
}

// Fixed reads exactly n bytes, aliasing the input.
func (r *Reader) Fixed(n int) []byte { return r.r.fixed(n) }

// Count reads a uvarint element count of at most max whose elements take
// at least minSize bytes each, so that a count the rest of the input cannot
// hold fails (ErrTruncated) before anyone sizes a slice by it.
func (r *Reader) Count(max, minSize int) int {
	r.checkVarint()
	return r.r.count(max, minSize)
}

// Offset is the number of bytes read so far.
func (r *Reader) Offset() int { return r.r.off }

// Remaining is the number of bytes left.
func (r *Reader) Remaining() int { return r.r.remaining() }

// Fail records err unless an error is already recorded; nothing more is
// read after it.
func (r *Reader) Fail(err error) { r.r.fail(err) }

// Err is the first error, or nil.
func (r *Reader) Err() error { return r.r.err }

// End returns the first error, or ErrTrailing when input remains.
func (r *Reader) End() error { return r.r.end() }
