package wire

import (
	"errors"
	"time"
)

// ErrorCode says why a request failed. Numbers are stable: they are on the
// wire. Each code names the hint fields of Error that it fills.
type ErrorCode uint16

const (
	// CodeBadRequest: the request is malformed or names an invalid value
	// (an empty topic, zero partitions). Retrying the same request fails
	// again.
	CodeBadRequest ErrorCode = 1
	// CodeUnauthorized: the connection has not completed the handshake, or
	// its proof of the shared secret was wrong.
	CodeUnauthorized ErrorCode = 2
	// CodeTooLarge: the request exceeds a limit (frame size, records per
	// Produce, record size).
	CodeTooLarge ErrorCode = 3
	// CodeNotFound: the topic (or shard) does not exist.
	CodeNotFound ErrorCode = 4
	// CodeUnavailable: the node cannot serve now (starting, no quorum for the
	// shard, shutting down). RetryAfter hints when to try again. Retry,
	// possibly on another node.
	CodeUnavailable ErrorCode = 5
	// CodeNotLeader: the request needs the leader of shard Shard and this
	// node is not it. NodeID and Addr name the leader this node believes in
	// (client address), empty when unknown. Update the leader table and
	// retry there.
	CodeNotLeader ErrorCode = 6
	// CodeNotLeaderForTopic: a data request (Produce, Fetch) named a topic
	// this node does not own at the request's epoch. Epoch is the topic's
	// current epoch as this node knows it (0 if unknown); NodeID and Addr
	// name its owner when known. Invalidate the cached route, look the topic
	// up again and retry.
	CodeNotLeaderForTopic ErrorCode = 7
	// CodeInternal: an unexpected failure on the node.
	CodeInternal ErrorCode = 8
	// CodeSessionExpired: a retried write (same Session ID and Seq) whose
	// first answer the node no longer keeps: the write may or may not have
	// been applied, and it is not applied again. Retrying fails again.
	CodeSessionExpired ErrorCode = 9

	maxErrorCode = CodeSessionExpired
)

var codeNames = [maxErrorCode + 1]string{
	CodeBadRequest: "BadRequest", CodeUnauthorized: "Unauthorized", CodeTooLarge: "TooLarge",
	CodeNotFound: "NotFound", CodeUnavailable: "Unavailable", CodeNotLeader: "NotLeader",
	CodeNotLeaderForTopic: "NotLeaderForTopic", CodeInternal: "Internal",
	CodeSessionExpired: "SessionExpired",
}

// Known reports whether c is a code this build understands.
func (c ErrorCode) Known() bool { return c >= CodeBadRequest && c <= maxErrorCode }

func (c ErrorCode) String() string {
	if c.Known() {
		return codeNames[c]
	}
	return "ErrorCode(" + itoa(uint64(c)) + ")"
}

// Protocol errors: one sentinel per ErrorCode. An *ErrorResponse matches
// the sentinel of its code under errors.Is, so callers write
// errors.Is(err, wire.ErrNotLeader) and use errors.As for the hints.
var (
	ErrBadRequest        = errors.New("shoal: bad request")
	ErrUnauthorized      = errors.New("shoal: unauthorized")
	ErrRequestTooLarge   = errors.New("shoal: request too large")
	ErrNotFound          = errors.New("shoal: not found")
	ErrUnavailable       = errors.New("shoal: unavailable")
	ErrNotLeader         = errors.New("shoal: not the shard leader")
	ErrNotLeaderForTopic = errors.New("shoal: not the topic owner at this epoch")
	ErrInternal          = errors.New("shoal: internal error")
	ErrSessionExpired    = errors.New("shoal: session expired")
)

var codeErrors = [maxErrorCode + 1]error{
	CodeBadRequest: ErrBadRequest, CodeUnauthorized: ErrUnauthorized,
	CodeTooLarge: ErrRequestTooLarge, CodeNotFound: ErrNotFound,
	CodeUnavailable: ErrUnavailable, CodeNotLeader: ErrNotLeader,
	CodeNotLeaderForTopic: ErrNotLeaderForTopic, CodeInternal: ErrInternal,
	CodeSessionExpired: ErrSessionExpired,
}

// Sentinel returns the sentinel error of c (ErrInternal for an unknown code).
func (c ErrorCode) Sentinel() error {
	if c.Known() {
		return codeErrors[c]
	}
	return ErrInternal
}

// Error is the answer to any request that failed (KindError). Every field
// is always encoded; hints a code does not use are zero.
type Error struct {
	Code    ErrorCode
	Message []byte // human-readable detail, at most MaxMessageLen; aliases the input
	// Hints, filled according to Code (see the ErrorCode constants).
	Shard      uint64 // NotLeader: the shard
	Epoch      uint64 // NotLeaderForTopic: the topic's current epoch
	NodeID     []byte // NotLeader: the leader; NotLeaderForTopic: the owner; aliases the input
	Addr       []byte // client address of NodeID; aliases the input
	RetryAfter uint32 // Unavailable: milliseconds to wait before retrying (0: no hint)
}

// AppendError appends m's payload.
func AppendError(dst []byte, m *Error) []byte {
	dst = appendU16(dst, uint16(m.Code))
	dst = appendBytes(dst, m.Message)
	dst = appendU64(dst, m.Shard)
	dst = appendU64(dst, m.Epoch)
	dst = appendBytes(dst, m.NodeID)
	dst = appendBytes(dst, m.Addr)
	return appendUvarint(dst, uint64(m.RetryAfter))
}

// DecodeError decodes an Error payload into m. Message, NodeID and Addr
// alias b. An unknown code is ErrMalformed.
func DecodeError(b []byte, m *Error) error {
	r := reader{b: b}
	m.Code = ErrorCode(r.u16())
	m.Message = r.bytes(MaxMessageLen)
	m.Shard = r.u64()
	m.Epoch = r.u64()
	m.NodeID = r.bytes(MaxNodeIDLen)
	m.Addr = r.bytes(MaxAddrLen)
	m.RetryAfter = r.u32v()
	if err := r.end(); err != nil {
		return err
	}
	if !m.Code.Known() {
		return ErrMalformed
	}
	return nil
}

// DecodeErrorResponse decodes an Error payload into an *ErrorResponse
// that owns its fields: DecodeError, then Err.
func DecodeErrorResponse(b []byte) (*ErrorResponse, error) {
	var m Error
	if err := DecodeError(b, &m); err != nil {
		return nil, err
	}
	return m.errorResponse(), nil
}

// Err converts a decoded Error into a Go error (an *ErrorResponse) that
// owns copies of its fields, so it outlives the input buffer.
func (m *Error) Err() error { return m.errorResponse() }

func (m *Error) errorResponse() *ErrorResponse {
	return &ErrorResponse{
		Code:       m.Code,
		Message:    string(m.Message),
		Shard:      m.Shard,
		Epoch:      m.Epoch,
		NodeID:     string(m.NodeID),
		Addr:       string(m.Addr),
		RetryAfter: time.Duration(m.RetryAfter) * time.Millisecond,
	}
}

// ErrorResponse is a failed request as a Go error. errors.Is(err,
// ErrNotLeader) and friends match on Code; errors.As gives the hints.
type ErrorResponse struct {
	Code       ErrorCode
	Message    string
	Shard      uint64
	Epoch      uint64
	NodeID     string
	Addr       string
	RetryAfter time.Duration
}

// NewErrorResponse returns an ErrorResponse with code and message and no
// hints.
func NewErrorResponse(code ErrorCode, message string) *ErrorResponse {
	return &ErrorResponse{Code: code, Message: message}
}

func (e *ErrorResponse) Error() string {
	s := e.Code.Sentinel().Error()
	if e.Message != "" {
		s += ": " + e.Message
	}
	switch e.Code {
	case CodeNotLeader:
		s += " (shard " + itoa(e.Shard)
		if e.NodeID != "" {
			s += ", leader " + e.NodeID + " at " + e.Addr
		}
		s += ")"
	case CodeNotLeaderForTopic:
		s += " (epoch " + itoa(e.Epoch)
		if e.NodeID != "" {
			s += ", owner " + e.NodeID + " at " + e.Addr
		}
		s += ")"
	}
	return s
}

// Is reports whether target is the sentinel of e's code.
func (e *ErrorResponse) Is(target error) bool { return target == e.Code.Sentinel() }

// Wire returns e as an Error ready for AppendError. The byte fields alias
// e's strings' copies; Message is cut to MaxMessageLen and the node id and
// address are dropped if they exceed their limits, so the result always
// decodes.
func (e *ErrorResponse) Wire() Error {
	m := Error{Code: e.Code, Shard: e.Shard, Epoch: e.Epoch}
	if !m.Code.Known() {
		m.Code = CodeInternal
	}
	msg := e.Message
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	m.Message = []byte(msg)
	if len(e.NodeID) <= MaxNodeIDLen && len(e.Addr) <= MaxAddrLen {
		m.NodeID, m.Addr = []byte(e.NodeID), []byte(e.Addr)
	}
	m.RetryAfter = retryMillis(e.RetryAfter)
	return m
}

// AppendErrorResponse appends e as an Error payload, like AppendError of
// e.Wire() but without converting e's strings.
func AppendErrorResponse(dst []byte, e *ErrorResponse) []byte {
	code := e.Code
	if !code.Known() {
		code = CodeInternal
	}
	msg := e.Message
	if len(msg) > MaxMessageLen {
		msg = msg[:MaxMessageLen]
	}
	id, addr := e.NodeID, e.Addr
	if len(id) > MaxNodeIDLen || len(addr) > MaxAddrLen {
		id, addr = "", ""
	}
	dst = appendU16(dst, uint16(code))
	dst = appendString(dst, msg)
	dst = appendU64(dst, e.Shard)
	dst = appendU64(dst, e.Epoch)
	dst = appendString(dst, id)
	dst = appendString(dst, addr)
	return appendUvarint(dst, uint64(retryMillis(e.RetryAfter)))
}

func retryMillis(d time.Duration) uint32 {
	ms := d / time.Millisecond
	switch {
	case ms < 0:
		return 0
	case ms > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(ms)
}

// ErrorResponseOf maps any error to an *ErrorResponse for sending: an
// *ErrorResponse in err's chain is returned as is; an error matching one of
// the protocol sentinels gets that code with err's text as the message;
// anything else is CodeInternal.
func ErrorResponseOf(err error) *ErrorResponse {
	var er *ErrorResponse
	if errors.As(err, &er) {
		return er
	}
	for c := CodeBadRequest; c <= maxErrorCode; c++ {
		if errors.Is(err, codeErrors[c]) {
			return &ErrorResponse{Code: c, Message: err.Error()}
		}
	}
	return &ErrorResponse{Code: CodeInternal, Message: err.Error()}
}
