package client_test

import (
	"context"
	"fmt"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/client/clienttest"
)

func Example() {
	// Two fake nodes stand in for a cluster.
	cluster := &clienttest.Cluster{ClusterID: 1}
	defer cluster.Close()
	n1, _ := cluster.Start("n1")
	n2, _ := cluster.Start("n2")

	c, err := client.New(client.Config{Servers: []string{n1.Addr()}, ClusterID: 1})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	a, err := c.Assign(ctx, "topic-blue", client.AssignOptions{Owner: "n2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("owner", a.Owner, "epoch", a.Epoch, "at n2's address:", a.OwnerAddr == n2.Addr())

	// Produce goes to the owner, at the epoch the client knows.
	p, _ := c.Produce(ctx, "topic-blue", [][]byte{[]byte("hello")})
	fmt.Println("offset", p.Offset, "epoch", p.Epoch)

	// Ownership moves; the client learns it from the owner's refusal.
	cluster.SetOwner("topic-blue", "n1")
	p, _ = c.Produce(ctx, "topic-blue", [][]byte{[]byte("world")})
	fmt.Println("offset", p.Offset, "epoch", p.Epoch)

	f, _ := c.Fetch(ctx, "topic-blue", 0, 0)
	for _, r := range f.Records {
		fmt.Println(r.Offset, string(r.Value))
	}
	// Output:
	// owner n2 epoch 1 at n2's address: true
	// offset 0 epoch 1
	// offset 1 epoch 2
	// 0 hello
	// 1 world
}
