package dispatch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/shoalmq/shoal/node/ownership"
	"github.com/shoalmq/shoal/node/records"
	"github.com/shoalmq/shoal/node/watch"
	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// The records and watch rooms' refusals become wire answers: a topic not
// served here points to the newer owner the cache knows, and is counted.
func TestRefusalsBecomeTheirWireAnswers(t *testing.T) {
	cache, err := router.NewCache(router.CacheConfig{Capacity: 64})
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{self: "n1", routes: cache}
	cache.Put([]byte("moved"), "n2", "10.0.0.2:9092", 7, 1)
	cache.Put([]byte("mine"), "n1", "10.0.0.1:9092", 9, 1)

	a := d.recordsRefusal(&records.NotServedError{Topic: []byte("moved"), Held: 3, Why: ownership.NoLease})
	if !a.Is(wire.CodeNotLeaderForTopic) || a.Err.Epoch != 7 || a.Err.NodeID != "n2" || a.Err.Addr != "10.0.0.2:9092" {
		t.Fatalf("refusal of a moved topic: %+v", a.Err)
	}
	a = d.recordsRefusal(&records.NotServedError{Topic: []byte("mine"), Held: 3, Why: ownership.NotHeld})
	if !a.Is(wire.CodeNotLeaderForTopic) || a.Err.Epoch != 3 || a.Err.NodeID != "" {
		t.Fatalf("refusal of a topic the cache says this node owns: %+v", a.Err)
	}
	if st := d.Stats(); st.TopicRejections != 2 || st.NotServedNoLease != 1 {
		t.Fatalf("counted %+v", st)
	}
	for _, c := range []struct {
		err  error
		code wire.ErrorCode
	}{
		{fmt.Errorf("x: %w", records.ErrHandingOver), wire.CodeUnavailable},
		{fmt.Errorf("x: %w", records.ErrSessionExpired), wire.CodeSessionExpired},
		{fmt.Errorf("x: %w", records.ErrBadRequest), wire.CodeBadRequest},
		{errors.New("disk"), wire.CodeInternal},
	} {
		if a := d.recordsRefusal(c.err); !a.Is(c.code) {
			t.Fatalf("records refusal %v answered %+v, want %v", c.err, a.Err, c.code)
		}
	}
	for _, c := range []struct {
		err  error
		code wire.ErrorCode
	}{
		{fmt.Errorf("x: %w", watch.ErrBadRequest), wire.CodeBadRequest},
		{fmt.Errorf("x: %w", watch.ErrFull), wire.CodeUnavailable},
		{fmt.Errorf("x: %w", watch.ErrUnreadable), wire.CodeUnavailable},
		{errors.New("disk"), wire.CodeInternal},
	} {
		if a := watchRefusal(c.err); !a.Is(c.code) {
			t.Fatalf("watch refusal %v answered %+v, want %v", c.err, a.Err, c.code)
		}
	}
}
