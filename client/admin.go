package client

import (
	"context"
	"fmt"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// The operators' requests. With client tokens, only a token of the admin
// role may make them.

// AdminPollInterval is how often Drain and RemoveNode ask the cluster how
// far the work they started has come.
const AdminPollInterval = 200 * time.Millisecond

// DrainProgress is what a drained node still holds, as Drain reports it
// after every look.
type DrainProgress struct {
	Node    string
	Topics  uint64 // topics it still owns
	Leaders uint64 // shards it still leads
}

// DrainResult is a finished drain.
type DrainResult struct {
	Node         string
	TopicsMoved  uint64 // topics the node owned when the drain began
	LeadersMoved uint64 // shards it led when the drain began
	Duration     time.Duration
}

// LeaderTransfer is a shard's leadership after TransferLeader.
type LeaderTransfer struct {
	Shard  uint64
	Leader string
	Term   uint64
}

// SplitResult is a shard's split: the shard, the leader that proposed the
// split and its term, and the two shards its topics went to (their ids
// fixed by the range, docs/shards.md): Low holds the keys whose next bit
// of the hash is 0, High the others.
type SplitResult struct {
	Shard     uint64
	Leader    string
	Term      uint64
	Low, High uint64
}

// RemoveOptions tune RemoveNode.
type RemoveOptions struct {
	// Force removes a node that is alive, or an id the membership does
	// not know.
	Force bool
	// Progress, when set, is called after every look with the number of
	// shards whose raft configuration still counts the node.
	Progress func(left uint64)
}

// RemoveResult is a finished removal.
type RemoveResult struct {
	Node           string
	ShardsReplaced uint64 // shards that counted the node when the removal began
	Duration       time.Duration
}

func validateNode(k call, node string) error {
	if node == "" || len(node) > wire.MaxNodeIDLen {
		return fmt.Errorf("client: %v: %w: a node id is 1..%d bytes", k, ErrInvalidArgument, wire.MaxNodeIDLen)
	}
	return nil
}

// adminRequest is an admin request whose AdminResult lands in out.
func adminRequest(kind wire.Kind, encode func([]byte) []byte, out *wire.AdminResult) *request {
	return &request{kind: kind, expect: wire.KindAdminResult, encode: encode, decode: func(b []byte) error {
		var m wire.AdminResult
		if err := wire.DecodeAdminResult(b, &m); err != nil {
			return err
		}
		*out = m
		out.Node = append([]byte(nil), m.Node...)
		return nil
	}}
}

// Drain takes node out of service: the cluster moves its topics and shard
// leaderships to other members and gives it none until Undrain. The mark
// is kept by the node and known cluster-wide, across restarts. Drain
// returns once the node owns and leads nothing, calling progress (when
// not nil) after every look; a drain cut short by ctx stays in force.
func (c *Client) Drain(ctx context.Context, node string, progress func(DrainProgress)) (DrainResult, error) {
	k := call{op: "drain", subject: node}
	if err := validateNode(k, node); err != nil {
		return DrainResult{}, err
	}
	start := time.Now()
	var res DrainResult
	for first := true; ; first = false {
		var out wire.AdminResult
		req := adminRequest(wire.KindDrain, func(b []byte) []byte {
			return wire.AppendAdminNode(b, &wire.AdminNode{Node: []byte(node)})
		}, &out)
		if err := c.anyServer(ctx, k, req); err != nil {
			return DrainResult{}, err
		}
		if first {
			res = DrainResult{Node: string(out.Node), TopicsMoved: out.Topics, LeadersMoved: out.Leaders}
		}
		if progress != nil {
			progress(DrainProgress{Node: string(out.Node), Topics: out.Topics, Leaders: out.Leaders})
		}
		if out.Topics == 0 && out.Leaders == 0 {
			res.Duration = time.Since(start)
			return res, nil
		}
		if err := c.sleep(ctx, AdminPollInterval); err != nil {
			return DrainResult{}, fmt.Errorf("client: %v: %w (the node is drained; %d topics and %d leaderships were still to move)",
				k, err, out.Topics, out.Leaders)
		}
	}
}

// Undrain lets a drained node take topics and shard leaderships again.
// Topics moved away stay where they went; leaderships come back as the
// placement balances them.
func (c *Client) Undrain(ctx context.Context, node string) (DrainProgress, error) {
	k := call{op: "undrain", subject: node}
	if err := validateNode(k, node); err != nil {
		return DrainProgress{}, err
	}
	var out wire.AdminResult
	req := adminRequest(wire.KindUndrain, func(b []byte) []byte {
		return wire.AppendAdminNode(b, &wire.AdminNode{Node: []byte(node)})
	}, &out)
	if err := c.anyServer(ctx, k, req); err != nil {
		return DrainProgress{}, err
	}
	return DrainProgress{Node: string(out.Node), Topics: out.Topics, Leaders: out.Leaders}, nil
}

// TransferLeader hands the leadership of shard to node, which must be a
// voter of the shard, and returns once node leads it. The shard manager
// leaves it there while the cluster's placement stays as it is.
func (c *Client) TransferLeader(ctx context.Context, shard uint64, node string) (LeaderTransfer, error) {
	k := call{op: fmt.Sprintf("transfer-leader %d", shard)}
	if err := validateNode(k, node); err != nil {
		return LeaderTransfer{}, err
	}
	var out wire.AdminResult
	req := adminRequest(wire.KindTransferLeader, func(b []byte) []byte {
		return wire.AppendTransferLeader(b, &wire.TransferLeader{Shard: shard, Node: []byte(node)})
	}, &out)
	if err := c.anyServer(ctx, k, req); err != nil {
		return LeaderTransfer{}, err
	}
	return LeaderTransfer{Shard: out.Shard, Leader: string(out.Node), Term: out.Term}, nil
}

// SplitShard splits shard in two: its leader proposes the split, and the
// shard's topics, leases, epochs and write sessions go on in the two
// halves of its hash range, each a raft group of its own on the same
// replicas. It returns once the split applied (and, within half the
// request timeout, both halves have leaders).
func (c *Client) SplitShard(ctx context.Context, shard uint64) (SplitResult, error) {
	k := call{op: fmt.Sprintf("split %d", shard)}
	var out wire.AdminResult
	req := adminRequest(wire.KindSplitShard, func(b []byte) []byte {
		return wire.AppendSplitShard(b, &wire.SplitShard{Shard: shard})
	}, &out)
	if err := c.anyServer(ctx, k, req); err != nil {
		return SplitResult{}, err
	}
	res := SplitResult{Shard: out.Shard, Leader: string(out.Node), Term: out.Term}
	// The halves' ids follow from the cluster's base shard count, which
	// the leader table says.
	if err := c.pullLeaders(ctx); err != nil {
		return res, fmt.Errorf("client: %v: the shard split; its halves are not known: %w", k, err)
	}
	if t := c.leaders.Load(); t != nil && t.smap != nil && out.Shard <= uint64(^uint32(0)) {
		if low, high, err := t.smap.Space().Children(uint32(out.Shard)); err == nil {
			res.Low, res.High = uint64(low), uint64(high)
		}
	}
	return res, nil
}

// RemoveNode forgets a node gone for good: every live member records the
// removal (a node refuses to remove one it sees alive, or does not know,
// unless opts.Force), the shard managers replace its replicas, and a node
// of that id that comes back with its old data is kept out (one started
// on an empty data directory joins as new). It returns once no shard's
// configuration counts the node.
func (c *Client) RemoveNode(ctx context.Context, node string, opts RemoveOptions) (RemoveResult, error) {
	k := call{op: "remove", subject: node}
	if err := validateNode(k, node); err != nil {
		return RemoveResult{}, err
	}
	start := time.Now()
	res := RemoveResult{Node: node}
	for {
		members, err := c.Members(ctx)
		if err != nil {
			return RemoveResult{}, err
		}
		var left uint64
		all := true
		for _, m := range members {
			if m.ID == node || (m.State != wire.MemberAlive && m.State != wire.MemberSuspect) || m.ClientAddr == "" {
				continue
			}
			var out wire.AdminResult
			req := adminRequest(wire.KindRemoveNode, func(b []byte) []byte {
				return wire.AppendAdminNode(b, &wire.AdminNode{Node: []byte(node), Force: opts.Force})
			}, &out)
			if err := c.atServer(ctx, k, m.ClientAddr, req); err != nil {
				if ctx.Err() != nil || classify(err) == fatal {
					return RemoveResult{}, err
				}
				all = false // a member that cannot answer now: ask again
				continue
			}
			left += out.Shards
		}
		// The most shards that counted the node at once: a member that
		// did not answer a first look is counted at the next.
		res.ShardsReplaced = max(res.ShardsReplaced, left)
		if opts.Progress != nil {
			opts.Progress(left)
		}
		if all && left == 0 {
			res.Duration = time.Since(start)
			return res, nil
		}
		if err := c.sleep(ctx, AdminPollInterval); err != nil {
			return RemoveResult{}, fmt.Errorf("client: %v: %w (the node is removed; %d shards still counted it)", k, err, left)
		}
	}
}
