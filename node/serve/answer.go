package serve

import (
	"time"

	"github.com/shoalmq/shoal/netio"
	"github.com/shoalmq/shoal/wire"
)

// Answer is a request's answer: the kind and payload of the frame that
// carries it and, when it is an error, the error itself. A node builds
// the error with the answer, or decodes it once where another node's
// answer comes back (Relayed), so that what is done with an answer (the
// request forwarded again, its outcome counted) reads Err and never
// decodes the payload again.
type Answer struct {
	Kind    wire.Kind
	Payload []byte
	// Err is the error of a wire.KindError answer: nil for any other
	// answer, and for an error from another node that does not decode.
	Err *wire.ErrorResponse
}

// Done takes the answer to a request.
type Done func(a Answer)

// NewAnswer is the answer of kind with payload, not an error.
func NewAnswer(kind wire.Kind, payload []byte) Answer {
	return Answer{Kind: kind, Payload: payload}
}

// ErrorAnswer is the error answer e.
func ErrorAnswer(e *wire.ErrorResponse) Answer {
	return Answer{Kind: wire.KindError, Payload: wire.AppendErrorResponse(nil, e), Err: e}
}

// ErrAnswer is the error answer of code with msg and no hints.
func ErrAnswer(code wire.ErrorCode, msg string) Answer {
	return ErrorAnswer(&wire.ErrorResponse{Code: code, Message: msg})
}

// Unavailable is the error answer Unavailable with msg and a retry hint.
func Unavailable(msg string) Answer {
	return ErrorAnswer(&wire.ErrorResponse{Code: wire.CodeUnavailable, Message: msg, RetryAfter: 50 * time.Millisecond})
}

// Relayed is the answer another node gave (a ForwardReply's kind and
// payload); an error is decoded here, once.
func Relayed(kind wire.Kind, payload []byte) Answer {
	a := Answer{Kind: kind, Payload: payload}
	if kind == wire.KindError {
		if e, err := wire.DecodeErrorResponse(payload); err == nil {
			a.Err = e
		}
	}
	return a
}

// Is reports whether a is an error answer of code.
func (a Answer) Is(code wire.ErrorCode) bool {
	return a.Err != nil && a.Err.Code == code
}

// ErrorFrame is the frame that answers request reqID with e.
func ErrorFrame(reqID uint64, e *wire.ErrorResponse) ([]byte, error) {
	f, start := wire.BeginFrame(nil, wire.KindError, reqID)
	f = wire.AppendErrorResponse(f, e)
	return wire.EndFrame(f, start)
}

// Frame is the frame that answers request reqID with kind and payload,
// or TooLarge when they do not fit in one.
func Frame(reqID uint64, kind wire.Kind, payload []byte) []byte {
	f, start := wire.BeginFrame(make([]byte, 0, wire.HeaderSize+len(payload)), kind, reqID)
	f = append(f, payload...)
	f, err := wire.EndFrame(f, start)
	if err != nil {
		f, _ = ErrorFrame(reqID, &wire.ErrorResponse{Code: wire.CodeTooLarge, Message: "answer too large"})
	}
	return f
}

// Overloaded answers a client request the node had no room for (netio's
// Overloaded).
func Overloaded(_ *netio.Conn, h wire.Header) []byte {
	f, _ := ErrorFrame(h.RequestID, &wire.ErrorResponse{Code: wire.CodeUnavailable, Message: "node overloaded", RetryAfter: 50 * time.Millisecond})
	return f
}
