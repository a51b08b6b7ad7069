package tests

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/shoalmq/shoal/history"
	"github.com/shoalmq/shoal/router"
)

// topicsNotLedBy returns n topic names whose shards' leaders, as the
// cluster reports them now, are not node.
func (c *cluster) topicsNotLedBy(node, prefix string, n int) []string {
	c.t.Helper()
	var s shards
	c.must(c.servers(), &s, "shards")
	leader := make(map[uint64]string)
	for _, sh := range s.Shards {
		leader[sh.Shard] = sh.Leader
	}
	var out []string
	for i := 0; len(out) < n; i++ {
		topic := fmt.Sprintf("%s-%d", prefix, i)
		if l := leader[uint64(router.ShardOf([]byte(topic), clusterShards))]; l != "" && l != node {
			out = append(out, topic)
		}
	}
	return out
}

// TestProcessPausedOwnerStopsServing stops an owner's process with
// SIGSTOP for longer than its lease while clients write its topics, one
// of them reaching only that owner, and resumes it: the owner's topics
// move, and once it runs again it must not acknowledge a write at its old
// epoch after the new owner acknowledged one (it was acknowledging about
// sixty before owners served under leases).
func TestProcessPausedOwnerStopsServing(t *testing.T) {
	c := startCluster(t, 3)
	n3 := c.node("n3")
	topics := c.topicsNotLedBy("n3", "paused", 2)
	l := newLoad()
	admin := loadClient(t, c.servers(), nil)
	owners := map[string]string{}
	for _, topic := range topics {
		owners[topic] = "n3"
	}
	before := l.assignAll(t, admin, owners)
	l.produce("beside-n3", loadClient(t, []string{n3.client}, onlyTo(n3.client, nil)), topics, 0)
	l.produce("elsewhere", loadClient(t, []string{c.node("n1").client, c.node("n2").client}, nil), topics, 0)
	time.Sleep(time.Second)
	stopped := time.Now()
	c.signal(n3, syscall.SIGSTOP)
	// Frozen past its lease: the topics move and are written at their
	// next owners; a second more of load, then n3 runs again and must
	// refuse from its first answer on.
	c.eventually(30*time.Second, "both topics written at their next owners", func() (bool, string) {
		moved := map[string]bool{}
		for _, o := range l.rec.Ops() {
			if o.OK && o.Kind == history.Produce && o.Epoch > before[o.Topic] && o.End.After(stopped) {
				moved[o.Topic] = true
			}
		}
		return len(moved) == len(topics), fmt.Sprintf("moved: %v", moved)
	})
	time.Sleep(time.Second)
	resumed := time.Now()
	c.signal(n3, syscall.SIGCONT)
	time.Sleep(2 * time.Second)
	l.stop()
	ops := checkLoad(t, l, finalState(t, admin, topics))
	for _, o := range ops {
		if o.OK && o.Client == "beside-n3" && o.Epoch == before[o.Topic] && o.End.After(resumed.Add(100*time.Millisecond)) {
			t.Fatalf("n3 acknowledged a write at its old epoch after it resumed: %v", &o)
		}
	}
	for _, topic := range topics {
		var a assignment
		c.must(c.servers(), &a, "lookup", topic, "--linearizable")
		if a.Epoch <= before[topic] {
			t.Fatalf("%s did not move off the paused owner: %+v", topic, a)
		}
		t.Logf("%s moved to %s at epoch %d", topic, a.Owner, a.Epoch)
	}
}
