package meta_test

import (
	"fmt"

	"github.com/shoalmq/shoal/meta"
)

// A leader prepares an assignment without a named owner, proposes its
// encoding, and every replica applies the committed entry. The leader then
// sends the effects.
func Example() {
	leader, follower := meta.New(), meta.New()
	live := []meta.Node{{ID: "n1"}, {ID: "n2"}, {ID: "n3"}}

	cmd, err := leader.PrepareAssign([]byte("topic-blue"), "", 0, live)
	if err != nil {
		panic(err)
	}
	entry, err := meta.AppendCommand(nil, &cmd)
	if err != nil {
		panic(err)
	}
	var res meta.Result
	for _, s := range []*meta.State{leader, follower} {
		if err := s.ApplyEntry(entry, &res); err != nil {
			panic(err)
		}
	}
	a := res.Assignment
	fmt.Printf("%s -> owner %s, epoch %d\n", a.Topic, a.Owner, a.Epoch)
	for _, e := range res.Effects {
		fmt.Printf("%s %s on %s at epoch %d\n", e.Kind, e.Topic, e.Node, e.Epoch)
	}

	// The owner dies: the leader moves its topics.
	dead := a.Owner
	var alive []meta.Node
	for _, n := range live {
		if n.ID != dead {
			alive = append(alive, meta.Node{ID: n.ID, Load: uint64(leader.Load(n.ID))})
		}
	}
	cmd, err = leader.PlanReassign(dead, alive, 0)
	if err != nil {
		panic(err)
	}
	entry, _ = meta.AppendCommand(nil, &cmd)
	for _, s := range []*meta.State{leader, follower} {
		if err := s.ApplyEntry(entry, &res); err != nil {
			panic(err)
		}
	}
	for _, e := range res.Effects {
		fmt.Printf("%s %s on %s at epoch %d\n", e.Kind, e.Topic, e.Node, e.Epoch)
	}
	// Output:
	// topic-blue -> owner n1, epoch 1
	// open topic-blue on n1 at epoch 1
	// close topic-blue on n1 at epoch 2
	// open topic-blue on n2 at epoch 2
}
