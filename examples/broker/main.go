// Command broker is a small broker that embeds a Shoal node: it keeps the
// records of the topics its node owns in memory, learns which those are
// from the node's ownership events, and acknowledges a write only after
// the topic's guard passed at the epoch the write was made at.
//
// Run alone it forms a cluster of one, takes a topic, writes a few
// records, leaves, and prints what happened:
//
//	go run ./examples/broker -dir /tmp/broker -topic orders -records 3
//
// A real broker would take writes from its own clients; this one writes
// them itself so that it runs on its own.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/shoalmq/shoal/client"
	"github.com/shoalmq/shoal/node"
	"github.com/shoalmq/shoal/node/feed"
)

// topicLog is the broker's own log of one topic it owns.
type topicLog struct {
	guard   feed.Guard
	records []string
}

// broker holds the topics its node owns, as the events said.
type broker struct {
	mu     sync.Mutex
	topics map[string]*topicLog
	n      *node.Node
	out    *os.File
}

// follow takes the node's ownership events until the channel closes.
func (b *broker) follow(acquired chan<- string) {
	for ev := range b.n.OwnershipEvents() {
		b.mu.Lock()
		switch ev.Kind {
		case feed.Acquired:
			b.topics[ev.Topic] = &topicLog{guard: b.n.Guard(ev.Topic, ev.Epoch)}
			fmt.Fprintf(b.out, "acquired %s at epoch %d with %d partition(s)\n", ev.Topic, ev.Epoch, ev.Partitions)
		case feed.Released:
			delete(b.topics, ev.Topic)
			fmt.Fprintf(b.out, "released %s at epoch %d: %s\n", ev.Topic, ev.Epoch, ev.Reason)
		}
		b.mu.Unlock()
		if ev.Kind == feed.Acquired {
			acquired <- ev.Topic
		}
	}
}

var errNotOwner = errors.New("broker: not the topic's owner")

// write appends value to topic and acknowledges it only while the guard
// passes: a write made after ownership moved on is taken back.
func (b *broker) write(topic, value string) (offset int, epoch uint64, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.topics[topic]
	if t == nil {
		return 0, 0, errNotOwner
	}
	t.records = append(t.records, value)
	if err := t.guard.Check(); err != nil {
		t.records = t.records[:len(t.records)-1]
		return 0, 0, err
	}
	return len(t.records) - 1, t.guard.Epoch(), nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "broker:", err)
		os.Exit(1)
	}
}

func run() error {
	dir := flag.String("dir", "", "data directory of the embedded node (required)")
	topic := flag.String("topic", "orders", "topic to take and write to")
	records := flag.Int("records", 3, "records to write (1-1000)")
	flag.Parse()
	if *dir == "" {
		return errors.New("-dir is required")
	}
	if *records < 1 || *records > 1000 {
		return fmt.Errorf("-records %d outside 1-1000", *records)
	}
	n, err := node.New(node.Config{
		ID: "broker-1", DataDir: *dir,
		ClientAddr: "127.0.0.1:0", PeerAddr: "127.0.0.1:0", SwimAddr: "127.0.0.1:0",
		Shards: 16, Replicas: 1, ClusterID: 7, SwimPreset: "fast",
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		return err
	}
	// Followed from before Start: the node keeps events from the first
	// ask on, and then tells every topic it holds.
	b := &broker{topics: map[string]*topicLog{}, n: n, out: os.Stdout}
	acquired := make(chan string, 16)
	followed := make(chan struct{})
	go func() { b.follow(acquired); close(followed) }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.Start(ctx); err != nil {
		_ = n.Close()
		return err
	}
	select {
	case <-n.Ready():
	case <-ctx.Done():
		_ = n.Close()
		return fmt.Errorf("node not ready: %w", ctx.Err())
	}

	// Take the topic, as an operator would with shoalctl assign.
	addr, _, _ := n.Addrs()
	cl, err := client.New(client.Config{Servers: []string{addr}, ClusterID: 7})
	if err != nil {
		_ = n.Close()
		return err
	}
	defer cl.Close()
	if _, err := cl.Assign(ctx, *topic, client.AssignOptions{Owner: n.ID()}); err != nil {
		_ = n.Close()
		return err
	}
	for got := ""; got != *topic; {
		select {
		case got = <-acquired:
		case <-ctx.Done():
			_ = n.Close()
			return fmt.Errorf("topic %q never acquired: %w", *topic, ctx.Err())
		}
	}
	for i := 0; i < *records; {
		off, epoch, err := b.write(*topic, fmt.Sprintf("record-%d", i))
		if errors.Is(err, feed.ErrNotServing) && ctx.Err() == nil {
			time.Sleep(20 * time.Millisecond) // no lease yet: the first one is on its way
			continue
		}
		if err != nil {
			_ = n.Close()
			return err
		}
		fmt.Printf("acknowledged record-%d at offset %d, epoch %d\n", i, off, epoch)
		i++
	}
	// Leaving releases the topic. With no other node to hand the shards'
	// leadership to, the leave waits for that only briefly.
	lctx, lcancel := context.WithTimeout(ctx, time.Second)
	defer lcancel()
	if err := n.Leave(lctx); err != nil {
		return err
	}
	<-followed
	return nil
}
