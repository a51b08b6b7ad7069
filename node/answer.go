package node

import (
	"time"

	"github.com/shoalmq/shoal/wire"
)

// answer is a request's answer: the kind and payload of the frame that
// carries it and, when it is an error, the error itself. A node builds
// the error with the answer, or decodes it once where another node's
// answer comes back (relayed), so that what is done with an answer (the
// request forwarded again, its outcome counted) reads err and never
// decodes the payload again.
type answer struct {
	kind    wire.Kind
	payload []byte
	// err is the error of a wire.KindError answer: nil for any other
	// answer, and for an error from another node that does not decode.
	err *wire.ErrorResponse
}

// newAnswer is the answer of kind with payload, not an error.
func newAnswer(kind wire.Kind, payload []byte) answer {
	return answer{kind: kind, payload: payload}
}

// errorAnswer is the error answer e.
func errorAnswer(e *wire.ErrorResponse) answer {
	return answer{kind: wire.KindError, payload: wire.AppendErrorResponse(nil, e), err: e}
}

// errAnswer is the error answer of code with msg and no hints.
func errAnswer(code wire.ErrorCode, msg string) answer {
	return errorAnswer(&wire.ErrorResponse{Code: code, Message: msg})
}

// unavailable is the error answer Unavailable with msg and a retry hint.
func unavailable(msg string) answer {
	return errorAnswer(&wire.ErrorResponse{Code: wire.CodeUnavailable, Message: msg, RetryAfter: 50 * time.Millisecond})
}

// relayed is the answer another node gave (a ForwardReply's kind and
// payload); an error is decoded here, once.
func relayed(kind wire.Kind, payload []byte) answer {
	a := answer{kind: kind, payload: payload}
	if kind == wire.KindError {
		if e, err := wire.DecodeErrorResponse(payload); err == nil {
			a.err = e
		}
	}
	return a
}

// is reports whether a is an error answer of code.
func (a answer) is(code wire.ErrorCode) bool {
	return a.err != nil && a.err.Code == code
}
