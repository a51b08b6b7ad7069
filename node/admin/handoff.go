package admin

import (
	"context"
	"time"

	"github.com/shoalmq/shoal/raftmux"
)

// Replicas is the raft host as a leaving node hands its leaderships over:
// blocking calls, bounded by their context (raftmux.Host).
type Replicas interface {
	// Shards describes every replica the host runs.
	Shards(ctx context.Context) ([]raftmux.Info, error)
	// TransferLeader hands the leadership of shard to the replica target.
	TransferLeader(ctx context.Context, shard, target uint64) error
}

// HandOff hands every leadership this node holds, as r reports them, to
// another voter of the shard: the first, in the group's order, that is a
// live member the node knows. Each transfer made is counted
// (Env.Transferred). A leaving node calls it once SWIM heard of the leave,
// and then waits until it leads nothing. It fails only when r cannot say
// which shards the node leads.
func (a *Handler) HandOff(ctx context.Context, r Replicas) error {
	infos, err := r.Shards(ctx)
	if err != nil {
		return err
	}
	v := a.env.Members()
	for _, in := range infos {
		if in.Leader != a.selfID {
			continue
		}
		for _, vo := range in.Voters {
			name, ok := a.env.NameOf(vo)
			if vo == a.selfID || !ok || !v.Alive(name) {
				continue
			}
			if err := r.TransferLeader(ctx, in.Shard, vo); err == nil {
				a.env.Transferred()
			}
			break
		}
	}
	return nil
}

// How long a leaving node waits, at most, for its leaderships to go
// (Leave), and how often it looks.
const (
	leaveWait = 3 * time.Second
	leavePoll = 50 * time.Millisecond
)

// Leave is a leaving node's handover: every leadership it holds handed to
// another voter (HandOff), then a wait on the node's clock, bounded by ctx
// and leaveWait, until it leads nothing (Env.Led). It blocks: a started
// node calls it once SWIM heard of its leave.
func (a *Handler) Leave(ctx context.Context, r Replicas) {
	if a.HandOff(ctx, r) != nil {
		return
	}
	deadline := a.env.Now().Add(leaveWait)
	for a.env.Now().Before(deadline) && ctx.Err() == nil {
		if a.events.Led() == 0 {
			return
		}
		slept := make(chan struct{})
		a.env.After(leavePoll, func() { close(slept) })
		<-slept
	}
}
