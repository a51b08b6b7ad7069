package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/shoalmq/shoal/wire"
)

// recoveryBound is how long (virtual time, "fast" preset) a topic whose
// owner was killed may stay unwritable: failure detection (about 1 s),
// the last lease running out (0.8 s) or a new shard leader's wait (1.2 s),
// a commit and the new owner's first lease round, with room to spare.
const recoveryBound = 8 * time.Second

// TestOwnerKilledAfterARestartRecovers kills every node and restarts it,
// in turn; then, three times, gives a node a set of topics and kills it:
// each topic must take writes at a new owner within recoveryBound. The
// third victim is the first one again, back from its restart.
func TestOwnerKilledAfterARestartRecovers(t *testing.T) {
	w, restore, err := newWorld(Config{Seed: 11, NoFaults: true, Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	defer w.close()
	if !w.waitReady(60 * time.Second) {
		t.Fatal("cluster not ready")
	}
	for _, h := range w.hosts {
		h.crash()
		w.runUntil(w.now.Add(3 * time.Second))
		w.restart(h)
		w.runUntil(w.now.Add(10 * time.Second))
	}
	for round, victim := range []*host{w.hosts[2], w.hosts[1], w.hosts[2]} {
		var topics []string
		for i := range 8 {
			topic := fmt.Sprintf("topic-%d-%d", round, i)
			kind, p, ok := w.ask(w.hosts[i%len(w.hosts)], wire.KindAssign, wire.AppendAssign(nil, &wire.Assign{Topic: []byte(topic), Owner: []byte(victim.id)}))
			var a wire.Assignment
			if !ok || kind != wire.KindAssignment || wire.DecodeAssignment(p, &a) != nil || string(a.Owner) != victim.id {
				t.Fatalf("assign %s to %s: %v %v", topic, victim.id, kind, ok)
			}
			if why := w.writable(victim, topic, a.Epoch); why != "" {
				t.Fatalf("%s not writable at %s before the kill: %s", topic, victim.id, why)
			}
			topics = append(topics, topic)
		}
		killed := w.now
		victim.crash()
		var slowest time.Duration
		for _, topic := range topics {
			for {
				if w.now.Sub(killed) > recoveryBound {
					t.Fatalf("round %d: %s not writable %v after its owner %s was killed", round, topic, recoveryBound, victim.id)
				}
				owner, epoch := w.ownerOf(topic)
				if h := w.byID[owner]; h != nil && h != victim && w.produce(h, topic, epoch) {
					slowest = max(slowest, w.now.Sub(killed))
					break
				}
				w.runUntil(w.now.Add(50 * time.Millisecond))
			}
		}
		t.Logf("round %d: %s killed, its %d topics writable again within %v", round, victim.id, len(topics), slowest.Round(time.Millisecond))
		// And they stay writable: the new owners' leases are renewed.
		for range 20 {
			w.runUntil(w.now.Add(500 * time.Millisecond))
			for _, topic := range topics {
				owner, epoch := w.ownerOf(topic)
				h := w.byID[owner]
				if h == nil || h == victim {
					t.Fatalf("round %d: %s owned by %q", round, topic, owner)
				}
				if why := w.writable(h, topic, epoch); why != "" {
					t.Fatalf("round %d: %s not writable at %s@%d %v after the kill: %s", round, topic, owner, epoch, w.now.Sub(killed).Round(time.Millisecond), why)
				}
			}
		}
		w.restart(victim)
		w.runUntil(w.now.Add(10 * time.Second))
	}
}

// ownerOf returns topic's owner and epoch by a linearizable lookup at the
// first live node ("" if none answers).
func (w *World) ownerOf(topic string) (string, uint64) {
	for _, h := range w.hosts {
		if h.down {
			continue
		}
		kind, p, ok := w.ask(h, wire.KindLookup, wire.AppendLookup(nil, &wire.Lookup{Topic: []byte(topic), Linearizable: true}))
		var a wire.Assignment
		if ok && kind == wire.KindAssignment && wire.DecodeAssignment(p, &a) == nil {
			return string(a.Owner), a.Epoch
		}
	}
	return "", 0
}

// produce reports whether h acknowledged one record of topic at epoch.
func (w *World) produce(h *host, topic string, epoch uint64) bool {
	kind, _, ok := w.ask(h, wire.KindProduce, wire.AppendProduce(nil, &wire.Produce{Topic: []byte(topic), Epoch: epoch, Records: [][]byte{[]byte("probe")}}))
	return ok && kind == wire.KindProduceAck
}
