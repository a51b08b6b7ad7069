package reconcile

import (
	"slices"
	"time"

	"github.com/shoalmq/shoal/router"
)

// Birth: a node whose store holds no shard waits until SWIM shows
// Config.BootstrapExpect live members. If no shard leader is known anywhere
// for birthSettle, the first BootstrapExpect members in id order compute
// the same placement, create the groups they are voters of, and the
// preferred leader of each campaigns. A member of that first set that
// hears of leaders its placement agrees with was born with the others and
// creates its groups at once. A node outside the set, or one that hears of
// more members than expected or of leaders its placement cannot have,
// joins the cluster already born instead (the shard manager gives it its
// share). Starting more than BootstrapExpect fresh nodes at once is not
// supported.

// birthSettle: how long the birth condition must hold, with no leader
// known, before a node acts.
const birthSettle = 500 * time.Millisecond

// BirthGrace: a born node is ready at the latest this long after birth,
// even if some shard's leader is still unknown to it (it answers
// Unavailable for those).
const BirthGrace = 5 * time.Second

// birthWaitLogInterval: while a fresh node waits for BootstrapExpect
// members, it says how many it sees this often.
const birthWaitLogInterval = 5 * time.Second

// BirthStep is what a node not born yet does at one look.
type BirthStep uint8

const (
	// BirthNone: nothing yet (the birth condition settles, the groups are
	// being created, or this node is not among the first members and
	// waits to hear of the leaders).
	BirthNone BirthStep = iota
	// BirthWait: fewer live members than BootstrapExpect; say so (at most
	// once in birthWaitLogInterval).
	BirthWait
	// BirthJoin: the cluster is born already; this node joins it (marks
	// itself born) and creates nothing.
	BirthJoin
	// BirthCreate: create Groups (none: born at once) and mark this node
	// born once every creation has been answered (GroupDone).
	BirthCreate
)

// Birth is the outcome of one look (Controller.Birth).
type Birth struct {
	Step BirthStep
	// Members are the first BootstrapExpect live members (BirthCreate).
	Members []string
	// Groups are the groups this node creates, in shard order.
	Groups []Group
}

// Group is one group to create: its shard, the raft ids of its voters,
// and whether this node is its preferred leader and campaigns once it is
// created.
type Group struct {
	Shard    uint64
	Voters   []uint64
	Campaign bool
}

// birthState is the birth's state between looks (event loop only, but for
// creating, which the creations' answers count down).
type birthState struct {
	seen      time.Time // when the birth condition began to hold
	waitSaid  time.Time // when BirthWait was last returned
	underWay  bool      // the groups are being created
	creations int       // creations not yet answered
}

// Birth looks, at now, at whether this node, not yet born, creates its
// groups or joins a born cluster: v is the membership, rows every shard
// leader this node has heard of. Event loop only. The error is the birth
// ring's (router.NewRing): nothing is done then, and the next look tries
// again.
func (c *Controller) Birth(v *View, rows []router.ShardLeader, now time.Time) (Birth, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := &c.birth
	expect := c.cfg.BootstrapExpect
	if len(v.Live) < expect {
		b.seen = time.Time{}
		if b.waitSaid.IsZero() || now.Sub(b.waitSaid) >= birthWaitLogInterval {
			b.waitSaid = now
			return Birth{Step: BirthWait}, nil
		}
		return Birth{}, nil
	}
	initial := v.Live[:expect]
	first := slices.Contains(initial, c.cfg.Self)
	if len(rows) > 0 && (len(v.Live) > expect || !first) {
		return Birth{Step: BirthJoin}, nil
	}
	if !first {
		return Birth{}, nil
	}
	// With no leader known anywhere, the condition must hold for
	// birthSettle: long enough for a node joining a born cluster to hear
	// of its leaders (by gossip or by its first metadata pull). Leaders
	// already known are those of peers that were born from this same
	// member set just before this node, and it creates its groups at once.
	if len(rows) == 0 {
		if b.seen.IsZero() {
			b.seen = now
		}
		if now.Sub(b.seen) < birthSettle {
			return Birth{}, nil
		}
	}
	rm := make([]router.Member, 0, len(initial))
	for _, id := range initial {
		rm = append(rm, router.Member{ID: id, Rack: v.Members[id].Rack})
	}
	ring, err := router.NewRing(rm, router.RingConfig{})
	if err != nil {
		return Birth{}, err
	}
	pl := ring.Placement(c.cfg.Shards, c.cfg.Replicas)
	var reps []string
	for _, r := range rows {
		if reps = pl.Replicas(r.Shard, reps[:0]); !slices.Contains(reps, r.Leader) {
			// Leaders this placement cannot have: a cluster born from
			// another member set. Join it instead.
			return Birth{Step: BirthJoin}, nil
		}
	}
	if b.underWay {
		return Birth{}, nil
	}
	b.underWay = true
	out := Birth{Step: BirthCreate, Members: initial}
	for s := range c.cfg.Shards {
		if reps = pl.Replicas(s, reps[:0]); !slices.Contains(reps, c.cfg.Self) {
			continue
		}
		voters := make([]uint64, len(reps))
		for i, r := range reps {
			voters[i] = c.cfg.RaftID(r)
		}
		out.Groups = append(out.Groups, Group{Shard: uint64(s), Voters: voters, Campaign: pl.Leader(s) == c.cfg.Self})
	}
	b.creations = len(out.Groups)
	return out, nil
}

// GroupDone reports that the creation of one group Birth returned was
// answered (made or not), and whether it was the last: the node is born
// then.
func (c *Controller) GroupDone() (last bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.birth.creations--
	return c.birth.creations == 0
}

// Ready reports whether a born node is ready at now, as far as its
// leaders go: it knows the leader of every shard (leaders of them), or
// BirthGrace has passed since it was born (bornAt). The node is ready
// also only once its cluster metadata is synced (metasync.Sync.Synced).
func (c *Controller) Ready(leaders int, bornAt, now time.Time) bool {
	return leaders == int(c.cfg.Shards) || now.Sub(bornAt) > BirthGrace
}
