package wire

import (
	"bytes"
	"errors"
	"testing"
	"time"
)

func TestDecodeErrorResponseRoundTrip(t *testing.T) {
	for _, e := range []*ErrorResponse{
		{Code: CodeNotLeader, Message: "shard 7 is led elsewhere", Shard: 7, NodeID: "n2", Addr: "127.0.0.1:7102"},
		{Code: CodeNotLeaderForTopic, Message: "not serving", Epoch: 9, NodeID: "n3", Addr: "127.0.0.1:7103"},
		{Code: CodeUnavailable, Message: "node overloaded", RetryAfter: 50 * time.Millisecond},
		{Code: CodeBadRequest},
		{Code: CodeSessionExpired, Message: "expired"},
	} {
		b := AppendErrorResponse(nil, e)
		got, err := DecodeErrorResponse(b)
		if err != nil {
			t.Fatalf("%v: %v", e, err)
		}
		if *got != *e {
			t.Fatalf("got %+v, want %+v", got, e)
		}
		// It owns its fields: the payload's bytes may be reused.
		clear(b)
		if *got != *e {
			t.Fatalf("after the payload was cleared: %+v", got)
		}
	}
	if _, err := DecodeErrorResponse(nil); !errors.Is(err, ErrTruncated) {
		t.Fatalf("empty payload: %v", err)
	}
	if _, err := DecodeErrorResponse(AppendError(nil, &Error{Code: 999})); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown code: %v", err)
	}
}

// FuzzDecodeErrorResponse decodes Error payloads as a node takes them
// from another node's answers: what DecodeError takes, DecodeErrorResponse
// takes with the same fields, and it encodes back to the same bytes.
func FuzzDecodeErrorResponse(f *testing.F) {
	f.Add(AppendErrorResponse(nil, &ErrorResponse{Code: CodeNotLeader, Message: "moved", Shard: 7, NodeID: "n2", Addr: "127.0.0.1:7102"}))
	f.Add(AppendErrorResponse(nil, &ErrorResponse{Code: CodeUnavailable, RetryAfter: time.Second}))
	f.Add([]byte{6, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Error
		werr := DecodeError(b, &m)
		e, err := DecodeErrorResponse(b)
		if (werr == nil) != (err == nil) {
			t.Fatalf("DecodeError %v, DecodeErrorResponse %v", werr, err)
		}
		if err != nil {
			if e != nil {
				t.Fatalf("an error and a value: %v %+v", err, e)
			}
			return
		}
		if e.Code != m.Code || e.Message != string(m.Message) || e.Shard != m.Shard || e.Epoch != m.Epoch ||
			e.NodeID != string(m.NodeID) || e.Addr != string(m.Addr) || e.RetryAfter != time.Duration(m.RetryAfter)*time.Millisecond {
			t.Fatalf("%+v, DecodeError gives %+v", e, m)
		}
		if again := AppendErrorResponse(nil, e); !bytes.Equal(again, AppendError(nil, &m)) {
			t.Fatalf("%+v encodes to %x, not %x", e, again, AppendError(nil, &m))
		}
	})
}
