package wire

import (
	"encoding/binary"

	"github.com/klauspost/compress/s2"
)

// CompressThreshold is the default payload size above which a peer frame is
// compressed: 4 KiB. Below it, S2 rarely saves enough to pay for itself.
const CompressThreshold = 4 << 10

// A compressed payload (FlagCompressed) is one S2 block
// (github.com/klauspost/compress/s2, block format, no stream framing): a
// uvarint of the decompressed length, then the compressed data. The frame
// header's Length is the compressed size; the decompressed size must not
// exceed MaxFrame.

// CompressFrame compresses the payload of the frame that starts at start in
// dst (a complete frame, after EndFrame) when the payload is larger than
// threshold and compressing makes it smaller, setting FlagCompressed and the
// new Length. Otherwise the frame is left as it is. scratch is working
// space, grown if needed and returned for reuse. It returns dst, possibly
// shortened.
func CompressFrame(dst []byte, start, threshold int, scratch []byte) (out, scratchOut []byte) {
	if start < 0 || len(dst)-start < HeaderSize {
		return dst, scratch
	}
	payload := dst[start+HeaderSize:]
	if len(payload) <= threshold || binary.LittleEndian.Uint16(dst[start+2:])&FlagCompressed != 0 {
		return dst, scratch
	}
	n := s2.MaxEncodedLen(len(payload))
	if n < 0 {
		return dst, scratch
	}
	if cap(scratch) < n {
		scratch = make([]byte, n)
	}
	enc := s2.Encode(scratch[:n], payload)
	if len(enc) >= len(payload) {
		return dst, scratch
	}
	copy(payload, enc)
	dst = dst[:start+HeaderSize+len(enc)]
	flags := binary.LittleEndian.Uint16(dst[start+2:]) | FlagCompressed
	binary.LittleEndian.PutUint16(dst[start+2:], flags)
	binary.LittleEndian.PutUint32(dst[start+4:], uint32(len(enc)))
	return dst, scratch
}

// DecompressedLen returns the decompressed size a compressed payload
// declares, without decompressing it: ErrMalformed if the size header is
// bad, ErrTooLarge if it exceeds MaxFrame.
func DecompressedLen(src []byte) (int, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return 0, ErrMalformed
	}
	if n > MaxFrame {
		return 0, ErrTooLarge
	}
	return n, nil
}

// Decompress decompresses a compressed payload into buf, which is grown
// (one allocation) if it is too small, and returns the payload (aliasing
// buf). The declared size is checked against MaxFrame before anything is
// allocated, so a small input cannot make it allocate a large buffer for
// nothing; corrupt input is ErrMalformed.
func Decompress(buf, src []byte) ([]byte, error) {
	n, err := DecompressedLen(src)
	if err != nil {
		return nil, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	out, err := s2.Decode(buf[:n], src)
	if err != nil || len(out) != n {
		return nil, ErrMalformed
	}
	return out, nil
}

// FramePayload returns the plain payload of a frame whose header is h and
// whose payload bytes are payload: payload itself, or its decompression
// into buf (grown if needed) when h has FlagCompressed. buf is returned
// for reuse; a decompressed payload aliases it, so it is valid until buf
// is used again.
func FramePayload(h *Header, payload, buf []byte) (plain, bufOut []byte, err error) {
	if h.Flags&FlagCompressed == 0 {
		return payload, buf, nil
	}
	out, err := Decompress(buf, payload)
	if err != nil {
		return nil, buf, err
	}
	return out, out[:0], nil
}
