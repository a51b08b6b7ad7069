package wire

import "errors"

// Decode errors. Every decoder returns one of these (never a wrapped or
// formatted error, so that a failed decode allocates nothing).
var (
	// ErrTruncated: the input ends before the message does.
	ErrTruncated = errors.New("wire: truncated input")
	// ErrTrailing: bytes remain after a complete message.
	ErrTrailing = errors.New("wire: trailing bytes after message")
	// ErrVersion: the protocol version is not one this build speaks.
	ErrVersion = errors.New("wire: unsupported protocol version")
	// ErrUnknownKind: the message kind is not known.
	ErrUnknownKind = errors.New("wire: unknown message kind")
	// ErrBadFlags: reserved flag bits are set.
	ErrBadFlags = errors.New("wire: reserved flag bits set")
	// ErrTooLarge: a length or count exceeds its limit (see limits.go).
	ErrTooLarge = errors.New("wire: field exceeds its limit")
	// ErrMalformed: a value is out of its domain (a bad enum, an overlong
	// varint, an empty required field).
	ErrMalformed = errors.New("wire: malformed message")
	// ErrBadMagic: a datagram does not start with the SWIM magic.
	ErrBadMagic = errors.New("wire: bad magic")
	// ErrSealed: a SWIM datagram or push-pull is sealed; its body must be
	// opened with a SwimKeyring before it is decoded.
	ErrSealed = errors.New("wire: sealed SWIM body")
	// ErrUnknownKey: a sealed SWIM body names a key the keyring does not
	// hold.
	ErrUnknownKey = errors.New("wire: unknown SWIM key")
	// ErrAuth: a sealed SWIM body did not open: the wrong key, or bytes
	// changed on the way.
	ErrAuth = errors.New("wire: SWIM body did not authenticate")
)
