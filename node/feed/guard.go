package feed

import (
	"errors"
	"fmt"

	"github.com/shoalmq/shoal/node/ownership"
)

// ErrNotServing is wrapped by the error of a Guard whose lease does not
// cover its topic at its epoch.
var ErrNotServing = errors.New("node: not serving topic at that epoch")

// NotServingError is a Guard's refusal: Held is the epoch this node holds
// the topic at (0: not held), Why the reason in words (not held, another
// epoch, no lease, released).
type NotServingError struct {
	Topic string
	Epoch uint64
	Held  uint64
	Why   string
}

func (e *NotServingError) Error() string {
	return fmt.Sprintf("node: not serving %q at epoch %d (held at %d): %s", e.Topic, e.Epoch, e.Held, e.Why)
}

func (e *NotServingError) Unwrap() error { return ErrNotServing }

// Leases is the lease check a Guard makes (lease.Agent.Serve): the
// holding of topic and whether a write at epoch may be acknowledged.
type Leases interface {
	Serve(topic []byte, epoch uint64) (ownership.Topic, ownership.Refusal)
}

// Guard checks that this node may acknowledge a write of topic at epoch.
// Take one per Acquired event and call Check after the write is durable
// and before acknowledging it, as the node does for its own produces.
type Guard struct {
	leases Leases
	topic  []byte
	epoch  uint64
}

// NewGuard returns the guard of topic at epoch, checked against leases.
func NewGuard(leases Leases, topic string, epoch uint64) Guard {
	return Guard{leases: leases, topic: []byte(topic), epoch: epoch}
}

// Check returns nil while this node holds the topic at the guard's epoch
// under an unexpired lease from the topic's shard leader, and a
// *NotServingError otherwise. It takes a read lock and reads the clock; it
// neither allocates nor waits when it returns nil. A check that passed
// covers a write made before it: one owner at a time (docs/leases.md)
// means no write at a later epoch was acknowledged before it.
func (g Guard) Check() error {
	t, r := g.leases.Serve(g.topic, g.epoch)
	if r == ownership.Servable {
		return nil
	}
	return &NotServingError{Topic: string(g.topic), Epoch: g.epoch, Held: t.Epoch, Why: r.String()}
}

// Topic and Epoch return what the guard covers.
func (g Guard) Topic() string { return string(g.topic) }

// Epoch returns the epoch the guard covers.
func (g Guard) Epoch() uint64 { return g.epoch }
