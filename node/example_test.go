package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node"
)

// A broker embeds a node, learns from its events which topics it owns,
// and checks the topic's guard before it acknowledges a write of its own.
func ExampleNode_OwnershipEvents() {
	dir, _ := os.MkdirTemp("", "shoal-example")
	defer os.RemoveAll(dir)
	n, err := node.New(node.Config{
		ID: "n1", DataDir: dir,
		ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0",
		Shards: 8, Replicas: 1, ClusterID: 9, SwimPreset: "fast",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer n.Close()
	// Asked before Start: every topic the node holds is told.
	events := n.OwnershipEvents()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		fmt.Println(err)
		return
	}
	<-n.Ready()

	// An operator gives the topic to this node.
	addr, _, _ := n.Addrs()
	cl, _ := client.New(client.Config{Servers: []string{addr}, ClusterID: 9})
	defer cl.Close()
	if _, err := cl.Assign(ctx, "orders", client.AssignOptions{Owner: "n1"}); err != nil {
		fmt.Println(err)
		return
	}

	ev := <-events
	fmt.Println(ev.Kind, ev.Topic, "epoch", ev.Epoch, "partitions", ev.Partitions)

	// A write of the broker's own is acknowledged only once the guard
	// passes: the node holds the topic at that epoch under a lease.
	g := n.Guard(ev.Topic, ev.Epoch)
	for g.Check() != nil && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	fmt.Println("guard:", g.Check())
	// At another epoch the guard refuses.
	fmt.Println("guard at epoch 2 refuses:", n.Guard("orders", 2).Check() != nil)
	// Output:
	// acquired orders epoch 1 partitions 1
	// guard: <nil>
	// guard at epoch 2 refuses: true
}
