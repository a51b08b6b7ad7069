package node

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/client"
)

func TestLeaveHandsOffLeadershipsAndTopics(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl := clientOf(t, c.node("n1"))
	for i := range 30 {
		if _, err := cl.Assign(ctx, fmt.Sprintf("leaving-%02d", i), client.AssignOptions{Owner: "n3"}); err != nil {
			t.Fatal(err)
		}
	}
	n3 := c.node("n3")
	if n3.Status().ShardsLed == 0 {
		t.Fatal("n3 leads nothing to hand off")
	}
	start := time.Now()
	if err := n3.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	if led := n3.ledCount(); led != 0 {
		t.Errorf("n3 still led %d shards when it closed", led)
	}
	waitUntil(t, 20*time.Second, "n3's topics moved", func() bool {
		for i := range 30 {
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			a, err := cl.Lookup(lctx, fmt.Sprintf("leaving-%02d", i), true)
			lcancel()
			if err != nil || a.Owner == "n3" {
				return false
			}
		}
		return true
	})
	t.Logf("leave and move of 30 topics took %v", time.Since(start).Round(time.Millisecond))
}
