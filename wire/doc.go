// Package wire owns every byte format Shoal puts on a socket: the TCP frame
// header, the handshake, client and peer messages, and SWIM datagrams.
//
// Encoders are named Append… and append to a caller's buffer. Decoders are
// named Decode… and fill a caller-owned struct; variable-length fields
// ([]byte) alias the input, so a caller that keeps a decoded value past the
// life of the input buffer must copy those fields. Decoders never panic,
// never read past their input, and reject truncated input, unknown kinds,
// wrong versions and trailing bytes with the sentinel errors of this package
// (test with errors.Is). Decoding a frame header or a SWIM datagram
// allocates nothing, and neither does decoding a client or peer message
// into a struct whose slices have grown. DecodeRaftBatch is the exception by
// design: raft keeps the entry slices (and read-index messages) it is
// stepped with, so the entries, responses and snapshots it produces come
// from slabs that are never reused (see its doc).
//
// Errors a node answers with are Error messages (error.go): typed codes
// with hints, which (*Error).Err turns into an *ErrorResponse matching the
// protocol sentinels (ErrNotLeader, ErrNotLeaderForTopic, …) under
// errors.Is.
//
// All integers are little-endian. Fixed-width fields are used where a value
// is usually large (ids, terms, indexes); unsigned varints (LEB128, as in
// encoding/binary) where it is usually small (lengths, counts). A byte
// string is a uvarint length followed by that many bytes.
//
// The package does no I/O. docs/wire.md gives the byte layout of every
// message.
package wire
