package client

import (
	"testing"
	"time"

	"github.com/shoalmq/shoal/router"
	"github.com/shoalmq/shoal/wire"
)

// TestAChangeMovesOnlyACachedRouteForward: a change from the route watch
// moves a cached route to a newer epoch, never back, and never adds one;
// a revoke fences it; a change naming no usable address is ignored.
func TestAChangeMovesOnlyACachedRouteForward(t *testing.T) {
	c, err := New(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.cache.Put([]byte("t"), "n1", "127.0.0.1:7101", 3, 1)
	steps := []struct {
		ch      Change
		changed bool
		want    router.Route // zero: no route
	}{
		{Change{Topic: "other", Change: wire.ChangeAssigned, Owner: "n2", OwnerAddr: "127.0.0.1:7102", Epoch: 1, Partitions: 1}, false, router.Route{}},
		{Change{Topic: "t", Change: wire.ChangeMoved, Owner: "n2", OwnerAddr: "127.0.0.1:7102", Epoch: 2, Partitions: 1}, false, router.Route{Owner: "n1", Addr: "127.0.0.1:7101", Epoch: 3, Partitions: 1}},
		{Change{Topic: "t", Change: wire.ChangeMoved, Owner: "n2", OwnerAddr: "not an address", Epoch: 4, Partitions: 1}, false, router.Route{Owner: "n1", Addr: "127.0.0.1:7101", Epoch: 3, Partitions: 1}},
		{Change{Topic: "t", Change: wire.ChangeMoved, Owner: "n2", OwnerAddr: "127.0.0.1:7102", Epoch: 4, Partitions: 1}, true, router.Route{Owner: "n2", Addr: "127.0.0.1:7102", Epoch: 4, Partitions: 1}},
		{Change{Topic: "t", Change: wire.ChangeUpdated, Owner: "n2", OwnerAddr: "127.0.0.1:7102", Epoch: 4, Partitions: 8}, true, router.Route{Owner: "n2", Addr: "127.0.0.1:7102", Epoch: 4, Partitions: 8}},
		{Change{Topic: "t", Change: wire.ChangeRevoked, Epoch: 5}, true, router.Route{}},
		{Change{Topic: "t", Change: wire.ChangeAssigned, Owner: "n3", OwnerAddr: "127.0.0.1:7103", Epoch: 6, Partitions: 2}, true, router.Route{Owner: "n3", Addr: "127.0.0.1:7103", Epoch: 6, Partitions: 2}},
	}
	for i, s := range steps {
		if got := c.applyChange(&s.ch); got != s.changed {
			t.Fatalf("step %d (%+v): changed %v, want %v", i, s.ch, got, s.changed)
		}
		r, ok := c.cache.Get([]byte(s.ch.Topic))
		if s.want == (router.Route{}) {
			if ok {
				t.Fatalf("step %d: route %+v, want none", i, r)
			}
			continue
		}
		if !ok || r != s.want {
			t.Fatalf("step %d: route %+v %v, want %+v", i, r, ok, s.want)
		}
	}
}

// TestTheWatchIsTrustedForAWhileOnly: a request leaves its route to the
// watch only while the watch is established, and for followPatience from
// when it first did.
func TestTheWatchIsTrustedForAWhileOnly(t *testing.T) {
	c, err := New(Config{Servers: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var since time.Time
	if c.trustWatch(&since) {
		t.Fatal("trusted a watch the client does not run")
	}
	c.follow = &follower{}
	if c.trustWatch(&since) {
		t.Fatal("trusted a watch not established")
	}
	c.follow.healthy.Store(true)
	if !c.trustWatch(&since) || since.IsZero() {
		t.Fatal("did not trust an established watch")
	}
	since = time.Now().Add(-followPatience)
	if c.trustWatch(&since) {
		t.Fatal("trusted the watch past followPatience")
	}
}
