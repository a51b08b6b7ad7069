package meta

import (
	"fmt"

	"github.com/zeebo/xxh3"
)

// Node is a live candidate owner and its load: the number of topics it
// owns as far as the caller knows (State.Load gives a shard's own count).
type Node struct {
	ID   string
	Load uint64
}

// ChooseOwner picks the owner of topic among live, by rendezvous (highest
// random weight) hashing biased by load: each node scores
// hash(topic, node)/(load+1) and the highest score wins; equal scores go
// to the lower load, then the lower id. The result depends only on the
// topic and the set of (id, load) pairs, not on their order. With equal
// loads a topic keeps its owner when other nodes come and go; a lightly
// loaded node wins more often, so new topics drift towards it. Entries
// with an empty or over-long id are ignored; "" means no candidate.
func ChooseOwner(topic []byte, live []Node) string {
	i := chooseOwner(xxh3.Hash(topic), live)
	if i < 0 {
		return ""
	}
	return live[i].ID
}

// chooseOwner returns the index in live of the winner for a topic whose
// hash is th, or -1.
func chooseOwner(th uint64, live []Node) int {
	best := -1
	var bestScore uint64
	for i := range live {
		n := &live[i]
		if checkNodeID(n.ID) != nil {
			continue
		}
		d := n.Load + 1
		if d == 0 { // Load is the largest uint64
			d = n.Load
		}
		score := xxh3.HashStringSeed(n.ID, th) / d
		if best < 0 || score > bestScore {
			best, bestScore = i, score
			continue
		}
		if score == bestScore {
			b := &live[best]
			if n.Load < b.Load || (n.Load == b.Load && n.ID < b.ID) {
				best = i
			}
		}
	}
	return best
}

// PrepareAssign turns an AssignTopic request into the command the leader
// proposes. With no owner named, an active topic keeps its owner (the
// command carries none, so it applies as a no-op even if the topic moved
// before it commits) and a topic that is not active gets one chosen by
// ChooseOwner among live. The command is checked against the current
// state, so a request that would be rejected can be refused before
// proposing: the error is Check's, returned with the command.
func (s *State) PrepareAssign(topic []byte, owner string, partitions uint32, live []Node) (Command, error) {
	c := Command{Op: OpAssign, Topic: topic, Owner: owner, Partitions: partitions}
	if owner == "" {
		if r := s.topics[string(topic)]; r == nil || r.state != Active {
			c.Owner = ChooseOwner(topic, live)
		}
	}
	return c, s.Check(&c)
}

// PlanReassign builds the ReassignNode command that moves up to limit (at
// most MaxMoves; limit <= 0 means MaxMoves) of dead's active topics to
// nodes of live, in topic order. Each move is chosen by ChooseOwner with
// the loads of live raised by the moves already planned, so the topics
// spread over the live nodes instead of all landing on one. A command with
// no moves means dead owns nothing here. Entries of live naming dead are
// ignored; with topics to move and no candidate left the error is
// ErrNoOwner.
func (s *State) PlanReassign(dead string, live []Node, limit int) (Command, error) {
	if err := checkNodeID(dead); err != nil {
		return Command{}, fmt.Errorf("meta: plan reassign: %w", err)
	}
	if limit <= 0 || limit > MaxMoves {
		limit = MaxMoves
	}
	c := Command{Op: OpReassignNode, Node: dead}
	if s.Load(dead) == 0 {
		return c, nil
	}
	cands := make([]Node, 0, len(live))
	for _, n := range live {
		if n.ID != dead && checkNodeID(n.ID) == nil {
			cands = append(cands, n)
		}
	}
	if len(cands) == 0 {
		return Command{}, fmt.Errorf("meta: plan reassign of %q: %w", dead, ErrNoOwner)
	}
	for _, r := range s.sortedRecords() {
		if len(c.Moves) == limit {
			break
		}
		k := r.topic
		if r.state != Active || r.owner != dead {
			continue
		}
		i := chooseOwner(xxh3.HashString(k), cands)
		if cands[i].Load < ^uint64(0) {
			cands[i].Load++
		}
		c.Moves = append(c.Moves, Move{Topic: []byte(k), Owner: cands[i].ID, Epoch: r.epoch})
	}
	return c, nil
}
