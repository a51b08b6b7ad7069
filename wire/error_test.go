package wire

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestErrorRoundTripAndSentinels(t *testing.T) {
	cases := []struct {
		m    Error
		want error
	}{
		{Error{Code: CodeNotLeader, Message: []byte("shard 7 moved"), Shard: 7, NodeID: []byte("n2"), Addr: []byte("127.0.0.1:7102")}, ErrNotLeader},
		{Error{Code: CodeNotLeaderForTopic, Epoch: 9, NodeID: []byte("n3"), Addr: []byte("127.0.0.1:7103")}, ErrNotLeaderForTopic},
		{Error{Code: CodeUnavailable, RetryAfter: 250}, ErrUnavailable},
		{Error{Code: CodeBadRequest, Message: []byte("empty topic")}, ErrBadRequest},
		{Error{Code: CodeTooLarge}, ErrRequestTooLarge},
		{Error{Code: CodeUnauthorized}, ErrUnauthorized},
		{Error{Code: CodeNotFound}, ErrNotFound},
		{Error{Code: CodeInternal}, ErrInternal},
		{Error{Code: CodeSessionExpired, Message: []byte("producer session expired")}, ErrSessionExpired},
	}
	for _, c := range cases {
		t.Run(c.m.Code.String(), func(t *testing.T) {
			b := AppendError(nil, &c.m)
			var got Error
			if err := DecodeError(b, &got); err != nil {
				t.Fatal(err)
			}
			if !equalError(&got, &c.m) {
				t.Fatalf("got %+v, want %+v", got, c.m)
			}
			err := fmt.Errorf("client: produce: %w", got.Err())
			if !errors.Is(err, c.want) {
				t.Fatalf("%v is not %v", err, c.want)
			}
			for _, other := range codeErrors {
				if other != nil && other != c.want && errors.Is(err, other) {
					t.Fatalf("%v also matches %v", err, other)
				}
			}
			var er *ErrorResponse
			if !errors.As(err, &er) || er.Shard != c.m.Shard || er.Epoch != c.m.Epoch || er.NodeID != string(c.m.NodeID) ||
				er.RetryAfter != time.Duration(c.m.RetryAfter)*time.Millisecond {
				t.Fatalf("As: %+v", er)
			}
			// The Go error converts back to the same wire value.
			w := er.Wire()
			if !equalError(&w, &c.m) {
				t.Fatalf("Wire() %+v, want %+v", w, c.m)
			}
			if direct := AppendErrorResponse(nil, er); string(direct) != string(b) {
				t.Fatal("AppendErrorResponse differs from AppendError")
			}
			for n := 0; n < len(b); n++ {
				if err := DecodeError(b[:n], &got); !errors.Is(err, ErrTruncated) {
					t.Fatalf("truncated at %d: %v", n, err)
				}
			}
			if err := DecodeError(append(b, 0), &got); !errors.Is(err, ErrTrailing) {
				t.Fatalf("trailing: %v", err)
			}
		})
	}
}

func TestErrorRejectsUnknownCode(t *testing.T) {
	for _, c := range []ErrorCode{0, maxErrorCode + 1, 999} {
		b := AppendError(nil, &Error{Code: c})
		var got Error
		if err := DecodeError(b, &got); !errors.Is(err, ErrMalformed) {
			t.Fatalf("code %d: %v", c, err)
		}
	}
}

func TestErrorResponseOf(t *testing.T) {
	nl := &ErrorResponse{Code: CodeNotLeader, Shard: 3}
	if got := ErrorResponseOf(fmt.Errorf("node: %w", nl)); got != nl {
		t.Fatalf("wrapped ErrorResponse not found: %v", got)
	}
	if got := ErrorResponseOf(fmt.Errorf("meta: topic x: %w", ErrNotFound)); got.Code != CodeNotFound || got.Message != "meta: topic x: shoal: not found" {
		t.Fatalf("sentinel: %+v", got)
	}
	if got := ErrorResponseOf(errors.New("disk on fire")); got.Code != CodeInternal {
		t.Fatalf("other: %+v", got)
	}
	long := &ErrorResponse{Code: CodeBadRequest, Message: string(make([]byte, 5000)), NodeID: string(make([]byte, 100)), RetryAfter: -time.Second}
	w := long.Wire()
	var got Error
	if err := DecodeError(AppendError(nil, &w), &got); err != nil {
		t.Fatalf("an oversized ErrorResponse must still encode to a decodable Error: %v", err)
	}
	if err := DecodeError(AppendErrorResponse(nil, long), &got); err != nil {
		t.Fatalf("AppendErrorResponse of an oversized ErrorResponse: %v", err)
	}
	if s := (&ErrorResponse{Code: CodeNotLeader, Shard: 4, NodeID: "n2", Addr: "127.0.0.1:1"}).Error(); s != "shoal: not the shard leader (shard 4, leader n2 at 127.0.0.1:1)" {
		t.Fatal(s)
	}
}
