package meta

import (
	"encoding/binary"
	"errors"

	"github.com/shoalmq/shoal/wire"
)

// Decoding problems of meta's own. The primitives (truncation, overflow,
// non-canonical varints, lengths over a limit, trailing bytes) are
// wire.Reader's and fail with wire's errors; the command and snapshot
// decoders wrap every one under ErrBadCommand or ErrBadSnapshot.
var (
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

// reader is wire's canonical reader: meta's formats refuse non-minimal
// varints so that decode→encode is the identity.
type reader struct{ wire.Reader }

func newReader(b []byte) reader { return reader{wire.NewCanonicalReader(b)} }
